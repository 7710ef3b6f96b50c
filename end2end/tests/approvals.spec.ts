// Human approvals, end to end in a real browser: a send_email run pauses and
// is approved on its trace page (then the email is in the outbox); another is
// rejected from the /approvals inbox with a reason the model gets to see; and
// edited arguments are validated inline without losing what was typed.
//
// The built-in model calls any attached tool whose name appears in the prompt,
// with arguments from a JSON object in the prompt; send_email always requires
// approval. Tests share one server, so they find their own run by id.
import { expect, openCall, openTranscript, test, type Locator, type Page } from './fixtures';

/** Waits until the browser bundle has hydrated the server-rendered page. */
async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** Fills the playground and starts a run with exactly `tools` attached; returns its id. */
async function startRun(page: Page, prompt: string, tools: string[], approvalTools: string[] = []): Promise<string> {
  await page.goto('/playground');
  await hydrated(page);
  await page.getByTestId('prompt').fill(prompt);
  for (const box of await page.locator('input[name="tools"]').all()) {
    await box.setChecked(tools.includes((await box.getAttribute('value')) ?? ''));
  }
  for (const name of approvalTools) {
    await page.locator(`input[name="approval_tools"][value="${name}"]`).check();
  }
  await page.getByTestId('start-run').click();
  await expect(page).toHaveURL(/\/runs\/[^/?#]+\/?(?:[?#].*)?$/, { timeout: 15_000 });
  return decodeURIComponent(new URL(page.url()).pathname.split('/').filter(Boolean)[1]);
}

/** The tool-call node of `tool` in the trace tree. */
function treeCall(page: Page, tool: string): Locator {
  return page.locator(`[data-testid="tool-call"][data-tool="${tool}"]`).first();
}

/** Marks the current document, to prove later that no reload happened. */
async function markDocument(page: Page) {
  await page.evaluate(() => ((window as unknown as { __runlensMark: boolean }).__runlensMark = true));
}
async function sameDocument(page: Page): Promise<boolean> {
  return page.evaluate(() => (window as unknown as { __runlensMark?: boolean }).__runlensMark === true);
}

test('a send_email run pauses, is approved on its trace page, finishes, and the email is in the outbox', async ({ page }) => {
  await page.goto('/playground');
  await hydrated(page);
  const alwaysBox = page.locator('input[name="approval_tools"][value="send_email"]');
  await expect(alwaysBox, 'send_email always requires approval').toBeChecked();
  await expect(alwaysBox).toBeDisabled();

  const id = await startRun(
    page,
    'send_email {"to": "ops@example.com", "subject": "Weekly report", "body": "All green."}',
    ['send_email'],
  );
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('paused', { timeout: 15_000 });

  const card = page.getByTestId('approval-card');
  await expect(card).toHaveCount(1);
  await expect(card).toHaveAttribute('data-tool', 'send_email');
  await expect(card.getByTestId('approval-args')).toContainText('"to": "ops@example.com"');
  await expect(treeCall(page, 'send_email')).toHaveAttribute('data-status', 'awaiting_approval');
  await expect(treeCall(page, 'send_email').getByTestId('awaiting-approval')).toBeVisible();
  await expect(page.getByTestId('approvals-badge'), 'nav badge counts the pending call').toHaveText('1');

  await markDocument(page);
  await card.getByTestId('approve-button').click();

  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  expect(await sameDocument(page), 'the page updated itself, no reload').toBe(true);
  await expect(page.getByTestId('approval-card')).toHaveCount(0);
  // The detail pane followed the run to its answer; the call is a line in the tree.
  await openCall(page, 'send_email');
  const decision = treeCall(page, 'send_email').getByTestId('approval-decision');
  await expect(decision).toHaveAttribute('data-decision', 'approved');
  await expect(decision).toHaveAttribute('data-decided-by', 'e2e-admin');
  await expect(treeCall(page, 'send_email')).toHaveAttribute('data-status', 'succeeded');
  await expect(page.getByTestId('run-status')).toHaveClass(/tone-clean/);
  await expect(page.getByTestId('run-outcome'), 'a clean run has nothing to add').toHaveCount(0);

  await decision.getByTestId('outbox-link').click();
  await expect(page).toHaveURL(/\/outbox$/);
  const row = page.locator(`[data-testid="email-row"][data-run-id="${id}"]`);
  await expect(row).toHaveCount(1);
  await expect(row.getByTestId('email-to')).toHaveText('ops@example.com');
  await expect(row.getByTestId('email-subject')).toHaveText('Weekly report');
  await expect(row.getByTestId('email-body')).toHaveText('All green.');
});

test('a run rejected from the approvals inbox gets the reason in its transcript', async ({ page }) => {
  const id = await startRun(
    page,
    'send_email {"to": "everyone@example.com", "subject": "Salaries", "body": "Attached."}',
    ['send_email'],
  );
  await expect(page.getByTestId('run-status')).toHaveText('paused', { timeout: 15_000 });

  await page.locator('nav a[href="/approvals"]').click();
  await expect(page).toHaveURL(/\/approvals$/);
  await hydrated(page);
  await expect(page.getByTestId('approvals-badge'), 'nav badge counts the pending call').toHaveText('1');
  await expect(page.getByTestId('approvals-empty')).toHaveCount(0);
  const card = page.getByTestId('approval-card').filter({ has: page.locator(`a[href="/runs/${id}"]`) });
  await expect(card).toHaveCount(1);
  await expect(card.getByTestId('approval-age')).toContainText('ago');
  const callId = await card.getAttribute('data-call-id');
  expect(callId).toBeTruthy();

  await markDocument(page);
  await card.getByTestId('reject-reason').fill('wrong audience');
  await card.getByTestId('reject-button').click();

  // The card is replaced by the decision, in place, and nothing else waits.
  const settled = page.locator(`[data-testid="approval-settled"][data-call-id="${callId}"]`);
  await expect(settled.getByTestId('approval-outcome')).toHaveAttribute('data-decision', 'rejected');
  await expect(settled.getByTestId('decision-comment')).toHaveText('wrong audience');
  await expect(page.getByTestId('approvals-empty')).toBeVisible();
  await expect(page.getByTestId('approvals-badge')).toBeHidden({ timeout: 10_000 });
  expect(await sameDocument(page)).toBe(true);

  // The decision stays listed under Decided, with its run and the reason.
  await page.getByTestId('approval-tabs').getByRole('link', { name: 'Decided' }).click();
  await expect(page).toHaveURL(/\/approvals\/decided$/);
  const decided = page.locator(`[data-testid="decided-card"][data-run-id="${id}"]`);
  await expect(decided).toHaveCount(1);
  await expect(decided.getByTestId('decided-tool')).toHaveText('send_email');
  await expect(decided.getByTestId('approval-decision')).toHaveAttribute('data-decision', 'rejected');
  await expect(decided.getByTestId('decision-comment')).toHaveText('wrong audience');
  await decided.getByTestId('decided-run').click();
  await expect(page).toHaveURL(new RegExp(`/runs/${id}`));

  await page.goto(`/runs/${encodeURIComponent(id)}`);
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  await openTranscript(page);
  const rejection = page
    .locator('[data-testid="message"][data-kind="invocation-result"]')
    .filter({ has: page.locator('[data-testid="result-type"]', { hasText: 'rejection' }) });
  await expect(rejection).toHaveCount(1);
  await expect(rejection).toContainText('wrong audience');
  await openCall(page, 'send_email');
  const decision = treeCall(page, 'send_email').getByTestId('approval-decision');
  await expect(decision).toHaveAttribute('data-decision', 'rejected');
  await expect(decision.getByTestId('decision-comment')).toHaveText('wrong audience');
  await expect(treeCall(page, 'send_email')).toHaveAttribute('data-status', 'rejected');

  // Done, but not the green of a clean run: the outcome says why, in the
  // header and in the runs list, whose outcome filter finds it.
  await expect(page.getByTestId('run-outcome')).toHaveText('1 call rejected');
  await expect(page.getByTestId('run-status')).toHaveClass(/tone-warning/);
  await page.goto('/runs');
  await hydrated(page);
  await page.getByTestId('filter-outcome').selectOption('rejected');
  await page.getByTestId('filter-submit').click();
  await expect(page).toHaveURL(/outcome=rejected/);
  const row = page.locator(`[data-testid="run-row"][data-run-id="${id}"]`);
  await expect(row.getByTestId('run-outcome')).toHaveText('1 call rejected');
  await expect(page.getByTestId('filter-outcome')).toHaveValue('rejected');
  for (const status of await page.getByTestId('run-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-status')))) {
    expect(status, 'only finished runs with a rejected call').toBe('done');
  }
  await page.goto('/runs?outcome=clean');
  await expect(page.locator(`[data-testid="run-row"][data-run-id="${id}"]`)).toHaveCount(0);
});

test('edited arguments are validated inline, survive live refreshes, and are recorded next to the original', async ({ page }) => {
  await startRun(page, 'What is 6 * 7?', ['calculator'], ['calculator']);
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('paused', { timeout: 15_000 });
  const card = page.locator('[data-testid="approval-card"][data-tool="calculator"]');
  await expect(card).toHaveCount(1);

  await card.getByTestId('edit-toggle').click();
  const editor = card.getByTestId('edit-arguments');
  await expect(editor).toBeVisible();
  await expect(editor).toHaveValue(/"expression": "6 \* 7"/);

  const broken = '{"expression": ';
  await editor.fill(broken);
  await card.getByTestId('approve-button').click();
  await expect(card.getByTestId('approval-error')).toContainText('not valid JSON');
  // The page keeps refreshing every second while paused; the text stays.
  await page.waitForTimeout(2_500);
  await expect(editor, 'the editor stays open').toBeVisible();
  await expect(editor).toHaveValue(broken);
  await expect(card.getByTestId('approval-error')).toBeVisible();

  await editor.fill('{"expression": 5}');
  await card.getByTestId('approve-button').click();
  await expect(card.getByTestId('approval-error')).toContainText('invalid arguments for `calculator`');
  await expect(page.getByTestId('run-status')).toHaveText('paused');

  await editor.fill('{"expression": "6 * 8"}');
  await card.getByTestId('approve-comment').fill('use the right numbers');
  await card.getByTestId('approve-button').click();
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });

  await openCall(page, 'calculator');
  const call = treeCall(page, 'calculator');
  const decision = call.getByTestId('approval-decision');
  await expect(decision).toHaveAttribute('data-decision', 'approved');
  await expect(decision.getByTestId('decision-original')).toContainText('6 * 7');
  await expect(decision.getByTestId('decision-edited')).toContainText('6 * 8');
  await expect(decision.getByTestId('decision-comment')).toHaveText('use the right numbers');
  await expect(call.getByTestId('tool-result')).toContainText('48');
});

test('Reject pressed with the mouse and no reason rejects at once, and the outcome says so', async ({ page }) => {
  // The reason field's hint must not move the button under the pointer.
  await startRun(page, 'send_email {"to": "x@example.com", "subject": "s", "body": "b"}', ['send_email']);
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('paused', { timeout: 15_000 });
  const card = page.getByTestId('approval-card');
  const before = await card.getByTestId('reject-button').boundingBox();
  await card.getByTestId('reject-button').click();
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  expect(before, 'the button was on screen').not.toBeNull();
  await expect(page.getByTestId('run-outcome')).toHaveText('1 call rejected');
  await openCall(page, 'send_email');
  await expect(treeCall(page, 'send_email')).toHaveAttribute('data-status', 'rejected');
});

// Conversation control, end to end in a real browser: follow up on a finished
// run and see the run continue; edit an earlier message, land on the fork and
// find the way back through the branch tree; export a run and import it from
// the runs list (and see a broken file refused).
//
// Runs are created through the REST API (the playground is covered by
// spine.spec.ts) with the built-in model, which answers arithmetic with the
// calculator. Tests share one server, so each finds its own runs by id.
import { expect, finishedRun, hydrated, openTranscript, test, type Page } from './fixtures';

/** The run id in the current URL (`/runs/{id}`). */
function runIdInUrl(page: Page): string {
  return decodeURIComponent(new URL(page.url()).pathname.split('/').filter(Boolean)[1] ?? '');
}

test('a follow-up on a finished run continues it and shows the new answer', async ({ page, request }) => {
  const id = await finishedRun(request, 'What is 2 + 3?');
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('done');
  await expect(page.getByTestId('run-result')).toContainText('5');
  // The tree lists the steps; the detail pane shows one, the newest.
  await expect(page.getByTestId('tree-step')).toHaveCount(2);
  await expect(page.getByTestId('step')).toHaveCount(1);
  await expect(page.getByTestId('step')).toHaveAttribute('data-index', '1');

  const box = page.getByTestId('follow-up');
  await box.getByTestId('follow-up-text').fill('And 4 * 4?');
  // Sat finished for over a second: the timeline marks the gap, not to scale.
  await page.waitForTimeout(1_500);
  await box.getByTestId('follow-up-send').click();

  await expect(page.getByTestId('run-result')).toContainText('16', { timeout: 15_000 });
  await expect(page.getByTestId('run-status')).toHaveText('done');
  await expect(page.getByTestId('tree-step')).toHaveCount(4);
  // The detail pane followed the run to its newest step.
  await expect(page.locator('[data-testid="step"][data-index="3"]')).toBeAttached();
  await openTranscript(page);
  await expect(page.locator('[data-testid="message"][data-kind="human"]').last()).toContainText('And 4 * 4?');
  // Still on the same run, and the box is empty again for the next question.
  expect(runIdInUrl(page)).toBe(id);
  await expect(page.getByTestId('follow-up-text')).toHaveValue('');

  // The duration is active time: the seconds the run sat finished before
  // the follow-up are left out, and the wall time is shown beside it.
  await page.reload();
  await expect(page.getByTestId('run-wall-time')).toContainText('wall');
  await expect(page.getByTestId('timeline-gap')).toHaveCount(1);
  await expect(page.getByTestId('timeline-gap-note')).toContainText('idle, not to scale');
  const run = await (await request.get(`/api/runs/${encodeURIComponent(id)}`)).json();
  expect(run.idle_ms, 'the page was open a while before the follow-up').toBeGreaterThanOrEqual(1_500);
  const seconds = (t: string) => (t.endsWith(' ms') ? parseFloat(t) / 1000 : t.endsWith(' s') ? parseFloat(t) : NaN);
  const active = seconds((await page.getByTestId('run-duration').innerText()).trim());
  const wall = seconds((await page.getByTestId('run-wall-time').innerText()).replace(' wall', '').trim());
  expect(wall - active).toBeGreaterThanOrEqual(run.idle_ms / 1000 - 0.2);
});

test('editing the first message forks the run and the branch tree links back', async ({ page, request }) => {
  const parent = await finishedRun(request, 'What is 2 + 3?');
  await page.goto(`/runs/${parent}`);
  await hydrated(page);
  await expect(page.getByTestId('run-family')).toHaveCount(0);

  await openTranscript(page);
  const first = page.locator('[data-testid="message"][data-kind="human"]').first();
  await first.getByTestId('edit-message').click();
  const editor = first.getByTestId('edit-message-text');
  await expect(editor).toBeVisible();
  await expect(editor).toHaveValue('What is 2 + 3?');
  await editor.fill('What is 9 * 9?');
  await first.getByTestId('edit-message-save').click();

  await expect.poll(() => runIdInUrl(page), { timeout: 15_000 }).not.toBe(parent);
  const fork = runIdInUrl(page);
  await expect(page.getByTestId('run-id')).toHaveText(fork);
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  await expect(page.getByTestId('run-result')).toContainText('81');
  await expect(page.getByTestId('edit-message-text')).toBeHidden(); // a fresh page, no editor left open

  const tree = page.getByTestId('run-family');
  await expect(tree).toBeVisible();
  await expect(tree.getByTestId('forked-message')).toHaveText('What is 9 * 9?');
  await expect(tree.locator(`[data-testid="family-link"][data-run-id="${fork}"]`)).toHaveAttribute('aria-current', 'page');
  const back = tree.locator(`[data-testid="family-link"][data-run-id="${parent}"]`);
  await expect(back).toBeVisible();
  await back.click();
  await expect(page).toHaveURL(new RegExp(`/runs/${parent}$`));
  await expect(page.getByTestId('run-result')).toContainText('5');
  await expect(page.getByTestId('run-family').locator(`[data-run-id="${fork}"]`).first()).toBeVisible();
});

test('a run exported from its trace page imports from the runs list; a broken file is refused', async ({ page, request }) => {
  const id = await finishedRun(request, 'What is 7 * 6?');
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  const link = page.getByTestId('export-run');
  await expect(link).toHaveAttribute('href', `/api/runs/${id}/state?download=1`);
  const exported = await request.get((await link.getAttribute('href'))!);
  expect(exported.status()).toBe(200);
  expect(exported.headers()['content-disposition']).toContain('attachment');
  const doc = await exported.json();
  expect(doc['$schemaVersion']).toBeTruthy();

  await page.goto('/runs');
  await hydrated(page);
  const form = page.getByTestId('import-run');
  await form.locator('input[type="file"]').setInputFiles({
    name: `run-${id}.json`,
    mimeType: 'application/json',
    buffer: Buffer.from(JSON.stringify(doc)),
  });
  await form.getByTestId('import-submit').click();
  await expect(page).toHaveURL(/\/runs\/[^/?#]+$/, { timeout: 15_000 });
  const imported = runIdInUrl(page);
  expect(imported).not.toBe(id);
  await expect(page.getByTestId('run-status')).toHaveText('done');
  await expect(page.getByTestId('run-result')).toContainText('42');

  await page.goto('/runs');
  await hydrated(page);
  await page.getByTestId('import-run').locator('input[type="file"]').setInputFiles({
    name: 'broken.json',
    mimeType: 'application/json',
    buffer: Buffer.from('{"$schemaVersion": "runlens.run-state.v1", "run": '),
  });
  await page.getByTestId('import-submit').click();
  await expect(page.getByTestId('import-error')).toBeVisible();
  await expect(page.getByTestId('import-error')).toContainText('not valid JSON');
  await expect(page).toHaveURL(/\/runs\?import_error=/);
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('the editor and the follow-up box still work as plain forms', async ({ page, request }) => {
    const parent = await finishedRun(request, 'What is 2 + 3?');
    await page.goto(`/runs/${parent}`);
    // The folded transcript is drawn by scripts; without them a link asks
    // the server for it unfolded.
    await page.getByTestId('transcript-fold').locator(':scope > summary').click();
    await page.getByTestId('transcript-unfold').click();
    await expect(page).toHaveURL(/transcript=1/);
    const first = page.locator('[data-testid="message"][data-kind="human"]').first();
    await first.getByTestId('edit-message').click();
    await first.getByTestId('edit-message-text').fill('What is 9 * 9?');
    await first.getByTestId('edit-message-save').click();
    await expect.poll(() => runIdInUrl(page), { timeout: 15_000 }).not.toBe(parent);
    const fork = runIdInUrl(page);
    // The page reloads itself while the fork runs.
    await expect(page.getByTestId('run-result')).toContainText('81', { timeout: 15_000 });

    await page.getByTestId('follow-up-text').fill('And 4 * 4?');
    await page.getByTestId('follow-up-send').click();
    await expect(page).toHaveURL(new RegExp(`/runs/${fork}`));
    await expect(page.getByTestId('run-result')).toContainText('16', { timeout: 15_000 });
  });
});

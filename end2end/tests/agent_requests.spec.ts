// Requests from agents runlens does not run, end to end: an agent (here the
// `request` fixture, with the instance-admin API key) asks through the REST
// API — an approval of a tool call (`POST /api/approval-requests`) or a
// question (`POST /api/questions`) — and long-polls for the outcome, while
// the signed-in admin decides on /approvals under "From other agents". The
// long-poll starts before the page opens and resolves with the decision.
//
// Tests share one server, so each finds its own request by id (every request
// gets a fresh idempotency key and agent run name).
import { randomBytes, randomUUID } from 'node:crypto';
import AxeBuilder from '@axe-core/playwright';
import { expect, test, type APIRequestContext, type Page } from './fixtures';
import { signIn, USERS } from './users';

/** Waits until the browser bundle has hydrated the server-rendered page. */
async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

type Outcome = {
  outcome: string;
  arguments?: Record<string, unknown>;
  edited: boolean;
  answer?: string;
  reason?: string;
  comment?: string;
  decided_by: string;
};
type AgentRequest = { id: string; kind: string; status: string; run_id?: string | null; decision: Outcome | null };

async function created(res: Awaited<ReturnType<APIRequestContext['post']>>): Promise<AgentRequest> {
  expect(res.status(), await res.text()).toBe(201);
  return (await res.json()) as AgentRequest;
}

/** How to settle each request a test made, should the test end before it did (see afterEach). */
const leftovers: Array<(api: APIRequestContext) => Promise<unknown>> = [];

async function askApproval(api: APIRequestContext, body: Record<string, unknown>): Promise<AgentRequest> {
  const asked = await created(await api.post('/api/approval-requests', { data: { idempotency_key: randomUUID(), ...body } }));
  leftovers.push((a) => a.post(`/api/approval-requests/${asked.id}/reject`, { data: { reason: 'test over' } }));
  return asked;
}

async function askQuestion(api: APIRequestContext, body: Record<string, unknown>): Promise<AgentRequest> {
  const asked = await created(await api.post('/api/questions', { data: { idempotency_key: randomUUID(), ...body } }));
  const answer = (body.choices as string[] | undefined)?.[0] ?? 'test over';
  leftovers.push((a) => a.post(`/api/questions/${asked.id}/answer`, { data: { answer } }));
  return asked;
}

// Nothing is left pending for the specs that follow (approvals.spec.ts counts
// what waits in the nav badge): a request a test did not settle is settled
// here (a 409 for one already decided is fine).
test.afterEach(async ({ request }) => {
  for (const settle of leftovers.splice(0)) await settle(request);
});

/** A long-poll for the outcome, as an agent waits (started now, awaited later). */
async function longPoll(api: APIRequestContext, path: string): Promise<AgentRequest> {
  const res = await api.get(`${path}?wait=30`, { timeout: 40_000 });
  expect(res.status(), await res.text()).toBe(200);
  return (await res.json()) as AgentRequest;
}

/** Request `id`'s card on /approvals (after the page has hydrated). */
async function inboxCard(page: Page, id: string) {
  await page.goto('/approvals');
  await hydrated(page);
  const card = page.locator(`[data-testid="request-card"][data-request-id="${id}"]`);
  await expect(card).toHaveCount(1);
  return card;
}

function name(what: string): string {
  return `${what}-${randomUUID().slice(0, 8)}`;
}

test('an approval request is approved with edited arguments and the agent long-polling gets them', async ({
  page,
  request,
}) => {
  test.setTimeout(60_000);
  const runName = name('e2e-approve');
  const args = { to: 'all@example.com', subject: 'Launch', body: 'We launch <b>today</b>.' };
  const asked = await askApproval(request, {
    tool: 'send_email',
    arguments: args,
    context: { ticket: 'T-42', note: 'Customer asked for <script>alert(1)</script>' },
    run: { external_id: `${runName}-conv`, name: runName },
    timeout_s: 3600,
  });
  expect(asked).toMatchObject({ kind: 'approval', status: 'pending', decision: null });
  expect(asked.id).toMatch(/^apr_/);
  const outcome = longPoll(request, `/api/approval-requests/${asked.id}`);

  const card = await inboxCard(page, asked.id);
  await expect(card).toHaveAttribute('data-kind', 'approval');
  const source = card.getByTestId('request-source');
  await expect(source).toContainText(runName);
  await expect(source).toContainText(`${runName}-conv`);
  await expect(source).toContainText('asked by');
  await expect(card.getByTestId('request-tool')).toHaveText('send_email');
  // The payload is shown as text, never as markup.
  await expect(card.getByTestId('request-context')).toContainText('<script>alert(1)</script>');
  await expect(card.locator('script')).toHaveCount(0);
  await expect(card.getByTestId('request-deadline')).toContainText('if undecided');
  const editor = card.getByTestId('request-arguments');
  expect(JSON.parse(await editor.inputValue())).toEqual(args);

  // Not JSON: the card says so, and nothing is decided.
  await editor.fill('{"to": ');
  await card.getByTestId('request-approve-button').click();
  await expect(card.getByTestId('request-error')).toContainText('not valid JSON');
  await expect(editor).toHaveValue('{"to": ');

  const edited = { ...args, to: 'leads@example.com' };
  await editor.fill(JSON.stringify(edited, null, 2));
  await card.getByTestId('request-comment').fill('only the leads');
  await card.getByTestId('request-approve-button').click();

  const shown = card.getByTestId('request-outcome');
  await expect(shown).toHaveAttribute('data-outcome', 'approved');
  await expect(shown.getByTestId('request-decided-by')).toHaveText('e2e-admin');
  await expect(shown.getByTestId('request-outcome-comment')).toHaveText('only the leads');
  await expect(shown.getByTestId('request-outcome-arguments')).toContainText('leads@example.com');

  const got = await outcome;
  expect(got).toMatchObject({
    id: asked.id,
    status: 'approved',
    decision: { outcome: 'approved', arguments: edited, edited: true, comment: 'only the leads', decided_by: 'e2e-admin' },
  });
});

test('a question with choices is answered by clicking one; the long-poll gets that answer', async ({
  page,
  request,
}) => {
  const runName = name('e2e-choice');
  const asked = await askQuestion(request, {
    question: 'Which plan should the customer move to?',
    choices: ['Team', 'Enterprise', 'Stay on Free'],
    context: 'Customer has 40 seats.',
    run: { name: runName },
  });
  expect(asked.id).toMatch(/^q_/);
  const outcome = longPoll(request, `/api/questions/${asked.id}`);

  const card = await inboxCard(page, asked.id);
  await expect(card).toHaveAttribute('data-kind', 'question');
  await expect(card.getByTestId('request-source')).toContainText(runName);
  await expect(card.getByTestId('request-question')).toHaveText('Which plan should the customer move to?');
  await expect(card.getByTestId('request-context')).toHaveText('Customer has 40 seats.');
  const choices = card.getByTestId('request-choice');
  await expect(choices).toHaveText(['Team', 'Enterprise', 'Stay on Free']);
  await choices.filter({ hasText: 'Enterprise' }).click();

  const shown = card.getByTestId('request-outcome');
  await expect(shown).toHaveAttribute('data-outcome', 'answered');
  await expect(shown.getByTestId('request-outcome-answer')).toHaveText('Enterprise');

  const got = await outcome;
  expect(got).toMatchObject({
    status: 'answered',
    decision: { outcome: 'answered', answer: 'Enterprise', decided_by: 'e2e-admin' },
  });
});

test('a free-text question is answered in the textarea', async ({ page, request }) => {
  const runName = name('e2e-free');
  const asked = await askQuestion(request, { question: 'What should the refund note say?', run: { name: runName } });
  const outcome = longPoll(request, `/api/questions/${asked.id}`);

  const card = await inboxCard(page, asked.id);
  await expect(card.getByTestId('request-choice')).toHaveCount(0);
  // An empty answer is refused on the card.
  await card.getByTestId('request-answer-button').click();
  await expect(card.getByTestId('request-error')).toContainText('Write an answer first');
  await card.getByTestId('request-answer').fill('Refunded in full, sorry for the wait.');
  await card.getByTestId('request-answer-button').click();

  const shown = card.getByTestId('request-outcome');
  await expect(shown).toHaveAttribute('data-outcome', 'answered');
  await expect(shown.getByTestId('request-outcome-answer')).toHaveText('Refunded in full, sorry for the wait.');
  const got = await outcome;
  expect(got).toMatchObject({
    status: 'answered',
    decision: { outcome: 'answered', answer: 'Refunded in full, sorry for the wait.' },
  });
});

test('a rejected request shows its reason, and the run of its trace lists it', async ({ page, request }) => {
  const runName = name('e2e-reject');
  const traceId = randomBytes(16).toString('hex');
  const asked = await askApproval(request, {
    tool: 'delete_records',
    arguments: { table: 'customers', where: 'all' },
    context: 'Cleanup job',
    run: { name: runName, trace_id: traceId },
  });
  expect(asked.run_id, "a trace's run id is scoped to the project").toBe(`default~trace~${traceId}`);
  const outcome = longPoll(request, `/api/approval-requests/${asked.id}`);

  const card = await inboxCard(page, asked.id);
  await expect(card.getByTestId('request-source').locator(`a[href="/runs/${asked.run_id}"]`)).toHaveCount(1);
  await card.getByTestId('request-reason').fill('never delete every customer');
  await card.getByTestId('request-reject-button').click();

  const shown = card.getByTestId('request-outcome');
  await expect(shown).toHaveAttribute('data-outcome', 'rejected');
  await expect(shown.getByTestId('request-outcome-reason')).toHaveText('never delete every customer');
  const got = await outcome;
  expect(got).toMatchObject({
    status: 'rejected',
    decision: { outcome: 'rejected', reason: 'never delete every customer', decided_by: 'e2e-admin' },
  });

  // The run the request names (by its trace) lists it, with its outcome.
  await page.goto(`/runs/${asked.run_id}`);
  const section = page.getByTestId('run-requests');
  await expect(section).toBeVisible();
  const row = section.locator(`[data-testid="run-request"][data-request-id="${asked.id}"]`);
  await expect(row).toHaveAttribute('data-status', 'rejected');
  await expect(row.getByTestId('run-request-tool')).toHaveText('delete_records');
  await expect(row.getByTestId('run-request-outcome')).toHaveAttribute('data-outcome', 'rejected');
  await expect(row.getByTestId('run-request-detail')).toHaveText('never delete every customer');
});

test('deciding works without JavaScript too (plain form posts)', async ({ browser, request, baseURL }) => {
  const context = await browser.newContext({ baseURL, javaScriptEnabled: false, storageState: process.env.E2E_ADMIN_STATE });
  const page = await context.newPage();
  try {
    const asked = await askQuestion(request, { question: 'Ship it?', choices: ['yes', 'no'], run: { name: name('e2e-nojs') } });
    const approval = await askApproval(request, { tool: 'deploy', arguments: { env: 'prod' }, run: { name: name('e2e-nojs') } });
    await page.goto('/approvals');
    const card = page.locator(`[data-testid="request-card"][data-request-id="${asked.id}"]`);
    await card.getByTestId('request-choice').filter({ hasText: 'yes' }).click();
    await expect(page).toHaveURL(/\/approvals/);
    const got = (await (await request.get(`/api/questions/${asked.id}`)).json()) as AgentRequest;
    expect(got).toMatchObject({ status: 'answered', decision: { answer: 'yes' } });

    // A refused decision comes back to the page (in the redirect), on its card.
    const other = page.locator(`[data-testid="request-card"][data-request-id="${approval.id}"]`);
    await other.getByTestId('request-arguments').fill('{"env": ');
    await other.getByTestId('request-approve-button').click();
    await expect(other.getByTestId('request-error')).toContainText('not valid JSON');
    await other.getByTestId('request-arguments').fill('{"env": "staging"}');
    await other.getByTestId('request-approve-button').click();
    await expect(page).toHaveURL(/\/approvals/);
    const approved = (await (await request.get(`/api/approval-requests/${approval.id}`)).json()) as AgentRequest;
    expect(approved).toMatchObject({ status: 'approved', decision: { arguments: { env: 'staging' }, edited: true } });
  } finally {
    await context.close();
  }
});

test('a viewer sees the card without buttons, and then the outcome of a decision made elsewhere', async ({
  browser,
  page: adminPage,
  request,
  baseURL,
}) => {
  const context = await browser.newContext({ baseURL, storageState: { cookies: [], origins: [] } });
  const page = await context.newPage();
  try {
    const asked = await askApproval(request, {
      tool: 'send_email',
      arguments: { to: 'viewer@example.com' },
      run: { name: name('e2e-viewer') },
    });
    await signIn(page, USERS.viewer.name, '/approvals');
    await hydrated(page);
    const card = page.locator(`[data-testid="request-card"][data-request-id="${asked.id}"]`);
    await expect(card.getByTestId('request-read-only')).toBeVisible();
    await expect(card.getByTestId('request-arguments-view')).toContainText('viewer@example.com');
    await expect(card.getByTestId('request-approve-button')).toHaveCount(0);
    await expect(card.getByTestId('request-reject-button')).toHaveCount(0);
    // Nor through the page's server function (its address, from the admin's card).
    const adminCard = await inboxCard(adminPage, asked.id);
    const action = await adminCard.locator('form.approve-form').getAttribute('action');
    expect(action).toBeTruthy();
    const refused = await page.request.post(action!, { form: { id: asked.id }, headers: { Accept: 'application/json' } });
    expect(refused.status(), await refused.text()).toBe(403);
    expect(((await (await request.get(`/api/approval-requests/${asked.id}`)).json()) as AgentRequest).status).toBe('pending');

    // Decided through the API: the open page shows the outcome in the card's place.
    const res = await request.post(`/api/approval-requests/${asked.id}/approve`, { data: { comment: 'via the API' } });
    expect(res.status(), await res.text()).toBe(200);
    await expect(card.getByTestId('request-outcome')).toHaveAttribute('data-outcome', 'approved', { timeout: 20_000 });
    await expect(card.getByTestId('request-outcome-comment')).toHaveText('via the API');
  } finally {
    await context.close();
  }
});

test('the inbox with pending requests of both kinds has no serious accessibility violation', async ({
  page,
  request,
  baseURL,
}) => {
  const runName = name('e2e-a11y');
  const approval = await askApproval(request, {
    tool: 'send_email',
    arguments: { to: 'a11y@example.com' },
    context: { why: 'contrast check' },
    run: { external_id: 'a11y-conv', name: runName },
    timeout_s: 600,
  });
  const question = await askQuestion(request, { question: 'Free text?', run: { name: runName } });
  const choice = await askQuestion(request, { question: 'Pick one', choices: ['a', 'b'], run: { name: runName } });
  for (const theme of ['light', 'dark']) {
    await page.context().addCookies([{ name: 'runlens_theme', value: theme, url: baseURL! }]);
    await page.goto('/approvals');
    await hydrated(page);
    await expect(page.locator('html')).toHaveAttribute('data-theme', theme);
    for (const id of [approval.id, question.id, choice.id]) {
      await expect(page.locator(`[data-testid="request-card"][data-request-id="${id}"]`)).toHaveCount(1);
    }
    const results = await new AxeBuilder({ page })
      .include('[data-testid="requests-inbox"]')
      .withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'])
      .analyze();
    const serious = results.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${theme}: ${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    expect(serious).toEqual([]);
  }
});

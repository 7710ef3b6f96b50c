// Saved agents and sub-agents, end to end in a real browser: an agent
// `math_helper_…` (calculator, every call needs approval, reasoning traces)
// and an agent that may call it are created at /agents; the delegating agent
// is run from the playground; its call of the helper starts a child run,
// which is expanded in place inside the parent's trace while it waits for
// approval; the child's call is approved from the /approvals inbox, which
// shows the chain parent run → child run → call; then the whole tree
// finishes and the parent's trace shows the child's answer.
//
// The built-in model calls a tool whose name appears in the prompt (an
// agent's tool gets the message as its `input`), and the calculator on an
// arithmetic expression. Names get a suffix: agent names are unique per
// project, and the tests may run against a server that already has agents.
import { expect, openCall, test, type Locator, type Page } from './fixtures';
import { signIn, USERS } from './users';

const suffix = Date.now().toString(36);
const helper = `math_helper_${suffix}`;
const delegator = `delegator_${suffix}`;
const ticket = `e2e-${suffix}`;

/** Waits until the browser bundle has hydrated the server-rendered page. */
async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** The id at the end of the current `/agents/{id}` or `/runs/{id}` URL. */
function idFromUrl(page: Page): string {
  return decodeURIComponent(new URL(page.url()).pathname.split('/').filter(Boolean)[1]);
}

/** The New agent form of /agents. */
function newAgentForm(page: Page): Locator {
  return page.getByTestId('new-agent').getByTestId('agent-form');
}

/** The tool-call node of `tool` in the trace tree. */
function treeCall(page: Page, tool: string): Locator {
  return page.locator(`[data-testid="tool-call"][data-tool="${tool}"]`).first();
}

test.describe.serial('agents', () => {
  let helperId = '';
  let delegatorId = '';
  let parentId = '';

  test('agents are created, versioned and listed at /agents', async ({ page }) => {
    await page.goto('/agents');
    await hydrated(page);
    await expect(page.getByRole('link', { name: 'Agents', exact: true })).toBeVisible();

    // The helper: calculator only, every call needs approval, with reasons.
    let form = newAgentForm(page);
    await form.getByTestId('agent-name').fill(helper);
    await form.getByTestId('agent-description').fill('Evaluates arithmetic with the calculator.');
    await form.getByTestId('agent-system-prompt').fill('You are exact. Use the calculator.');
    await form.locator('input[name="tools[]"][value="calculator"]').check();
    await form.getByTestId('agent-approval-all').check();
    await form.getByTestId('agent-reasoning-traces').check();
    // Bad JSON is flagged while typing, and the server refuses it too.
    await form.getByTestId('agent-result-schema').fill('{"type": ');
    await expect(form.getByTestId('agent-result-schema-error')).toContainText('Result schema is not valid JSON');
    await form.getByTestId('agent-save').click();
    await expect(form.getByTestId('agent-form-error')).toContainText('Result schema is not valid JSON');
    await expect(page).toHaveURL(/\/agents$/);
    await form.getByTestId('agent-result-schema').fill('');
    await expect(form.getByTestId('agent-result-schema-error')).toHaveCount(0);
    await form.getByTestId('agent-save').click();

    await expect(page).toHaveURL(/\/agents\/[^/]+$/, { timeout: 15_000 });
    helperId = idFromUrl(page);
    await hydrated(page);
    await expect(page.getByTestId('agent-title')).toHaveText(helper);
    await expect(page.getByTestId('agent-current-version')).toHaveText('v1');
    await expect(page.getByTestId('spec-tools')).toHaveText('calculator');
    await expect(page.getByTestId('spec-approval')).toHaveText('every call');

    // The delegating agent: no tools of its own, may call the helper.
    await page.goto('/agents');
    await hydrated(page);
    form = newAgentForm(page);
    await form.getByTestId('agent-name').fill(delegator);
    await form.getByTestId('agent-description').fill('Hands arithmetic to the helper.');
    await form.getByTestId('agent-system-prompt').fill('Delegate every calculation.');
    await form.locator(`[data-testid="agent-calls"][data-agent-name="${helper}"]`).check();
    // A taken name is the engine's conflict, shown on the form.
    await form.getByTestId('agent-name').fill(helper);
    await form.getByTestId('agent-save').click();
    await expect(form.getByTestId('agent-form-error')).toContainText(helper);
    await form.getByTestId('agent-name').fill(delegator);
    await form.getByTestId('agent-save').click();

    await expect(page).toHaveURL(/\/agents\/[^/]+$/, { timeout: 15_000 });
    delegatorId = idFromUrl(page);
    await hydrated(page);
    await expect(page.getByTestId('agent-title')).toHaveText(delegator);
    await expect(page.getByTestId('spec-agent')).toHaveText(helper);

    // Each save is a new version; the older one stays readable.
    const edit = page.getByTestId('edit-agent').getByTestId('agent-form');
    await edit.getByTestId('agent-description').fill('Hands every calculation to the helper.');
    await edit.getByTestId('agent-save').click();
    await expect(page.getByTestId('agent-current-version')).toHaveText('v2', { timeout: 15_000 });
    await expect(page.getByTestId('agent-about')).toHaveText('Hands every calculation to the helper.');
    await expect(page.getByTestId('agent-version-row')).toHaveCount(2);
    await expect(page.getByTestId('agent-stats-row')).toHaveCount(2);
    await page.locator('[data-testid="agent-version-row"][data-version="1"]').getByTestId('agent-version-link').click();
    await expect(page).toHaveURL(new RegExp(`/agents/${delegatorId}/versions/1$`));
    await expect(page.getByTestId('version-number')).toHaveText('v1');
    await expect(page.getByTestId('agent-about')).toHaveText('Hands arithmetic to the helper.');

    // Both are listed, with their current versions.
    await page.goto('/agents');
    const row = page.locator(`[data-testid="agent-row"][data-agent-id="${delegatorId}"]`);
    await expect(row.getByTestId('agent-version')).toHaveText('2');
    await expect(page.locator(`[data-testid="agent-row"][data-agent-id="${helperId}"]`)).toHaveCount(1);
  });

  test('a run of the delegating agent waits on its child, whose call is approved from the inbox', async ({ page }) => {
    test.setTimeout(120_000);
    expect(delegatorId, 'the agents were created').not.toBe('');

    // Picking the agent loads its settings and keeps the prompt typed.
    await page.goto('/playground');
    await hydrated(page);
    const prompt = `Ask ${helper}: what is 17 * 23?`;
    await page.getByTestId('prompt').fill(prompt);
    await page.getByTestId('agent-select').selectOption(delegatorId);
    await expect(page.getByTestId('agent-loaded')).toContainText(delegator);
    await expect(page.getByTestId('prompt')).toHaveValue(prompt);
    await expect(page.getByTestId('system-prompt')).toHaveValue('Delegate every calculation.');
    await hydrated(page);
    await page.getByTestId('metadata').fill(`{"ticket": "${ticket}"}`);
    await page.getByTestId('start-run').click();
    await expect(page).toHaveURL(/\/runs\/[^/?#]+$/, { timeout: 15_000 });
    parentId = idFromUrl(page);
    await hydrated(page);

    // The parent pauses while its child waits for a decision.
    await expect(page.getByTestId('run-status')).toHaveText('paused', { timeout: 20_000 });
    await expect(page.getByTestId('run-agent')).toHaveText(delegator);
    await expect(page.getByTestId('run-current-agent')).toHaveText(delegator);
    await expect(page.getByTestId('run-sub-agents')).toHaveText(helper);
    await expect(page.getByTestId('run-metadata')).toContainText(ticket);
    const call = treeCall(page, helper);
    const child = call.getByTestId('child-run');
    await expect(child).toHaveCount(1);
    await expect(child.getByTestId('child-run-agent')).toHaveText(helper);
    await expect(child.getByTestId('child-run-status')).toHaveText('paused');

    // Expanded in place: the child's call of the calculator, awaiting approval.
    await child.locator('summary').first().click();
    const brief = child.getByTestId('child-brief');
    await expect(brief).toBeVisible();
    await expect(brief.getByTestId('child-prompt')).toContainText('17 * 23');
    const childCall = brief.locator('[data-testid="child-call"][data-tool="calculator"]');
    await expect(childCall).toHaveAttribute('data-status', 'awaiting_approval');
    await expect(childCall.getByTestId('child-call-args')).toContainText('17 * 23');
    await expect(brief.getByTestId('child-answer-pending')).toBeVisible();
    const childId = (await child.getAttribute('data-run-id'))!;

    // The inbox shows the chain parent run → child run → call, and the reason.
    await page.goto('/approvals');
    await hydrated(page);
    const card = page
      .getByTestId('approval-card')
      .filter({ has: page.locator(`[data-testid="chain-run"][data-run-id="${parentId}"]`) });
    await expect(card).toHaveCount(1);
    await expect(card).toHaveAttribute('data-tool', 'calculator');
    const chain = card.getByTestId('approval-chain');
    await expect(chain.getByTestId('chain-run')).toHaveCount(2);
    await expect(chain.getByTestId('chain-run').nth(0)).toHaveAttribute('data-run-id', parentId);
    await expect(chain.getByTestId('chain-run').nth(1)).toHaveAttribute('data-run-id', childId);
    await expect(chain).toContainText('calculator');
    await expect(card.getByTestId('approval-reasoning')).toContainText('17 * 23');
    await card.getByTestId('approve-button').click();
    await expect(
      page.getByTestId('approval-card').filter({ has: page.locator(`[data-testid="chain-run"][data-run-id="${parentId}"]`) }),
    ).toHaveCount(0, { timeout: 15_000 });

    // The tree finishes; the parent's trace shows the child's answer.
    await page.goto(`/runs/${parentId}`);
    await hydrated(page);
    await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 20_000 });
    await openCall(page, helper);
    await expect(treeCall(page, helper)).toHaveAttribute('data-status', 'succeeded');
    await expect(treeCall(page, helper).getByTestId('tool-result')).toContainText('391');
    await expect(page.getByTestId('tree-runs')).toHaveText('2');
    const done = treeCall(page, helper).getByTestId('child-run');
    await expect(done.getByTestId('child-run-status')).toHaveText('done');
    await done.locator('summary').first().click();
    await expect(done.getByTestId('child-answer')).toContainText('391');
    await expect(
      done.locator('[data-testid="child-call"][data-tool="calculator"]'),
    ).toHaveAttribute('data-status', 'succeeded');

    // The child's own trace links up to its parent.
    await done.getByTestId('child-run-link').click();
    await expect(page).toHaveURL(new RegExp(`/runs/${childId}$`));
    await expect(page.getByTestId('run-parent')).toHaveAttribute('data-run-id', parentId);
    await expect(page.getByTestId('run-agent')).toHaveText(helper);
    await expect(page.getByTestId('run-reasoning-traces')).toHaveText('on');
    await openCall(page, 'calculator');
    await expect(treeCall(page, 'calculator').getByTestId('tool-reasoning')).toContainText('17 * 23');

    // The runs list: the root with its child count; the child with "all".
    await page.goto(`/runs?q=${ticket}`);
    const parentRow = page.locator(`[data-testid="run-row"][data-run-id="${parentId}"]`);
    await expect(parentRow.getByTestId('run-child-count')).toHaveText('1 child run');
    await expect(parentRow.getByTestId('run-metadata')).toContainText(ticket);
    await page.goto(`/runs?agent=${helperId}`);
    await expect(page.locator(`[data-testid="run-row"][data-run-id="${childId}"]`)).toHaveCount(0);
    await page.goto(`/runs?agent=${helperId}&all=1&group=agent`);
    const group = page.locator(`[data-testid="run-group"][data-agent="${helperId}"]`);
    await expect(group.locator(`[data-testid="run-row"][data-run-id="${childId}"]`)).toHaveCount(1);
    await expect(group.getByTestId('run-parent')).toContainText(parentId.slice(-8));

    // The agent's page counts the run of its version.
    await page.goto(`/agents/${helperId}`);
    const stats = page.locator('[data-testid="agent-stats-row"][data-version="1"]');
    await expect(stats.getByTestId('stats-runs')).toHaveText('1');
    await expect(stats.getByTestId('stats-success')).toHaveText('100%');
  });

  test('a handoff switches the run to another agent, shown as a step, in the timeline and as the current agent', async ({ page }) => {
    const greeter = `greeter_${suffix}`;
    const triage = `triage_${suffix}`;
    const create = async (name: string, fill: (form: Locator) => Promise<void>): Promise<string> => {
      await page.goto('/agents');
      await hydrated(page);
      const form = newAgentForm(page);
      await form.getByTestId('agent-name').fill(name);
      await fill(form);
      await form.getByTestId('agent-save').click();
      await expect(page).toHaveURL(/\/agents\/[^/]+$/, { timeout: 15_000 });
      return idFromUrl(page);
    };
    const greeterId = await create(greeter, async (form) => {
      await form.getByTestId('agent-description').fill('Greets people.');
      await form.getByTestId('agent-system-prompt').fill('You greet people warmly.');
    });
    const triageId = await create(triage, async (form) => {
      await form.getByTestId('agent-description').fill('Sends people to the right agent.');
      await form.locator(`[data-testid="agent-handoff"][data-agent-name="${greeter}"]`).check();
    });

    await page.goto(`/playground?agent_id=${triageId}`);
    await hydrated(page);
    await expect(page.getByTestId('agent-loaded')).toContainText(triage);
    await page.getByTestId('prompt').fill(`Please transfer_to_${greeter}, I would like a hello.`);
    await page.getByTestId('start-run').click();
    await expect(page).toHaveURL(/\/runs\/[^/?#]+$/, { timeout: 15_000 });
    await hydrated(page);
    await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 20_000 });
    await expect(page.getByTestId('run-agent')).toHaveText(triage);
    await expect(page.getByTestId('run-current-agent')).toHaveText(greeter);
    await expect(page.getByTestId('run-current-agent')).toHaveAttribute('data-agent-id', greeterId);
    const handoffLine = page.getByTestId('tree-step').filter({ hasText: 'handoff' });
    await expect(handoffLine).toHaveCount(1);
    await handoffLine.click();
    const handoff = page.locator('[data-testid="step"][data-kind="handoff"]');
    await expect(handoff).toHaveCount(1);
    await expect(handoff.getByTestId('handoff-text')).toContainText(greeter);
    await expect(page.locator('[data-testid="timeline-bar"][data-kind="handoff"]')).toHaveCount(1);
  });

  test.describe('as a viewer', () => {
    test.use({ storageState: { cookies: [], origins: [] } });

    test('a viewer reads agents without edit controls', async ({ page }) => {
      expect(helperId, 'the agents were created').not.toBe('');
      await signIn(page, USERS.viewer.name, `/agents/${helperId}`);
      await expect(page.getByTestId('agent-title')).toHaveText(helper);
      await expect(page.getByTestId('agent-stats')).toBeVisible();
      await expect(page.getByTestId('agent-form')).toHaveCount(0);
      await page.goto('/agents');
      await expect(page.locator(`[data-testid="agent-row"][data-agent-id="${helperId}"]`)).toHaveCount(1);
      await expect(page.getByTestId('new-agent')).toHaveCount(0);
      await expect(page.getByTestId('agent-form')).toHaveCount(0);
    });
  });
});

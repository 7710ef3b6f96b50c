// Approvals for an agent runlens does not run, end to end with a real OpenAI Agents SDK
// program: end2end/agents_sdk/approval_agent.py (a scripted model, no network but
// runlens) calls its send_email tool, whose body asks for approval with
// POST /api/approval-requests and long-polls until a person decides. Here that person
// is the signed-in admin on /approvals: an approval with an edited address sends the
// email to the edited address, and a rejection's reason reaches the model, whose final
// answer the program prints.
//
// Needs python3 with `openai-agents` (scripts/setup.sh installs the pinned version).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { expect, test as base, type Page } from './fixtures';
import { USERS } from './users';

const SCRIPT = path.resolve(__dirname, '..', 'agents_sdk', 'approval_agent.py');
/** The arguments the script's scripted model calls send_email with. */
const ARGUMENTS = { to: 'team@example.com', subject: 'Weekly report', body: 'All green.' };

/** The agent program, running: its request's id once it asked, and how it ended. */
interface AgentProcess {
  /** The `REQUEST <id>` the program prints once its approval request exists. */
  requestId: Promise<string>;
  /** Its exit code and the text after `FINAL ` (the run's final output). */
  finished: Promise<{ code: number | null; final: string | undefined }>;
}

const test = base.extend<{
  /** Creates an operator key named `keyName` and starts the agent program with it. */
  startAgent: (runName: string, keyName: string) => Promise<AgentProcess>;
}>({
  startAgent: async ({ request, baseURL }, use) => {
    const children: ChildProcessWithoutNullStreams[] = [];
    try {
      await use(async (runName, keyName) => {
        const key = await request.post('/api/keys', { data: { name: keyName, role: 'operator', project: 'default' } });
        expect(key.status(), await key.text()).toBe(201);
        const child = spawn('python3', [SCRIPT], {
          env: {
            ...process.env,
            RUNLENS_URL: baseURL!,
            RUNLENS_API_KEY: (await key.json()).secret,
            RUNLENS_RUN_NAME: runName,
            RUNLENS_EXTERNAL_ID: `${runName}-conversation`,
          },
        });
        children.push(child);
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        // 'close': the process exited and its output is all read.
        const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
        const requestId = new Promise<string>((resolve, reject) => {
          const look = () => {
            const found = stdout.match(/^REQUEST (\S+)$/m);
            if (found) resolve(found[1]);
          };
          child.stdout.on('data', look);
          closed.then((code) => reject(new Error(`the agent exited (${code}) before asking:\n${stdout}\n${stderr}`)));
        });
        const finished = closed.then((code) => {
          if (code !== 0) throw new Error(`the agent exited with ${code}:\n${stdout}\n${stderr}`);
          return { code, final: stdout.match(/^FINAL (.*)$/m)?.[1] };
        });
        // Not awaited by every test; their failure is reported by the one that awaits.
        requestId.catch(() => {});
        finished.catch(() => {});
        return { requestId, finished };
      });
    } finally {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
    }
  },
});

/** Waits until the browser bundle has hydrated the server-rendered page. */
async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** The inbox card of request `id`, after checking it names the agent's run. */
async function inboxCard(page: Page, id: string, runName: string) {
  await page.goto('/approvals');
  await hydrated(page);
  const card = page.locator(`[data-testid="request-card"][data-request-id="${id}"]`);
  await expect(card).toHaveCount(1);
  await expect(card.getByTestId('request-source')).toContainText(runName);
  return card;
}

test('an Agents SDK agent sends the email to the address the person edited before approving', async ({
  page,
  request,
  startAgent,
}) => {
  test.setTimeout(60_000);
  const runName = `sdk-approve-${randomUUID().slice(0, 8)}`;
  const keyName = `${runName}-key`;
  const agent = await startAgent(runName, keyName);
  const id = await agent.requestId;
  expect(id).toMatch(/^apr_/);

  // The request as the SDK tool sent it.
  const pending = await request.get(`/api/approval-requests/${id}`);
  expect(pending.status(), await pending.text()).toBe(200);
  expect(await pending.json()).toMatchObject({
    id,
    kind: 'approval',
    status: 'pending',
    tool: 'send_email',
    arguments: ARGUMENTS,
    run: { external_id: `${runName}-conversation`, name: runName },
    requested_by: keyName,
    decision: null,
  });

  const card = await inboxCard(page, id, runName);
  const editor = card.getByTestId('request-arguments');
  await expect(editor).not.toHaveValue('');
  expect(JSON.parse(await editor.inputValue())).toEqual(ARGUMENTS);
  await editor.fill(JSON.stringify({ ...ARGUMENTS, to: 'leads@example.com' }, null, 2));
  await card.getByTestId('request-comment').fill('only the leads');
  await card.getByTestId('request-approve-button').click();
  await expect(card.getByTestId('request-outcome')).toHaveAttribute('data-outcome', 'approved');

  // The tool ran with the edited arguments, and the model reported what it returned.
  const { final } = await agent.finished;
  expect(final).toBe('Done: sent to leads@example.com: Weekly report');

  const decided = await (await request.get(`/api/approval-requests/${id}`)).json();
  expect(decided).toMatchObject({
    status: 'approved',
    arguments: ARGUMENTS,
    decision: {
      outcome: 'approved',
      arguments: { ...ARGUMENTS, to: 'leads@example.com' },
      comment: 'only the leads',
      decided_by: USERS.admin.name,
    },
  });
});

test('an Agents SDK agent whose email is rejected gets the reason as the tool result', async ({
  page,
  request,
  startAgent,
}) => {
  test.setTimeout(60_000);
  const runName = `sdk-reject-${randomUUID().slice(0, 8)}`;
  const agent = await startAgent(runName, `${runName}-key`);
  const id = await agent.requestId;

  const card = await inboxCard(page, id, runName);
  await card.getByTestId('request-reason').fill('the report is not final yet');
  await card.getByTestId('request-reject-button').click();
  await expect(card.getByTestId('request-outcome')).toHaveAttribute('data-outcome', 'rejected');

  const { final } = await agent.finished;
  expect(final).toBe(`Done: rejected by ${USERS.admin.name}: the report is not final yet`);

  const decided = await (await request.get(`/api/approval-requests/${id}`)).json();
  expect(decided).toMatchObject({
    status: 'rejected',
    decision: { outcome: 'rejected', reason: 'the report is not final yet', decided_by: USERS.admin.name },
  });
});

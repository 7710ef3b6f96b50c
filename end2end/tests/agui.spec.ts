// AG-UI, end to end with the protocol's own TypeScript client: `@ag-ui/client`'s
// HttpAgent posts RunAgentInput to POST /api/agui (with the test server's API key) and
// validates every event it reads against the protocol's schemas and ordering rules, so
// a run that finishes here is a stream the client accepts.
//
// A tool-calling prompt streams its events in order; a send_email prompt ends with an
// approval interrupt, a resume with the decision continues the run to its end, and the
// runs page shows the thread's run as done.
//
// The built-in model calls `calculator` for arithmetic and any attached tool named in
// the prompt (arguments from a JSON object in it); send_email needs approval.
import { randomUUID } from 'node:crypto';
import { HttpAgent, type BaseEvent, type Interrupt } from '@ag-ui/client';
import { expect, test } from './fixtures';

/** The run of AG-UI thread `threadId` in the default project: thread ids are scoped per project. */
const threadRun = (threadId: string) => `default~thread~${threadId}`;

/** An HttpAgent for a new thread of the test server, with its API key. */
function agent(baseURL: string, threadId = `agui-${randomUUID()}`): HttpAgent {
  return new HttpAgent({
    url: `${baseURL}/api/agui`,
    threadId,
    headers: { Authorization: `Bearer ${process.env.E2E_API_KEY}` },
  });
}

/** Runs the agent once; the event types it saw, and the run's end. */
async function run(a: HttpAgent, params: Parameters<HttpAgent['runAgent']>[0] = {}) {
  const types: string[] = [];
  let outcome: string | undefined;
  let interrupts: Interrupt[] = [];
  await a.runAgent(params, {
    onEvent: ({ event }: { event: BaseEvent }) => {
      types.push(event.type);
    },
    onRunFinishedEvent: (e) => {
      outcome = e.outcome;
      if (e.outcome === 'interrupt') interrupts = e.interrupts;
    },
  });
  return { types, outcome, interrupts };
}

/** `types` with runs of one repeated type collapsed. */
function squeezed(types: string[]): string[] {
  return types.filter((t, i) => t !== types[i - 1]);
}

test('a tool-calling run streams AG-UI events in order', async ({ baseURL }) => {
  const a = agent(baseURL!);
  a.addMessage({ id: randomUUID(), role: 'user', content: 'What is (12 + 30) * 2?' });
  const { types, outcome } = await run(a);
  expect(outcome).toBe('success');
  expect(squeezed(types)).toEqual([
    'RUN_STARTED',
    'STEP_STARTED',
    'TOOL_CALL_START',
    'TOOL_CALL_ARGS',
    'TOOL_CALL_END',
    'TOOL_CALL_RESULT',
    'STEP_FINISHED',
    'STEP_STARTED',
    'TEXT_MESSAGE_START',
    'TEXT_MESSAGE_CONTENT',
    'TEXT_MESSAGE_END',
    'STEP_FINISHED',
    'RUN_FINISHED',
  ]);
  // The client assembled the thread: the call, its result, the answer.
  const [, call, result, answer] = a.messages;
  expect(call.role).toBe('assistant');
  expect(call.role === 'assistant' && call.toolCalls?.[0].function.name).toBe('calculator');
  expect(result.role).toBe('tool');
  expect(JSON.parse(result.content as string)).toMatchObject({ value: 84 });
  expect(answer.role).toBe('assistant');
  expect(answer.content).toContain('(12 + 30) * 2 = 84');

  // The next message on the thread is a follow-up of the same run.
  a.addMessage({ id: randomUUID(), role: 'user', content: 'And 2 ^ 10?' });
  const next = await run(a);
  expect(next.outcome).toBe('success');
  const last = a.messages[a.messages.length - 1];
  expect(last.role).toBe('assistant');
  expect(last.content).toContain('2 ^ 10 = 1024');
});

test('an approval interrupts the run and a resume with the decision finishes it', async ({ baseURL, page, request }) => {
  const a = agent(baseURL!);
  a.addMessage({
    id: randomUUID(),
    role: 'user',
    content: 'Please send email {"to": "agui@example.com", "subject": "from AG-UI", "body": "hello"}',
  });
  const first = await run(a);
  expect(first.outcome).toBe('interrupt');
  expect(squeezed(first.types)).toEqual([
    'RUN_STARTED',
    'STEP_STARTED',
    'TOOL_CALL_START',
    'TOOL_CALL_ARGS',
    'TOOL_CALL_END',
    'STEP_FINISHED',
    'RUN_FINISHED',
  ]);
  expect(first.interrupts).toHaveLength(1);
  const [interrupt] = first.interrupts;
  expect(interrupt.reason).toBe('tool_approval');
  expect(interrupt.metadata).toMatchObject({ toolName: 'send_email', arguments: { to: 'agui@example.com' } });
  expect(a.pendingInterrupts.map((i) => i.id)).toEqual([interrupt.id]);
  const paused = await (await request.get(`/api/runs/${threadRun(a.threadId)}`)).json();
  expect(paused.status).toBe('paused');

  // The client refuses to go on without answering the interrupt.
  await expect(a.runAgent({})).rejects.toThrow(/pending interrupt/);

  const second = await run(a, { resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] });
  expect(second.outcome).toBe('success');
  expect(second.types[0]).toBe('RUN_STARTED');
  expect(second.types).toContain('TOOL_CALL_RESULT');
  expect(second.types[second.types.length - 1]).toBe('RUN_FINISHED');
  expect(a.pendingInterrupts).toEqual([]);

  const done = await (await request.get(`/api/runs/${threadRun(a.threadId)}`)).json();
  expect(done.status).toBe('done');
  const outbox = await (await request.get('/api/outbox')).json();
  expect(outbox.emails.some((e: { to: string }) => e.to === 'agui@example.com')).toBe(true);

  // The runs page shows the thread's run, done.
  await page.goto('/runs');
  const row = page.locator(`[data-testid="run-row"][data-run-id="${threadRun(a.threadId)}"]`);
  await expect(row).toBeVisible();
  await expect(row).toHaveAttribute('data-status', 'done');
});

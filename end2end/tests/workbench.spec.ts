// The trace as a workbench (issue 36), end to end in a real browser: a
// step's model call shows the messages exactly as sent as a chat, with a
// toggle to the provider's raw request and response; a folded step names
// the tools it called and starts its text; and the browser bundle comes
// under content-hashed names, cached as immutable, with a visible state
// until it has taken over the page.
import { expect, openCall, test, type APIRequestContext, type Page } from './fixtures';

async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** Starts a run through the API and waits for it to finish; returns its id. */
async function finishedRun(request: APIRequestContext, data: Record<string, unknown>): Promise<string> {
  const res = await request.post('/api/runs', { data });
  expect(res.status(), await res.text()).toBe(201);
  const id = (await res.json()).id;
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status, { timeout: 15_000 })
    .toBe('done');
  return id;
}

test("a step's model call shows the messages as sent, and the raw request and response", async ({ page, request }) => {
  const id = await finishedRun(request, {
    initial_prompt: 'What is (12 + 30) * 2?',
    system_prompt: 'You are <b>careful</b> with numbers.',
    tools: ['calculator'],
  });
  await page.goto(`/runs/${id}`);
  await hydrated(page);

  // The detail pane shows one step: the newest, until another is picked
  // in the tree. A step's line names its call and starts its text.
  await expect(page.getByTestId('step')).toHaveCount(1);
  const second = page.locator('[data-testid="step"][data-index="1"]');
  await expect(second.getByTestId('step-preview')).toContainText('84');
  await page.locator('[data-testid="tree-step"][data-index="0"]').click();
  const first = page.locator('[data-testid="step"][data-index="0"]');
  await expect(first.getByTestId('step-calls')).toHaveText('→ calculator');
  await expect(second).toHaveCount(0);
  await expect(page).toHaveURL(/#step-0$/);
  await page.locator('[data-testid="tree-step"][data-index="1"]').click();

  // The second turn's model call, unfolded: system, user, assistant with
  // its call, tool result — loaded only now.
  if (!(await second.evaluate((el) => (el as HTMLDetailsElement).open))) {
    await second.locator('summary').first().click();
  }
  const call = second.getByTestId('model-call');
  await expect(call.getByTestId('model-call-body')).toHaveCount(0);
  await call.locator('summary').first().click();
  const chat = call.getByTestId('model-call-messages');
  await expect(chat.locator('li[data-role]')).toHaveCount(4);
  const roles = await chat.locator('li[data-role]').evaluateAll((els) => els.map((e) => e.getAttribute('data-role')));
  expect(roles).toEqual(['system', 'user', 'assistant', 'tool']);
  // User text is text, not markup.
  await expect(chat.locator('li[data-role="system"]')).toContainText('You are <b>careful</b> with numbers.');
  await expect(chat.locator('li[data-role="system"] b')).toHaveCount(0);
  await expect(chat.locator('li[data-role="user"]')).toContainText('What is (12 + 30) * 2?');
  await expect(chat.locator('li[data-role="assistant"]')).toContainText('calculator');
  await expect(chat.locator('li[data-role="tool"]')).toContainText('84');
  await expect(call.getByTestId('model-call-count')).toHaveText('3 messages sent');

  // The raw bodies: the request holds the messages themselves.
  const raw = call.getByTestId('model-call-raw');
  await expect(raw.getByTestId('raw-request')).toBeHidden();
  await raw.locator('summary').click();
  await expect(raw.getByTestId('raw-request')).toBeVisible();
  const body = JSON.parse((await raw.getByTestId('raw-request').textContent()) ?? '{}');
  expect(body.system_prompt).toBe('You are <b>careful</b> with numbers.');
  expect(body.messages).toHaveLength(3);
  expect(body.tools.map((t: { name: string }) => t.name)).toEqual(['calculator']);
  await expect(raw.getByTestId('raw-response')).toContainText('84');
});

test('the bundle has content-hashed names, is cached as immutable, and the page says when it is loading', async ({ page }) => {
  const assets: { url: string; cacheControl: string | undefined; encoding: string | undefined }[] = [];
  page.on('response', (res) => {
    if (new URL(res.url()).pathname.startsWith('/pkg/')) {
      const h = res.headers();
      assets.push({ url: res.url(), cacheControl: h['cache-control'], encoding: h['content-encoding'] });
    }
  });
  // Hold the wasm back: until it arrives, the page says it is loading.
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  await page.route(/\/pkg\/.*\.wasm$/, async (route) => {
    await held;
    await route.continue();
  });
  await page.goto('/runs');
  const state = page.locator('.hydration-state');
  await expect(state).toBeVisible();
  await expect(state).toContainText("Loading the page's controls");
  release();
  await hydrated(page);
  await expect(state).toBeHidden();

  const names = assets.map((a) => new URL(a.url).pathname);
  for (const kind of ['.js', '.wasm', '.css']) {
    const asset = assets.find((a) => new URL(a.url).pathname.endsWith(kind));
    expect(asset, `${kind} in ${names.join(', ')}`).toBeTruthy();
    expect(new URL(asset!.url).pathname).toMatch(/^\/pkg\/runlens(_bg)?\.[0-9a-f]{16}\.(js|wasm|css)$/);
    expect(asset!.cacheControl).toBe('public, max-age=31536000, immutable');
    expect(asset!.encoding).toBe('br');
  }

  // A bundle that cannot load says so instead of failing silently.
  const other = await page.context().browser()!.newContext({ storageState: await page.context().storageState() });
  const broken = await other.newPage();
  await broken.route(/\/pkg\/.*\.wasm$/, (route) => route.fulfill({ status: 404, body: '' }));
  await broken.goto(new URL('/runs', page.url()).toString());
  await expect(broken.locator('.hydration-failed')).toBeVisible();
  await expect(broken.locator('.hydration-failed')).toContainText('did not load');
  await expect(broken.locator('.hydration-loading')).toBeHidden();
  await other.close();
});

test('a live run shows each call as it is: a finished call its result, a running one its growing time and bar', async ({ page, request }) => {
  const res = await request.post('/api/runs', {
    data: {
      initial_prompt: 'go',
      tools: ['calculator', 'wait'],
      model_settings: {
        script: [
          { tool_calls: [{ name: 'calculator', arguments: { expression: '2+2' } }, { name: 'wait', arguments: { seconds: 5 } }] },
          { text: 'finished waiting' },
        ],
      },
    },
  });
  expect(res.status(), await res.text()).toBe(201);
  const id = (await res.json()).id;
  // Opened while `wait` runs: the calculator has finished, but its step
  // (and so what is stored of it) waits for `wait`.
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${id}/steps`)).json()).steps.length, { timeout: 10_000 })
    .toBe(1);
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  const calculator = page.locator('[data-testid="tool-call"][data-tool="calculator"]');
  const wait = page.locator('[data-testid="tool-call"][data-tool="wait"]');
  // The tree says the same of them, and follows the run's newest step.
  const waitRow = page.getByTestId('tree-call').filter({ hasText: 'wait' });
  await expect(page.getByTestId('tree-call').filter({ hasText: 'calculator' })).toHaveAttribute('data-status', 'succeeded');
  await expect(waitRow).toHaveAttribute('data-status', 'running');
  await expect(page.locator('[data-testid="tree-step"][data-index="0"]')).toHaveAttribute('aria-selected', 'true');
  await expect(calculator).toHaveAttribute('data-status', 'succeeded');
  await expect(calculator.getByTestId('tool-result')).toContainText('4');
  await expect(wait).toHaveAttribute('data-status', 'running');
  await expect(page.getByTestId('run-result-pending')).toBeVisible();

  // Its time and the run's grow without a reload; the timeline has its bar.
  const seconds = async (locator: ReturnType<Page['locator']>) => {
    const text = (await locator.textContent()) ?? '';
    const m = text.match(/([\d.]+)\s*(ms|s)/);
    return m ? Number(m[1]) / (m[2] === 'ms' ? 1000 : 1) : NaN;
  };
  const callTime = wait.getByTestId('tool-duration');
  const first = await seconds(callTime);
  const firstRun = await seconds(page.getByTestId('run-duration'));
  await page.waitForTimeout(1500);
  expect(await seconds(callTime)).toBeGreaterThan(first + 0.5);
  expect(await seconds(page.getByTestId('run-duration'))).toBeGreaterThan(firstRun + 0.5);
  const bar = page.locator('[data-testid="timeline"] g.timeline-row[data-node="call-call_0_1"] [data-testid="timeline-bar"]');
  await expect(bar).toHaveCount(1);
  // It runs to the axis' end, which moves on: its length (the tooltip) grows.
  const took = bar.locator('title');
  const before = await seconds(took);
  await page.waitForTimeout(1200);
  expect(await seconds(took), 'the running bar grows').toBeGreaterThan(before + 0.5);

  // Then it finishes: the call's result, the run's.
  await expect(waitRow).toHaveAttribute('data-status', 'succeeded', { timeout: 10_000 });
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 10_000 });
  // The detail pane and the tree followed the run to its newest step.
  await expect(page.locator('[data-testid="tree-step"][data-index="1"]')).toHaveAttribute('aria-selected', 'true');
  await expect(page.locator('[data-testid="step"][data-index="1"]')).toBeVisible();
  await expect(page.getByTestId('run-result')).toContainText('finished waiting');
  await openCall(page, 'wait');
  await expect(wait).toHaveAttribute('data-status', 'succeeded');
});

test('a model turn under way is on the timeline and its text near the top before the model has answered', async ({ page, request }) => {
  const res = await request.post('/api/runs', { data: { initial_prompt: 'Say hello.', model_settings: { latency_ms: 5000 } } });
  expect(res.status(), await res.text()).toBe(201);
  const id = (await res.json()).id;
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('running');
  await expect(page.getByTestId('timeline-empty')).toHaveCount(0);
  const bar = page.locator('[data-testid="timeline"] g.timeline-row[data-node="step-0"] [data-testid="timeline-bar"]');
  await expect(bar).toHaveCount(1);
  await expect(page.getByTestId('step')).toHaveCount(0);
  // Its text so far is near the top of the page, linking down to the step.
  const preview = page.getByTestId('live-preview');
  await expect(preview.getByTestId('live-preview-text')).not.toBeEmpty({ timeout: 10_000 });
  await expect(preview).toHaveAttribute('href', '#live-step');
  await expect(page.locator('#live-step')).toHaveCount(1);
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  await expect(page.getByTestId('step')).toHaveCount(1);
  await expect(preview).toHaveCount(0);
});

test("a child run nested under its call shows its outcome: done · 1 call rejected", async ({ page, request }) => {
  const suffix = Date.now().toString(36);
  const helper = `mailer_${suffix}`;
  const made = async (spec: Record<string, unknown>) => {
    const res = await request.post('/api/agents', { data: spec });
    expect(res.status(), await res.text()).toBe(201);
    return (await res.json()).id as string;
  };
  const helperId = await made({
    name: helper,
    tools: ['send_email'],
    model_settings: {
      script: [
        { tool_calls: [{ name: 'send_email', arguments: { to: 'a@example.com', subject: 'Hi', body: 'Hello.' } }] },
        { text: 'not sent' },
      ],
    },
  });
  const boss = await made({
    name: `boss_${suffix}`,
    agents: [helperId],
    model_settings: { script: [{ tool_calls: [{ name: helper, arguments: { input: 'mail Ada' } }] }, { text: 'asked' }] },
  });
  const res = await request.post('/api/runs', { data: { agent_id: boss, initial_prompt: 'Mail Ada.' } });
  expect(res.status(), await res.text()).toBe(201);
  const parent = (await res.json()).id;
  // The child pauses on send_email; a person rejects it.
  const firstChild = async () => (await (await request.get(`/api/runs/${parent}/children`)).json()).runs?.[0]?.id ?? '';
  await expect.poll(firstChild, { timeout: 15_000 }).not.toBe('');
  const child: string = await firstChild();
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${child}`)).json()).status, { timeout: 15_000 })
    .toBe('paused');
  const call = (await (await request.get(`/api/runs/${child}`)).json()).interruptions[0].call_id;
  const rejected = await request.post(`/api/runs/${child}/tool-calls/${call}/reject`, { data: { reason: 'not now' } });
  expect(rejected.status(), await rejected.text()).toBe(200);
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${parent}`)).json()).status, { timeout: 15_000 })
    .toBe('done');

  await page.goto(`/runs/${parent}`);
  await hydrated(page);
  await openCall(page, helper);
  const nested = page.locator(`[data-testid="child-run"][data-run-id="${child}"]`);
  await expect(nested.getByTestId('child-run-status')).toHaveText('done');
  await expect(nested.getByTestId('child-run-outcome')).toHaveText('1 call rejected');
  await expect(nested.locator('.outcome')).toHaveAttribute('data-outcome', 'warning');
  // The parent's own outcome is clean: its call of the child succeeded.
  await expect(page.getByTestId('run-outcome')).toHaveCount(0);
});

test('the selected step or call is in the URL: j/k and [/] move it, and a shared link opens on it', async ({ page, request }) => {
  const id = await finishedRun(request, { initial_prompt: 'What is (12 + 30) * 2?', tools: ['calculator'] });
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  await page.keyboard.press('j');
  await expect(page).toHaveURL(new RegExp(`/runs/${id}#step-0$`));
  await page.keyboard.press('j');
  await expect(page).toHaveURL(/#step-1$/);
  await expect(page.locator('#step-1')).toHaveAttribute('data-selected', 'true');
  // `[` from a step without calls: the call before it.
  await page.keyboard.press('[');
  await expect(page).toHaveURL(/#call-call_0_0$/);
  const call = page.locator('#call-call_0_0');
  await expect(call).toHaveAttribute('data-selected', 'true');
  await expect(call).toHaveJSProperty('open', true);
  await expect(page.locator('#step-1'), 'the detail pane shows the call\'s step').toHaveCount(0);
  const link = page.url();

  // The link, opened afresh, lands on the call: selected, open, in view.
  const other = await page.context().newPage();
  await other.goto(link);
  await expect(other.locator('body')).toHaveAttribute('data-hydrated', 'true');
  const shared = other.locator('#call-call_0_0');
  await expect(shared).toHaveAttribute('data-selected', 'true');
  await expect(shared).toHaveJSProperty('open', true);
  await expect(other.locator('#step-0')).toHaveJSProperty('open', true);
  await expect(shared).toBeInViewport();
  await other.close();
});

test('the tree beside the steps: a click or the keyboard opens a step or call, and the URL and the tree follow each other', async ({ page, request }) => {
  const id = await finishedRun(request, { initial_prompt: 'What is (12 + 30) * 2?', tools: ['calculator'] });
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  const tree = page.getByTestId('tree');
  const stepRow = (i: number) => tree.locator(`[data-testid="tree-step"][data-index="${i}"]`);
  // A short run's tree holds every step with its calls.
  await expect(tree.getByTestId('tree-step')).toHaveCount(2);
  const callRow = tree.getByTestId('tree-call');
  await expect(callRow).toHaveCount(1);
  await expect(callRow).toContainText('calculator');
  await expect(callRow).toHaveAttribute('data-status', 'succeeded');
  await expect(stepRow(1).getByTestId('tree-preview')).toContainText('84');
  await expect(stepRow(0)).toHaveAttribute('aria-expanded', 'true');

  // A click opens the step in the detail, marked and in the URL.
  await stepRow(1).click();
  await expect(page.locator('[data-testid="step"][data-index="1"]')).toHaveAttribute('data-selected', 'true');
  await expect(page).toHaveURL(new RegExp(`/runs/${id}#step-1$`));
  await expect(stepRow(1)).toHaveAttribute('aria-selected', 'true');
  await expect(tree).toBeFocused();

  // The keyboard moves in the tree; Enter opens.
  await page.keyboard.press('Home');
  await expect(stepRow(0)).toHaveAttribute('aria-selected', 'true');
  await expect(tree).toHaveAttribute('aria-activedescendant', 'tree-step-0');
  await page.keyboard.press('ArrowDown');
  await expect(callRow).toHaveAttribute('aria-selected', 'true');
  await expect(page).toHaveURL(/#step-1$/);
  await page.keyboard.press('Enter');
  const call = page.locator('[data-testid="tool-call"][data-tool="calculator"]');
  await expect(call).toHaveAttribute('data-selected', 'true');
  await expect(page).toHaveURL(/#call-/);
  await page.keyboard.press('ArrowLeft');
  await expect(stepRow(0)).toHaveAttribute('aria-selected', 'true');
  await page.keyboard.press('End');
  await expect(stepRow(1)).toHaveAttribute('aria-selected', 'true');

  // A selection made elsewhere moves the tree's: `k`, the previous step.
  await page.keyboard.press('k');
  await expect(page.locator('[data-testid="step"][data-index="0"]')).toHaveAttribute('data-selected', 'true');
  await expect(stepRow(0)).toHaveAttribute('aria-selected', 'true');

  // A shared link to the call opens with the call's line selected.
  const callId = (await call.getAttribute('data-call-id'))!;
  await page.goto('about:blank');
  await page.goto(`/runs/${id}#call-${callId}`);
  await hydrated(page);
  await expect(call).toHaveAttribute('data-selected', 'true');
  await expect(tree.getByTestId('tree-call')).toHaveAttribute('aria-selected', 'true');
});

test('the tree filters its steps: those with an error, those calling a tool', async ({ page, request }) => {
  const id = await finishedRun(request, {
    initial_prompt: 'add',
    tools: ['calculator'],
    model_settings: {
      script: [
        { tool_calls: [{ name: 'calculator', arguments: { expression: '2 + 2' } }] },
        { tool_calls: [{ name: 'calculator', arguments: { expression: '2 +' } }] },
        { text: 'done' },
      ],
    },
  });
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  const tree = page.getByTestId('tree');
  const shown = () => tree.getByTestId('tree-step').evaluateAll((els) => els.map((e) => e.getAttribute('data-index')));
  await expect.poll(shown).toEqual(['0', '1', '2']);

  const filter = page.getByTestId('tree-filter');
  await filter.selectOption('errors');
  await expect.poll(shown).toEqual(['1']);
  await expect(page.getByTestId('tree-filter-count')).toHaveText('1 of 3 steps');
  await expect(tree.getByTestId('tree-call')).toHaveAttribute('data-status', 'failed');
  // The keyboard moves among the steps kept.
  await tree.focus();
  await page.keyboard.press('Home');
  await page.keyboard.press('Enter');
  await expect(page.locator('[data-testid="step"][data-index="1"]')).toHaveAttribute('data-selected', 'true');

  await filter.selectOption('tool:calculator');
  await expect.poll(shown).toEqual(['0', '1']);
  await expect(page.getByTestId('tree-filter-count')).toHaveText('2 of 3 steps');
  await filter.selectOption('');
  await expect.poll(shown).toEqual(['0', '1', '2']);
  await expect(page.getByTestId('tree-filter-count')).toHaveText('');
});

test('the detail pane links to the steps around it, in place with scripts', async ({ page, request }) => {
  const id = await finishedRun(request, { initial_prompt: 'What is (12 + 30) * 2?', tools: ['calculator'] });
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  await page.evaluate(() => ((window as unknown as { __same: boolean }).__same = true));
  await expect(page.getByTestId('step-position')).toHaveText('#1 of 2 steps');
  await expect(page.getByTestId('step-next')).toHaveCount(0);
  await page.getByTestId('step-prev').click();
  await expect(page.locator('[data-testid="step"][data-index="0"]')).toHaveAttribute('data-selected', 'true');
  await expect(page).toHaveURL(new RegExp(`/runs/${id}#step-0$`));
  await expect(page.getByTestId('step-position')).toHaveText('#0 of 2 steps');
  await expect(page.locator('[data-testid="tree-step"][data-index="0"]')).toHaveAttribute('aria-selected', 'true');
  expect(await page.evaluate(() => (window as unknown as { __same?: boolean }).__same)).toBe(true);
  // An in-page link to a node shows it too.
  await page.evaluate(() => (location.hash = '#step-1'));
  await expect(page.locator('[data-testid="step"][data-index="1"]')).toBeVisible();
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('the detail pane shows the newest step, and its links lead to the others', async ({ page, request }) => {
    const id = await finishedRun(request, { initial_prompt: 'What is (12 + 30) * 2?', tools: ['calculator'] });
    await page.goto(`/runs/${id}`);
    // The tree needs scripts to scroll through a run: it is not shown.
    await expect(page.getByTestId('tree')).toBeHidden();
    await expect(page.getByTestId('step')).toHaveCount(1);
    await expect(page.getByTestId('step')).toHaveAttribute('data-index', '1');
    await page.getByTestId('step-prev').click();
    await expect(page).toHaveURL(/\?from=0#step-0$/);
    await expect(page.getByTestId('step')).toHaveAttribute('data-index', '0');
    await expect(page.locator('[data-testid="tool-call"][data-tool="calculator"]')).toBeVisible();
  });
});

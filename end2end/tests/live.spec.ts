// Live runs and traces that scale, end to end in a real browser (issue 5):
// a run streams onto its trace page without a reload (status, steps, text
// growing in place), a reload mid-run picks up where it was, the runs list
// and the approvals badge follow the all-runs stream, the timeline and the
// token chart render, prices are edited in /settings and priced into runs,
// and a 10,000-step run opens fast and is searched on the server.
//
// Runs are started through the REST API with the built-in model: with
// `latency_ms` each model turn takes that long, spread over its streamed
// chunks. The prompt below makes two turns: a calculator call, then a text
// answer of about ten streamed words ("… = 84").
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, openTranscript, test, type APIRequestContext, type Page } from './fixtures';

const PROMPT = 'What is (12 + 30) * 2?';

async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** Starts a run through the API; returns its id. */
async function startRun(request: APIRequestContext, data: Record<string, unknown>): Promise<string> {
  const res = await request.post('/api/runs', { data });
  expect(res.status(), await res.text()).toBe(201);
  return (await res.json()).id;
}

/** Marks the current document, to prove later that no reload happened. */
async function markDocument(page: Page) {
  await page.evaluate(() => ((window as unknown as { __liveMark: boolean }).__liveMark = true));
}
async function sameDocument(page: Page): Promise<boolean> {
  return page.evaluate(() => (window as unknown as { __liveMark?: boolean }).__liveMark === true);
}

test('a running trace updates live: status, steps, streamed text, tokens, timeline, token chart', async ({ page, request }) => {
  const id = await startRun(request, { initial_prompt: PROMPT, model_settings: { latency_ms: 4000 } });
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  await markDocument(page);
  const status = page.getByTestId('run-status');
  await expect(status).toHaveText('running');

  // The first turn (the calculator call) is stored: its step appears.
  await expect(page.getByTestId('step')).toHaveCount(1, { timeout: 10_000 });
  await expect(page.locator('[data-testid="tool-call"][data-tool="calculator"]')).toBeVisible();
  // The second turn streams its text into the page before it is stored: it
  // grows in place. Sampled inside the page every 20 ms, so how long the
  // test runner takes between two calls cannot make it miss the stream.
  const samples = await page.evaluate(async () => {
    const seen: { text: string; status: string }[] = [];
    const end = Date.now() + 15_000;
    while (Date.now() < end && seen.length < 2) {
      const text = document.querySelector('[data-testid="streaming-text"]')?.textContent?.trim() ?? '';
      const status = document.querySelector('[data-testid="run-status"]')?.textContent?.trim() ?? '';
      if (text && text !== seen[seen.length - 1]?.text) seen.push({ text, status });
      await new Promise((r) => setTimeout(r, 20));
    }
    return seen;
  });
  expect(samples.length, `streamed text seen growing: ${JSON.stringify(samples)}`).toBe(2);
  expect(samples[1].text.startsWith(samples[0].text), 'chunks are appended').toBe(true);
  expect(samples.map((s) => s.status)).toEqual(['running', 'running']);

  await expect(status).toHaveText('done', { timeout: 15_000 });
  expect(await sameDocument(page), 'the page updated itself, no reload').toBe(true);
  // The detail pane followed the run to its newest step; the tree has both.
  await expect(page.getByTestId('tree-step')).toHaveCount(2);
  await expect(page.getByTestId('step')).toHaveCount(1);
  await expect(page.getByTestId('step')).toHaveAttribute('data-index', '1');
  await expect(page.getByTestId('streaming-text')).toHaveCount(0);
  await expect(page.getByTestId('step-text')).toContainText('84');
  await expect(page.getByTestId('run-tokens')).not.toHaveText('0');
  await expect(page.getByTestId('run-cost')).toHaveText('$0.00');

  const timeline = page.getByTestId('timeline');
  await expect(timeline.locator('[data-testid="timeline-bar"][data-kind="model"]')).toHaveCount(2);
  await expect(timeline.locator('[data-testid="timeline-bar"][data-kind="tool"]')).toHaveCount(1);
  await expect(page.getByTestId('token-chart').getByTestId('token-bar')).toHaveCount(2);
  await expect(page.getByTestId('token-total')).toHaveText(/^[1-9][\d,]*$/);

  // Clicking a bar selects its node in the tree.
  await timeline.locator('.timeline-row[data-node^="call-"]').click();
  await expect(page.locator('[data-testid="tool-call"][data-tool="calculator"]')).toHaveAttribute('data-selected', 'true');
});

test('a reload mid-run picks up where it was and follows the run to the end', async ({ page, request }) => {
  const id = await startRun(request, { initial_prompt: PROMPT, model_settings: { latency_ms: 5000 } });
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  // Reload while the second turn is streaming.
  await expect(page.getByTestId('step')).toHaveCount(1, { timeout: 15_000 });
  await expect(page.getByTestId('streaming-text')).toHaveText(/\S/, { timeout: 10_000 });
  await page.reload();
  await hydrated(page);
  await markDocument(page);
  await expect(page.getByTestId('run-status')).toHaveText('running');
  await expect(page.getByTestId('step')).toHaveCount(1);
  // The stream resumes from the start of the step being written.
  await expect(page.getByTestId('streaming-text')).toHaveText(/^Here is/, { timeout: 5_000 });
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  expect(await sameDocument(page)).toBe(true);
  await expect(page.getByTestId('tree-step')).toHaveCount(2);
  await expect(page.getByTestId('step')).toHaveAttribute('data-index', '1');
  await expect(page.getByTestId('step-text')).toContainText('= 84');
});

test('the runs list and the approvals badge follow the all-runs stream', async ({ page, request }) => {
  await page.goto('/runs');
  await hydrated(page);
  await markDocument(page);
  const badge = page.getByTestId('approvals-badge');
  const before = Number((await badge.getAttribute('data-count')) ?? '0');

  const id = await startRun(request, { initial_prompt: PROMPT, model_settings: { latency_ms: 1000 } });
  const row = page.locator(`[data-testid="run-row"][data-run-id="${id}"]`);
  await expect(row).toHaveAttribute('data-status', 'running', { timeout: 10_000 });
  await expect(row).toHaveAttribute('data-status', 'done', { timeout: 15_000 });

  const paused = await startRun(request, {
    initial_prompt: 'send_email {"to": "live@example.com", "subject": "Live", "body": "Badge."}',
    tools: ['send_email'],
  });
  await expect(page.locator(`[data-testid="run-row"][data-run-id="${paused}"]`)).toHaveAttribute('data-status', 'paused', { timeout: 10_000 });
  await expect(badge).toHaveAttribute('data-count', String(before + 1));
  expect((await request.post(`/api/runs/${paused}/cancel`)).ok()).toBe(true);
  await expect(badge).toHaveAttribute('data-count', String(before));
  expect(await sameDocument(page), 'no reload, no polling needed').toBe(true);
});

test('prices are edited in settings, validated, and priced into runs', async ({ page, request }) => {
  await page.goto('/settings');
  await hydrated(page);
  const row = page.locator('[data-testid="price-row"][data-model="builtin"]');
  await expect(row).toBeVisible();
  // The admin's Servers panel: this one server (SQLite), alive.
  const server = page.locator('[data-testid="servers-panel"] [data-testid="server-row"]');
  await expect(server).toHaveCount(1);
  await expect(server).toHaveAttribute('data-alive', 'true');
  await expect(server.getByTestId('server-this')).toBeVisible();

  // A price that is far too high (per token instead of per million) is refused.
  await page.getByTestId('new-price-model').fill('e2e-model');
  await page.getByTestId('new-price-input').fill('1e9');
  await page.getByTestId('new-price-output').fill('8');
  await page.getByTestId('new-price-save').click();
  await expect(page.getByTestId('price-error')).toContainText('per million');
  await expect(page.locator('[data-testid="price-row"][data-model="e2e-model"]')).toHaveCount(0);

  await page.getByTestId('new-price-input').fill('2');
  await page.getByTestId('new-price-save').click();
  await expect(page.getByTestId('price-saved')).toContainText('e2e-model');
  const added = page.locator('[data-testid="price-row"][data-model="e2e-model"]');
  await expect(added.getByTestId('price-cache_read')).toHaveValue('2');
  await expect(added.getByTestId('price-reasoning')).toHaveValue('8');

  // Price the built-in model for a moment: a run's cost follows.
  await row.getByTestId('price-input').fill('1000');
  await row.getByTestId('price-output').fill('2000');
  await row.getByTestId('price-save').click();
  await expect(page.getByTestId('price-saved')).toContainText('builtin');
  try {
    const id = await startRun(request, { initial_prompt: PROMPT });
    await page.goto(`/runs/${id}`);
    await hydrated(page);
    await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
    await expect(page.getByTestId('run-cost')).toHaveText(/^\$[1-9]/);
    await expect(page.getByTestId('step-cost').first()).toHaveText(/^\$0\.[0-9]*[1-9]/);
    await expect(page.getByTestId('chart-cost')).toHaveText(await page.getByTestId('run-cost').innerText());
  } finally {
    const reset = await request.put('/api/prices/builtin', { data: { input: 0, output: 0 } });
    expect(reset.ok()).toBe(true);
    await request.delete('/api/prices/e2e-model');
  }
});

test.describe('a 10,000-step run', () => {
  let bigRun = '';
  test.beforeAll(async () => {
    test.skip(!process.env.E2E_DB_FILE, 'needs the server database (not available with E2E_BASE_URL)');
    test.setTimeout(240_000);
    // `runlens gen-trace` plays a scripted run into the server's database.
    const { stdout } = await promisify(execFile)(
      process.env.E2E_RUNLENS_BIN!,
      ['gen-trace', '--steps', '10000', '--database-url', `sqlite://${process.env.E2E_DB_FILE}`],
      { timeout: 230_000, env: { ...process.env, RUST_LOG: 'error' } },
    );
    // It prints the run's id (on the last line: logs may come before it).
    bigRun = stdout.trim().split('\n').pop()!.trim();
    expect(bigRun).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('its tree holds only the rows in view, loads others as it scrolls, and opens a step on another page', async ({ page }) => {
    await page.goto(`/runs/${bigRun}`);
    await hydrated(page);
    const tree = page.getByTestId('tree');
    // As tall as 10,000 lines of 28 px, with a few dozen in the DOM.
    await expect(tree.locator('.tree-space')).toHaveAttribute('style', 'height: 280000px');
    const inDom = () => tree.locator('[role="treeitem"]').count();
    expect(await inDom()).toBeGreaterThan(10);
    expect(await inDom()).toBeLessThan(120);
    await tree.evaluate((el) => (el.scrollTop = 28 * 7000));
    const row = tree.locator('[data-testid="tree-step"][data-index="7003"]');
    await expect(row.getByTestId('tree-preview')).toContainText('Step 7003', { timeout: 10_000 });
    await expect(row).toContainText('→ calculator');
    expect(await inDom()).toBeLessThan(120);
    await expect(tree.locator('[data-testid="tree-step"][data-index="100"]')).toHaveCount(0);
    // Step 7003 is on another page: opening it loads that page, at the step.
    await row.click();
    await expect(page).toHaveURL(/\?from=7003#step-7003$/);
    await expect(page.locator('[data-testid="step"][data-index="7003"]')).toHaveAttribute('data-selected', 'true', {
      timeout: 15_000,
    });
    await expect(page.getByTestId('steps-range')).toHaveText('steps 7000–7049 of 10000');
    await expect(row).toHaveAttribute('aria-selected', 'true');
    // The next line is on the same page: Enter selects it there.
    await expect(tree).toBeFocused();
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await expect(page.locator('[data-testid="step"][data-index="7004"]')).toHaveAttribute('data-selected', 'true');
    await expect(page).toHaveURL(/\?from=7003#step-7004$/);
    // → shows a step's calls as lines under it, ← folds them again.
    await page.keyboard.press('ArrowRight');
    await expect(tree.locator('[data-testid="tree-step"][data-index="7004"]')).toHaveAttribute('aria-expanded', 'true');
    await expect(tree.locator('[data-testid="tree-call"][data-step="7004"]')).toHaveCount(1);
    await page.keyboard.press('ArrowLeft');
    await expect(tree.locator('[data-testid="tree-call"][data-step="7004"]')).toHaveCount(0);
  });

  test('opens fast, pages its steps, and search finds a step deep in it', async ({ page }) => {
    const started = Date.now();
    await page.goto(`/runs/${bigRun}`);
    await hydrated(page);
    const loadMs = Date.now() - started;
    console.log(`10,000-step trace page: interactive after ${loadMs} ms`);
    expect(loadMs, 'first screen interactive').toBeLessThan(5_000);
    await expect(page.getByTestId('steps-range')).toHaveText('steps 0–49 of 10000');
    // The detail pane shows the page's first step; the tree lists them all.
    await expect(page.getByTestId('step')).toHaveCount(1);
    await expect(page.getByTestId('step')).toHaveAttribute('data-index', '0');
    await expect(page.getByTestId('timeline-bar').first()).toBeVisible();
    await expect(page.getByTestId('token-chart').getByTestId('token-bar')).toHaveCount(200, { timeout: 20_000 });
    await openTranscript(page);
    await expect(page.getByTestId('transcript-window')).toContainText('of 20000 messages', { timeout: 20_000 });

    const searched = Date.now();
    await page.getByTestId('trace-search').fill('9876 + 1');
    await expect(page.getByTestId('search-count')).toHaveText('1 match', { timeout: 20_000 });
    console.log(`search over 10,000 steps: ${Date.now() - searched} ms`);
    await expect(page.getByTestId('search-hit')).toContainText('#9876 calculator');
    await page.getByTestId('search-next').click();
    await expect(page).toHaveURL(/\?from=9876(#.*)?$/);
    const call = page.locator('[data-testid="tool-call"][data-call-id="call_9876_0"]');
    await expect(call).toHaveAttribute('data-selected', 'true', { timeout: 15_000 });
    // The selection is in the URL too: a copied link lands on the call.
    await expect(page).toHaveURL(/\?from=9876#call-call_9876_0$/);
    await expect(call).toHaveClass(/search-hit/);
    await expect(call.getByTestId('tool-args')).toContainText('"9876 + 1"');
    await expect(page.getByTestId('search-count')).toHaveText('1 of 1');
    await expect(page.getByTestId('steps-range')).toHaveText('steps 9850–9899 of 10000');
  });
});

// Time travel in a real browser: fork a finished run from one of its steps
// with a tool result changed ("what if the calculator had said 41?"), land
// on the fork with its inherited steps marked, see its own answer and find
// it in the parent's branch tree; a bad JSON result is explained in the
// panel; and a recorded replay of a finished run reports that it matches.
//
// Runs are created through the REST API with the built-in model, scripted
// (`model_settings.script`) so the parent's turns are known; the fork drops
// the script (`{}`), and the built-in model then answers from the results
// it sees. Tests share one server, so each finds its own runs by id.
import AxeBuilder from '@axe-core/playwright';
import { expect, openStep, test, type APIRequestContext, type Page } from './fixtures';

async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** The parent: two calculator turns (2+2, then 3+3), then an answer. */
const SCRIPTED = {
  initial_prompt: 'Add',
  tools: ['calculator'],
  model_settings: {
    script: [
      { tool_calls: [{ name: 'calculator', arguments: { expression: '2+2' } }] },
      { tool_calls: [{ name: 'calculator', arguments: { expression: '3+3' } }] },
      { text: 'Both added.' },
    ],
  },
};

async function status(request: APIRequestContext, id: string): Promise<string> {
  return (await (await request.get(`/api/runs/${id}`)).json()).status;
}

/** Creates the scripted run through the API and waits until it is done; returns its id. */
async function scriptedRun(request: APIRequestContext, name: string): Promise<string> {
  const created = await request.post('/api/runs', { data: { ...SCRIPTED, name } });
  expect(created.status(), await created.text()).toBe(201);
  const id = (await created.json()).id as string;
  await expect.poll(() => status(request, id), { timeout: 15_000 }).toBe('done');
  return id;
}

/** axe's serious and critical WCAG 2.1 AA violations on the page, one line each (as a11y.spec.ts). */
async function violations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).slice(0, 10).join(', ')}`);
}

/** The run id in the current URL (`/runs/{id}`). */
function runIdInUrl(page: Page): string {
  return decodeURIComponent(new URL(page.url()).pathname.split('/').filter(Boolean)[1] ?? '');
}

test('forking from a step with a changed tool result continues from there', async ({ page, request }) => {
  const parent = await scriptedRun(request, `fork from step ${Date.now()}`);
  const steps = (await (await request.get(`/api/runs/${parent}/steps`)).json()).steps;
  const call = steps[0].tool_calls[0].id as string;

  await page.goto(`/runs/${parent}`);
  await hydrated(page);
  await openStep(page, 0);
  const control = page.locator('[data-testid="fork-from-step"][data-step="0"]');
  await control.locator('summary').click();
  const panel = control.getByTestId('fork-panel');
  await expect(panel).toBeVisible();
  await expect(panel.getByTestId('fork-mode-results')).toBeChecked();
  const result = panel.locator(`[data-testid="fork-tool-result"][data-call-id="${call}"]`);
  await expect(result).toHaveValue(/4/);
  await expect(panel.getByTestId('fork-model-calls')).toHaveValue(/2\+2/);
  // The model field keeps the run's model when blank and suggests the configured ones.
  await expect(panel.getByTestId('fork-model')).toHaveAttribute('placeholder', 'builtin');
  await expect(panel.locator('datalist option[value="builtin"]')).toHaveCount(1);

  // Broken JSON is explained in the panel, and nothing is forked.
  await result.fill('{41');
  await panel.getByTestId('fork-submit').click();
  await expect(panel.getByTestId('fork-error')).toContainText('not valid JSON');
  expect(runIdInUrl(page)).toBe(parent);

  await result.fill('41');
  await panel.getByTestId('fork-model-settings').fill('{}');
  await panel.getByTestId('fork-submit').click();

  await expect.poll(() => runIdInUrl(page), { timeout: 15_000 }).not.toBe(parent);
  const fork = runIdInUrl(page);
  await hydrated(page);
  await expect(page.getByTestId('run-id')).toHaveText(fork);
  // The parent's step-0 error did not follow to the fork's step 0.
  await expect(page.getByTestId('fork-error')).toHaveCount(0);
  const marker = page.getByTestId('fork-point');
  await expect(marker).toContainText('Forked from step 0 of');
  await expect(marker.getByTestId('fork-parent')).toHaveAttribute('data-run-id', parent);
  const inherited = await openStep(page, 0);
  await expect(inherited).toHaveAttribute('data-inherited', 'true');
  await expect(inherited.getByTestId('fork-from-step')).not.toHaveAttribute('open', '');
  await expect(inherited).toHaveClass(/inherited/);
  await expect(inherited.getByTestId('tool-result')).toContainText('41');

  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  await expect(page.getByTestId('run-summary')).toContainText('41');
  const own = await openStep(page, 1);
  await expect(own).not.toHaveAttribute('data-inherited', 'true');
  // The timeline starts at the fork's own first step: the inherited one is a
  // folded row that says it ran in the parent, not a bar on this axis.
  const timeline = page.getByTestId('timeline');
  await expect(timeline.getByTestId('timeline-inherited')).toContainText('#0 inherited');
  await expect(timeline.getByTestId('timeline-inherited')).toContainText('copied from the parent run');
  await expect(timeline.locator('.timeline-row:not(.inherited)[data-node="step-0"]')).toHaveCount(0);
  await expect(timeline.locator('.timeline-row[data-node="step-1"]')).toHaveCount(1);
  const forked = await (await request.get(`/api/runs/${fork}`)).json();
  expect(forked.forked_from_step).toBe(0);
  expect(forked.parent_run_id).toBe(parent);
  await expect(page.getByTestId('compare-parent')).toHaveAttribute('href', `/compare?a=${parent}&b=${fork}`);

  // The branch tree of both runs has the other one, and the parent is unchanged.
  const tree = page.getByTestId('run-family');
  await expect(tree.locator(`[data-testid="family-link"][data-run-id="${fork}"]`)).toHaveAttribute('aria-current', 'page');
  await tree.locator(`[data-testid="family-link"][data-run-id="${parent}"]`).click();
  await expect(page).toHaveURL(new RegExp(`/runs/${parent}$`));
  await expect(page.getByTestId('run-family').locator(`[data-testid="family-link"][data-run-id="${fork}"]`)).toBeVisible();
  await expect(page.getByTestId('run-summary')).toContainText('Both added.');
  await expect(page.getByTestId('fork-point')).toHaveCount(0);
});

test('a recorded replay of a finished run matches the original', async ({ page, request }) => {
  const original = await scriptedRun(request, `replay ${Date.now()}`);
  await page.goto(`/runs/${original}`);
  await hydrated(page);
  await expect(page.getByTestId('replay-info')).toHaveCount(0);
  await page.getByTestId('replay-mode').selectOption('recorded');
  await page.getByTestId('replay-submit').click();

  await expect.poll(() => runIdInUrl(page), { timeout: 15_000 }).not.toBe(original);
  const replay = runIdInUrl(page);
  await hydrated(page);
  await expect(page.getByTestId('run-id')).toHaveText(replay);
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  const info = page.getByTestId('replay-info');
  await expect(info).toContainText('Replay (recorded) of');
  await expect(info.getByTestId('replay-of')).toHaveAttribute('data-run-id', original);
  await expect(info.getByTestId('replay-identical')).toHaveText('identical to the original');
  await expect(page.getByTestId('run-summary')).toContainText('Both added.');
  const got = await (await request.get(`/api/runs/${replay}`)).json();
  expect(got.replay).toMatchObject({ of: original, mode: 'recorded' });
  // The original links nowhere new and can be replayed again.
  await info.getByTestId('replay-of').click();
  await expect(page).toHaveURL(new RegExp(`/runs/${original}$`));
  await expect(page.getByTestId('replay-submit')).toBeVisible();
});

test('a recorded replay says where a tool answered differently', async ({ page, request }) => {
  const created = await request.post('/api/runs', {
    data: {
      name: `replay diverges ${Date.now()}`,
      initial_prompt: 'What time is it?',
      tools: ['current_time'],
      model_settings: { script: [{ tool_calls: [{ name: 'current_time', arguments: {} }] }, { text: 'It is now.' }] },
    },
  });
  expect(created.status(), await created.text()).toBe(201);
  const original = (await created.json()).id as string;
  await expect.poll(() => status(request, original), { timeout: 15_000 }).toBe('done');

  await page.goto(`/runs/${original}`);
  await hydrated(page);
  await page.getByTestId('replay-submit').click(); // recorded is the default
  await expect.poll(() => runIdInUrl(page), { timeout: 15_000 }).not.toBe(original);
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  const info = page.getByTestId('replay-info');
  await expect(info).toContainText('Replay (recorded) of');
  const diverged = info.getByTestId('replay-diverged');
  await expect(diverged).toHaveAttribute('data-step', '0');
  await expect(diverged).toContainText('diverged at step 0');
  await expect(diverged.getByRole('link')).toHaveAttribute('href', '#step-0');
  await expect(info.getByTestId('replay-divergence')).not.toBeEmpty();
  await expect(info.getByTestId('replay-identical')).toHaveCount(0);
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('the fork panel is a plain form: errors come back to it, a fork opens', async ({ page, request }) => {
    const parent = await scriptedRun(request, `fork no-js ${Date.now()}`);
    // A step's link (`?from=N`, as the tree's lines) opens it without scripts.
    await page.goto(`/runs/${parent}?from=1`);
    const control = page.locator('[data-testid="fork-from-step"][data-step="1"]');
    await control.locator('summary').click();
    const panel = control.getByTestId('fork-panel');
    await panel.getByTestId('fork-mode-answer').check();
    await panel.getByTestId('fork-model-calls').fill('[{"name": "calculator"');
    await panel.getByTestId('fork-submit').click();
    // Back on the page, the panel open again with the message.
    await expect(page).toHaveURL(new RegExp(`/runs/${parent}`));
    const again = page.locator('[data-testid="fork-from-step"][data-step="1"]');
    await expect(again).toHaveAttribute('open', '');
    await expect(again.getByTestId('fork-error')).toContainText('JSON array');

    await again.getByTestId('fork-mode-answer').check();
    await again.getByTestId('fork-model-text').fill('Stopped early: 4 and 6.');
    await again.getByTestId('fork-model-calls').fill('');
    await again.getByTestId('fork-submit').click();
    await expect.poll(() => runIdInUrl(page), { timeout: 15_000 }).not.toBe(parent);
    await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
    await expect(page.getByTestId('run-summary')).toContainText('Stopped early: 4 and 6.');
    await expect(page.getByTestId('fork-point')).toContainText('Forked from step 1 of');
    // Without scripts a step's link (`?from=N`, as the tree's) opens it.
    await page.goto(`${page.url().split(/[?#]/)[0]}?from=1`);
    await expect(page.locator('[data-testid="step"][data-index="1"]')).toHaveAttribute('data-inherited', 'true');
  });
});

for (const theme of ['light', 'dark'] as const) {
  test(`a fork from a step, its open panel and a replay pass axe (${theme} theme)`, async ({ page, request, context, baseURL }) => {
    await context.addCookies([{ name: 'runlens_theme', value: theme, url: baseURL! }]);
    const parent = await scriptedRun(request, `fork a11y ${theme} ${Date.now()}`);
    const steps = (await (await request.get(`/api/runs/${parent}/steps`)).json()).steps;
    const forked = await request.post(`/api/runs/${parent}/fork`, {
      data: { from_step: 0, tool_results: { [steps[0].tool_calls[0].id]: 41 }, model_settings: {} },
    });
    expect(forked.status(), await forked.text()).toBe(201);
    const fork = (await forked.json()).id as string;
    await expect.poll(() => status(request, fork), { timeout: 15_000 }).toBe('done');
    const replayed = await request.post(`/api/runs/${parent}/replay`, { data: { mode: 'recorded' } });
    expect(replayed.status(), await replayed.text()).toBe(201);
    const replay = (await replayed.json()).id as string;
    await expect.poll(() => status(request, replay), { timeout: 15_000 }).toBe('done');

    await page.goto(`/runs/${fork}`);
    await hydrated(page);
    await expect(page.locator('html')).toHaveAttribute('data-theme', theme);
    await expect(page.getByTestId('fork-point')).toBeVisible();
    await page.locator('[data-testid="fork-from-step"][data-step="1"] summary').click();
    await expect(page.locator('[data-testid="fork-from-step"][data-step="1"]').getByTestId('fork-panel')).toBeVisible();
    let found = await violations(page);
    expect(found, `axe on the fork's trace (${theme}):\n${found.join('\n')}`).toEqual([]);

    await page.goto(`/runs/${replay}`);
    await hydrated(page);
    await expect(page.getByTestId('replay-identical')).toBeVisible();
    found = await violations(page);
    expect(found, `axe on the replay's trace (${theme}):\n${found.join('\n')}`).toEqual([]);
  });
}

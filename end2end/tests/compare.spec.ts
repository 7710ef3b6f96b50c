// Comparing runs in a real browser: tick two runs in the runs list and see
// where they first differ and how (an argument diff); open a fork's
// "Compare with parent"; start one prompt on three models from the
// playground and watch the group's three columns fill in.
//
// Runs are created through the REST API with the built-in model, which
// answers arithmetic with the calculator; the playground's comparison also
// uses the scripted `mock` provider (mock-llm.ts). Tests share one server,
// so each finds its own runs by id.
import { expect, test, type APIRequestContext, type Page } from './fixtures';

async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** Creates a run through the API and waits until it is done; returns its id. */
async function finishedRun(request: APIRequestContext, prompt: string, name: string): Promise<string> {
  const created = await request.post('/api/runs', { data: { name, initial_prompt: prompt, tools: ['calculator'] } });
  expect(created.status(), await created.text()).toBe(201);
  const id = (await created.json()).id as string;
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status, { timeout: 15_000 })
    .toBe('done');
  return id;
}

test('two ticked runs open side by side at their first difference', async ({ page, request }) => {
  const tag = `${Date.now()}`;
  const a = await finishedRun(request, 'What is 2 + 3?', `compare a ${tag}`);
  const b = await finishedRun(request, 'What is 2 + 4?', `compare b ${tag}`);
  await page.goto('/runs');
  await hydrated(page);
  await page.locator(`[data-testid="run-row"][data-run-id="${a}"]`).getByTestId('run-tick').check();
  await page.locator(`[data-testid="run-row"][data-run-id="${b}"]`).getByTestId('run-tick').check();
  await page.getByTestId('compare-selected-submit').click();

  await expect(page).toHaveURL(/\/compare\?run=/);
  await hydrated(page);
  // Newest first in the list, so B is on the left.
  await expect(page.getByTestId('compare-side-a')).toHaveAttribute('data-run-id', b);
  await expect(page.getByTestId('compare-side-b')).toHaveAttribute('data-run-id', a);
  await expect(page.getByTestId('compare-divergence')).toBeVisible();
  await expect(page.getByTestId('compare-equal')).toHaveCount(0);
  // The prompt differs word by word in the configuration...
  const prompt = page.locator('[data-testid="config-row"][data-field="initial_prompt"]');
  await expect(prompt).toHaveAttribute('data-equal', 'false');
  await expect(prompt.locator('del')).toHaveText('4');
  await expect(prompt.locator('ins')).toHaveText('3');
  // ...and the calculator's arguments as a JSON diff in the first step.
  const changed = page.locator('[data-testid="step-pair"][data-change="changed"]').first();
  await expect(changed.getByTestId('argument-diff')).toBeVisible();
  await expect(changed.getByTestId('json-change').first()).toContainText('2 + 4');
  await expect(changed.getByTestId('json-change').first()).toContainText('2 + 3');
  // Each side links to its trace.
  await page.getByTestId('compare-side-b').getByRole('link').first().click();
  await expect(page).toHaveURL(new RegExp(`/runs/${a}`));
});

test('a fork compares with its parent from the edited message', async ({ page, request }) => {
  const parent = await finishedRun(request, 'What is 6 * 7?', `fork parent ${Date.now()}`);
  const messages = await (await request.get(`/api/runs/${parent}/messages`)).json();
  const human = messages.messages.find((m: { type: string }) => m.type === 'human');
  const forked = await request.post(`/api/runs/${parent}/messages/${human.id}/edit`, {
    data: { message: 'What is 6 * 8?' },
  });
  expect(forked.status(), await forked.text()).toBe(201);
  const fork = (await forked.json()).id as string;
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${fork}`)).json()).status, { timeout: 15_000 })
    .toBe('done');

  await page.goto(`/runs/${fork}`);
  await hydrated(page);
  await page.getByTestId('compare-parent').click();
  await expect(page).toHaveURL(new RegExp(`/compare\\?a=${parent}&b=${fork}`));
  await expect(page.getByTestId('compare-fork')).toBeVisible();
  await expect(page.getByTestId('compare-divergence')).toBeVisible();
  const first = page.locator('[data-testid="message-pair"]').first();
  await expect(first).toHaveAttribute('data-change', 'changed');
  await expect(first.locator('ins')).toContainText('8');
});

test('one prompt on three models from the playground fills three columns live', async ({ page }) => {
  test.skip(!process.env.E2E_DB_FILE, 'needs the scripted `mock` provider of the test server');
  await page.goto('/playground');
  await hydrated(page);
  await page.getByTestId('prompt').fill('Summarise the plan in one sentence.');
  for (const model of ['builtin', 'mock/small', 'mock/large']) {
    await page.locator(`[data-testid="compare-model"][data-model="${model}"]`).check();
  }
  await expect(page.getByTestId('compare-toggle')).toBeChecked();
  await page.getByTestId('start-run').click();

  await expect(page).toHaveURL(/\/compare\?group=/, { timeout: 15_000 });
  await hydrated(page);
  const columns = page.getByTestId('group-column');
  await expect(columns).toHaveCount(3);
  // One column per ticked model (in the order the playground lists them).
  for (const model of ['builtin', 'mock/small', 'mock/large']) {
    await expect(columns.filter({ hasText: model })).toHaveCount(1);
  }
  // The slow model is still working when the page opens; every column ends
  // done without a reload, each with its own answer.
  for (let i = 0; i < 3; i++) {
    await expect(columns.nth(i)).toHaveAttribute('data-status', 'done', { timeout: 20_000 });
  }
  const results = page.getByTestId('group-result');
  await expect(results).toHaveCount(3);
  await expect(results.filter({ hasText: 'a short answer' })).toHaveCount(1);
  await expect(results.filter({ hasText: 'a longer and more careful answer' })).toHaveCount(1);

  // Any two open in the pairwise diff.
  await page.getByTestId('group-pick-b').selectOption({ index: 2 });
  await page.getByTestId('group-pick-submit').click();
  await expect(page).toHaveURL(/\/compare\?a=.*&b=/);
  await expect(page.getByTestId('compare-divergence')).toBeVisible();
  const model = page.locator('[data-testid="config-row"][data-field="model"]');
  await expect(model).toHaveAttribute('data-equal', 'false');
});

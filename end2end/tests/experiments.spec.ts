// Experiments in a real browser: from a dataset's page, run an agent's
// version 1 over the dataset, save version 2 of the agent (which answers
// one item wrong), run it too, and find the regression on the comparison
// page, one click from the step-aligned compare of the item's two runs.
import { expect, hydrated, test } from './fixtures';
import type { Page } from './fixtures';

async function json(res: { ok(): boolean; status(): number; text(): Promise<string>; json(): Promise<any> }) {
  expect(res.ok(), `${res.status()} ${await res.text()}`).toBeTruthy();
  return res.json();
}

/// Starts an experiment from the dataset page with `runWith` (an option's label) and waits until it is done.
async function runFromDatasetPage(page: Page, datasetId: string, runWith: string, name: string): Promise<string> {
  await page.goto(`/datasets/${datasetId}`);
  await hydrated(page);
  const form = page.getByTestId('new-experiment');
  await form.getByTestId('experiment-run-with').selectOption({ label: runWith });
  await form.getByTestId('experiment-name').fill(name);
  await form.getByTestId('experiment-start').click();
  await expect(page.getByTestId('experiment-title')).toContainText(name);
  // The page reads the experiment again while it runs.
  await expect(page.getByTestId('experiment-status')).toHaveText('done', { timeout: 20_000 });
  return decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
}

/// An agent spec answering `answer` (the built-in model's script).
function spec(name: string, answer: string) {
  return { name, description: 'Names capitals', model: 'builtin', tools: [], model_settings: { script: [{ text: answer }] } };
}

test('two agent versions run over a dataset, and the regression shows item by item', async ({ page, request }) => {
  const dataset = await json(await request.post('/api/datasets', { data: { name: `capitals ${Date.now()}` } }));
  await json(await request.post(`/api/datasets/${dataset.id}/items`, { data: { items: [
    { input: { prompt: 'Capital of France?' }, expected: 'Paris' },
  ] } }));
  // Version 1 answers Paris; version 2 answers Lyon.
  const name = `capitals_${Date.now()}`;
  const agent = await json(await request.post('/api/agents', { data: spec(name, 'Paris') }));

  const first = await runFromDatasetPage(page, dataset.id, `agent ${name} (v1)`, 'capitals v1');
  await expect(page.getByTestId('experiment-progress')).toContainText('1 of 1 ended');
  const card = page.getByTestId('scorer-card');
  await expect(card).toContainText('1 of 1 yes');
  const row = page.getByTestId('experiment-row-item');
  await expect(row).toContainText('Capital of France?');
  await expect(row).toContainText('Paris');
  await expect(row.getByTestId('experiment-row-trace')).toHaveAttribute('href', /^\/runs\//);

  await json(await request.put(`/api/agents/${agent.id}`, { data: spec(name, 'Lyon') }));
  const second = await runFromDatasetPage(page, dataset.id, `agent ${name} (v2)`, 'capitals v2');
  await expect(page.getByTestId('scorer-card')).toContainText('0 of 1 yes');

  // Compare v1 with v2 from the first experiment's page.
  await page.goto(`/experiments/${first}`);
  await hydrated(page);
  await page.getByTestId('experiment-compare-with').selectOption(second);
  await page.getByRole('button', { name: 'Compare' }).click();
  await expect(page.getByTestId('compare-filter-regressed')).toContainText('1');
  await expect(page.getByTestId('compare-filter-improved')).toContainText('0');
  const item = page.getByTestId('compare-item');
  await expect(item).toHaveAttribute('data-change', 'regressed');
  await item.getByTestId('compare-runs').click();
  await expect(page).toHaveURL(/\/compare\?a=.*&b=/);

  // The agent's page: the score per version, falling from v1 to v2.
  await page.goto(`/agents/${agent.id}`);
  await hydrated(page);
  const scoreRow = page.getByTestId('version-score-row').filter({ hasText: 'contains' });
  await expect(scoreRow.locator('[data-version="1"]')).toContainText('1.00');
  await expect(scoreRow.locator('[data-version="2"]')).toContainText('▼');
  await expect(scoreRow.locator('[data-version="2"]')).toContainText('0.00');

  // Both experiments are listed.
  await page.goto('/experiments');
  await hydrated(page);
  await expect(page.getByTestId('experiment-row').filter({ hasText: 'capitals v1' })).toBeVisible();
  await expect(page.getByTestId('experiment-row').filter({ hasText: 'capitals v2' })).toBeVisible();
});

test('an LLM judge scores an experiment, and its run is one click from the score', async ({ page, request }) => {
  const dataset = await json(await request.post('/api/datasets', { data: { name: `judged ${Date.now()}` } }));
  await json(await request.post(`/api/datasets/${dataset.id}/items`, { data: { items: [
    { input: { prompt: 'Capital of France?' }, expected: 'Paris, France' },
  ] } }));
  const name = `judged_${Date.now()}`;
  await json(await request.post('/api/agents', { data: spec(name, 'Paris') }));
  await page.goto(`/datasets/${dataset.id}`);
  await hydrated(page);
  const form = page.getByTestId('new-experiment');
  await form.getByTestId('experiment-run-with').selectOption({ label: `agent ${name} (v1)` });
  await form.getByTestId('experiment-scorer').selectOption('judge:builtin');
  // Without a rubric the form says so at the field and starts nothing.
  await form.getByTestId('experiment-start').click();
  await expect(form.getByTestId('experiment-error')).toContainText('rubric');
  await form.getByTestId('experiment-rubric').fill('Names the capital and its country.');
  await form.getByTestId('experiment-start').click();
  await expect(page.getByTestId('experiment-status')).toHaveText('done', { timeout: 20_000 });
  // Half the expected words: a mean of 0.5.
  await expect(page.getByTestId('scorer-card')).toContainText('0.5');

  await page.getByTestId('experiment-row-item').getByTestId('experiment-row-trace').click();
  await hydrated(page);
  const score = page.getByTestId('score-row').filter({ hasText: 'judge' });
  await expect(score.getByTestId('score-label')).toHaveText('pass');
  await expect(score).toContainText('1 of the 2 words');
  await score.getByTestId('judge-run').click();
  await expect(page).toHaveURL(/\/runs\//);
  await expect(page.getByText('<rubric>').first()).toBeVisible();
});

test('several models run over a dataset as a set, read side by side', async ({ page, request }) => {
  const dataset = await json(await request.post('/api/datasets', { data: { name: `careful ${Date.now()}` } }));
  await json(await request.post(`/api/datasets/${dataset.id}/items`, { data: { items: [
    { input: { prompt: 'Explain retries.' }, expected: 'careful' },
    { input: { prompt: 'Explain timeouts.' }, expected: 'careful' },
  ] } }));
  await page.goto(`/datasets/${dataset.id}`);
  await hydrated(page);
  const form = page.getByTestId('new-experiment');
  await form.getByTestId('experiment-run-with').selectOption({ label: 'model mock/small' });
  const also = form.getByTestId('experiment-models');
  await also.getByLabel('mock/large').check();
  await also.getByLabel('builtin').check();
  await form.getByTestId('experiment-name').fill('careful answers');
  await form.getByTestId('experiment-start').click();

  await expect(page).toHaveURL(/\/experiments\/sets\//);
  await expect(page.getByTestId('experiment-set-title')).toContainText('v1: 3 models');
  const models = page.getByTestId('set-model-row');
  await expect(models).toHaveCount(3);
  // The page reads the set again while its experiments run.
  await expect(page.getByTestId('experiment-status')).toHaveText(['done', 'done', 'done'], { timeout: 30_000 });
  // The model given first leads; the large model's answers are the careful ones, marked best.
  await expect(models.nth(0)).toContainText('mock/small');
  const large = models.filter({ hasText: 'mock/large' });
  await expect(large.getByTestId('set-score')).toContainText('2 of 2 yes');
  await expect(large.getByTestId('set-score')).toHaveAttribute('data-best', 'true');
  await expect(models.filter({ hasText: 'mock/small' }).getByTestId('set-score')).toContainText('0 of 2 yes');

  // Each item with every model's answer beside the others, each one click from its trace.
  const items = page.getByTestId('set-item');
  await expect(items).toHaveCount(2);
  await expect(items.first().getByTestId('set-item-answer')).toHaveCount(3);
  await expect(items.first().getByTestId('set-item-answer').first()).toContainText('answers: a short answer');
  await expect(items.first()).toContainText('a longer and more careful answer');
  await expect(items.first().getByTestId('set-item-trace').first()).toHaveAttribute('href', /^\/runs\//);

  // Item by item against the first model, on the comparison page.
  await large.getByTestId('set-compare').click();
  await expect(page.getByTestId('compare-filter-improved')).toContainText('2');

  // Each experiment of the set is listed, and leads back to the set.
  await page.goto('/experiments');
  await hydrated(page);
  const listed = page.getByTestId('experiment-row').filter({ hasText: 'careful answers · mock/large' });
  await listed.getByRole('link', { name: 'careful answers · mock/large' }).click();
  await page.getByTestId('experiment-set-link').click();
  await expect(page.getByTestId('experiment-set-title')).toContainText('3 models');
});

// Review queues in a real browser: make a queue on its page (a bad field is
// explained at the form), add two runs by id, review the first with the
// keyboard beside what the run was asked and answered (n, 1, a correction,
// Ctrl+Enter), skip the second with `s`, and find the scores on the run and
// the correction in the dataset.
import { expect, hydrated, test } from './fixtures';

async function finishedRun(request: any, answer: string): Promise<string> {
  const made = await request.post('/api/runs', { data: { initial_prompt: 'Where is my refund?',
    model_settings: { script: [{ text: answer }] } } });
  expect(made.ok(), await made.text()).toBeTruthy();
  const id = (await made.json()).id as string;
  await expect.poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status).toBe('done');
  return id;
}

test('a reviewer works through a queue with the keyboard and a correction lands in the dataset', async ({ page, request }) => {
  const stamp = Date.now();
  const dataset = await (await request.post('/api/datasets', { data: { name: `corrections ${stamp}` } })).json();
  const first = await finishedRun(request, 'Soon.');
  const second = await finishedRun(request, 'It was sent.');

  await page.goto('/reviews');
  await hydrated(page);
  const form = page.getByTestId('new-queue');
  await form.getByTestId('queue-name').fill(`refunds ${stamp}`);
  await form.getByTestId('queue-fields').fill('correct: maybe');
  await form.getByTestId('queue-dataset').selectOption(dataset.id);
  await form.getByTestId('queue-create').click();
  await expect(form.getByTestId('queue-error')).toContainText('not yes/no');
  await form.getByTestId('queue-fields').fill('correct: yes/no; tone: kind | rude');
  await form.getByTestId('queue-create').click();
  await expect(page.getByTestId('queue-title')).toHaveText(`refunds ${stamp}`);

  await page.getByTestId('add-run-ids').fill(`${first}, ${second}`);
  await page.getByTestId('add-runs-submit').click();
  await expect(page.getByTestId('add-outcome')).toContainText('2 added');
  await expect(page.getByTestId('queue-facts')).toContainText('2 pending');

  await page.getByTestId('queue-review').click();
  await hydrated(page);
  const item = page.getByTestId('review-item');
  await expect(item).toHaveAttribute('data-run-id', first);
  await expect(page.getByTestId('review-answer')).toHaveText('Soon.');
  await page.keyboard.press('n');
  await page.keyboard.press('1');
  await expect(page.locator('input[name="f0"][value="no"]')).toBeChecked();
  await expect(page.locator('input[name="f1"][value="kind"]')).toBeChecked();
  await page.getByTestId('review-correction').fill('Your refund is on its way: 3 to 5 days.');
  await page.getByTestId('review-correction').press('Control+Enter');
  // The next item comes in its place.
  await expect(item).toHaveAttribute('data-run-id', second);
  await expect(page.getByTestId('review-counts')).toContainText('1 pending · 1 done');
  await page.locator('body').click({ position: { x: 5, y: 200 } });
  await page.keyboard.press('s');
  await expect(page.getByTestId('review-done')).toBeVisible();

  await page.getByTestId('review-done').getByRole('link').click();
  await expect(page.getByTestId('queue-facts')).toContainText('0 pending · 1 done · 1 skipped');
  await expect(page.getByTestId('reviewer')).toContainText('1 done, 1 skipped');

  const scores = await (await request.get(`/api/runs/${first}/scores`)).json();
  expect(scores.scores.map((s: any) => [s.name, s.value, s.source])).toEqual([['correct', false, 'human'], ['tone', 'kind', 'human']]);
  const items = await (await request.get(`/api/datasets/${dataset.id}/items`)).json();
  expect(items.items[0].expected).toBe('Your refund is on its way: 3 to 5 days.');
});

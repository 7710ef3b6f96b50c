// Online evaluation in a real browser: an operator makes an evaluator from
// its page (a bad one is refused at the field), new runs of its tag are
// judged as they end, and the runs list's Score filter finds them; the
// evaluator is turned off and deleted from its row.
import { expect, hydrated, test } from './fixtures';

async function finishedRun(request: any, answer: string, tags: Record<string, string>): Promise<string> {
  const made = await request.post('/api/runs', { data: { initial_prompt: 'What is 2 + 1?', tags,
    model_settings: { script: [{ text: answer }] } } });
  expect(made.ok(), await made.text()).toBeTruthy();
  const id = (await made.json()).id as string;
  await expect.poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status).toBe('done');
  return id;
}

test('an evaluator judges the new runs of its tag, and the runs list filters by its score', async ({ page, request }) => {
  const stamp = Date.now();
  const tag = `suite:e2e${stamp}`;
  await page.goto('/evaluators');
  await hydrated(page);
  const form = page.getByTestId('new-evaluator');
  await form.getByTestId('evaluator-name').fill(`judge ${stamp}`);
  await form.getByTestId('evaluator-watch').selectOption('tag');
  await form.getByTestId('evaluator-sample-input').fill('100');
  await form.getByTestId('evaluator-scorer').selectOption('judge:builtin');
  // No tag and no rubric: refused at the field, nothing made.
  await form.getByTestId('evaluator-create').click();
  await expect(form.getByTestId('evaluator-error')).toContainText('tag');
  await form.getByTestId('evaluator-tag').fill(tag);
  await form.getByTestId('evaluator-create').click();
  await expect(form.getByTestId('evaluator-error')).toContainText('rubric');
  await form.getByTestId('evaluator-setting').fill('Says "3".');
  await form.getByTestId('evaluator-create').click();
  const row = page.getByTestId('evaluator-row').filter({ hasText: `judge ${stamp}` });
  await expect(row).toBeVisible();
  await expect(row.getByTestId('evaluator-state')).toHaveText('on');

  const [key, value] = tag.split(':');
  const right = await finishedRun(request, 'It is 3.', { [key]: value });
  const wrong = await finishedRun(request, 'It is 4.', { [key]: value });
  await finishedRun(request, 'It is 3.', {});
  // Both tagged runs are judged (the untagged one is not watched).
  await expect.poll(async () => {
    await page.reload();
    return row.getByTestId('evaluator-scored').textContent();
  }, { timeout: 20_000 }).toBe('2');
  await expect(row.getByTestId('evaluator-seen')).toHaveText('2');

  // The runs list: the score's column, and the filter.
  await page.goto(`/runs?tag=${encodeURIComponent(tag)}&score=${encodeURIComponent('judge>=0.5')}`);
  await hydrated(page);
  await expect(page.getByTestId('filter-score')).toHaveValue('judge>=0.5');
  await expect(page.locator(`a[href="/runs/${right}"]`).first()).toBeVisible();
  await expect(page.locator(`a[href="/runs/${wrong}"]`)).toHaveCount(0);
  await page.getByTestId('filter-score').fill('judge=fail');
  await page.getByTestId('filter-score').press('Enter');
  await expect(page).toHaveURL(/score=judge%3Dfail/);
  await expect(page.locator(`a[href="/runs/${wrong}"]`).first()).toBeVisible();
  await expect(page.locator(`a[href="/runs/${right}"]`)).toHaveCount(0);

  // Off, then deleted.
  await page.goto('/evaluators');
  await hydrated(page);
  await row.getByTestId('evaluator-switch').click();
  await expect(row.getByTestId('evaluator-state')).toHaveText('off');
  await row.getByTestId('evaluator-delete').click();
  await expect(row).toHaveCount(0);
});

// Scores on the trace page, end to end in a real browser: a person adds a
// score with the form (a yes, then a number with a comment), sees it in the
// table and the summary, and a bad value is explained at the form with
// nothing kept; a program's score and a scorer's verdict made through the
// API show beside them, labelled by who gave them.
import { expect, finishedRun, hydrated, test } from './fixtures';

test('a person scores a run on its trace page and sees every score with who gave it', async ({ page, request }) => {
  const id = await finishedRun(request, 'What is 2 + 3?');
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  const section = page.getByTestId('scores');
  await expect(section.getByTestId('scores-empty')).toBeVisible();

  const form = section.getByTestId('score-form');
  await form.getByTestId('score-name').fill('correct');
  await form.getByTestId('score-value').fill('yes');
  await form.getByTestId('score-submit').click();
  await expect(section.getByTestId('score-row')).toHaveCount(1);
  await expect(form.getByTestId('score-name')).toHaveValue('');

  await form.getByTestId('score-name').fill('helpfulness');
  await form.getByTestId('score-value').fill('0.5');
  await form.getByTestId('score-comment').fill('right, but terse');
  await form.getByTestId('score-submit').click();
  await expect(section.getByTestId('score-row')).toHaveCount(2);
  const newest = section.getByTestId('score-row').first();
  await expect(newest).toContainText('helpfulness');
  await expect(newest).toContainText('0.5');
  await expect(newest).toContainText('right, but terse');

  // A name the rules refuse is explained at the form, and nothing is kept.
  await form.getByTestId('score-name').fill('bad/name');
  await form.getByTestId('score-value').fill('1');
  await form.getByTestId('score-submit').click();
  await expect(form.getByTestId('score-error')).toContainText('name:');
  await expect(section.getByTestId('score-row')).toHaveCount(2);

  // A program's score and a scorer's verdict, made through the API.
  const api = await request.post('/api/scores', { data: { run_id: id, name: 'correct', value: false } });
  expect(api.status(), await api.text()).toBe(201);
  const evaluated = await request.post(`/api/runs/${id}/evaluate`, {
    data: { scorers: [{ name: 'answer', scorer: { kind: 'contains', expected: '5' } }] },
  });
  expect(evaluated.status(), await evaluated.text()).toBe(201);
  await page.reload();
  await hydrated(page);
  await expect(section.getByTestId('score-row')).toHaveCount(4);
  await expect(section.locator('[data-testid="score-row"][data-source="scorer"]')).toContainText('scorer · contains');
  await expect(section.locator('[data-testid="score-row"][data-source="api"]')).toContainText('API');
  // Two `correct` scores, yes and no; `helpfulness` a number.
  await expect(section.locator('[data-testid="score-chip"][data-name="correct"]')).toContainText('yes 1 of 2');
  await expect(section.locator('[data-testid="score-chip"][data-name="helpfulness"]')).toContainText('mean 0.5');
});

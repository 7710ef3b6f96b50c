// Full-text search across runs (issue 37): the runs list's search box finds
// a run by a word of a tool call or an answer, shows where it matched with
// the word marked, and links to that step; a search with no word is said at
// the field.
import { expect, test } from './fixtures';

test('search finds a run by its tool call and answer and links to the step', async ({ page, request }) => {
  const stamp = Date.now();
  const word = `rhubarb${stamp}`;
  const res = await request.post('/api/runs', {
    data: {
      name: `search demo ${stamp}`,
      initial_prompt: 'Multiply, then tell me about it',
      model_settings: { script: [
        { tool_calls: [{ name: 'calculator', arguments: { expression: `${stamp} * 2` } }] },
        { text: `The ${word} doubled is ${stamp * 2}.` },
      ] },
    },
  });
  expect(res.status(), await res.text()).toBe(201);
  const id = (await res.json()).id as string;
  await expect.poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status, { timeout: 20_000 }).toBe('done');

  await page.goto('/runs');
  await page.getByTestId('filter-q').fill(word);
  await page.getByTestId('filter-submit').click();
  await expect(page).toHaveURL(new RegExp(`q=${word}`));
  const row = page.locator(`[data-testid="run-row"][data-run-id="${id}"]`);
  await expect(page.getByTestId('run-row')).toHaveCount(1);
  const match = row.getByTestId('run-match');
  await expect(match.locator('mark')).toHaveText(word);
  await expect(match.locator('.search-place')).toHaveText('step 1, answer');
  await page.screenshot({ path: test.info().outputPath('search-answer.png') });

  // The tool call's arguments (the number multiplied).
  await page.getByTestId('filter-q').fill(String(stamp));
  await page.getByTestId('filter-submit').click();
  await expect(row.getByTestId('run-match').locator('.search-place')).toHaveText('step 0, tool call');
  await expect(row.getByTestId('run-match').locator('mark').first()).toHaveText(String(stamp));
  await row.getByTestId('run-match').locator('.search-place').click();
  await expect(page).toHaveURL(new RegExp(`/runs/${id}#step-0$`));

  // Nothing to search for: said at the field.
  await page.goto('/runs?q=%2B%2B%2B');
  await expect(page.getByTestId('filter-q')).toHaveAttribute('aria-invalid', 'true');
  await expect(page.getByTestId('filter-q-error')).toContainText('The search has no word to search for');
  await page.screenshot({ path: test.info().outputPath('search-no-word.png') });
});

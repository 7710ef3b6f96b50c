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

test('a run is added from its trace page and a whole session from its page, then reviewed turn by turn', async ({ page, request }) => {
  const stamp = Date.now();
  const made = await request.post('/api/review-queues', { data: { name: `chats ${stamp}`, fields: [{ name: 'resolved' }] } });
  expect(made.ok(), await made.text()).toBeTruthy();
  const queue = await made.json();
  const session = `chat ${stamp}`;
  const turns: string[] = [];
  for (const [prompt, answer] of [['Where is my parcel?', 'In transit.'], ['When will it come?', 'Tomorrow.']]) {
    const run = await request.post('/api/runs', { data: { initial_prompt: prompt, session_id: session,
      model_settings: { script: [{ text: answer }] } } });
    const id = (await run.json()).id as string;
    await expect.poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status).toBe('done');
    turns.push(id);
  }

  // From the trace page: the first run alone.
  await page.goto(`/runs/${turns[0]}`);
  await hydrated(page);
  const fromTrace = page.getByTestId('to-review');
  await fromTrace.getByTestId('to-review-choice').selectOption(queue.id);
  await fromTrace.getByTestId('to-review-submit').click();
  await expect(fromTrace.getByTestId('to-review-added')).toContainText('Added to the queue');

  // From the session's page: the whole session, once.
  await page.goto(`/sessions/${encodeURIComponent(session)}`);
  await hydrated(page);
  const fromSession = page.getByTestId('to-review');
  await expect(fromSession).toContainText('review this session');
  await fromSession.getByTestId('to-review-choice').selectOption(queue.id);
  await fromSession.getByTestId('to-review-submit').click();
  await expect(fromSession.getByTestId('to-review-added')).toContainText('Added to the queue');
  await fromSession.getByTestId('to-review-submit').click();
  await expect(fromSession.getByTestId('to-review-added')).toContainText('Already in that queue');

  await fromSession.getByTestId('to-review-added').getByRole('link').click();
  await expect(page.getByTestId('queue-item')).toHaveCount(2);
  await expect(page.getByTestId('queue-item').nth(1)).toContainText(`session ${session}`);
  await page.getByTestId('queue-review').click();
  await hydrated(page);
  // The run first; skipped.
  await expect(page.getByTestId('review-item')).toHaveAttribute('data-run-id', turns[0]);
  await page.getByTestId('review-skip').click();
  // Then the session: both turns, the verdict kept on the latest run.
  await expect(page.getByTestId('review-session')).toContainText('2 turns');
  await expect(page.getByTestId('review-turn')).toHaveCount(2);
  await expect(page.getByTestId('review-turn').nth(0).getByTestId('review-prompt')).toHaveText('Where is my parcel?');
  await expect(page.getByTestId('review-turn').nth(1).getByTestId('review-answer')).toHaveText('Tomorrow.');
  await expect(page.getByTestId('review-item')).toHaveAttribute('data-run-id', turns[1]);
  await page.locator('body').click({ position: { x: 5, y: 200 } });
  await page.keyboard.press('y');
  await page.keyboard.press('Control+Enter');
  await expect(page.getByTestId('review-done')).toBeVisible();
  const scores = await (await request.get(`/api/runs/${turns[1]}/scores`)).json();
  expect(scores.scores.map((s: any) => [s.name, s.value])).toEqual([['resolved', true]]);
});

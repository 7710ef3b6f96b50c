// Sessions (issue 37): runs started with a `session_id` and a `user_id`
// show both as links in the runs list; the session's page lists its runs
// oldest first with their totals; the user's link filters the list, and the
// filter is kept by the form and dropped by its ×.
import { expect, test, type APIRequestContext } from './fixtures';

async function finished(api: APIRequestContext, data: Record<string, unknown>): Promise<string> {
  const res = await api.post('/api/runs', { data });
  expect(res.status(), await res.text()).toBe(201);
  const id = (await res.json()).id as string;
  await expect.poll(async () => (await (await api.get(`/api/runs/${id}`)).json()).status, { timeout: 20_000 }).toBe('done');
  return id;
}

test('a session page lists its runs oldest first, and the list links sessions and users', async ({ page, request }) => {
  const stamp = Date.now();
  const session = `support-chat-${stamp}`;
  const user = `customer-${stamp}`;
  const first = await finished(request, { name: `session first ${stamp}`, initial_prompt: 'What is 6 * 7?', tools: ['calculator'], session_id: session, user_id: user });
  const second = await finished(request, { name: `session second ${stamp}`, initial_prompt: 'What is 7 * 8?', tools: ['calculator'], session_id: session, user_id: user });

  await page.goto(`/runs?q=${stamp}`);
  const row = page.locator(`[data-testid="run-row"][data-run-id="${first}"]`);
  await expect(row.getByTestId('run-session')).toHaveText(`session ${session}`);
  await expect(row.getByTestId('run-user')).toHaveText(`user ${user}`);
  await row.getByTestId('run-session').click();

  await expect(page).toHaveURL(new RegExp(`/sessions/${session}$`));
  await expect(page.getByTestId('session-title')).toHaveText(session);
  await expect(page.getByTestId('session-runs')).toHaveText('2');
  await expect(page.getByTestId('session-users')).toHaveText(user);
  await expect(page.getByTestId('session-statuses')).toHaveText('2 done');
  const ids = await page.getByTestId('run-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run-id')));
  expect(ids).toEqual([first, second]);
  await page.screenshot({ path: test.info().outputPath('session.png'), fullPage: true });

  // The user's runs, through the chip; the filter survives another filter's submit.
  await page.locator(`[data-testid="run-row"][data-run-id="${second}"]`).getByTestId('run-user').click();
  await expect(page).toHaveURL(new RegExp(`/runs\\?user=${user}$`));
  await expect(page.getByTestId('filter-user')).toContainText(user);
  await expect(page.getByTestId('run-row')).toHaveCount(2);
  await page.screenshot({ path: test.info().outputPath('runs-of-user.png') });
  await page.getByTestId('filter-status').selectOption('done');
  await page.getByTestId('filter-submit').click();
  await expect(page).toHaveURL(/status=done/);
  await expect(page).toHaveURL(new RegExp(`user=${user}`));
  await expect(page.getByTestId('run-row')).toHaveCount(2);
  await page.getByTestId('filter-user').getByTestId('filter-drop').click();
  await expect(page).toHaveURL(/\/runs\?status=done$/);
  await expect(page.getByTestId('filter-user')).toHaveCount(0);

  // Grouped by session: one group, headed by a link to the session.
  await page.goto(`/runs?q=${stamp}&group=session`);
  const group = page.locator(`[data-testid="run-group"][data-session="${session}"]`);
  await expect(group.getByTestId('run-row')).toHaveCount(2);
  await expect(group.locator('h3 a')).toHaveAttribute('href', `/sessions/${session}`);
  await expect(page.getByTestId('filter-group')).toHaveValue('session');

  // The trace page names the session too.
  await page.goto(`/runs/${first}`);
  await expect(page.getByTestId('run-session')).toHaveAttribute('href', `/sessions/${session}`);
});

test('an unknown session is empty, and a malformed id says why', async ({ page }) => {
  await page.goto('/sessions/no-such-session-anywhere');
  await expect(page.getByTestId('session-empty')).toBeVisible();
  await page.goto(`/sessions/${'x'.repeat(129)}`);
  await expect(page.getByText(/session id must be 1-128 characters/)).toBeVisible();
});

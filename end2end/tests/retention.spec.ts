// Retention (issue 37): an admin sets how old and how many runs are kept on
// the settings page; a bad number is said and changes nothing. (Limits far
// beyond the suite's runs, so the job deletes nothing the other tests use.)
import { expect, test } from './fixtures';

test('an admin sets the retention on the settings page', async ({ page, request }) => {
  await page.goto('/settings');
  const panel = page.getByTestId('retention');
  await expect(panel).toBeVisible();

  await page.getByTestId('retention-days').fill('0');
  await page.getByTestId('retention-save').click();
  await expect(page.getByTestId('retention-error')).toContainText('Days kept must be 1 to 36500');
  expect((await (await request.get('/api/retention')).json()).max_age_days).toBeNull();

  await page.getByTestId('retention-days').fill('36500');
  await page.getByTestId('retention-runs').fill('100000000');
  await page.getByTestId('retention-save').click();
  await expect(page.getByTestId('retention-saved')).toBeVisible();
  await expect(page.getByTestId('retention-summary')).toHaveText(
    'Finished runs older than 36500 days, or past the newest 100,000,000, are deleted.');
  await page.screenshot({ path: test.info().outputPath('retention.png') });
  expect(await (await request.get('/api/retention')).json()).toEqual({ max_age_days: 36500, max_runs: 100000000 });

  // Back to no limits.
  const reset = await request.put('/api/retention', { data: {} });
  expect(reset.status()).toBe(200);
});

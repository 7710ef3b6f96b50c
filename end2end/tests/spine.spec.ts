// The spine of runlens, end to end in a real browser: start a run from the
// playground, watch it finish on its trace page, find it in the runs list;
// reject a bad form without losing the input; cancel a run that is waiting.
//
// The server is the built-in model (no network): it calls any attached tool whose
// name appears in the prompt, with arguments from a JSON object in the prompt.
import { expect, openCall, test, type Page } from './fixtures';

/** The first number in a text, e.g. "1,234 tokens" → 1234; NaN when there is none. */
function firstNumber(text: string | null): number {
  const m = (text ?? '').match(/\d[\d,]*(?:\.\d+)?/);
  return m ? Number(m[0].replace(/,/g, '')) : NaN;
}

/** Waits until the browser bundle has hydrated the server-rendered page. */
async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** Opens the playground, ready to type into. */
async function openPlayground(page: Page) {
  await page.goto('/playground');
  await hydrated(page);
  await expect(page.getByTestId('prompt')).toBeEditable();
}

/** Checks exactly the named tools among the playground's tool checkboxes. */
async function selectTools(page: Page, wanted: string[]) {
  const boxes = page.locator('input[name="tools"]');
  for (const name of wanted) {
    await expect(boxes.and(page.locator(`[value="${name}"]`)), `tool checkbox "${name}"`).toHaveCount(1);
  }
  for (const box of await boxes.all()) {
    const value = await box.getAttribute('value');
    await box.setChecked(wanted.includes(value ?? ''));
  }
}

/** Clicks "start run" and returns the id of the run the page navigated to. */
async function startRun(page: Page): Promise<string> {
  await page.getByTestId('start-run').click();
  await expect(page).toHaveURL(/\/runs\/[^/?#]+\/?(?:[?#].*)?$/, { timeout: 15_000 });
  const id = new URL(page.url()).pathname.split('/').filter(Boolean)[1];
  expect(id, 'run id in the URL').toBeTruthy();
  return decodeURIComponent(id);
}

test('a calculator run goes from the playground to done and shows up in the runs list', async ({ page }) => {
  await openPlayground(page);
  await page.getByTestId('prompt').fill('What is (12 + 30) * 2?');
  const calculator = page.locator('input[name="tools"][value="calculator"]');
  await calculator.check();
  await expect(calculator).toBeChecked();

  const id = await startRun(page);

  // The trace page refreshes itself while the run is active.
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });

  // The detail pane shows the newest step (the answer); the call is a line in the tree.
  await openCall(page, 'calculator');
  const call = page.locator('[data-testid="tool-call"][data-tool="calculator"]').first();
  await expect(call).toBeAttached();
  // Tool calls are <details>, possibly closed: textContent includes the hidden body.
  await expect(call.getByTestId('tool-result')).toContainText('84');
  // Open it the way a user would and see the result.
  await hydrated(page);
  if (!(await call.evaluate((el) => (el as HTMLDetailsElement).open))) {
    await call.locator('summary').first().click();
  }
  await expect(call.getByTestId('tool-result')).toBeVisible();

  const tokens = page.getByTestId('run-tokens');
  await expect(tokens).toHaveText(/\d/);
  expect(firstNumber(await tokens.textContent()), 'tokens used').toBeGreaterThan(0);

  await page.goto('/runs');
  await expect(page.locator(`[data-testid="run-row"][data-run-id="${id}"]`)).toBeVisible();
});

test('invalid context JSON is rejected with an error and the prompt is kept', async ({ page }) => {
  const prompt = 'This prompt must survive a failed submit';
  await openPlayground(page);
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('context').fill('{not json');
  await page.getByTestId('start-run').click();

  await expect(page.getByTestId('form-error')).toBeVisible();
  await expect(page.getByTestId('form-error')).not.toHaveText('');
  await expect(page).toHaveURL(/\/playground/);
  await expect(page.getByTestId('prompt')).toHaveValue(prompt);
});

test('a waiting run can be cancelled from its trace page', async ({ page }) => {
  page.on('dialog', (dialog) => dialog.accept()); // in case cancelling asks to confirm
  await openPlayground(page);
  await page.getByTestId('prompt').fill('wait {"seconds": 30}');
  await selectTools(page, ['wait']);

  await startRun(page);
  await hydrated(page);
  const status = page.getByTestId('run-status');
  await expect(status).toHaveText(/^(pending|running)$/);

  await page.getByTestId('cancel-run').click();
  // Well before the 30 s wait would have ended.
  await expect(status).toHaveText('cancelled', { timeout: 15_000 });
});

// `test` with a `request` fixture that calls the REST API with the test
// server's instance-admin key (runs it creates belong to the `default`
// project), while `page` uses the signed-in admin's session.
import { test as base } from '@playwright/test';

export { expect } from '@playwright/test';
export type { APIRequestContext, Locator, Page } from '@playwright/test';
import type { APIRequestContext, Page } from '@playwright/test';
import { expect } from '@playwright/test';

/** Waits until the browser bundle has hydrated the server-rendered page. */
export async function hydrated(page: Page): Promise<void> {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** Creates a run of `prompt` with the calculator through the API and waits until it is done; its id. */
export async function finishedRun(request: APIRequestContext, prompt: string): Promise<string> {
  const created = await request.post('/api/runs', { data: { initial_prompt: prompt, tools: ['calculator'] } });
  expect(created.status(), await created.text()).toBe(201);
  const id = (await created.json()).id as string;
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status, { timeout: 15_000 })
    .toBe('done');
  return id;
}

/** Unfolds the trace page's transcript (it is folded, and drawn when unfolded). */
export async function openTranscript(page: Page): Promise<void> {
  const fold = page.getByTestId('transcript-fold');
  if ((await fold.getAttribute('open')) === null) await fold.locator(':scope > summary').click();
}


export const test = base.extend({
  request: async ({ playwright, baseURL }, use) => {
    const context = await playwright.request.newContext({
      baseURL,
      extraHTTPHeaders: { Authorization: `Bearer ${process.env.E2E_API_KEY}` },
    });
    await use(context);
    await context.dispose();
  },
});

/** Opens step `index` of the trace in the detail pane through its line in the tree. */
export async function openStep(page: Page, index: number) {
  await page.getByTestId('tree').locator(`[data-testid="tree-step"][data-index="${index}"]`).click();
  const step = page.locator(`[data-testid="step"][data-index="${index}"]`);
  await step.waitFor();
  return step;
}

/** Opens the first call of `tool` in the detail pane through its line in the tree. */
export async function openCall(page: Page, tool: string) {
  await page.getByTestId('tree').getByTestId('tree-call').filter({ hasText: tool }).first().click();
  const call = page.locator(`[data-testid="tool-call"][data-tool="${tool}"]`).first();
  await call.waitFor();
  return call;
}

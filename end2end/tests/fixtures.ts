// `test` with a `request` fixture that calls the REST API with the test
// server's instance-admin key (runs it creates belong to the `default`
// project), while `page` uses the signed-in admin's session.
import { test as base } from '@playwright/test';

export { expect } from '@playwright/test';
export type { APIRequestContext, Locator, Page } from '@playwright/test';

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

// Before the specs: the test users, and a signed-in admin session that every
// spec uses by default (`storageState` in playwright.config.ts). The server
// is already up (Playwright starts its webServer first).
import { request, type FullConfig } from '@playwright/test';
import { startMockLlm } from './mock-llm';
import { addUser, PASSWORD, USERS } from './tests/users';

export default async function globalSetup(config: FullConfig) {
  const baseURL = config.projects[0].use.baseURL!;
  // The `mock` provider's models (see mock-llm.ts); stopped after the run.
  const stopLlm = process.env.E2E_DB_FILE ? await startMockLlm(Number(process.env.E2E_LLM_PORT)) : undefined;
  if (process.env.E2E_DB_FILE) {
    for (const user of Object.values(USERS)) {
      await addUser(user.name, user.args);
    }
  }
  // A plain form post, as the sign-in page makes it; the session cookie it
  // sets is what the specs' browsers start with.
  const context = await request.newContext({ baseURL });
  const res = await context.post('/login', {
    form: { username: USERS.admin.name, password: PASSWORD, next: '/runs' },
    maxRedirects: 0,
  });
  if (res.status() !== 303 || !(res.headers()['location'] ?? '').endsWith('/runs')) {
    throw new Error(`signing in the test admin failed: ${res.status()} ${res.headers()['location']}`);
  }
  await context.storageState({ path: process.env.E2E_ADMIN_STATE! });
  await context.dispose();
  return stopLlm;
}

// The test users (created by global-setup.ts) and how specs sign in as them.
import { execFile } from 'node:child_process';
import { expect, type Page } from '@playwright/test';

/** One password for every test user; no page may ever show it. */
export const PASSWORD = 'e2e-Passw0rd-never-shown';

/** name → `runlens user add` arguments after the name. */
export const USERS = {
  admin: { name: 'e2e-admin', args: ['--role', 'admin'] },
  approver: { name: 'e2e-approver', args: ['--role', 'approver', '--project', 'default'] },
  viewer: { name: 'e2e-viewer', args: ['--role', 'viewer', '--project', 'default'] },
} as const;

/** `runlens user add NAME …` on the test server's database, password on stdin. */
export function addUser(name: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.env.E2E_RUNLENS_BIN!,
      ['user', 'add', name, ...args, '--database-url', `sqlite://${process.env.E2E_DB_FILE}`],
      { timeout: 60_000, env: { ...process.env, RUST_LOG: 'error' } },
      (err, _stdout, stderr) => (err ? reject(new Error(`runlens user add ${name}: ${err.message}\n${stderr}`)) : resolve()),
    );
    child.stdin!.end(`${PASSWORD}\n`);
  });
}

/** Signs in through the /login form and waits for the page it leads to. */
export async function signIn(page: Page, name: string, next?: string) {
  await page.goto(next ? `/login?next=${encodeURIComponent(next)}` : '/login');
  await page.getByTestId('login-username').fill(name);
  await page.getByTestId('login-password').fill(PASSWORD);
  await page.getByTestId('login-submit').click();
  await expect(page.getByTestId('user-name')).toHaveText(name);
}

/** Fails when the page's HTML contains the test password. */
export async function expectNoPassword(page: Page) {
  expect(await page.content(), `the password appears on ${page.url()}`).not.toContain(PASSWORD);
}

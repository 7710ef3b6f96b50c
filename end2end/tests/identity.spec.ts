// Identity and access, end to end in a real browser: the first-start setup
// link of a server with no user; signing in (and a wrong password); an
// approver approving a call, whose card then names them; a viewer seeing the
// card without its buttons; signing out. No page ever shows a password.
//
// These tests start signed out (no stored session) and sign in through the
// /login form as the users global-setup.ts created.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect, openCall, test, type Page } from './fixtures';
import { expectNoPassword, PASSWORD, signIn, USERS } from './users';

test.use({ storageState: { cookies: [], origins: [] } });

const EMAIL_PROMPT = 'send_email {"to": "cfo@example.com", "subject": "Budget", "body": "Numbers attached."}';

async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

test('first start: the setup link creates the first admin, who lands signed in', async ({ page }) => {
  test.skip(!process.env.E2E_RUNLENS_BIN, 'starts a server of its own (not available with E2E_BASE_URL)');
  const port = await freePort();
  const db = path.join(os.tmpdir(), `runlens-e2e-setup-${port}.db`);
  const removeDb = () => ['', '-wal', '-shm'].forEach((s) => rmSync(db + s, { force: true }));
  removeDb();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: `sqlite://${db}`,
    LEPTOS_SITE_ROOT: process.env.E2E_SITE_ROOT,
    RUST_LOG: 'warn,runlens=info',
  };
  delete env.RUNLENS_BOOTSTRAP_API_KEY;
  const server = spawn(process.env.E2E_RUNLENS_BIN!, ['serve', '--addr', `127.0.0.1:${port}`], { env });
  try {
    // With no user in its database, the server prints a one-time setup link.
    let stderr = '';
    const link = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no setup link within 30 s:\n${stderr}`)), 30_000);
      server.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const found = stderr.match(/http:\/\/\S+\/setup\?token=[0-9a-f]+/);
        if (found) {
          clearTimeout(timer);
          resolve(found[0]);
        }
      });
      server.once('exit', (code) => reject(new Error(`the server exited (${code}):\n${stderr}`)));
    });
    expect(new URL(link).port).toBe(String(port));

    await page.goto(link);
    await expect(page.getByTestId('setup-form')).toBeVisible();
    await expect(page.getByTestId('user-area'), 'nobody is signed in yet').toHaveCount(0);
    await page.getByTestId('setup-username').fill('first-admin');
    await page.getByTestId('setup-password').fill(PASSWORD);
    await page.getByTestId('setup-submit').click();

    await expect(page).toHaveURL(`http://127.0.0.1:${port}/`);
    await expect(page.getByTestId('user-name')).toHaveText('first-admin');
    await expect(page.getByTestId('user-role')).toHaveText('admin');
    await expectNoPassword(page);

    // The link works once.
    await page.goto(link);
    await expect(page.getByTestId('setup-invalid')).toBeVisible();
    await expect(page.getByTestId('setup-form')).toHaveCount(0);
  } finally {
    server.kill();
    removeDb();
  }
});

test('a wrong password is refused with a clear message; the right one signs in', async ({ page }) => {
  await page.goto('/runs');
  await expect(page, 'pages send the signed-out to the sign-in form').toHaveURL(/\/login\?next=%2Fruns$/);
  await page.getByTestId('login-username').fill(USERS.viewer.name);
  await page.getByTestId('login-password').fill('not-the-password');
  await page.getByTestId('login-submit').click();
  await expect(page).toHaveURL(/\/login\?error=invalid/);
  await expect(page.getByTestId('login-error')).toContainText('do not match');
  expect(await page.content()).not.toContain('not-the-password');

  await page.getByTestId('login-username').fill(USERS.viewer.name);
  await page.getByTestId('login-password').fill(PASSWORD);
  await page.getByTestId('login-submit').click();
  await expect(page, 'back to the page first asked for').toHaveURL(/\/runs$/);
  await expect(page.getByTestId('user-name')).toHaveText(USERS.viewer.name);
  await expect(page.getByTestId('user-role')).toHaveText('viewer');
  await expectNoPassword(page);
});

test('an approver approves a call and the decision names them', async ({ page }) => {
  await signIn(page, USERS.approver.name);
  await expectNoPassword(page);
  await page.goto('/playground');
  await hydrated(page);
  await page.getByTestId('prompt').fill(EMAIL_PROMPT);
  for (const box of await page.locator('input[name="tools"]').all()) {
    await box.setChecked((await box.getAttribute('value')) === 'send_email');
  }
  await page.getByTestId('start-run').click();
  await expect(page).toHaveURL(/\/runs\/[^/?#]+$/, { timeout: 15_000 });
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('paused', { timeout: 15_000 });

  const card = page.getByTestId('approval-card');
  await expect(card).toHaveCount(1);
  await card.getByTestId('approve-comment').fill('fine by me');
  await card.getByTestId('approve-button').click();
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });

  await openCall(page, 'send_email');
  const decision = page
    .locator('[data-testid="tool-call"][data-tool="send_email"]')
    .first()
    .getByTestId('approval-decision');
  await expect(decision).toHaveAttribute('data-decision', 'approved');
  await expect(decision).toHaveAttribute('data-decided-by', USERS.approver.name);
  await expect(decision.getByTestId('decision-by')).toHaveText(USERS.approver.name);
  await expectNoPassword(page);
});

test('a viewer sees a paused run\'s approval card without the buttons, and no operator controls', async ({ page, request }) => {
  const created = await request.post('/api/runs', { data: { initial_prompt: EMAIL_PROMPT, tools: ['send_email'] } });
  expect(created.status(), await created.text()).toBe(201);
  const id = (await created.json()).id as string;
  try {
    await expect
      .poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status, { timeout: 15_000 })
      .toBe('paused');

    await signIn(page, USERS.viewer.name, `/runs/${id}`);
    await expect(page).toHaveURL(new RegExp(`/runs/${id}$`));
    await hydrated(page);
    const card = page.getByTestId('approval-card');
    await expect(card).toHaveCount(1);
    await expect(card.getByTestId('approval-args')).toContainText('cfo@example.com');
    await expect(card.getByTestId('approval-read-only')).toBeVisible();
    await expect(card.getByTestId('approve-button')).toHaveCount(0);
    await expect(card.getByTestId('reject-button')).toHaveCount(0);
    await expect(page.getByTestId('cancel-run'), 'cancelling needs an operator').toHaveCount(0);
    await expectNoPassword(page);

    await page.goto('/approvals');
    const inbox = page.getByTestId('approval-card').filter({ has: page.locator(`a[href="/runs/${id}"]`) });
    await expect(inbox).toHaveCount(1);
    await expect(inbox.getByTestId('approve-button')).toHaveCount(0);
    await expect(inbox.getByTestId('approval-read-only')).toBeVisible();

    await page.goto('/playground');
    await expect(page.getByTestId('start-run')).toHaveCount(0);
    await expect(page.getByTestId('start-run-forbidden')).toBeVisible();

    await page.goto('/settings/keys');
    await expect(page.locator('.error')).toContainText('admin');
    await expectNoPassword(page);
  } finally {
    // Leave nothing waiting: other specs count the pending calls.
    await request.post(`/api/runs/${id}/cancel`);
  }
});

test('signing out ends the session: back to the sign-in page, and pages redirect there', async ({ page }) => {
  await signIn(page, USERS.viewer.name);
  await page.getByTestId('sign-out').click();
  await expect(page).toHaveURL(/\/login$/);
  await expect(page.getByTestId('login-form')).toBeVisible();
  await expect(page.getByTestId('user-area')).toHaveCount(0);

  await page.goto('/approvals');
  await expect(page).toHaveURL(/\/login\?next=%2Fapprovals$/);
  await expectNoPassword(page);
});

test('an admin creates a project, switches to it, adds a member, and creates and revokes a key; the audit log lists it', async ({ page, playwright, baseURL }) => {
  await signIn(page, USERS.admin.name);
  const project = `e2e-team-${Date.now().toString(36)}`;

  await page.goto('/settings/projects');
  await hydrated(page);
  await page.getByTestId('new-project-name').fill(project);
  await page.getByTestId('new-project-submit').click();
  await expect(page.getByTestId('project-created')).toContainText(project);
  await expect(page.locator(`[data-testid="project-row"][data-project="${project}"]`)).toHaveCount(1);

  // The switcher is a plain form: it posts, and the page comes back in the new project.
  await page.reload();
  await page.getByTestId('project-select').selectOption(project);
  await page.getByTestId('project-switch-submit').click();
  await expect(page).toHaveURL(/\/settings\/projects$/);
  await expect(page.getByTestId('project-select')).toHaveValue(project);
  await hydrated(page);
  await page.getByTestId('add-member-name').fill(USERS.viewer.name);
  await page.getByTestId('add-member-role').selectOption('operator');
  await page.getByTestId('add-member-submit').click();
  await expect(page.getByTestId('member-saved')).toContainText(`${USERS.viewer.name} is now operator of ${project}`);
  await expect(page.locator(`[data-testid="member-row"][data-user="${USERS.viewer.name}"]`)).toHaveCount(1);

  await page.goto('/runs');
  await expect(page.getByTestId('runs-empty'), 'the new project has no runs').toBeVisible();

  await page.goto('/settings/keys');
  await hydrated(page);
  await page.getByTestId('new-key-name').fill('e2e-ci');
  await page.getByTestId('new-key-role').selectOption('viewer');
  await page.getByTestId('new-key-submit').click();
  const secret = (await page.getByTestId('new-key-secret').inputValue()).trim();
  expect(secret).toMatch(/^rl_[0-9a-f]{64}$/);
  await page.getByTestId('new-key-secret-copy').click();
  await expect(page.getByTestId('new-key-secret-copy')).toHaveText('Copied');
  await expect(page.getByTestId('new-key')).toContainText('not shown again');
  const row = page.getByTestId('key-row').filter({ hasText: 'e2e-ci' });
  await expect(row).toHaveCount(1);
  await expect(row).toContainText(secret.slice(0, 8));

  const api = await playwright.request.newContext({ baseURL, extraHTTPHeaders: { Authorization: `Bearer ${secret}` } });
  try {
    expect((await api.get('/api/runs')).status(), 'the new key works').toBe(200);
    await row.getByTestId('key-revoke').click();
    await expect(page.getByTestId('key-revoked')).toContainText('e2e-ci');
    await expect(row).toHaveAttribute('data-revoked', 'true');
    expect((await api.get('/api/runs')).status(), 'a revoked key does not').toBe(401);
  } finally {
    await api.dispose();
  }
  await page.reload();
  await expect(page.locator('body'), 'the secret is shown once').not.toContainText(secret);

  await page.goto('/audit');
  for (const action of ['key_created', 'key_revoked', 'member_set']) {
    const entry = page.locator(`[data-testid="audit-row"][data-action="${action}"]`).first();
    await expect(entry.getByTestId('audit-who')).toHaveText(USERS.admin.name);
  }
  await expectNoPassword(page);

  // Back to the default project for whoever signs in next with this session.
  await page.getByTestId('project-select').selectOption('default');
  await page.getByTestId('project-switch-submit').click();
  await expect(page.getByTestId('project-select')).toHaveValue('default');
});

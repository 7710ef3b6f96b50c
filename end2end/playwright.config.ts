// Playwright configuration for the runlens end-to-end tests.
//
// `npx playwright test` (from end2end/) is the whole run: the `webServer` block
// starts the already built debug server (scripts/build.sh) on its own port with
// a fresh SQLite file, and the tests drive Debian's Chromium against it.
//
// Environment:
//   E2E_PORT       port for the test server (default 3917 when free, else any free port)
//   E2E_BASE_URL   test a server you started yourself instead (no webServer)
//   RUNLENS_BIN    server binary (default ../target/debug/runlens, or $CARGO_TARGET_DIR/debug/runlens)
//   CHROMIUM_PATH  browser (default /usr/bin/chromium); Playwright never downloads one
//   E2E_LLM_PORT   port of the scripted model server (mock-llm.ts; default: a free one)
//   E2E_API_KEY    the test server's instance-admin key (`rl_` + 64 hex; default: a
//                  random one, given to the server as RUNLENS_BOOTSTRAP_API_KEY)
//
// Identity: global-setup.ts creates the test users with `runlens user add` on
// the server's database (see `users.ts`) and signs the admin in; every spec
// runs with that session (`storageState`) unless it says otherwise, and the
// `request` fixture of fixtures.ts sends the API key.
import { defineConfig } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const repoRoot = path.resolve(__dirname, '..');

// The config is loaded again in every worker process; workers inherit the
// environment, so choosing the port once and storing it keeps them consistent.
if (!process.env.E2E_PORT) {
  process.env.E2E_PORT = execFileSync(process.execPath, [
    '-e',
    `const net = require('node:net');
     const probe = (port, fallback) => {
       const s = net.createServer();
       s.once('error', fallback);
       s.listen(port, '127.0.0.1', () => { const p = s.address().port; s.close(() => console.log(p)); });
     };
     probe(3917, () => probe(0, (e) => { throw e; }));`,
  ])
    .toString()
    .trim();
}
const port = Number(process.env.E2E_PORT);
// The scripted model server (mock-llm.ts, started by global-setup.ts), on a
// free port chosen once like the server's.
if (!process.env.E2E_LLM_PORT) {
  process.env.E2E_LLM_PORT = execFileSync(process.execPath, [
    '-e',
    `const s = require('node:net').createServer();
     s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => console.log(p)); });`,
  ])
    .toString()
    .trim();
}
// Chosen once, like the port, so every worker knows the server's key.
if (!process.env.E2E_API_KEY) {
  process.env.E2E_API_KEY = `rl_${randomBytes(32).toString('hex')}`;
}
// The admin's signed-in session, written by global-setup.ts.
process.env.E2E_ADMIN_STATE = path.join(os.tmpdir(), `runlens-e2e-${port}-admin.json`);
const externalBaseURL = process.env.E2E_BASE_URL;
const baseURL = externalBaseURL ?? `http://127.0.0.1:${port}`;

// scripts/build.sh output (it honours CARGO_TARGET_DIR too).
const targetDir = path.resolve(repoRoot, process.env.CARGO_TARGET_DIR ?? 'target');
const serverBin = process.env.RUNLENS_BIN ?? path.join(targetDir, 'debug', 'runlens');
const siteRoot = path.join(targetDir, 'site');
// One database per port, deleted (with its WAL files) right before the server starts.
const dbFile = path.join(os.tmpdir(), `runlens-e2e-${port}.db`);
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
// The server's config file (`--config`): tools.spec.ts registers an HTTP tool
// whose receiver listens on 127.0.0.1, which needs private networks allowed;
// compare.spec.ts runs one prompt on several models, the scripted ones of
// the `mock` provider among them.
const configFile = path.join(os.tmpdir(), `runlens-e2e-${port}.toml`);
if (!externalBaseURL) {
  writeFileSync(
    configFile,
    '[http]\nallow_private_networks = true\n\n' +
      `[providers.mock]\nbase_url = "http://127.0.0.1:${process.env.E2E_LLM_PORT}/v1"\n` +
      'models = ["small", "large"]\nstream = false\nmax_retries = 0\n',
  );
}
// For specs that add data straight into the server's database (live.spec.ts
// makes a 10,000-step run with `runlens gen-trace`); unset against E2E_BASE_URL.
if (!externalBaseURL) {
  process.env.E2E_DB_FILE = dbFile;
  process.env.E2E_RUNLENS_BIN = serverBin;
  process.env.E2E_SITE_ROOT = siteRoot;
}

export default defineConfig({
  testDir: './tests',
  globalSetup: './global-setup.ts',
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  retries: 0,
  workers: 1,
  reporter: 'list',
  timeout: 30_000,
  expect: { timeout: 10_000 },
  outputDir: './test-results',
  use: {
    baseURL,
    storageState: process.env.E2E_ADMIN_STATE,
    browserName: 'chromium',
    headless: true,
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    },
  },
  projects: [{ name: 'chromium' }],
  webServer: externalBaseURL
    ? undefined
    : {
        command:
          `rm -f ${q(dbFile)} ${q(dbFile + '-wal')} ${q(dbFile + '-shm')} && ` +
          `exec ${q(serverBin)} serve --addr 127.0.0.1:${port} --config ${q(configFile)}` +
          // The server's log to a file as well, when asked (scripts/test.sh
          // then checks no password or key secret is in it).
          (process.env.E2E_SERVER_LOG ? ` 2>>${q(process.env.E2E_SERVER_LOG)}` : ''),
        url: `http://127.0.0.1:${port}/healthz`,
        reuseExistingServer: false,
        timeout: 60_000,
        stdout: 'pipe',
        stderr: 'pipe',
        env: {
          DATABASE_URL: `sqlite://${dbFile}`,
          RUNLENS_BOOTSTRAP_API_KEY: process.env.E2E_API_KEY,
          LEPTOS_SITE_ROOT: siteRoot,
          RUST_LOG: process.env.RUST_LOG ?? 'warn,runlens=info,runlens_engine=info',
        },
      },
});

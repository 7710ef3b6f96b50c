// Accessibility (issue 19): axe-core's WCAG 2.0/2.1 A and AA rules over every
// page in the states the suite can reach, in both themes (the `runlens_theme`
// cookie the theme toggle sets, which the server renders into `<html
// data-theme>`). Any violation of impact "serious" or "critical" fails the
// page's test, listing the rule, its impact and the offending elements.
//
// The runs are made through the REST API with the built-in model: a long
// `latency_ms` keeps one running, send_email pauses one for approval, a
// scripted `error` turn fails one, and editing a message forks one. A
// 10,000-step run is made with `runlens gen-trace` as in live.spec.ts (about
// 20 s; not against a server of E2E_BASE_URL, whose database is not ours).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import AxeBuilder from '@axe-core/playwright';
import { request as playwrightRequest } from '@playwright/test';
import { expect, test, type APIRequestContext, type Page } from './fixtures';

const TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];
const EMAIL_PROMPT = 'send_email {"to": "a11y@example.com", "subject": "Check", "body": "Contrast report."}';

type Run = { id: string; status: string };

async function startRun(api: APIRequestContext, data: Record<string, unknown>): Promise<string> {
  const res = await api.post('/api/runs', { data });
  expect(res.status(), await res.text()).toBe(201);
  return (await res.json()).id as string;
}

async function waitFor(api: APIRequestContext, id: string, status: string) {
  await expect
    .poll(async () => ((await (await api.get(`/api/runs/${id}`)).json()) as Run).status, { timeout: 20_000 })
    .toBe(status);
}

/** The page states checked, by name: a path, and optionally what to do there first. */
type State = { path: string; prepare?: (page: Page) => Promise<void> };
const states: Record<string, State> = {};
/** The runs this spec made (kept in a file: a failed test restarts the worker, which must not make them again). */
type Made = { done: string; other: string; failed: string; running: string; paused: string; fork: string; group: string; big?: string; ingested?: string; dataset: string; experiments: string[]; queue: string };
let made: Made;
const baseURL = process.env.E2E_BASE_URL ?? `http://127.0.0.1:${process.env.E2E_PORT}`;
const madeFile = path.join(
  os.tmpdir(),
  `runlens-e2e-a11y-${createHash('sha256').update(`${baseURL} ${process.env.E2E_API_KEY}`).digest('hex').slice(0, 16)}.json`,
);

function api(): Promise<APIRequestContext> {
  return playwrightRequest.newContext({ baseURL, extraHTTPHeaders: { Authorization: `Bearer ${process.env.E2E_API_KEY}` } });
}

async function makeRuns(): Promise<Made> {
  const api_ = await api();
  const made = await makeRunsWith(api_);
  await api_.dispose();
  return made;
}

async function makeRunsWith(api: APIRequestContext): Promise<Made> {
  const stamp = Date.now();
  // Before any run pauses: the inbox of the project is empty (this spec runs first,
  // and the filter below keeps it empty whatever other specs left behind).
  const done = await startRun(api, { name: `a11y done ${stamp}`, initial_prompt: 'What is (12 + 30) * 2?', tools: ['calculator'], tags: { a11y: 'yes' }, metadata: { suite: 'a11y' }, session_id: 'a11y-session', user_id: 'a11y-user' });
  const other = await startRun(api, { name: `a11y other ${stamp}`, initial_prompt: 'What is 6 * 7?', tools: ['calculator'] });
  const failed = await startRun(api, { name: `a11y failed ${stamp}`, initial_prompt: 'fail please', model_settings: { script: [{ error: 'the provider fell over' }] } });
  // Running for an hour (a `wait` call), cancelled by the last test.
  const running = await startRun(api, { name: `a11y running ${stamp}`, initial_prompt: 'wait {"seconds": 3600}', tools: ['wait'] });
  const paused = await startRun(api, { name: `a11y paused ${stamp}`, initial_prompt: EMAIL_PROMPT, tools: ['send_email'] });
  await waitFor(api, done, 'done');
  await waitFor(api, other, 'done');
  await waitFor(api, failed, 'failed');
  await waitFor(api, paused, 'paused');
  await waitFor(api, running, 'running');
  // A fork: the first human message of `done`, edited.
  const messages = await (await api.get(`/api/runs/${done}/messages`)).json();
  const human = messages.messages.find((m: { type: string }) => m.type === 'human');
  const forked = await api.post(`/api/runs/${done}/messages/${human.id}/edit`, { data: { message: 'What is 9 * 9?' } });
  expect(forked.status(), await forked.text()).toBe(201);
  const fork = (await forked.json()).id as string;
  await waitFor(api, fork, 'done');
  // A comparison group of one prompt on the built-in model.
  const batch = await api.post('/api/runs/batch', { data: { initial_prompt: 'What is 5 * 5?', tools: ['calculator'], models: ['builtin'] } });
  expect(batch.status(), await batch.text()).toBe(201);
  const group = (await batch.json()).group_id as string;
  // A dataset holding `done`, made from its trace.
  const dsMade = await api.post('/api/datasets', { data: { name: `a11y ${stamp}`, description: 'Runs the a11y pass keeps' } });
  expect(dsMade.status(), await dsMade.text()).toBe(201);
  const dataset = (await dsMade.json()).id as string;
  const added = await api.post(`/api/runs/${done}/dataset-items`, { data: { dataset_id: dataset } });
  expect(added.status(), await added.text()).toBe(201);
  // Two experiments over it, scored, to read and to compare.
  const experiments: string[] = [];
  for (const answer of ['4', 'four']) {
    const made = await api.post('/api/experiments', { data: { dataset_id: dataset, model: 'builtin', name: `a11y ${answer}`,
      model_settings: { script: [{ text: answer }] }, scorers: [{ name: 'correct', scorer: { kind: 'contains' } }] } });
    expect(made.status(), await made.text()).toBe(201);
    experiments.push((await made.json()).id as string);
  }
  // An evaluator, so its page has a row.
  const evaluator = await api.post('/api/evaluators', { data: { name: `a11y ${stamp}`, sample_percent: 0,
    scorers: [{ scorer: { kind: 'bounds', max_turns: 9 } }] } });
  expect(evaluator.status(), await evaluator.text()).toBe(201);
  // A review queue holding `done`, to read and to review.
  const queueMade = await api.post('/api/review-queues', { data: { name: `a11y ${stamp}`, dataset_id: dataset,
    fields: [{ name: 'correct' }, { name: 'tone', kind: 'label', labels: ['kind', 'rude'] }, { name: 'quality', kind: 'number', min: 1, max: 5 }] } });
  expect(queueMade.status(), await queueMade.text()).toBe(201);
  const queue = (await queueMade.json()).id as string;
  const queued = await api.post(`/api/review-queues/${queue}/items`, { data: { run_ids: [done] } });
  expect(queued.status(), await queued.text()).toBe(201);

  // A run recorded from OpenTelemetry spans (the fixtures otlp.spec.ts posts).
  const otlp = path.resolve(__dirname, '..', '..', 'tests', 'fixtures', 'otlp', 'openai-agents');
  for (const file of readdirSync(otlp).filter((f) => f.endsWith('.pb')).sort()) {
    const reply = await api.post('/v1/traces', {
      headers: { 'content-type': 'application/x-protobuf' },
      data: readFileSync(path.join(otlp, file)),
    });
    expect(reply.status(), `${file}: ${await reply.text()}`).toBe(200);
  }
  const traceId = JSON.parse(readFileSync(path.join(otlp, 'expected.json'), 'utf8')).trace_ids[0];
  const ingested = `default~trace~${traceId}`;

  let big: string | undefined;
  if (process.env.E2E_RUNLENS_BIN && process.env.E2E_DB_FILE) {
    const { stdout } = await promisify(execFile)(
      process.env.E2E_RUNLENS_BIN,
      ['gen-trace', '--steps', '10000', '--database-url', `sqlite://${process.env.E2E_DB_FILE}`],
      { timeout: 230_000, env: { ...process.env, RUST_LOG: 'error' } },
    );
    big = stdout.trim().split('\n').pop()!.trim();
  }
  return { done, other, failed, running, paused, fork, group, big, ingested, dataset, experiments, queue };
}

test.beforeAll(async () => {
  test.setTimeout(300_000);
  if (existsSync(madeFile)) {
    made = JSON.parse(readFileSync(madeFile, 'utf8'));
  } else {
    made = await makeRuns();
    writeFileSync(madeFile, JSON.stringify(made));
  }
  const { done, other, failed, running, paused, fork, group, big: bigRun, ingested, dataset, experiments, queue } = made;

  Object.assign(states, {
    'approvals inbox, empty': { path: '/approvals?tool=no_such_tool_a11y' },
    'runs list': { path: '/runs' },
    'runs list with filters': { path: `/runs?status=done&tag=a11y%3Ayes&q=a11y&all=1&group=agent` },
    'runs list of a session and a user': { path: '/runs?session_id=a11y-session&user=a11y-user' },
    'session page': { path: '/sessions/a11y-session' },
    'datasets': { path: '/datasets' },
    'a dataset': { path: `/datasets/${dataset}` },
    'experiments': { path: '/experiments' },
    'evaluators': { path: '/evaluators' },
    'review queues': { path: '/reviews' },
    'a review queue': { path: `/reviews/${queue}` },
    'reviewing an item': { path: `/reviews/${queue}/review` },
    'an experiment': { path: `/experiments/${experiments[0]}` },
    'two experiments compared': { path: `/experiments/${experiments[0]}/compare?with=${experiments[1]}` },
    'playground': { path: '/playground' },
    'playground with a validation error': {
      path: '/playground',
      prepare: async (page: Page) => {
        await page.getByTestId('prompt').fill('This prompt must survive a failed submit');
        await page.getByTestId('context').fill('{not json');
        await page.getByTestId('start-run').click();
        await expect(page.getByTestId('form-error')).toBeVisible();
      },
    },
    'trace of a running run': { path: `/runs/${running}` },
    'trace of a paused run': { path: `/runs/${paused}` },
    'trace of a done run': { path: `/runs/${done}` },
    'trace of a done run, steps unfolded': {
      path: `/runs/${done}`,
      prepare: async (page: Page) => {
        for (const d of await page.locator('details:not([open])').all()) {
          if (await d.isVisible()) await d.locator('summary').first().click();
        }
      },
    },
    'trace of a failed run': { path: `/runs/${failed}` },
    'trace of a forked run': { path: `/runs/${fork}` },
    'approvals inbox, full': { path: '/approvals' },
    'approvals, decided': { path: '/approvals/decided' },
    'outbox': { path: '/outbox' },
    'settings': { path: '/settings' },
    'compare two runs': { path: `/compare?a=${done}&b=${other}` },
    'compare a fork with its parent': { path: `/compare?a=${done}&b=${fork}` },
    'compare a group': { path: `/compare?group=${group}` },
    'compare one run picked': { path: `/compare?a=${done}` },
    'compare, nothing picked': { path: '/compare' },
    'agents': { path: '/agents' },
    'tools': { path: '/tools' },
    'HTTP tools': { path: '/tools/http' },
    'projects': { path: '/settings/projects' },
    'keys': { path: '/settings/keys' },
    'audit': { path: '/audit' },
    ...(bigRun ? { 'trace of a 10,000-step run': { path: `/runs/${bigRun}` } } : {}),
    ...(ingested
      ? {
          'trace of a run recorded from spans, a span opened from the tree': {
            path: `/runs/${ingested}`,
            prepare: async (page: Page) => {
              await page.getByTestId('tree-span').first().click();
              await expect(page.locator('details[data-selected]')).toHaveCount(1);
            },
          },
        }
      : {}),
  });
});

/** axe's serious and critical violations on the page as it is now, one line per element. */
async function violations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).withTags(TAGS).analyze();
  const lines: string[] = [];
  for (const v of results.violations) {
    if (v.impact !== 'serious' && v.impact !== 'critical') continue;
    lines.push(`${v.id} (${v.impact}, ${v.nodes.length} element(s)): ${v.help}`);
    for (const node of v.nodes.slice(0, 15)) {
      const why = node.failureSummary?.split('\n').slice(1, 2).join(' ').trim() ?? '';
      lines.push(`    ${node.target.join(' ')}${why ? ` — ${why}` : ''}`);
    }
    if (v.nodes.length > 15) lines.push(`    … and ${v.nodes.length - 15} more`);
  }
  return lines;
}

const NAMES = [
  'approvals inbox, empty',
  'runs list',
  'runs list with filters',
  'runs list of a session and a user',
  'session page',
  'datasets',
  'a dataset',
  'experiments',
  'an experiment',
  'two experiments compared',
  'evaluators',
  'review queues',
  'a review queue',
  'reviewing an item',
  'playground',
  'playground with a validation error',
  'trace of a running run',
  'trace of a paused run',
  'trace of a done run',
  'trace of a done run, steps unfolded',
  'trace of a failed run',
  'trace of a forked run',
  'approvals inbox, full',
  'outbox',
  'settings',
  'compare two runs',
  'compare a fork with its parent',
  'compare a group',
  'compare one run picked',
  'compare, nothing picked',
  'agents',
  'tools',
  'HTTP tools',
  'projects',
  'keys',
  'audit',
  'trace of a 10,000-step run',
  'trace of a run recorded from spans, a span opened from the tree',
];

for (const theme of ['light', 'dark'] as const) {
  test.describe(`${theme} theme`, () => {
    // The system setting is the opposite of the chosen theme, so the cookie is what decides.
    test.use({ colorScheme: theme === 'light' ? 'dark' : 'light' });
    test.beforeEach(async ({ context, baseURL }) => {
      await context.addCookies([{ name: 'runlens_theme', value: theme, url: baseURL! }]);
    });

    for (const name of NAMES) {
      test(`${name}: no serious or critical WCAG 2.1 AA violation`, async ({ page }) => {
        const state = states[name];
        test.skip(!state, 'not made against E2E_BASE_URL (the 10,000-step run needs the local database)');
        await page.goto(state.path);
        await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
        await expect(page.locator('html')).toHaveAttribute('data-theme', theme);
        if (state.prepare) await state.prepare(page);
        const found = await violations(page);
        expect(found, `axe on ${state.path} (${theme}):\n${found.join('\n')}`).toEqual([]);
      });
    }
  });
}

test('the theme toggle works without JavaScript and is remembered', async ({ browser, baseURL }) => {
  const context = await browser.newContext({ javaScriptEnabled: false, storageState: process.env.E2E_ADMIN_STATE, colorScheme: 'light' });
  const page = await context.newPage();
  await page.goto(`${baseURL}/outbox`);
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'system');
  await page.getByTestId('theme-toggle').locator('button[value="dark"]').click();
  await expect(page).toHaveURL(/\/outbox$/);
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
  await page.goto(`${baseURL}/runs`);
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
  const cookie = (await context.cookies()).find((c) => c.name === 'runlens_theme');
  expect(cookie?.value).toBe('dark');
  await page.getByTestId('theme-toggle').locator('button[value="system"]').click();
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'system');
  await context.close();
});

test('the theme toggle switches at once when hydrated, and a reload keeps it', async ({ page }) => {
  await page.goto('/runs');
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
  // A mark on the document proves no form post reloaded the page.
  await page.evaluate(() => ((window as unknown as { __themeMark: boolean }).__themeMark = true));
  await page.getByTestId('theme-toggle').locator('button[value="light"]').click();
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'light');
  await expect(page.getByTestId('theme-toggle').locator('button[value="light"]')).toHaveAttribute('aria-pressed', 'true');
  await page.getByTestId('theme-toggle').locator('button[value="dark"]').click();
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
  await expect(page.getByTestId('theme-toggle').locator('button[value="light"]')).toHaveAttribute('aria-pressed', 'false');
  await expect(page).toHaveURL(/\/runs$/);
  expect(await page.evaluate(() => (window as unknown as { __themeMark?: boolean }).__themeMark)).toBe(true);
  await page.reload();
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
  await page.getByTestId('theme-toggle').locator('button[value="system"]').click();
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'system');
});

// Last: the running and the paused run are cancelled, so the specs after this
// one find no call waiting in the inbox.
test('cleanup: the runs left running or paused are cancelled', async () => {
  const client = await api();
  for (const id of [made.running, made.paused]) {
    const res = await client.post(`/api/runs/${id}/cancel`);
    expect([200, 202, 409]).toContain(res.status());
  }
  await client.dispose();
});

// HTTP tools, end to end in a real browser: an HTTP tool is registered on the
// Tools page (/tools/http) — a bad name is refused with the engine's message,
// the signing secret is shown once — a run started from the playground calls
// it, and the trace shows the answer of the receiver, which checked the
// call's signature.
//
// The receiver is a small node:http server started by this spec on
// 127.0.0.1; it verifies `runlens-signature` (HMAC-SHA256 of "<t>.<body>")
// with node:crypto, as the README tells receivers to. The server under test
// reaches 127.0.0.1 because playwright.config.ts starts it with a config file
// that sets `[http] allow_private_networks = true`. The built-in model calls
// an attached tool whose name is in the prompt, with the prompt's JSON object
// as arguments.
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, openCall, test, type Page } from './fixtures';

const toolName = `lookup_order_${Date.now().toString(36)}`;

/** What the receiver got. */
type Received = { verified: boolean; body: Record<string, unknown>; headers: http.IncomingHttpHeaders };

let receiver: http.Server;
let receiverUrl = '';
let secret = '';
const received: Received[] = [];

/** Whether `header` signs `raw` with `secret`: a v1 HMAC of "<t>.<raw>", t within five minutes. */
function verify(header: string | undefined, raw: Buffer): boolean {
  if (!header || !secret) return false;
  let t = '';
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const [key, value] = part.split('=', 2);
    if (key === 't') t = value;
    if (key === 'v1') v1.push(value);
  }
  if (!/^\d+$/.test(t) || Math.abs(Date.now() / 1000 - Number(t)) > 300) return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(`${t}.`).update(raw).digest('hex'));
  return v1.some((sig) => sig.length === expected.length && timingSafeEqual(Buffer.from(sig), expected));
}

test.beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const verified = verify(req.headers['runlens-signature'] as string | undefined, raw);
      const body = JSON.parse(raw.toString('utf8') || '{}');
      received.push({ verified, body, headers: req.headers });
      res.setHeader('content-type', 'application/json');
      if (!verified) {
        res.statusCode = 401;
        res.end(JSON.stringify({ error: 'bad signature' }));
        return;
      }
      const id = (body.arguments as { id?: string } | undefined)?.id;
      res.end(JSON.stringify({ order: id, status: 'shipped', signature: 'verified by the receiver' }));
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/orders`;
});

test.afterAll(async () => {
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});

/** Waits until the browser bundle has hydrated the server-rendered page. */
async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

test('an HTTP tool registered on the Tools page is called, signed, by a playground run', async ({ page }) => {
  await page.goto('/tools/http');
  await hydrated(page);
  await expect(page.getByRole('link', { name: 'HTTP tools', exact: true })).toBeVisible();
  // One navigation link is current: HTTP tools, not Tools as well.
  const current = page.locator('nav[aria-label="Main"] a[aria-current="page"]');
  await expect(current).toHaveCount(1);
  await expect(current).toHaveText('HTTP tools');
  const form = page.getByTestId('new-http-tool').getByTestId('http-tool-form');
  await form.getByTestId('http-tool-name').fill('calculator');
  await form.getByTestId('http-tool-description').fill('Looks an order up by its id.');
  await form.getByTestId('http-tool-url').fill(receiverUrl);
  await form
    .getByTestId('http-tool-schema')
    .fill(JSON.stringify({ type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }));
  await form.getByTestId('http-tool-headers').fill('X-Api-Key: e2e-header-value');
  await form.getByTestId('http-tool-idempotent').check();
  await form.getByTestId('http-tool-requires-approval').uncheck();

  // A name the built-in calculator has: refused, with the reason, and nothing registered.
  await form.getByTestId('http-tool-submit').click();
  await expect(form.getByTestId('http-tool-form-error')).toContainText('name `calculator` is taken by a tool');
  await expect(page.getByTestId('http-tool-secret')).toHaveCount(0);

  await form.getByTestId('http-tool-name').fill(toolName);
  await form.getByTestId('http-tool-submit').click();
  const secretBox = page.getByTestId('http-tool-secret-box');
  await expect(secretBox).toContainText('it is not shown again');
  secret = await page.getByTestId('http-tool-secret').inputValue();
  expect(secret).toMatch(/^whsec_[0-9a-f]{64}$/);
  const row = page.locator(`[data-testid="http-tool-row"][data-tool="${toolName}"]`);
  await expect(row.getByTestId('http-tool-url')).toHaveText(receiverUrl);
  await expect(row.getByTestId('http-tool-headers')).toHaveText('X-Api-Key');

  // Shown once: after a reload the tool is listed, its secret and header value are not.
  await page.reload();
  await hydrated(page);
  await expect(row).toBeVisible();
  await expect(page.getByTestId('http-tool-secret')).toHaveCount(0);
  const html = await page.content();
  expect(html).not.toContain(secret);
  expect(html).not.toContain('e2e-header-value');

  // A run from the playground attaches the tool; the built-in model calls it.
  await page.goto('/playground');
  await hydrated(page);
  await page.getByTestId('prompt').fill(`Please ${toolName} {"id": "A-42"}`);
  const boxes = page.locator('input[name="tools"]');
  await expect(boxes.and(page.locator(`[value="${toolName}"]`))).toHaveCount(1);
  for (const box of await boxes.all()) {
    await box.setChecked((await box.getAttribute('value')) === toolName);
  }
  await page.getByTestId('start-run').click();
  await expect(page).toHaveURL(/\/runs\/[^/?#]+\/?(?:[?#].*)?$/, { timeout: 15_000 });
  const runId = decodeURIComponent(new URL(page.url()).pathname.split('/').filter(Boolean)[1]);
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });

  // The trace shows the receiver's answer to the signed call.
  await openCall(page, toolName);
  const call = page.locator(`[data-testid="tool-call"][data-tool="${toolName}"]`).first();
  await expect(call).toBeAttached();
  await hydrated(page);
  if (!(await call.evaluate((el) => (el as HTMLDetailsElement).open))) {
    await call.locator('summary').first().click();
  }
  const result = call.getByTestId('tool-result');
  await expect(result).toBeVisible();
  await expect(result).toContainText('shipped');
  await expect(result).toContainText('A-42');
  await expect(result).toContainText('verified by the receiver');

  expect(received).toHaveLength(1);
  const [got] = received;
  expect(got.verified).toBe(true);
  expect(got.body).toMatchObject({ run_id: runId, tool: toolName, arguments: { id: 'A-42' } });
  expect(got.headers['x-api-key']).toBe('e2e-header-value');
  expect(got.headers['runlens-idempotency-key']).toBe(`${runId}:${got.body.call_id}`);
});

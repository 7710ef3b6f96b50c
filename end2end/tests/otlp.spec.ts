// Runs runlens did not run, in the browser: the OTLP requests the OpenAI Agents SDK with
// OpenInference instrumentation really sent (tests/fixtures/otlp/openai-agents, one span a
// request, children before parents) are posted to POST /v1/traces as they were recorded;
// the run they make shows in the runs list with its source, and its trace page shows the
// steps, tool call, timeline, token chart and cost, explains why it offers no controls, and
// lists the spans that are neither model nor tool calls.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect, openCall, test } from './fixtures';

const fixtures = path.resolve(__dirname, '..', '..', 'tests', 'fixtures', 'otlp', 'openai-agents');

test('a trace sent by an instrumented agent is a read-only run with its steps, timeline and cost', async ({
  page,
  request,
}) => {
  const expected = JSON.parse(readFileSync(path.join(fixtures, 'expected.json'), 'utf8'));
  for (const file of readdirSync(fixtures).filter((f) => f.endsWith('.pb')).sort()) {
    const reply = await request.post('/v1/traces', {
      headers: { 'content-type': 'application/x-protobuf' },
      data: readFileSync(path.join(fixtures, file)),
    });
    expect(reply.status(), `${file}: ${await reply.text()}`).toBe(200);
  }
  const price = await request.put('/api/prices/gpt-4o-mini-2024-07-18', { data: { input: 0.15, output: 0.6 } });
  expect(price.ok()).toBeTruthy();
  const id = `default~trace~${expected.trace_ids[0]}`;

  // The run is as old as its spans: filtered by its name, so runs the other specs made after it
  // do not push it off the first page.
  const run = await (await request.get(`/api/runs/${id}`)).json();
  await page.goto(`/runs?q=${encodeURIComponent(run.name)}`);
  const row = page.locator('tr', { has: page.locator(`a[href="/runs/${id}"]`) });
  await expect(row.getByTestId('run-source')).toHaveText('otlp · support-bot');

  await page.goto(`/runs/${id}`);
  await expect(page.getByTestId('run-source-notice')).toContainText('runlens did not run it');
  await expect(page.getByTestId('run-status')).toHaveText('done');
  for (const control of ['cancel-run', 'follow-up', 'edit-message']) {
    await expect(page.getByTestId(control)).toHaveCount(0);
  }
  // Two model turns (the `response` spans), the tool call between them.
  await openCall(page, 'get_order_status');
  await expect(page.getByTestId('tool-call').filter({ hasText: 'get_order_status' }).first()).toBeVisible();
  await expect(page.getByTestId('timeline')).toBeVisible();
  await expect(page.locator('[data-testid="timeline-bar"][data-kind="model"]')).toHaveCount(2);
  await expect(page.getByTestId('token-chart')).toBeVisible();
  // 283 input and 47 output tokens at $0.15 / $0.60 per million.
  await expect(page.getByTestId('run-cost')).toHaveText('$0.00007065');

  // The tree lists the other spans after the steps; a click opens one.
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
  const tree = page.getByTestId('tree');
  await expect(tree.getByTestId('tree-step')).toHaveCount(2);
  const spanLine = tree.getByTestId('tree-span').filter({ hasText: 'Agent workflow' }).first();
  await expect(spanLine).toBeVisible();
  const other = page.getByTestId('other-spans');
  await expect(other).not.toHaveAttribute('open', '');
  await spanLine.click();
  await expect(other).toHaveAttribute('open', '');
  await expect(other.getByText('Agent workflow').first()).toBeVisible();
  await expect(page).toHaveURL(/#span-/);
  const selected = page.locator('details[data-selected]');
  await expect(selected).toHaveCount(1);
  await expect(selected).toContainText('Agent workflow');
  await expect(spanLine).toHaveAttribute('aria-selected', 'true');
});

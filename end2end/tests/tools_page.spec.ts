// The Tools page and what the trace shows of tools: the page lists the
// project's tools with their sources, flags and schemas (and the MCP
// servers' health); a trace shows which tools a step offered and why when
// its run had more attached than one turn offers, and renders a tool result
// in the MCP content shape (texts, images of safe types, structured content).
//
// The test server has only the four built-in tools and the default
// `[tool_selection] max` of 20, so no run of it selects: the selection
// shown here comes from an imported state document (the shape the engine
// records, proven against 200+ tools by the engine's selection tests), as
// does the MCP-shaped result (no MCP server runs in this suite).
import { expect, openStep, test, type APIRequestContext, type Page } from './fixtures';

async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** A 1×1 PNG. */
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

/** Starts a calculator run through the API and waits until it is done; its id. */
async function finishedRun(request: APIRequestContext): Promise<string> {
  const created = await request.post('/api/runs', {
    data: { initial_prompt: 'What is 6 * 7?', tools: ['calculator'] },
  });
  expect(created.status(), await created.text()).toBe(201);
  const id = (await created.json()).id as string;
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status, { timeout: 15_000 })
    .toBe('done');
  return id;
}

test('the Tools page lists the built-in tools with their sources, flags and schemas', async ({ page }) => {
  await page.goto('/runs');
  await hydrated(page);
  await page.locator('nav a[href="/tools"]').click();
  await expect(page).toHaveURL(/\/tools$/);
  const rows = page.getByTestId('tool-row');
  await expect(rows).toHaveCount(4);
  await expect(page.getByTestId('tools-range')).toHaveText('1–4 of 4');
  for (const name of ['calculator', 'current_time', 'send_email', 'wait']) {
    const row = page.locator(`[data-testid="tool-row"][data-tool="${name}"]`);
    await expect(row.getByTestId('tool-source')).toHaveText('builtin');
    await expect(row.getByTestId('tool-description')).not.toBeEmpty();
  }
  const email = page.locator('[data-testid="tool-row"][data-tool="send_email"]');
  await expect(email.getByTestId('tool-needs-approval')).toBeVisible();
  await expect(email.getByTestId('tool-not-idempotent')).toBeVisible();
  await expect(page.locator('[data-testid="tool-row"][data-tool="calculator"]').getByTestId('tool-idempotent')).toBeVisible();

  // The schema is folded until asked for, and shown as text.
  const calculator = page.locator('[data-testid="tool-row"][data-tool="calculator"]');
  const schema = calculator.getByTestId('tool-schema');
  await expect(schema).toBeHidden();
  await calculator.getByText('Arguments schema').click();
  await expect(schema).toBeVisible();
  await expect(schema).toContainText('"expression"');
  await expect(schema).toContainText('"required"');

  // Sources with their counts; filtering by text keeps the source.
  await expect(page.locator('[data-testid="source-chip"][data-source="builtin"]')).toContainText('4');
  await page.getByTestId('tools-q').fill('email');
  await page.getByTestId('tools-filter-submit').click();
  await expect(page).toHaveURL(/\/tools\?.*q=email/);
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toHaveAttribute('data-tool', 'send_email');
  await page.getByTestId('tools-q').fill('no such tool');
  await page.getByTestId('tools-filter-submit').click();
  await expect(rows).toHaveCount(0);
  await expect(page.getByTestId('tools-range')).toHaveText('No tools match.');

  // No MCP server is configured on the test server; HTTP tools have their own page.
  await expect(page.getByTestId('no-mcp-servers')).toBeVisible();
  await expect(page.getByTestId('http-tools-link')).toHaveAttribute('href', '/tools/http');
});

test('a trace shows the tools each step offered and why, and renders MCP results safely', async ({ page, request }) => {
  const id = await finishedRun(request);
  const doc = await (await request.get(`/api/runs/${id}/state`)).json();
  expect(doc.steps.length).toBe(2);
  const query = 'What is 6 * 7?';
  doc.steps[0].request.selection = {
    attached: 240,
    max: 20,
    query,
    offered: [
      { name: 'calculator', score: 2.4178, reason: 'relevant' },
      { name: 'wait', score: 0.3012, reason: 'relevant' },
    ],
  };
  doc.steps[1].request.selection = {
    attached: 240,
    max: 20,
    query: `${query}\n<script>alert(1)</script>`,
    offered: [{ name: 'calculator', score: 2.4178, reason: 'used' }],
  };
  doc.steps[0].tool_calls[0].result = {
    content: [
      { type: 'text', text: '<b>42</b> is the answer' },
      { type: 'image', mime_type: 'image/png', data: PNG },
      { type: 'image', mime_type: 'image/svg+xml', data: 'PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+' },
      { type: 'image', mime_type: 'image/png', data: 'not base64"><script>alert(1)</script>' },
    ],
    structured_content: { value: 42 },
  };
  const imported = await request.post('/api/runs/import', { data: doc });
  expect(imported.status(), await imported.text()).toBe(201);
  const copy = (await imported.json()).id as string;

  await page.goto(`/runs/${encodeURIComponent(copy)}`);
  await hydrated(page);
  await expect(page.getByTestId('tree-step')).toHaveCount(2);

  const first = (await openStep(page, 0)).getByTestId('tool-selection');
  await expect(first).toHaveAttribute('data-attached', '240');
  await expect(first.getByTestId('selection-summary')).toHaveText('2 of 240 attached tools offered (at most 20)');
  await first.getByTestId('selection-summary').click();
  const offered = first.getByTestId('offered-tool');
  await expect(offered).toHaveCount(2);
  await expect(offered.nth(0)).toHaveAttribute('data-tool', 'calculator');
  await expect(offered.nth(0)).toHaveAttribute('data-reason', 'relevant');
  await expect(offered.nth(0)).toContainText('2.418');
  await expect(first.getByTestId('selection-query')).toHaveText(query);

  const second = (await openStep(page, 1)).getByTestId('tool-selection');
  await expect(second.getByTestId('selection-summary')).toHaveText(
    '1 of 240 attached tools offered (at most 20), 1 used before',
  );
  await second.getByTestId('selection-summary').click();
  await expect(second.getByTestId('offered-tool')).toHaveAttribute('data-reason', 'used');
  await expect(second.getByTestId('selection-query')).toContainText('<script>alert(1)</script>');

  // The MCP-shaped result: text as text, the PNG shown, the SVG and the
  // bad data described, structured content as JSON; no markup got through.
  await openStep(page, 0);
  const call = page.locator('[data-testid="tool-call"][data-tool="calculator"]').first();
  await expect(call.getByTestId('mcp-text')).toHaveText('<b>42</b> is the answer');
  await expect(call.locator('.mcp-result b')).toHaveCount(0);
  const images = call.getByTestId('mcp-image');
  await expect(images).toHaveCount(1);
  await expect(images).toHaveAttribute('src', `data:image/png;base64,${PNG}`);
  const hidden = call.getByTestId('mcp-image-hidden');
  await expect(hidden).toHaveCount(2);
  await expect(hidden.nth(0)).toHaveText('image of type image/svg+xml not shown');
  await expect(hidden.nth(1)).toContainText('not valid base64');
  await expect(call.getByTestId('mcp-structured')).toContainText('"value": 42');
  await expect(page.locator('script:has-text("alert(1)")')).toHaveCount(0);
});

test('the playground attaches all tools by default, or a whole source', async ({ page, request }) => {
  await page.goto('/playground');
  await hydrated(page);
  await expect(page.getByTestId('attach-all')).toBeChecked();
  await expect(page.locator('input[name="tools"][value="calculator"]')).not.toBeChecked();
  await page.getByTestId('prompt').fill('What is 2 + 3?');
  await page.getByTestId('attach-all').uncheck();
  await page.locator('[data-testid="attach-source"][data-source="builtin"]').check();
  await page.getByTestId('start-run').click();
  await expect(page).toHaveURL(/\/runs\/[^/?#]+$/, { timeout: 15_000 });
  const id = decodeURIComponent(new URL(page.url()).pathname.split('/').filter(Boolean)[1]);
  const run = await (await request.get(`/api/runs/${id}`)).json();
  expect(run.tools).toEqual(['calculator', 'current_time', 'send_email', 'wait']);
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
});

// Keyboard-first use (issue 19): approving and rejecting with `a` and `r`
// (reject only after a reason is confirmed), walking a trace with `j`/`k`,
// folding with `o`, searching with `/`, `g` sequences, the `?` overlay,
// no shortcut while typing, the status announcer, and phones (390 × 844:
// no page-wide horizontal scroll).
//
// The built-in model calls any attached tool whose name is in the prompt;
// send_email always requires approval, so such a run pauses. Tests share
// one server (other specs leave runs behind), so they find their own run by id.
import { expect, openCall, test, type APIRequestContext, type Page } from './fixtures';

const EMAIL_PROMPT = 'send_email {"to": "a@example.com", "subject": "Hi", "body": "Hello."}';

async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** Starts a run through the API and waits until it is `status`; returns its id. */
async function runUntil(request: APIRequestContext, data: object, status: string): Promise<string> {
  const created = await request.post('/api/runs', { data });
  expect(created.status(), await created.text()).toBe(201);
  const id = (await created.json()).id as string;
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status, { timeout: 15_000 })
    .toBe(status);
  return id;
}

const pausedRun = (request: APIRequestContext) =>
  runUntil(request, { initial_prompt: EMAIL_PROMPT, tools: ['send_email'] }, 'paused');

async function openTrace(page: Page, id: string) {
  await page.goto(`/runs/${encodeURIComponent(id)}`);
  await hydrated(page);
}

/** Whether the focus is inside the element matched by `selector`. */
async function focusWithin(page: Page, selector: string): Promise<boolean> {
  return page.evaluate((s) => !!document.activeElement?.closest(s), selector);
}

test('a paused run is approved with `a` then `a` again, and the change is announced', async ({ page, request }) => {
  const id = await pausedRun(request);
  await openTrace(page, id);
  await expect(page.getByTestId('run-status')).toHaveText('paused');
  const card = page.getByTestId('approval-card');
  await expect(card).toHaveCount(1);
  // With nothing focused, `a` and `r` act on the first card: it is marked.
  await expect(card).toHaveAttribute('data-kbd-target', '');
  await expect(card.getByTestId('approval-kbd-hint')).toBeVisible();
  const announcer = page.getByTestId('run-announcer');
  await expect(announcer).toHaveAttribute('aria-live', 'polite');
  await expect(announcer, 'nothing is announced on load').toHaveText('');

  // `a` alone decides nothing: it moves to Approve and asks to confirm.
  await page.keyboard.press('a');
  await expect(card).toHaveAttribute('data-confirm-approve', '');
  await expect(card.getByTestId('approve-confirm-hint')).toBeVisible();
  await expect(card.getByTestId('approve-button')).toBeFocused();
  // Escape gives up: the card has the focus again, and the run still waits.
  await page.keyboard.press('Escape');
  await expect(card).toBeFocused();
  await expect(card).not.toHaveAttribute('data-confirm-approve', '');
  await expect(card.getByTestId('approve-confirm-hint')).toBeHidden();
  await page.waitForTimeout(300);
  await expect(page.getByTestId('run-status')).toHaveText('paused');
  await page.keyboard.press('a');
  await page.keyboard.press('a');
  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  await openCall(page, 'send_email');
  const decision = page.locator('[data-testid="tool-call"][data-tool="send_email"]').getByTestId('approval-decision');
  await expect(decision).toHaveAttribute('data-decision', 'approved');
  await expect(announcer).toHaveText('Run finished (done).');
});

test('`r` asks for a reason first; Escape gives up, Enter in the reason rejects', async ({ page, request }) => {
  const id = await pausedRun(request);
  await openTrace(page, id);
  const card = page.getByTestId('approval-card');
  const reason = card.getByTestId('reject-reason');

  // `r` only moves to the reason field: nothing is rejected yet.
  await page.keyboard.press('r');
  await expect(reason).toBeFocused();
  await expect(reason, 'the `r` was not typed into the field').toHaveValue('');
  await expect(card.getByTestId('reject-confirm-hint')).toBeVisible();
  await page.waitForTimeout(300);
  expect((await (await request.get(`/api/runs/${id}`)).json()).status).toBe('paused');

  // Escape: back to the card, still undecided.
  await page.keyboard.press('Escape');
  await expect(card).toBeFocused();
  await expect(page.getByTestId('run-status')).toHaveText('paused');

  // Again, with a reason typed: its letters (a, r, j, o…) are not shortcuts.
  await page.keyboard.press('r');
  await expect(reason).toBeFocused();
  await page.keyboard.type('not a good idea, jo');
  await expect(reason).toHaveValue('not a good idea, jo');
  await expect(page.getByTestId('run-status')).toHaveText('paused');
  await page.keyboard.press('Enter');

  await expect(page.getByTestId('run-status')).toHaveText('done', { timeout: 15_000 });
  await openCall(page, 'send_email');
  const decision = page.locator('[data-testid="tool-call"][data-tool="send_email"]').getByTestId('approval-decision');
  await expect(decision).toHaveAttribute('data-decision', 'rejected');
  await expect(decision.getByTestId('decision-comment')).toHaveText('not a good idea, jo');
});

test('in the inbox `a` acts on the focused card, not the first', async ({ page, request }) => {
  const first = await pausedRun(request);
  const second = await pausedRun(request);
  try {
    await inboxFocusedCard(page, request, first, second);
  } finally {
    // Nothing of this spec is left waiting in the inbox of the specs after it.
    for (const id of [first, second]) await request.post(`/api/runs/${id}/cancel`);
  }
});

async function inboxFocusedCard(page: Page, request: APIRequestContext, first: string, second: string) {
  await page.goto('/approvals');
  await hydrated(page);
  const cardOf = (id: string) =>
    page.getByTestId('approval-card').filter({ has: page.locator(`a[href="/runs/${encodeURIComponent(id)}"]`) });
  await expect(cardOf(first)).toHaveCount(1);
  await expect(cardOf(second)).toHaveCount(1);
  await expect(page.getByTestId('approval-card').first()).toHaveAttribute('data-kbd-target', '');

  // Tab from the first card to the second (each card is one tab stop, its controls the next).
  await cardOf(first).focus();
  await expect(cardOf(first)).toHaveAttribute('data-kbd-target', '');
  // (Call ids repeat across runs: the card is told by its run.)
  const inSecond = () => cardOf(second).evaluate((card) => card.contains(document.activeElement));
  for (let i = 0; i < 40 && !(await inSecond()); i++) {
    await page.keyboard.press('Tab');
  }
  expect(await inSecond(), 'Tab reached the second card').toBe(true);
  await expect(cardOf(second)).toHaveAttribute('data-kbd-target', '');
  await expect(cardOf(first)).not.toHaveAttribute('data-kbd-target', '');
  // The focus may be on a control of the card: leave the field, if it is one.
  if (await page.evaluate(() => ['INPUT', 'TEXTAREA'].includes(document.activeElement?.tagName ?? ''))) {
    await cardOf(second).focus();
  }
  await page.keyboard.press('a');
  await page.keyboard.press('a');
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${second}`)).json()).status, { timeout: 15_000 })
    .toBe('done');
  expect((await (await request.get(`/api/runs/${first}`)).json()).status).toBe('paused');
}

test('a trace is walked with `j`/`k`, folded with `o`, and searched with `/`', async ({ page, request }) => {
  const id = await runUntil(request, { initial_prompt: 'What is 6 * 7?', tools: ['calculator'] }, 'done');
  await openTrace(page, id);
  // The detail pane shows one step at a time: `j`/`k` move it.
  await expect(page.getByTestId('tree-step')).toHaveCount(2);
  const step = (i: number) => page.locator(`#steps details.step[data-index="${i}"]`);
  const summaryFocused = (i: number) => expect(step(i).locator(':scope > summary')).toBeFocused();

  await page.keyboard.press('j');
  await expect(step(0)).toHaveAttribute('data-selected', 'true');
  await summaryFocused(0);
  await page.keyboard.press('j');
  await expect(step(1)).toHaveAttribute('data-selected', 'true');
  await expect(step(0)).toHaveCount(0);
  await summaryFocused(1);
  await page.keyboard.press('k');
  await expect(step(0)).toHaveAttribute('data-selected', 'true');
  await summaryFocused(0);

  // `o` folds and unfolds the current step; Enter on its summary too.
  await expect(step(0)).toHaveAttribute('open', '');
  await page.keyboard.press('o');
  await expect(step(0)).not.toHaveAttribute('open', '');
  await page.keyboard.press('o');
  await expect(step(0)).toHaveAttribute('open', '');
  await page.keyboard.press('Enter');
  await expect(step(0)).not.toHaveAttribute('open', '');
  await page.keyboard.press('Enter');
  await expect(step(0)).toHaveAttribute('open', '');

  // `/` moves to the search field; what is typed there is text, not shortcuts.
  await page.keyboard.press('/');
  const search = page.getByTestId('trace-search');
  await expect(search).toBeFocused();
  await page.keyboard.type('calculator');
  await expect(search).toHaveValue('calculator');
  await expect(page.getByTestId('search-count')).toContainText('match', { timeout: 10_000 });
  await expect(step(0), 'the letters typed (o, a, r…) did nothing').toHaveAttribute('data-selected', 'true');
  await expect(step(0)).toHaveAttribute('open', '');
});

test('`?` opens the labelled overlay and Escape closes it; `g` sequences navigate; fields swallow shortcuts', async ({ page }) => {
  await page.goto('/runs');
  await hydrated(page);
  const link = page.locator('nav a[href="/playground"]');
  await link.focus();

  await page.keyboard.press('?');
  const dialog = page.getByRole('dialog', { name: 'Keyboard shortcuts' });
  await expect(dialog).toBeVisible();
  expect(await focusWithin(page, '[data-testid="shortcuts-dialog"]'), 'the focus moved into the overlay').toBe(true);
  await expect(dialog).toContainText('Go to approvals');
  // While it is open, other shortcuts do nothing.
  await page.keyboard.press('g');
  await page.keyboard.press('a');
  await expect(page).toHaveURL(/\/runs$/);
  await page.keyboard.press('Escape');
  await expect(dialog).toBeHidden();
  await expect(link, 'the focus is back where it was').toBeFocused();

  await page.keyboard.press('g');
  await page.keyboard.press('a');
  await expect(page).toHaveURL(/\/approvals$/);
  await page.keyboard.press('g');
  await page.keyboard.press('p');
  await expect(page).toHaveURL(/\/playground$/);
  await hydrated(page);

  // Typing in a field: no shortcut fires.
  const prompt = page.getByTestId('prompt');
  await prompt.focus();
  await page.keyboard.type('g r ?');
  await expect(prompt).toHaveValue('g r ?');
  await expect(page).toHaveURL(/\/playground$/);
  await expect(dialog).toBeHidden();
  // Nor with Ctrl, Alt or Meta held.
  await page.locator('body').focus();
  await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  await page.keyboard.press('Alt+g');
  await page.keyboard.press('Alt+r');
  await expect(page).toHaveURL(/\/playground$/);
  // A `g` left waiting too long is forgotten.
  await page.keyboard.press('g');
  await page.waitForTimeout(1_700);
  await page.keyboard.press('r');
  await expect(page).toHaveURL(/\/playground$/);
  await page.keyboard.press('g');
  await page.keyboard.press('r');
  await expect(page).toHaveURL(/\/runs$/);
});

test.describe('on a phone (390 × 844)', () => {
  test.use({ viewport: { width: 390, height: 844 } });

  /** The page does not scroll sideways as a whole. */
  async function noPageScroll(page: Page) {
    const { scrollWidth, innerWidth } = await page.evaluate(() => ({
      scrollWidth: document.documentElement.scrollWidth,
      innerWidth: window.innerWidth,
    }));
    expect(scrollWidth, `page is ${scrollWidth}px wide in a ${innerWidth}px window`).toBeLessThanOrEqual(innerWidth);
  }

  test('the trace and approvals pages fit; the card, the navigation and the charts stay usable', async ({ page, request }) => {
    const id = await pausedRun(request);
    try {
      await phonePages(page, request, id);
    } finally {
      await request.post(`/api/runs/${id}/cancel`);
    }
  });

  async function phonePages(page: Page, request: APIRequestContext, id: string) {
    await openTrace(page, id);
    await expect(page.getByTestId('approval-card')).toHaveCount(1);
    await expect(page.getByTestId('token-chart').locator('svg')).toBeVisible({ timeout: 15_000 });
    await noPageScroll(page);
    // The approve and reject controls are inside the window.
    for (const testid of ['approve-button', 'reject-button', 'reject-reason']) {
      const box = await page.getByTestId(testid).boundingBox();
      expect(box, testid).not.toBeNull();
      expect(box!.x, testid).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width, testid).toBeLessThanOrEqual(390);
    }
    // The timeline and the token chart scroll inside their own boxes.
    for (const box of ['.timeline-scroll', '.token-chart .chart-scroll']) {
      const el = page.locator(box).first();
      await expect(el).toBeVisible();
      const fits = await el.evaluate((e) => e.getBoundingClientRect().right <= window.innerWidth);
      expect(fits, `${box} stays inside the window`).toBe(true);
    }
    // The navigation folds behind "Menu"; opened, every link is on the page, inside the window.
    const nav = page.locator('header.topbar nav.nav');
    await expect(nav).toBeHidden();
    await page.getByText('Menu', { exact: true }).click();
    await expect(nav).toBeVisible();
    expect(await nav.evaluate((n) => n.getBoundingClientRect().right <= window.innerWidth)).toBe(true);
    const audit = nav.locator('a[href="/audit"]');
    await audit.scrollIntoViewIfNeeded();
    await expect(audit).toBeInViewport();
    await noPageScroll(page);
    await page.getByText('Menu', { exact: true }).click();
    await expect(nav).toBeHidden();

    // The runs list's table scrolls inside its wrapper.
    await page.goto('/runs');
    await hydrated(page);
    await expect(page.locator('table.runs')).toBeVisible();
    await noPageScroll(page);

    await page.goto('/approvals');
    await hydrated(page);
    await expect(page.getByTestId('approval-card').first()).toBeVisible();
    await noPageScroll(page);
    const card = page.getByTestId('approval-card').filter({ has: page.locator(`a[href="/runs/${encodeURIComponent(id)}"]`) });
    await card.getByTestId('reject-reason').fill('not from a phone');
    await card.getByTestId('reject-button').click();
    await expect
      .poll(async () => (await (await request.get(`/api/runs/${id}`)).json()).status, { timeout: 15_000 })
      .toBe('done');
  }
});

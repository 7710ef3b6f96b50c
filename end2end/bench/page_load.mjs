// How fast a page of runlens becomes interactive in a real browser, printed
// beside its target. Run by scripts/bench-page.sh, which builds the app,
// makes the runs, adds a user and starts the server.
//
//   node bench/page_load.mjs URL LOADS [--label TEXT] [--target MS] [--mbit N] [--repeat]
//                                      [--memory MB] [--scroll SELECTOR --frames MS]
//
// Every load is a fresh browser context signed in as BENCH_USER /
// BENCH_PASSWORD (no HTTP cache, no compiled-wasm cache): a first visit.
// With --repeat the context first loads the page once, uncounted, so the
// counted load is a second visit (the bundle from the browser's cache).
// With --mbit N the network is throttled to N Mbit/s down and up with 20 ms
// of latency (Chromium's own emulation). Per load it reads the browser's
// own timings:
//   server   first byte of the page (the server rendered it by then)
//   parsed   DOMContentLoaded (HTML parsed, first layout done)
//   wasm     the browser bundle received (it compiles while it streams)
//   ready    `data-hydrated` set on <body>: the page is interactive
// and prints each load, then the median, best and worst of `ready`.
// With --memory MB, once the page is interactive and its deferred loads have
// had a second and a half, the page's memory: the JavaScript heap in use
// plus every WebAssembly memory (found with the DevTools protocol), beside
// MB as the target. With --scroll SELECTOR, the element is then scrolled
// through from top to bottom in 120 animation frames, and the longest frame
// is printed beside --frames MS as the target.
import { chromium } from '@playwright/test';

const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args.splice(i, 2)[1];
};
const repeat = args.includes('--repeat') && args.splice(args.indexOf('--repeat'), 1).length > 0;
const label = option('--label');
const target = option('--target');
const mbit = option('--mbit');
const memoryTarget = option('--memory');
const scrollSelector = option('--scroll');
const frameTarget = option('--frames');
const [url, loadsArg] = args;
if (!url) {
  console.error('usage: node bench/page_load.mjs URL LOADS [--label TEXT] [--target MS] [--mbit N] [--repeat] ' +
    '[--memory MB] [--scroll SELECTOR --frames MS]');
  process.exit(2);
}
const loads = Number(loadsArg ?? 9);
const origin = new URL(url).origin;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

async function signIn(context) {
  const user = process.env.BENCH_USER;
  if (!user) return;
  const res = await context.request.post(`${origin}/login`, {
    form: { username: user, password: process.env.BENCH_PASSWORD ?? '' },
    headers: { Origin: origin },
    maxRedirects: 0,
  });
  if (res.status() !== 303) throw new Error(`signing in as ${user}: HTTP ${res.status()}`);
}

async function throttle(page) {
  if (!mbit) return;
  const cdp = await page.context().newCDPSession(page);
  const bytesPerSecond = (Number(mbit) * 1e6) / 8;
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false, latency: 20, downloadThroughput: bytesPerSecond, uploadThroughput: bytesPerSecond,
  });
}

/** The page's memory in bytes: JS heap in use plus all WebAssembly memories. */
async function pageMemory(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  await cdp.send('HeapProfiler.collectGarbage');
  const { metrics } = await cdp.send('Performance.getMetrics');
  const heap = metrics.find((m) => m.name === 'JSHeapUsedSize').value;
  const proto = await cdp.send('Runtime.evaluate', { expression: 'WebAssembly.Memory.prototype' });
  const { objects } = await cdp.send('Runtime.queryObjects', { prototypeObjectId: proto.result.objectId });
  const sum = await cdp.send('Runtime.callFunctionOn', {
    objectId: objects.objectId,
    functionDeclaration: 'function () { return this.reduce((n, m) => n + m.buffer.byteLength, 0); }',
    returnByValue: true,
  });
  await cdp.detach();
  return { heap, wasm: sum.result.value };
}

/** Scrolls `selector` top to bottom in 120 frames; the frames' lengths (ms). */
async function scrollFrames(page, selector) {
  return page.evaluate(async (selector) => {
    const el = document.querySelector(selector);
    if (!el) throw new Error(`nothing matches ${selector}`);
    const frames = 120;
    const step = (el.scrollHeight - el.clientHeight) / frames;
    const times = [];
    let last = await new Promise(requestAnimationFrame);
    for (let i = 1; i <= frames; i++) {
      el.scrollTop = Math.round(step * i);
      const now = await new Promise(requestAnimationFrame);
      times.push(now - last);
      last = now;
    }
    return times;
  }, selector);
}

const ready = [];
const memories = [];
const worstFrames = [];
try {
  for (let i = 0; i < loads; i++) {
    const context = await browser.newContext();
    await signIn(context);
    const page = await context.newPage();
    await throttle(page);
    // Timestamp the moment hydration marks the page, on the page's own clock.
    await page.addInitScript(() => {
      new MutationObserver((_, observer) => {
        if (document.body?.getAttribute('data-hydrated') === 'true') {
          window.__readyAt = performance.now();
          observer.disconnect();
        }
      }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
    });
    if (repeat) {
      await page.goto(url);
      await page.waitForSelector('body[data-hydrated="true"]', { timeout: 120_000 });
    }
    const response = await page.goto(url, { waitUntil: 'commit' });
    if (new URL(page.url()).pathname !== new URL(url).pathname || response.status() !== 200) {
      throw new Error(`${url} answered ${response.status()} at ${page.url()}: not the page to measure`);
    }
    await page.waitForSelector('body[data-hydrated="true"]', { timeout: 120_000 });
    const t = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const wasm = performance.getEntriesByType('resource').find((r) => r.name.endsWith('.wasm'));
      return {
        server: nav.responseStart,
        parsed: nav.domContentLoadedEventEnd,
        wasm: wasm ? wasm.responseEnd : NaN,
        wasmBytes: wasm ? wasm.transferSize : 0,
        ready: window.__readyAt,
        nodes: document.getElementsByTagName('*').length,
        htmlBytes: nav.encodedBodySize,
      };
    });
    ready.push(t.ready);
    let extra = '';
    if (memoryTarget) {
      await page.waitForTimeout(1500);
      const m = await pageMemory(page);
      memories.push(m.heap + m.wasm);
      extra += `  memory ${((m.heap + m.wasm) / 1048576).toFixed(0)} MB (heap ${(m.heap / 1048576).toFixed(0)}, wasm ${(m.wasm / 1048576).toFixed(0)})`;
    }
    if (scrollSelector) {
      const times = await scrollFrames(page, scrollSelector);
      const worst = Math.max(...times);
      worstFrames.push(worst);
      extra += `  scrolled in ${times.length} frames, longest ${Math.round(worst)} ms`;
    }
    const f = (x) => `${Math.round(x)} ms`.padStart(8);
    const wasmMb = t.wasmBytes ? `${(t.wasmBytes / 1048576).toFixed(2)} MB` : 'from cache';
    console.log(`load ${i + 1}: server ${f(t.server)}  parsed ${f(t.parsed)}  wasm ${f(t.wasm)}  ready ${f(t.ready)}` +
      `  (page ${(t.htmlBytes / 1024).toFixed(0)} KB, wasm over the network ${wasmMb}, ${t.nodes} elements once ready)${extra}`);
    await context.close();
  }
} finally {
  await browser.close();
}
ready.sort((a, b) => a - b);
const what = label ?? url;
const goal = target ? `target ≤ ${target} ms` : 'no target';
console.log(`${what}, interactive: ${Math.round(ready[ready.length >> 1])} ms median, ` +
  `${Math.round(ready[0])} ms best, ${Math.round(ready[ready.length - 1])} ms worst (${loads} loads; ${goal})`);
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
if (memoryTarget) {
  console.log(`${what}, memory: ${(median(memories) / 1048576).toFixed(0)} MB median, ` +
    `${(Math.max(...memories) / 1048576).toFixed(0)} MB most (target ≤ ${memoryTarget} MB)`);
}
if (scrollSelector) {
  console.log(`${what}, scrolling ${scrollSelector}: longest frame ${Math.round(median(worstFrames))} ms median, ` +
    `${Math.round(Math.max(...worstFrames))} ms worst (target ≤ ${frameTarget ?? '?'} ms)`);
}

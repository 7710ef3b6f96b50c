// The 10,000-step trace page's load time in a real browser, printed (issue 5:
// "first screen interactive in under 1 s"). Run by scripts/bench-page.sh,
// which builds the app, makes the run and starts the server.
//
//   node bench/page_load.mjs URL [LOADS]
//
// Every load is a fresh browser context (no HTTP cache, no compiled-wasm
// cache): a first visit. Per load it reads the browser's own timings:
//   server   first byte of the page (the server rendered it by then)
//   parsed   DOMContentLoaded (HTML parsed, first layout done)
//   wasm     the browser bundle received (it compiles while it streams)
//   ready    `data-hydrated` set on <body>: the page is interactive
// and prints each load, then the median and best of `ready`.
import { chromium } from '@playwright/test';

const [url, loadsArg] = process.argv.slice(2);
if (!url) {
  console.error('usage: node bench/page_load.mjs URL [LOADS]');
  process.exit(2);
}
const loads = Number(loadsArg ?? 9);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const ready = [];
try {
  for (let i = 0; i < loads; i++) {
    const context = await browser.newContext();
    const page = await context.newPage();
    // Timestamp the moment hydration marks the page, on the page's own clock.
    await page.addInitScript(() => {
      new MutationObserver((_, observer) => {
        if (document.body?.getAttribute('data-hydrated') === 'true') {
          window.__readyAt = performance.now();
          observer.disconnect();
        }
      }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
    });
    await page.goto(url, { waitUntil: 'commit' });
    await page.waitForSelector('body[data-hydrated="true"]', { timeout: 60_000 });
    const t = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const wasm = performance.getEntriesByType('resource').find((r) => r.name.endsWith('.wasm'));
      return {
        server: nav.responseStart,
        parsed: nav.domContentLoadedEventEnd,
        wasm: wasm ? wasm.responseEnd : NaN,
        wasmBytes: wasm ? wasm.encodedBodySize : 0,
        ready: window.__readyAt,
        nodes: document.getElementsByTagName('*').length,
        htmlBytes: nav.encodedBodySize,
      };
    });
    ready.push(t.ready);
    const f = (x) => `${Math.round(x)} ms`.padStart(8);
    console.log(`load ${i + 1}: server ${f(t.server)}  parsed ${f(t.parsed)}  wasm ${f(t.wasm)}  ready ${f(t.ready)}` +
      `  (page ${(t.htmlBytes / 1024).toFixed(0)} KB, wasm ${(t.wasmBytes / 1048576).toFixed(1)} MB, ${t.nodes} elements once ready)`);
    await context.close();
  }
} finally {
  await browser.close();
}
ready.sort((a, b) => a - b);
console.log(`10,000-step trace page, first screen interactive: ${Math.round(ready[ready.length >> 1])} ms median, ` +
  `${Math.round(ready[0])} ms best, ${Math.round(ready[ready.length - 1])} ms worst (${loads} fresh loads; target < 1000 ms)`);

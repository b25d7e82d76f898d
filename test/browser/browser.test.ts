/**
 * The browser example (examples/browser) in headless Chromium: esbuild
 * bundles the page (arrow-device for platform=browser, koffi and Node
 * builtins left out), a node:http server on 127.0.0.1 serves it, and Debian's
 * chromium, driven by playwright-core, loads it. The page reads a Parquet
 * file with parquet-wasm, imports the FFI structs from parquet-wasm's memory
 * with arrow-device and renders them; the test checks the rendered schema,
 * values and release counts, and takes a screenshot. The page then moves the
 * table to the GPU (WebGPU, Chromium's --enable-unsafe-webgpu: SwiftShader
 * where there is no GPU) through the C Device Data Interface, runs a compute
 * shader on a column and copies the batches back; the test prints the
 * adapter and checks the results. Without WebGPU that test skips with the
 * reason, and fails under ARROW_DEVICE_BROWSER_REQUIRED=1 or WEBGPU_REQUIRED=1.
 *
 * Needs /usr/bin/chromium (Debian package `chromium`; another binary with
 * ARROW_DEVICE_CHROMIUM) and playwright-core; skips with the reason otherwise.
 * ARROW_DEVICE_BROWSER_REQUIRED=1 makes that a failure (CI).
 * ARROW_DEVICE_KEEP_BROWSER_TMP=1 keeps the temp folder (bundle, screenshot).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { buildExample, type BuiltExample } from '../../examples/browser/build.js';
import { sampleRow, SAMPLE_ROWS } from '../../examples/browser/sample.js';
import { serveDir, type Served } from '../../examples/browser/serve.js';

const CHROMIUM = process.env.ARROW_DEVICE_CHROMIUM ?? '/usr/bin/chromium';
const BATCH_SIZE = 256;
const BATCHES = Math.ceil(SAMPLE_ROWS / BATCH_SIZE);

let playwright: typeof import('playwright-core') | undefined;
try {
  playwright = await import('playwright-core');
} catch {
  // reported below
}
const skip = !existsSync(CHROMIUM)
  ? `${CHROMIUM} not found: install the Debian package chromium (apt-get install -y chromium)`
  : !playwright
    ? 'playwright-core is not installed (npm install)'
    : false;
if (skip && process.env.ARROW_DEVICE_BROWSER_REQUIRED) throw new Error(`the browser tests cannot run: ${skip}`);
if (skip) console.log(`# skipping the browser tests: ${skip}`);

/** The flags Chromium runs with (Playwright passes --user-data-dir itself, from launchPersistentContext). */
const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--js-flags=--expose-gc', // lets the page prove the zero-copy batches are released once collected
  '--enable-unsafe-webgpu', // WebGPU on Linux (SwiftShader where there is no GPU, even with --disable-gpu); needs a secure context: http://127.0.0.1
];

const on = (v: string | undefined): boolean => v !== undefined && v !== '' && v !== '0';
/** A browser without WebGPU fails the WebGPU test instead of skipping it. */
const WEBGPU_REQUIRED = on(process.env.ARROW_DEVICE_BROWSER_REQUIRED) || on(process.env.WEBGPU_REQUIRED);

describe('browser example: parquet-wasm → arrow-device in headless Chromium', { skip, timeout: 180_000 }, () => {
  let tmp: string;
  let built: BuiltExample;
  let server: Served;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'arrow-device-browser-'));
    built = await buildExample(join(tmp, 'site'));
    server = await serveDir(built.dir);
    context = await playwright!.chromium.launchPersistentContext(join(tmp, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: FLAGS,
      viewport: { width: 1100, height: 1000 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console.error: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.url()}`);
    });
  });

  after(async () => {
    await context?.close();
    await server?.close();
    if (!tmp) return;
    if (process.env.ARROW_DEVICE_KEEP_BROWSER_TMP) console.log(`# kept ${tmp}`);
    else rmSync(tmp, { recursive: true, force: true });
  });

  async function finished(): Promise<string> {
    await page.waitForSelector('body[data-state="done"], body[data-state="error"]', { timeout: 60_000 });
    return page.locator('body').getAttribute('data-state') as Promise<string>;
  }

  const text = (sel: string): Promise<string> => page.locator(sel).innerText();

  test('the bundle leaves out koffi and the Node builtins', () => {
    const inputs = Object.keys(built.metafile.inputs);
    assert.ok(inputs.some((i) => i.endsWith('src/memory/wasm.ts')), 'the wasm backend is in');
    assert.ok(inputs.some((i) => i.includes('node_modules/parquet-wasm/')), 'parquet-wasm glue is in');
    assert.deepEqual(inputs.filter((i) => /koffi/.test(i)), [], 'no koffi');
    assert.deepEqual(inputs.filter((x) => x.includes('node:')), [], 'no Node builtin (package.json "browser" maps src/platform/node.ts away)');
    assert.ok(inputs.some((x) => x.endsWith('src/platform/browser.ts')), 'the browser platform file is bundled');
  });

  test('reads the Parquet file and renders schema, rows and release counts', async () => {
    await page.goto(`${server.url}index.html?batchSize=${BATCH_SIZE}&rows=12`);
    const state = await finished();
    await page.screenshot({ path: join(tmp, 'page.png'), fullPage: true });
    console.log(`# screenshot: ${join(tmp, 'page.png')}`);
    assert.equal(state, 'done', await text('#status'));
    assert.deepEqual(problems, []);

    assert.equal(await text('#num-rows'), String(SAMPLE_ROWS));
    assert.equal(await text('#num-cols'), '6');
    assert.equal(await text('#num-batches'), String(BATCHES));

    const schema = await page.locator('#schema tbody tr').evaluateAll((trs) =>
      trs.map((tr) => Array.from(tr.querySelectorAll('td')).slice(1).map((td) => td.textContent).join(' ')));
    assert.deepEqual(schema, [
      'id Int32 false',
      'name Utf8 true',
      'city Dictionary<Int32, Utf8> true',
      'score Float64 true',
      'big Int64 false',
      'flag Bool true',
    ]);

    const header = await page.locator('#rows thead th').allInnerTexts();
    assert.deepEqual(header, ['#', 'id', 'name', 'city', 'score', 'big', 'flag']);
    const rows = await page.locator('#rows tbody tr').evaluateAll((trs) =>
      trs.map((tr) => Array.from(tr.querySelectorAll('td')).map((td) => td.textContent)));
    assert.equal(rows.length, 12);
    rows.forEach((cells, i) => {
      const want = sampleRow(i);
      assert.deepEqual(cells, [String(i), want.id, want.name, want.city, want.score, want.big, want.flag], `row ${i}`);
    });

    // release, through parquet-wasm's function table: the schema once per import; each batch
    // once, at import with copy: true, and after collection for the zero-copy import.
    assert.equal(await text('#release-schema'), '1 call at import (copy: true import: 1)');
    assert.equal(await text('#release-copy'), `${BATCHES} of ${BATCHES} batches, at import`);
    assert.equal(await text('#release-zero-copy'), `0 at import, ${BATCHES} of ${BATCHES} batches after collection`);
    assert.equal(await text('#release-explicit'), `${BATCHES} of ${BATCHES} batches at release(); a read after it throws`);
    assert.equal(await text('#copy-matches'), `yes (${SAMPLE_ROWS} rows compared)`);
    for (const id of ['release-schema', 'release-copy', 'release-zero-copy', 'copy-matches']) {
      assert.equal(await page.locator(`#${id}`).getAttribute('class'), 'ok', id);
    }
  });

  test('a file chosen with the file input is read the same way', async () => {
    await page.goto(`${server.url}index.html?rows=3`);
    await finished();
    // The first run ends with the same status text the second one will: clear it, so the wait below
    // can only be satisfied by the run the file input starts (else it races that run's first steps).
    await page.evaluate(() => {
      document.querySelector('#status')!.textContent = '';
    });
    await page.locator('#file').setInputFiles(join(built.dir, 'sample.parquet'));
    await page.waitForFunction(() => document.querySelector('#status')?.textContent === 'done: sample.parquet', undefined, { timeout: 60_000 });
    assert.equal(await text('#source'), 'sample.parquet');
    assert.equal(await text('#num-rows'), String(SAMPLE_ROWS));
    assert.equal(await text('#num-batches'), '1');
    assert.equal(await text('#release-zero-copy'), '0 at import, 1 of 1 batches after collection');
    assert.deepEqual(problems, []);
  });

  test('WebGPU: the batches go to the GPU (structs in wasm memory), a compute shader aggregates a column where it is, they come back, all released', async (t) => {
    await page.goto(`${server.url}index.html?batchSize=${BATCH_SIZE}&rows=3`);
    assert.equal(await finished(), 'done', await text('#status'));
    const state = await page.locator('body').getAttribute('data-webgpu');
    const status = await text('#webgpu-status');
    if (state === 'skipped') {
      const gpu = await page.evaluate(() => ({ gpu: 'gpu' in navigator, secure: isSecureContext }));
      const reason = `${status} (navigator.gpu ${gpu.gpu ? 'present' : 'missing'}, secure context: ${gpu.secure})`;
      if (WEBGPU_REQUIRED) assert.fail(`WebGPU is required (ARROW_DEVICE_BROWSER_REQUIRED or WEBGPU_REQUIRED) but the page says: ${reason}`);
      console.log(`# WebGPU part skipped: ${reason}`);
      t.skip(reason);
      return;
    }
    const adapter = await text('#webgpu-adapter');
    console.log(`# WebGPU adapter (Chromium): ${adapter}`);
    for (const id of ['webgpu-column', 'webgpu-result', 'webgpu-roundtrip', 'webgpu-release', 'webgpu-accounting']) console.log(`# ${id}: ${await text(`#${id}`)}`);
    assert.equal(state, 'done', status);
    assert.deepEqual(problems, []);

    // The sample's id column, 0..SAMPLE_ROWS-1, every value valid: the shader's count and sums, computed here.
    const ids = Array.from({ length: SAMPLE_ROWS }, (_, i) => Number(sampleRow(i).id));
    const by3 = ids.filter((v) => v % 3 === 0);
    const sum = (xs: number[]): number => xs.reduce((a, b) => (a + b) | 0, 0);
    assert.equal(await text('#webgpu-column'), `id (Int32), ${BATCHES} batches, structs in the page's own wasm memory (webgpu-structs)`);
    assert.equal(await text('#webgpu-result'), `GPU: ${ids.length} valid, sum ${sum(ids)}; ${by3.length} with id % 3 == 0, sum ${sum(by3)} (JS: the same)`);
    assert.equal(await text('#webgpu-roundtrip'), `yes (${SAMPLE_ROWS} rows compared)`);
    assert.equal(await text('#webgpu-release'), `${BATCHES} of ${BATCHES} releases through the function table; ${BATCHES} GPUBuffers destroyed; ${BATCHES} address ranges ended`);
    // Everything of the page's earlier steps is released by then too (the zero-copy batches after collection): all zero.
    assert.equal(await text('#webgpu-accounting'), 'liveExports 0, liveImports 0, liveHandles 0, pinnedBytes 0');
    for (const id of ['webgpu-result', 'webgpu-roundtrip', 'webgpu-release', 'webgpu-accounting', 'webgpu-status']) {
      assert.equal(await page.locator(`#${id}`).getAttribute('class'), 'ok', id);
    }
  });

  test('a missing file is reported on the page', async () => {
    await page.goto(`${server.url}index.html?file=nope.parquet`);
    assert.equal(await finished(), 'error');
    assert.match(await text('#status'), /GET nope\.parquet: 404/);
    problems.length = 0; // the 404 (and Chromium's console error about it) were expected
  });
});

/**
 * Builds the browser example into a folder: `main.js` (the page script and
 * arrow-device, apache-arrow and parquet-wasm's glue, bundled by esbuild for
 * platform=browser), `index.html`, `parquet_wasm_bg.wasm` and
 * `sample.parquet` (written by parquet-wasm from an arrow-js table).
 *
 *   node --import tsx examples/browser/build.ts [outdir] [--serve [port]]
 *
 * outdir defaults to examples/browser/dist. With --serve it then serves the
 * folder on http://127.0.0.1:<port>/ (port 8080 by default) until killed.
 *
 * arrow-device's Node-only parts (the koffi backend, CUDA) import Node
 * builtins only through src/platform/node.ts, which package.json's "browser"
 * field swaps for src/platform/browser.ts: esbuild (platform=browser) then
 * bundles no Node builtin and no koffi.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Metafile } from 'esbuild';
import { sampleParquet } from './sample.js';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

export interface BuiltExample {
  dir: string;
  /** esbuild's metafile of the bundle: which inputs went in. */
  metafile: Metafile;
}

export async function buildExample(outdir: string): Promise<BuiltExample> {
  mkdirSync(outdir, { recursive: true });
  const result = await build({
    entryPoints: [join(here, 'main.ts')],
    outfile: join(outdir, 'main.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    sourcemap: true,
    metafile: true,
    logLevel: 'warning',
  });
  copyFileSync(join(here, 'index.html'), join(outdir, 'index.html'));
  copyFileSync(require.resolve('parquet-wasm/esm/parquet_wasm_bg.wasm'), join(outdir, 'parquet_wasm_bg.wasm'));
  writeFileSync(join(outdir, 'sample.parquet'), sampleParquet());
  return { dir: outdir, metafile: result.metafile };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const serveAt = args.indexOf('--serve');
  const port = serveAt >= 0 && /^\d+$/.test(args[serveAt + 1] ?? '') ? Number(args[serveAt + 1]) : 8080;
  const outdir = resolve(args.find((a, i) => !a.startsWith('--') && !(serveAt >= 0 && i === serveAt + 1)) ?? join(here, 'dist'));
  const { metafile } = await buildExample(outdir);
  const bytes = metafile.outputs[Object.keys(metafile.outputs).find((o) => o.endsWith('main.js'))!]!.bytes;
  console.log(`built ${outdir} (main.js ${(bytes / 1024).toFixed(0)} KiB, sample.parquet ${readFileSync(join(outdir, 'sample.parquet')).byteLength} bytes)`);
  if (serveAt >= 0) {
    const { serveDir } = await import('./serve.js');
    const server = await serveDir(outdir, port);
    console.log(`serving on ${server.url}index.html?batchSize=256 (Ctrl-C to stop)`);
  }
}

/**
 * The JavaScript of the package: `npm run build` runs tsc for the
 * declarations (dist/**\/*.d.ts, the layout of src/) and then this, which
 * bundles the entry points with esbuild into few files (issue 47): arrow-device,
 * arrow-device/adbc, arrow-device/flechette and arrow-device/flechette/adbc (the flechette
 * entries load no apache-arrow: the chunks they share with the others hold only the
 * target-neutral core).
 *
 * Why: a fresh process pays the module loader per file (resolving each
 * import, reading package.json files, compiling), and the library is some
 * 80 modules: loading them one by one cost about three times loading the
 * same code bundled (bench:startup, CHANGELOG). The entries are split
 * (`splitting`), so `arrow-device/adbc` loads the code it shares with
 * `arrow-device` from a chunk and none of the device, async, wasm or
 * protocol code only `arrow-device` reaches; one copy of every module
 * whichever entries a program imports.
 *
 * - dist/index.js, dist/adbc/index.js, dist/flechette/index.js, dist/flechette/adbc.js, dist/chunks/*.js (minified, in short lines, each with
 *   its source map, which names the files of src/ the package ships): Node.js, Bun and
 *   Deno (ESM; `require` loads it as ESM), every bare import (apache-arrow,
 *   koffi, node:*) left to the runtime.
 * - dist/browser/index.js: `arrow-device` for browser bundlers, with
 *   src/platform/browser.ts in place of src/platform/node.ts (package.json's
 *   `browser` field maps dist/index.js to it, as it maps the source file
 *   for bundlers that build from src/).
 *
 * The entries are src/index.ts and src/adbc/index.ts themselves, so an
 * export added there is in the bundle with no step of its own.
 *
 *   node tools/bundle.mjs
 */
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const common = {
  absWorkingDir: root,
  bundle: true,
  format: 'esm',
  target: 'es2022',
  // apache-arrow and @uwdata/flechette (peers: one copy, the user's), koffi and the runtime's builtins stay imports.
  packages: 'external',
  sourcemap: true,
  // The package ships src/: the maps point at it instead of copying it in.
  sourcesContent: false,
  outdir: join(root, 'dist'),
  outbase: join(root, 'src'),
  logLevel: 'warning',
  // A class or function keeps its own name (esbuild renames one that collides with another module's).
  keepNames: true,
};

await build({
  ...common,
  platform: 'node',
  entryPoints: [join(root, 'src', 'index.ts'), join(root, 'src', 'adbc', 'index.ts'), join(root, 'src', 'flechette', 'index.ts'), join(root, 'src', 'flechette', 'adbc.ts')],
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  // Minified: V8 compiles a module's whole source at load and each function's again on its first call,
  // and both cost by the size of the source (its identifiers most): loading `arrow-device` took about a
  // third less minified, and a fresh process's first query about an eighth less (CHANGELOG). `keepNames`
  // keeps every function's and class's own name, which error stacks show; the source maps give the rest.
  minify: true,
  // Lines of about 120 characters, not one line per file: for an uncaught error Node prints the source line
  // of the throw site, which was the whole 150 KB chunk (issue 53), and a stack's `file:line:column` now has
  // a line to go to. Measured: about 1% more bytes, and a load time equal within the noise (CHANGELOG).
  lineLimit: 120,
});

await build({
  ...common,
  platform: 'browser',
  entryPoints: [{ in: join(root, 'src', 'index.ts'), out: 'browser/index' }],
  // package.json's browser field ("./src/platform/node.js") swaps the platform file, as for examples/browser.
});

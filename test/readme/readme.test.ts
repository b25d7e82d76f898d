/**
 * Every TypeScript code block of README.md and of the guides (docs/*.md)
 * runs here, as written, against
 * real peers built at test time: a C producer (test/ownership/counting.c)
 * for the pointers the blocks import (`schemaPtr`, `arrayPtr`, `arrayPtrs`,
 * `streamPtr`, `deviceArrayPtr`, `deviceStreamPtr`, ...), C consumers for
 * what they export (`nativeLib.consume`, `nativeLib.consume_stream`), and the
 * async C peer's producer thread and consumer (`nativeLib.start_producing`,
 * `nativeConsumerHandler`). Each test is named by file and line
 * (`docs/streams.md block at line 40`).
 *
 * A block fenced ```ts runs; one fenced ```ts quickstart does not (the
 * README's self-contained quick starts, run from the packed tarball by
 * test/package); any other info string on a TypeScript or JavaScript fence
 * fails a test here, so that no block is left unrun by a typo. DOCS_LOG=1
 * prints what each block logs, to check the comments that show output.
 *
 * Peers a block may need, each given only to the blocks that name it, each
 * skipping that block with the reason where it is missing:
 * - 'arrow-device/adbc' (src/adbc): the SQLite driver's path as
 *   `sqliteDriverPath` (`npm run setup:adbc`; ADBC_REQUIRED=1 fails instead);
 * - `gpuDevice`: a WebGPU device (test/webgpu/gpu.ts: Dawn for Node, over
 *   SwiftShader without a GPU; WEBGPU_REQUIRED=1 fails instead);
 * - `DeviceType.CUDA`: a real GPU's CUDA runtime where one is found, else
 *   the simulated runtime (test/device/cuda/sim; ARROW_DEVICE_CUDA_REQUIRED=1
 *   fails where neither is);
 * - `wasmModule`: the exports of a fresh instance of the clang-built wasm32
 *   C peer (test/wasm/peer.c: malloc, free, a growable table,
 *   `sum_int32_column`...);
 * - `parquetBytes`: parquet-wasm (`pw`, its ESM build initialised, and
 *   `wasmExports`, what its init returned) with a small Parquet file.
 *
 * A block may import from 'arrow-device' (the names must be public: this
 * test fails on a name src/index.ts does not export), from
 * 'arrow-device/adbc' and from 'apache-arrow'; all are in scope either way.
 * A block that imports from 'arrow-device/flechette', '.../flechette/adbc'
 * or '@uwdata/flechette' has their names in scope too, over the arrow-js
 * ones where both have a name (docs/flechette.md).
 * A block may also import `Worker` from 'node:worker_threads' (docs/threads.md's
 * pool); a worker file it starts is named relative to the repository root,
 * where the suite runs, and inherits the suite's `--import tsx`.
 * After each block, the C producer must have every array back (nothing
 * leaked, nothing released twice) and our accounting must show no live
 * import or export.
 *
 * Also here: the README is at most 250 lines; every guide about an API has
 * at least one block, and every
 * relative link of README.md and docs/*.md points at a file that exists
 * (and, for a Markdown file, at a heading it has); so does every citation of
 * a guide in the code (`docs/architecture.md#errors` in a comment under
 * src/, test/, tools/, bench/, demo/ or examples/).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { transformSync } from 'esbuild';
import * as Arrow from 'apache-arrow';
import * as WorkerThreads from 'node:worker_threads';
import * as Lib from '../../src/index.js';
import { asyncPeer, peerMissing } from '../async/peer.js';
import { collectUntil } from '../helpers/gc.js';
import { counting, countingMissing } from '../ownership/counting.js';
import * as Adbc from '../../src/adbc/index.js';
import * as Flechette from '@uwdata/flechette';
import * as LibFlechette from '../../src/flechette/index.js';
import * as AdbcFlechette from '../../src/flechette/adbc.js';
import { SQLITE } from '../adbc/drivers.js';
import { openGpu } from '../webgpu/gpu.js';
import { setupCuda } from '../device/cuda/sim/sim.js';
import { cPeer, cPeerSkip, loadParquetWasm } from '../wasm/modules.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The documents whose blocks run: the README, then the guides. */
const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];

/** The guides the README links to, one per job. Those about an API must show it in a block that runs. */
const GUIDES = ['native', 'streams', 'adbc', 'device', 'webgpu', 'async', 'wasm', 'threads', 'protocol', 'validation', 'performance', 'contributing'];
const GUIDES_WITHOUT_BLOCKS = new Set(['performance', 'contributing']);
/** The README's length: what a newcomer reads in five minutes (issue 53 found it at 275). */
const README_MAX_LINES = 250;

interface Block {
  file: string;
  line: number;
  code: string;
}

const CODE_LANG = /^(ts|typescript|tsx|js|javascript|mjs|cjs|jsx)$/;

/** Code blocks fenced so that they would not run, by `${file} line ${n}: ...` (see `tsBlocks`). */
const fenceProblems: string[] = [];

/** The ```ts blocks of a Markdown text, with the line each starts on; ```ts quickstart blocks are left out. */
function tsBlocks(file: string, text: string): Block[] {
  const out: Block[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = /^\s*(`{3,}|~{3,})\s*(.*)$/.exec(lines[i]!);
    if (!fence) continue;
    const info = fence[2]!.trim();
    const start = i + 1;
    let j = start;
    while (j < lines.length && lines[j]!.trim() !== fence[1]) j++;
    i = j;
    const lang = info.split(/\s+/)[0]!;
    if (info === 'ts quickstart') continue;
    if (info === 'ts') out.push({ file, line: start + 1, code: lines.slice(start, j).join('\n') });
    else if (CODE_LANG.test(lang)) fenceProblems.push(`${file} line ${start}: \`\`\`${info}`);
  }
  return out;
}

/** What a block may import from, each module's names. */
const MODULES: Record<string, Record<string, unknown>> = {
  'arrow-device': Lib,
  'apache-arrow': Arrow,
  'arrow-device/adbc': Adbc,
  'arrow-device/flechette': LibFlechette,
  'arrow-device/flechette/adbc': AdbcFlechette,
  '@uwdata/flechette': Flechette,
  'node:worker_threads': { Worker: WorkerThreads.Worker },
};

const IMPORT = /^import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*'([^']+)';?\s*$/gm;

/** Removes the import lines of a block, checking that every name it imports exists in its module. */
function resolveImports(code: string, where: string): string {
  return code.replace(IMPORT, (_all, names: string, from: string) => {
    const mod = MODULES[from];
    if (mod === undefined) throw new Error(`${where}: import from '${from}' is not available to examples`);
    for (const raw of names.split(',')) {
      const name = raw.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]!.trim();
      if (name && !(name in mod) && !raw.trim().startsWith('type ')) {
        throw new Error(`${where}: '${name}' is not exported by '${from}'`);
      }
    }
    return '';
  });
}

const texts = new Map(DOCS.map((f) => [f, readFileSync(join(ROOT, f), 'utf8')]));
const blocksOf = new Map(DOCS.map((f) => [f, tsBlocks(f, texts.get(f)!)]));
const blocks = [...blocksOf.values()].flat();
const skip = countingMissing ?? peerMissing;

const uses = {
  adbc: (b: Block) => b.code.includes("'arrow-device/adbc'") || b.code.includes("'arrow-device/flechette/adbc'"),
  // A flechette block's names are flechette's where both libraries have one (tableFromArrays, importArrayStream, ...).
  flechette: (b: Block) => b.code.includes("'arrow-device/flechette") || b.code.includes("'@uwdata/flechette'"),
  gpu: (b: Block) => b.code.includes('gpuDevice'),
  cuda: (b: Block) => /DeviceType\.CUDA\b/.test(b.code),
  wasmModule: (b: Block) => /\bwasmModule\b/.test(b.code),
  parquet: (b: Block) => /\bparquetBytes\b/.test(b.code),
};

// A WebGPU device for the blocks that use one (opened once; the result keeps Dawn's instance and adapter reachable).
const gpu = blocks.some(uses.gpu) ? await openGpu() : null;
// CUDA for the blocks that use it: a real GPU, else the simulated runtime (ARROW_DEVICE_CUDART is pointed at it).
const cuda = blocks.some(uses.cuda) ? setupCuda() : null;
// parquet-wasm, and a Parquet file it wrote, for the blocks that read one.
const parquet = blocks.some(uses.parquet) ? await loadParquetWasm() : null;
const parquetFile = parquet !== null && typeof parquet === 'object'
  ? parquet.pw.writeParquet(parquet.pw.Table.fromIPCStream(Arrow.tableToIPC(Arrow.tableFromArrays({ id: Int32Array.of(1, 2, 3), name: ['a', 'b', 'c'] }), 'stream')))
  : undefined;

/** Why a block cannot run here (its test skips with it), or undefined. Under the peer's REQUIRED variable the block runs, and fails. */
function blockSkip(b: Block): string | undefined {
  if (uses.adbc(b) && SQLITE.missing && process.env.ADBC_REQUIRED !== '1') return SQLITE.missing;
  if (uses.gpu(b) && typeof gpu === 'string' && process.env.WEBGPU_REQUIRED !== '1') return gpu;
  if (uses.cuda(b) && cuda?.mode === 'none' && process.env.ARROW_DEVICE_CUDA_REQUIRED !== '1') return cuda.describe;
  if (uses.wasmModule(b) && cPeerSkip) return cPeerSkip;
  if (uses.parquet(b) && typeof parquet === 'string') return parquet;
  return undefined;
}

describe('the README and the guides', () => {
  test('have code blocks to run', () => {
    assert.ok(blocks.length >= 10, `found ${blocks.length}`);
  });

  test('README.md is at most 250 lines: a newcomer reads it in five minutes, the detail is in the guides', () => {
    const lines = texts.get('README.md')!.replace(/\n$/, '').split('\n').length;
    assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines, more than ${README_MAX_LINES}: move detail to a guide under docs/`);
  });

  test('every TypeScript or JavaScript block is fenced ```ts (run here) or ```ts quickstart (run from the packed package)', () => {
    assert.deepEqual(fenceProblems, [], `blocks that would not run:\n${fenceProblems.join('\n')}`);
  });

  test('every guide exists, and each about an API has a block that runs', () => {
    for (const g of GUIDES) {
      const file = `docs/${g}.md`;
      assert.ok(texts.has(file), `${file} is missing`);
      if (!GUIDES_WITHOUT_BLOCKS.has(g)) assert.ok(blocksOf.get(file)!.length >= 1, `${file} has no \`\`\`ts block`);
    }
  });
});

describe('every TypeScript block of the README and the guides runs', { skip }, () => {
  for (const block of blocks) {
    const name = `${block.file} block at line ${block.line}`;
    test(name, { skip: blockSkip(block) }, async () => {
      if (uses.gpu(block) && typeof gpu === 'string') throw new Error(`WEBGPU_REQUIRED=1, but ${gpu}`);
      if (uses.cuda(block) && cuda?.mode === 'none') throw new Error(`ARROW_DEVICE_CUDA_REQUIRED=1, but ${cuda.describe}`);
      const c = counting();
      const p = asyncPeer();
      const before = { out: c.outstanding(), dbl: c.doubleReleases(), live: Lib.accounting().liveImports, exp: Lib.accounting().liveExports };
      const logged: unknown[][] = [];
      const producers: bigint[] = [];
      let consumerHandler: bigint | undefined;
      const wasm = uses.wasmModule(block) ? cPeer() : undefined;
      const pwLoaded = parquet !== null && typeof parquet === 'object' ? parquet : undefined;
      const scope: Record<string, unknown> = {
        ...Arrow,
        ...Lib,
        ...(uses.adbc(block) ? Adbc : {}),
        ...(uses.flechette(block) ? { ...Flechette, ...LibFlechette, ...(uses.adbc(block) ? AdbcFlechette : {}) } : {}),
        Worker: WorkerThreads.Worker,
        console: { log: (...a: unknown[]) => logged.push(a), error: (...a: unknown[]) => logged.push(a) },
        // What a native producer filled.
        schemaPtr: c.schema(),
        arrayPtr: c.batch(5, 1),
        arrayPtrs: [c.batch(3, 0), c.batch(3, 3)],
        streamPtr: c.stream(4, 3),
        ptr2: c.stream(4, 3),
        ptr3: c.stream(4, 3),
        deviceArrayPtr: c.deviceBatch(5, 1),
        deviceStreamPtr: c.deviceStream(3, 4),
        use: (b: unknown) => void b,
        wanted: (b: Arrow.RecordBatch) => (b.getChild('x')?.get(0) as number) % 2 === 0,
        // Native code that takes what we export.
        nativeLib: {
          consume: c.lib.consume,
          consume_stream: c.lib.consume_stream,
          make_stream: c.lib.make_stream,
          start_producing: (handler: bigint) => void producers.push(p.produce(handler, 5, 4, -1)),
        },
        // A driver arrow-device/adbc runs (a real database, not a stand-in).
        sqliteDriverPath: SQLITE.library,
        // A GPUDevice (Dawn for Node), for the WebGPU blocks.
        gpuDevice: gpu !== null && typeof gpu === 'object' ? gpu.device : undefined,
        // A wasm32 module's exports (the clang-built C peer), for the blocks that export into one.
        wasmModule: wasm?.exports,
        // parquet-wasm and a Parquet file, for the blocks that read one in wasm memory.
        pw: pwLoaded?.pw,
        wasmExports: pwLoaded?.exports,
        parquetBytes: parquetFile,
      };
      // A native consumer's handler, only for the blocks that hand data to one (it runs a thread).
      if (block.code.includes('nativeConsumerHandler')) scope.nativeConsumerHandler = consumerHandler = p.consumer(2, -1, false);
      const code = resolveImports(block.code, name);
      const js = transformSync(code, { loader: 'ts', target: 'es2022', format: 'esm', sourcefile: `${block.file}:${block.line}` }).code;
      // `default`: a CommonJS package's namespace (flechette's) has one, and it cannot name a parameter.
      const names = Object.keys(scope).filter((k) => /^[A-Za-z_$][\w$]*$/.test(k) && k !== 'default');
      const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...a: string[]) => (...v: unknown[]) => Promise<void>;
      const run = new AsyncFunction(...names, js);
      try {
        await run(...names.map((k) => scope[k]));
      } finally {
        // DOCS_LOG=1 prints what each block logged: the comments that show output must say what it prints.
        if (process.env.DOCS_LOG === '1') for (const l of logged) process.stdout.write(`# ${name}: ${l.map((x) => typeof x === 'string' ? x : typeof x === 'bigint' ? `${x}n` : JSON.stringify(x) ?? String(x)).join(' ')}\n`);
      }

      // Native threads joined, then nothing may be left: every array the producer handed out
      // released exactly once, no import or export live.
      for (const h of producers) await p.produceWait(h);
      if (consumerHandler !== undefined) {
        const stats = await p.consumerWait(consumerHandler, 10_000);
        assert.equal(stats.timedOut, false, 'the native consumer finished');
      }
      // Pointers the block did not consume (each block uses some of them): release and free them.
      for (const k of ['arrayPtr', 'schemaPtr', 'streamPtr', 'ptr2', 'ptr3', 'deviceArrayPtr', 'deviceStreamPtr'] as const) {
        const ptr = scope[k] as bigint;
        if (k === 'schemaPtr') Lib.freeArrowSchema(ptr);
        else if (k === 'arrayPtr') Lib.freeArrowArray(ptr);
        else if (k === 'deviceArrayPtr') Lib.freeArrowDeviceArray(ptr);
        else if (k === 'deviceStreamPtr') Lib.freeArrowDeviceArrayStream(ptr);
        else Lib.freeArrowArrayStream(ptr);
      }
      for (const ptr of scope.arrayPtrs as bigint[]) Lib.freeArrowArray(ptr);
      await collectUntil(() => c.outstanding() === before.out && Lib.accounting().liveImports === before.live);
      assert.equal(c.outstanding(), before.out, 'every array the C producer handed out was released');
      assert.equal(c.doubleReleases(), before.dbl, 'none twice');
      await collectUntil(() => Lib.accounting().liveExports === before.exp);
      assert.equal(Lib.accounting().liveImports, before.live, 'no import left live');
      assert.equal(Lib.accounting().liveExports, before.exp, 'no export left live');
    });
  }
});

// --- links --------------------------------------------------------------------------------------

/** GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/`/g, '').replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** The anchors of a Markdown file's headings (outside code blocks), with GitHub's -1, -2 for repeats. */
function anchors(text: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of text.split('\n')) {
    const f = /^\s*(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (fence === undefined) fence = f[1];
      else if (line.trim() === fence) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const s = slug(h[1]!);
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    out.add(n === 0 ? s : `${s}-${n}`);
  }
  return out;
}

/** The link targets of a Markdown text, outside code blocks and code spans, with their lines. */
function links(text: string): { target: string; line: number }[] {
  const out: { target: string; line: number }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, i) => {
    const f = /^\s*(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (fence === undefined) fence = f[1];
      else if (line.trim() === fence) fence = undefined;
      return;
    }
    if (fence !== undefined) return;
    const bare = line.replace(/`[^`]*`/g, '');
    for (const m of bare.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: m[1]!, line: i + 1 });
    for (const m of bare.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/g)) out.push({ target: m[1]!, line: i + 1 });
  });
  return out;
}

describe('every relative link of the README and the guides resolves', () => {
  for (const file of DOCS) {
    test(`${file}: relative links point at files (and headings) that exist`, () => {
      const bad: string[] = [];
      for (const { target, line } of links(texts.get(file)!)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        const [path, anchor] = target.split('#', 2) as [string, string | undefined];
        const abs = path === '' ? join(ROOT, file) : join(ROOT, dirname(file), decodeURIComponent(path));
        const shown = `${file}:${line}: ${target}`;
        if (!abs.startsWith(ROOT) || !existsSync(abs)) {
          bad.push(`${shown} (no file ${relative(ROOT, abs) || abs})`);
          continue;
        }
        if (anchor !== undefined && abs.endsWith('.md') && statSync(abs).isFile() && !anchors(readFileSync(abs, 'utf8')).has(anchor)) {
          bad.push(`${shown} (no heading #${anchor} in ${relative(ROOT, abs)})`);
        }
      }
      assert.deepEqual(bad, [], `broken links:\n${bad.join('\n')}`);
    });
  }
});

/** Where the code cites the guides: the comments of these folders' sources. */
const CITING = ['src', 'test', 'tools', 'bench', 'demo', 'examples'];
const CITING_FILE = /\.(ts|mts|mjs|c|cu|sh)$/;
// Built from pieces so that this file's own text holds no citation.
const CITATION = new RegExp(['\\b', 'docs/', '([\\w-]+\\.md)', '(?:#([\\w-]+))?'].join(''), 'g');

/** The citations of `text` (a file at `where`) that name no guide, or no heading of it. */
function citationProblems(where: string, text: string): string[] {
  const bad: string[] = [];
  for (const m of text.matchAll(CITATION)) {
    const file = `docs/${m[1]!}`;
    const line = text.slice(0, m.index).split('\n').length;
    if (!texts.has(file)) bad.push(`${where}:${line}: ${m[0]} (no file ${file})`);
    else if (m[2] !== undefined && !anchors(texts.get(file)!).has(m[2])) bad.push(`${where}:${line}: ${m[0]} (no heading #${m[2]} in ${file})`);
  }
  return bad;
}

function sourcesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.name === 'node_modules' || e.name.startsWith('.')) return [];
    const p = join(dir, e.name);
    return e.isDirectory() ? sourcesUnder(p) : CITING_FILE.test(e.name) ? [p] : [];
  });
}

describe('every citation of a guide in the code resolves', () => {
  test('comments under src/, test/, tools/, bench/, demo/ and examples/ cite guides and headings that exist', () => {
    const files = CITING.flatMap((d) => sourcesUnder(join(ROOT, d)));
    assert.ok(files.length > 100, `found ${files.length} source files`);
    const cited = files.filter((f) => [...readFileSync(f, 'utf8').matchAll(CITATION)].length > 0);
    assert.ok(cited.length >= 5, `found ${cited.length} files citing a guide`);
    const bad = files.flatMap((f) => citationProblems(relative(ROOT, f), readFileSync(f, 'utf8')));
    assert.deepEqual(bad, [], `broken citations:\n${bad.join('\n')}`);
  });

  test('the check fails on a citation of a missing guide or heading', () => {
    const doc = ['docs', 'architecture.md'].join('/');
    assert.deepEqual(citationProblems('x.ts', `// see ${doc}#errors and ${doc}\n`), []);
    assert.deepEqual(citationProblems('x.ts', `// ok\n// see ${doc}#no-such-heading\n`), [`x.ts:2: ${doc}#no-such-heading (no heading #no-such-heading in ${doc})`]);
    const missing = ['docs', 'design.md'].join('/');
    assert.deepEqual(citationProblems('x.ts', `/* ${missing}#errors */`), [`x.ts:1: ${missing}#errors (no file ${missing})`]);
  });
});

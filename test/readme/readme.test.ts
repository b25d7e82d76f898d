/**
 * Every TypeScript code block of README.md runs here, as written, against
 * real peers built at test time: a C producer (test/ownership/counting.c)
 * for the pointers the blocks import (`schemaPtr`, `arrayPtr`, `arrayPtrs`,
 * `streamPtr`, ...), C consumers for what they export (`nativeLib.consume`,
 * `nativeLib.consume_stream`), and the async C peer's producer thread and
 * consumer (`nativeLib.start_producing`, `nativeConsumerHandler`).
 * A block may import from 'arrow-device/adbc' (src/adbc); the ADBC block
 * gets the SQLite driver's path as `sqliteDriverPath`; without the driver
 * (`npm run setup:adbc`) that block skips with the reason, unless
 * ADBC_REQUIRED=1. A block that uses `gpuDevice` gets a WebGPU device (test/webgpu/gpu.ts:
 * Dawn for Node, over SwiftShader without a GPU); where Dawn finds no adapter that block skips
 * with the reason, unless WEBGPU_REQUIRED=1.
 *
 * A block may import from 'arrow-device' (the names must be public: this
 * test fails on a name src/index.ts does not export) and from
 * 'apache-arrow'; both are in scope either way. After each block, the C
 * producer must have every array back (nothing leaked, nothing released
 * twice) and our accounting must show no live import or export.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { transformSync } from 'esbuild';
import * as Arrow from 'apache-arrow';
import * as Lib from '../../src/index.js';
import { asyncPeer, peerMissing } from '../async/peer.js';
import { collectUntil } from '../helpers/gc.js';
import { counting, countingMissing } from '../ownership/counting.js';
import * as Adbc from '../../src/adbc/index.js';
import { SQLITE } from '../adbc/drivers.js';
import { openGpu } from '../webgpu/gpu.js';

const README = new URL('../../README.md', import.meta.url);

interface Block {
  line: number;
  code: string;
}

/** The ```ts blocks of the README, with the line each starts on. */
function tsBlocks(text: string): Block[] {
  const out: Block[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```ts') continue;
    const start = i + 1;
    let j = start;
    while (j < lines.length && lines[j]!.trim() !== '```') j++;
    out.push({ line: start + 1, code: lines.slice(start, j).join('\n') });
    i = j;
  }
  return out;
}

const IMPORT = /^import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*'([^']+)';?\s*$/gm;

/** Removes the import lines of a block, checking that every name it imports exists in its module. */
function resolveImports(code: string, line: number): string {
  return code.replace(IMPORT, (_all, names: string, from: string) => {
    const mod: Record<string, unknown> = from === 'arrow-device' ? Lib : from === 'apache-arrow' ? Arrow : from === 'arrow-device/adbc' ? Adbc : {};
    if (from !== 'arrow-device' && from !== 'apache-arrow' && from !== 'arrow-device/adbc') throw new Error(`README line ${line}: import from '${from}' is not available to examples`);
    for (const raw of names.split(',')) {
      const name = raw.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]!.trim();
      if (name && !(name in mod) && !raw.trim().startsWith('type ')) {
        throw new Error(`README line ${line}: '${name}' is not exported by '${from}'`);
      }
    }
    return '';
  });
}

const blocks = tsBlocks(readFileSync(README, 'utf8'));
const skip = countingMissing ?? peerMissing;
// A WebGPU device for the blocks that use one (opened once; the result keeps Dawn's instance and adapter reachable).
const gpu = blocks.some((b) => b.code.includes('gpuDevice')) ? await openGpu() : null;

describe('every TypeScript block of the README runs', { skip }, () => {
  test('the README has code blocks to run', () => {
    assert.ok(blocks.length >= 4, `found ${blocks.length}`);
  });

  for (const block of blocks) {
    const needsAdbc = block.code.includes("'arrow-device/adbc'");
    const needsGpu = block.code.includes('gpuDevice');
    const blockSkip = needsAdbc && SQLITE.missing && process.env.ADBC_REQUIRED !== '1' ? SQLITE.missing
      : needsGpu && typeof gpu === 'string' && process.env.WEBGPU_REQUIRED !== '1' ? gpu : undefined;
    test(`README block at line ${block.line}`, { skip: blockSkip }, async () => {
      if (needsGpu && typeof gpu === 'string') throw new Error(`WEBGPU_REQUIRED=1, but ${gpu}`);
      const c = counting();
      const p = asyncPeer();
      const before = { out: c.outstanding(), dbl: c.doubleReleases(), live: Lib.accounting().liveImports, exp: Lib.accounting().liveExports };
      const logged: unknown[][] = [];
      const producers: bigint[] = [];
      let consumerHandler: bigint | undefined;
      const scope: Record<string, unknown> = {
        ...Arrow,
        ...Lib,
        ...(needsAdbc ? Adbc : {}),
        console: { log: (...a: unknown[]) => logged.push(a), error: (...a: unknown[]) => logged.push(a) },
        // What a native producer filled.
        schemaPtr: c.schema(),
        arrayPtr: c.batch(5, 1),
        arrayPtrs: [c.batch(3, 0), c.batch(3, 3)],
        streamPtr: c.stream(4, 3),
        ptr2: c.stream(4, 3),
        ptr3: c.stream(4, 3),
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
        // A GPUDevice (Dawn for Node), for the WebGPU block.
        gpuDevice: gpu !== null && typeof gpu === 'object' ? gpu.device : undefined,
      };
      // A native consumer's handler, only for the blocks that hand data to one (it runs a thread).
      if (block.code.includes('nativeConsumerHandler')) scope.nativeConsumerHandler = consumerHandler = p.consumer(2, -1, false);
      const code = resolveImports(block.code, block.line);
      const js = transformSync(code, { loader: 'ts', target: 'es2022', format: 'esm' }).code;
      const names = Object.keys(scope).filter((k) => /^[A-Za-z_$][\w$]*$/.test(k));
      const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...a: string[]) => (...v: unknown[]) => Promise<void>;
      const run = new AsyncFunction(...names, js);
      await run(...names.map((k) => scope[k]));

      // Native threads joined, then nothing may be left: every array the producer handed out
      // released exactly once, no import or export live.
      for (const h of producers) await p.produceWait(h);
      if (consumerHandler !== undefined) {
        const stats = await p.consumerWait(consumerHandler, 10_000);
        assert.equal(stats.timedOut, false, 'the native consumer finished');
      }
      // Pointers the block did not consume (each block uses some of them): release and free them.
      for (const k of ['arrayPtr', 'schemaPtr', 'streamPtr', 'ptr2', 'ptr3'] as const) {
        const ptr = scope[k] as bigint;
        if (k === 'schemaPtr') Lib.freeArrowSchema(ptr);
        else if (k === 'arrayPtr') Lib.freeArrowArray(ptr);
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

/**
 * Proves src/abi's layouts against a C compiler: test/abi/layout.c is built
 * with the system C compiler (native, run, prints JSON) and with
 * clang --target=wasm32 (instantiated here, read through its exports).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  ALL_STRUCTS,
  ArrowDeviceArrayDef,
  layoutOf,
  NATIVE64,
  WASM32,
  layoutsFor,
  type Target,
} from '../../src/abi/index.js';
import { run, tempDir, which } from '../helpers/tools.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const source = join(here, 'layout.c');

/** Our table, in the C file's key format: `ArrowArray.length`, `ArrowArray.sizeof`. */
function expected(target: Target): Map<string, number> {
  const m = new Map<string, number>();
  for (const def of ALL_STRUCTS) {
    const l = layoutOf(def, target);
    m.set(`${def.name}.sizeof`, l.size);
    m.set(`${def.name}.alignof`, l.align);
    for (const f of l.fields) m.set(`${def.name}.${f.name}`, f.offset);
  }
  return m;
}

function compare(actual: Map<string, number>, target: Target): void {
  const exp = expected(target);
  // Every struct and field the C file knows must be in our table, and vice versa.
  assert.deepEqual([...actual.keys()].sort(), [...exp.keys()].sort(), 'same structs and fields');
  for (const [k, v] of exp) assert.equal(actual.get(k), v, `${target.name} ${k}`);
}

const cc = which('cc') ?? which('gcc') ?? which('clang');
const clang = which('clang');

describe('ABI layouts', () => {
  test('64-bit ArrowDeviceArray is 128 bytes with padding after device_type', () => {
    const l = layoutOf(ArrowDeviceArrayDef, NATIVE64);
    assert.equal(l.size, 128);
    assert.equal(l.offsets.device_type, 88);
    assert.equal(l.offsets.sync_event, 96);
  });

  test('wasm32 pointers are 4 bytes but int64 stays 8-aligned', () => {
    const l = layoutsFor(WASM32).ArrowArray;
    assert.equal(l.offsets.buffers, 40);
    assert.equal(l.offsets.private_data, 56);
    assert.equal(l.size, 64);
  });

  test('ArrowAsyncProducer has no release member (abi.h layout)', () => {
    assert.equal(layoutsFor(NATIVE64).ArrowAsyncProducer.fields.some((f) => f.name === 'release'), false);
  });

  test('native layouts match the C compiler', { skip: cc ? false : 'no C compiler (cc/gcc/clang) on PATH' }, () => {
    const dir = tempDir('abi');
    const exe = join(dir, 'layout');
    run(cc!, ['-std=c11', '-O0', '-o', exe, source]);
    const json = JSON.parse(run(exe, [])) as Record<string, number>;
    assert.equal(json.pointer_size, 8, 'the native test target is 64-bit');
    delete json.pointer_size;
    compare(new Map(Object.entries(json)), NATIVE64);
  });

  const wasmSkip = !clang
    ? 'clang not found: install Debian packages clang and lld to prove the wasm32 layouts'
    : !which('wasm-ld') && !which('wasm-ld-14') && !which('wasm-ld-16') && !which('lld')
      ? 'wasm-ld not found: install the Debian package lld to prove the wasm32 layouts'
      : false;

  test('wasm32 layouts match clang --target=wasm32', { skip: wasmSkip }, async () => {
    const dir = tempDir('abi-wasm');
    const out = join(dir, 'layout.wasm');
    run(clang!, [
      '--target=wasm32',
      '-std=c11',
      '-O1',
      '-nostdlib',
      '-ffreestanding',
      '-Wl,--no-entry',
      '-o',
      out,
      source,
    ]);
    const { instance } = await WebAssembly.instantiate(readFileSync(out));
    const ex = instance.exports as {
      memory: WebAssembly.Memory;
      n_entries(): number;
      entry_key(i: number): number;
      entry_value(i: number): bigint;
      pointer_size(): number;
    };
    assert.equal(ex.pointer_size(), 4);
    const bytes = new Uint8Array(ex.memory.buffer);
    const actual = new Map<string, number>();
    for (let i = 0; i < ex.n_entries(); i++) {
      const p = ex.entry_key(i);
      const end = bytes.indexOf(0, p);
      actual.set(new TextDecoder().decode(bytes.subarray(p, end)), Number(ex.entry_value(i)));
    }
    compare(actual, WASM32);
  });
});

/**
 * Issue 18's findings, one test each, laid out by the fuzz producer (every
 * buffer and struct in a guarded mapping): limits are typed errors naming
 * the place and the size, shared structs are refused in linear time, device
 * reads name their buffer, a failed importTable releases what it imported.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ArrowDeviceError, importArrayView, importDeviceArray, importField, importRecordBatch, importData, importTable, nativeMemory,
} from '../../src/index.js';
import { Vector } from 'apache-arrow';
import { runChild } from '../helpers/child.js';
import { MAX_BUFFER_BYTES } from '../../src/array/read.js';
import { MAX_EXPANDED_ELEMENTS } from '../../src/array/expand.js';
import { MAX_METADATA_PAIRS } from '../../src/schema/metadata.js';
import { parseFormat, type SchemaNode } from '../../src/index.js';
import type { ADesc, Case, SDesc } from './cases.js';
import { layOut, producerLib, producerMissing } from './producer.js';
import { runOne } from './runner.js';

const skip = producerMissing ?? false;
const b64 = (a: ArrayBufferView): string => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');
const S = (format: string, children: SDesc[] = [], extra: Partial<SDesc> = {}): SDesc => ({
  format, name: 'f', flags: '2', metadata: null, children, dictionary: null, ...extra,
});
const A = (length: number | string, buffers: (ArrayBufferView | null)[], children: ADesc[] = [], extra: Partial<ADesc> = {}): ADesc => ({
  length: String(length), offset: '0', nullCount: '0', buffers: buffers.map((b) => (b ? b64(b) : null)), children, dictionary: null, ...extra,
});
const kase = (schema: SDesc, arrays: ADesc[], extra: Partial<Case> = {}): Case => ({
  origin: 'limits.test.ts', mutations: [], driver: 'data', level: 'default', expand: false, copy: false, schema, arrays, ...extra,
});
let ids = 1;
const lay = (c: Case) => {
  const l = layOut(c, ids);
  ids += l.ids.length;
  return l;
};

function throwsAt(fn: () => unknown, path: RegExp, detail: RegExp): ArrowDeviceError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof ArrowDeviceError, `expected an ArrowDeviceError, got ${String(caught)}`);
  assert.match(caught.path, path);
  assert.match(caught.detail, detail);
  return caught;
}

describe('hostile shapes are refused in linear time', { skip }, () => {
  test('a schema DAG (each level names the one below twice) is refused at the second visit, at once', () => {
    let s = S('i');
    // Built once per level; the second child's pointer names the first child's struct.
    for (let d = 0; d < 30; d++) s = S('+s', [s, S('i')], { alias: [null, 0] });
    const l = lay(kase(s, []));
    const t0 = performance.now();
    throwsAt(() => importField(l.schema), /^schema(\.children\[0\])*\.children\[1\]$/, /reached a second time/);
    assert.ok(performance.now() - t0 < 1000, 'linear, not 2^30');
  });

  test('2,000 fields pointing at one child: refused at field 1, not read 2,000 times', () => {
    const kids = Array.from({ length: 2000 }, (_, k) => (k === 0 ? S('+s', [S('i'), S('u')]) : S('i')));
    const l = lay(kase(S('+s', kids, { alias: kids.map((_, k) => (k === 0 ? null : 0)) }), []));
    throwsAt(() => importField(l.schema), /^schema\.children\[1\]$/, /reached a second time/);
  });

  test('an array child reached twice is refused with its place', () => {
    const schema = S('+s', [S('i'), S('i')]);
    const l = lay(kase(schema, [A(1, [null], [A(1, [null, new Int32Array([1])]), A(1, [null, new Int32Array([2])])], { alias: [null, 0] })]));
    throwsAt(() => importRecordBatch(l.arrays[0]!, l.schema), /^array\.children\[1\]$/, /reached a second time/);
  });

  test('an array DAG 30 levels deep (2^30 paths) is refused at its first shared child, host and device', () => {
    // The schema as a SchemaNode (a JS DAG is no C struct: nothing to refuse there), the array a C DAG:
    // unfolded, 2^30 leaves; refused at the second visit, the import costs its input.
    let node: SchemaNode = { format: 'i', type: parseFormat('i'), name: 'f', metadata: null, flags: 2, children: [], dictionary: null };
    let a = A(1, [null, new Int32Array([1])]);
    for (let d = 0; d < 30; d++) {
      node = { format: '+s', type: parseFormat('+s'), name: 'f', metadata: null, flags: 2, children: [node, node], dictionary: null };
      a = A(1, [null], [a, A(1, [null, new Int32Array([2])])], { alias: [null, 0] });
    }
    const tree = (depth: number): SDesc => (depth === 0 ? S('i') : S('+s', [tree(depth - 1), S('i')]));
    const host = lay(kase(tree(30), [a]));
    throwsAt(() => importArrayView(host.arrays[0]!, node), /^array(\.children\[0\])*\.children\[1\]$/, /reached a second time/);
    const c = kase(tree(30), [a]);
    c.device = { type: 1, id: '-1', syncEvent: '0', reserved: false };
    const dev = lay(c);
    throwsAt(() => importDeviceArray(dev.arrays[0]!, node), /^device_array\.array(\.children\[0\])*\.children\[1\]$/, /reached a second time/);
  });

  test('a device array child reached twice is refused too', () => {
    const schema = S('+s', [S('i'), S('i')]);
    const c = kase(schema, [A(1, [null], [A(1, [null, new Int32Array([1])]), A(1, [null, new Int32Array([2])])], { alias: [null, 0] })]);
    c.device = { type: 1, id: '-1', syncEvent: '0', reserved: false };
    const l = lay(c);
    throwsAt(() => importDeviceArray(l.arrays[0]!, l.schema), /^device_array\.array\.children\[1\]$/, /reached a second time/);
  });

  test('a cycle (a schema child that is its own parent) is refused at the second visit', () => {
    const l = lay(kase(S('+s', [S('i'), S('+s', [S('i')])]), []));
    const m = nativeMemory();
    const o = m.layouts.ArrowSchema.offsets;
    // children[1]'s first child pointer is made to point back at the root.
    const kids = m.readPtr(l.schema + BigInt(o.children!));
    const inner = m.readPtr(kids + 8n);
    m.writePtr(m.readPtr(inner + BigInt(o.children!)), l.schema);
    throwsAt(() => importField(l.schema), /^schema\.children\[1\]\.children\[0\]$/, /reached a second time/);
    assert.equal(producerLib().count(l.schemaId!), 1, 'released once (the producer releases its true children)');
  });

  test(`metadata declaring more than ${MAX_METADATA_PAIRS} pairs is refused before any pair is read`, () => {
    // Only the count is there: reading one pair would fault on the guard page.
    const md = Buffer.alloc(4);
    md.writeInt32LE(MAX_METADATA_PAIRS + 1, 0);
    const l = lay(kase(S('i', [], { metadata: md.toString('base64') }), []));
    throwsAt(() => importField(l.schema), /^schema\.metadata$/, new RegExp(`more than the ${MAX_METADATA_PAIRS}`));
  });
});

describe('limits are typed errors naming the place and the size', { skip }, () => {
  test(`a buffer past ${MAX_BUFFER_BYTES} bytes (a valid 5 GiB int8 array) is refused, not viewed`, () => {
    const n = 5 * 2 ** 30;
    const l = lay(kase(S('c'), [A(n, [null, new Int8Array(8)])]));
    const e = throwsAt(() => importData(l.arrays[0]!, l.schema), /^array\.buffers\[1\]$/, new RegExp(`${n} bytes`));
    assert.equal(e.kind, 'unsupported');
  });

  test(`a buffer past ${MAX_BUFFER_BYTES} bytes is refused the same way when copied, and as an ArrayView`, () => {
    const n = 5 * 2 ** 30;
    for (const run of [
      (l: ReturnType<typeof lay>) => importData(l.arrays[0]!, l.schema, { copy: true }),
      (l: ReturnType<typeof lay>) => importArrayView(l.arrays[0]!, l.schema, { validate: 'full' }),
    ]) {
      const l = lay(kase(S('c'), [A(n, [null, new Int8Array(8)])]));
      const e = throwsAt(() => run(l), /^array\.buffers\[1\]$/, new RegExp(`${n} bytes`));
      assert.equal(e.kind, 'unsupported');
      assert.equal(producerLib().count(l.arrayIds[0]!), 1, 'released at once');
    }
  });

  test('a copy JS cannot allocate (a valid 512 MiB buffer, the address space limited) is a typed nomem error naming the buffer: copy, toHostView, wasm memory', () => {
    // In a child whose address space is then limited to what it has mapped plus 256 MiB:
    // V8 refuses the copy with a plain RangeError ("Array buffer allocation failed"), which
    // escaped untyped before (issue 18: "Invalid typed array length" under copy and toHostView).
    const r = runChild(
      `import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { ArrowDeviceError, exportArray, importData, importDeviceArray, wasmMemory } from '@/src/index.js';
import { parseFormat } from '@/src/schema/format.js';
import { layOut } from '@/test/fuzz/producer.js';
const N = 512 * 2 ** 20;
const S = { format: 'c', name: 'f', flags: '2', metadata: null, children: [], dictionary: null };
const A = { length: String(N), offset: '0', nullCount: '0', buffers: [null, 'AQID'], children: [], dictionary: null };
const host = layOut({ origin: 't', mutations: [], driver: 'data', level: 'default', expand: false, copy: true, schema: S, arrays: [A] }, 1);
const dev = layOut({ origin: 't', mutations: [], driver: 'deviceArray', level: 'default', expand: false, copy: false, schema: S, arrays: [A],
  device: { type: 1, id: '-1', syncEvent: '0', reserved: false } }, 100);
// wasm: a memory of N + 2 MiB; a 3-element int8 array exported into it, its length and values pointer then patched to N bytes from 1 MiB.
const memory = new WebAssembly.Memory({ initial: (N >> 16) + 32 });
let top = 1024;
const malloc = (n, align) => { top = Math.ceil(top / align) * align; const p = top; top += n; return p; };
const wm = wasmMemory({ memory, malloc, free: () => {}, table: new WebAssembly.Table({ initial: 1, element: 'anyfunc' }) });
const node = { format: 'c', name: '', flags: 2, metadata: null, children: [], dictionary: null, type: parseFormat('c') };
const wp = exportArray({ schema: node, length: 3, offset: 0, nullCount: 0, buffers: [null, new Uint8Array([1, 2, 3])], children: [], dictionary: null }, { memory: wm });
const o = wm.layouts.ArrowArray.offsets;
wm.writeI64(wp + BigInt(o.length), BigInt(N));
wm.writePtr(wm.readPtr(wp + BigInt(o.buffers)) + 4n, 2n ** 20n);
const vm = Number(/VmSize:\\s+(\\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;
const koffi = createRequire('@/package.json')('koffi');
const rlimit = koffi.struct('rlimit_t', { cur: 'uint64_t', max: 'uint64_t' });
const setrlimit = koffi.load('libc.so.6').func('int setrlimit(int, const rlimit_t *)');
const limit = vm + 256 * 2 ** 20;
if (setrlimit(9 /* RLIMIT_AS */, { cur: limit, max: limit }) !== 0) throw new Error('setrlimit failed');
const out = {};
const attempt = (name, fn) => {
  try { fn(); out[name] = 'imported'; } catch (e) { out[name] = e instanceof ArrowDeviceError ? [e.kind, e.path, e.detail] : ['untyped', String(e)]; }
};
attempt('copy', () => importData(host.arrays[0], host.schema, { copy: true }));
attempt('toHostView', () => { const d = importDeviceArray(dev.arrays[0], dev.schema); try { d.toHostView(); } finally { d.release(); } });
attempt('wasm copy', () => importData(wp, node, { memory: wm, copy: true }));
process.stdout.write(JSON.stringify(out));
process.exit(0);`,
      60_000,
    );
    assert.equal(r.status, 0, r.stderr.slice(-2000));
    const out = JSON.parse(r.stdout) as Record<string, [string, string, string]>;
    const detail = /^cannot allocate 536870912 bytes in JS for a copy: /;
    assert.deepEqual(out.copy!.slice(0, 2), ['nomem', 'array.buffers[1]'], JSON.stringify(out.copy));
    assert.match(out.copy![2], detail);
    assert.deepEqual(out.toHostView!.slice(0, 2), ['nomem', 'device_array.array.buffers[1]'], JSON.stringify(out.toHostView));
    assert.match(out.toHostView![2], detail);
    assert.deepEqual(out['wasm copy']!.slice(0, 2), ['nomem', 'array.buffers[1]'], JSON.stringify(out['wasm copy']));
    assert.match(out['wasm copy']![2], detail);
  });

  test('copying a buffer past the limit from a device array is refused with its place', () => {
    const n = 5 * 2 ** 30;
    const c = kase(S('c'), [A(n, [null, new Int8Array(8)])]);
    c.device = { type: 1, id: '-1', syncEvent: '0', reserved: false };
    const l = lay(c);
    const dev = importDeviceArray(l.arrays[0]!, l.schema);
    try {
      throwsAt(() => dev.toHostView(), /^device_array\.array\.buffers\[1\]$/, new RegExp(`${n} bytes`));
    } finally {
      dev.release();
    }
  });

  test(`expanding a valid run-end encoded array past ${MAX_EXPANDED_ELEMENTS} elements is refused`, () => {
    const n = 2 ** 31 - 1;
    const schema = S('+r', [S('i', [], { name: 'run_ends', flags: '0' }), S('i', [], { name: 'values' })]);
    const l = lay(kase(schema, [A(n, [], [A(1, [null, new Int32Array([n])]), A(1, [null, new Int32Array([7])])])]));
    const t0 = performance.now();
    throwsAt(() => importData(l.arrays[0]!, l.schema, { expand: true }), /^array$/, new RegExp(`${n} elements`));
    assert.ok(performance.now() - t0 < 2000);
  });

  test('expanding list views whose valid, overlapping sizes add up past the cap is refused before building', () => {
    const rows = 64;
    const size = 2 ** 20; // 64 views of the whole child: 2^26 elements
    const schema = S('+vl', [S('c', [], { name: 'item' })]);
    const child = A(size, [null, new Int8Array(size)]);
    const l = lay(kase(schema, [A(rows, [null, new Int32Array(rows), new Int32Array(rows).fill(size)], [child])]));
    const t0 = performance.now();
    throwsAt(() => importData(l.arrays[0]!, l.schema, { expand: true }), /^array$/, /elements, more than/);
    assert.ok(performance.now() - t0 < 2000);
  });

  test('expanding a list view whose sizes run past its child (unchecked at default) is a typed error', () => {
    const schema = S('+vl', [S('i', [], { name: 'item' })]);
    const l = lay(kase(schema, [A(1, [null, new Int32Array([0]), new Int32Array([2 ** 30])], [A(2, [null, new Int32Array(2)])])]));
    throwsAt(() => importData(l.arrays[0]!, l.schema, { expand: true }), /^array\.buffers\[1\]$/, /outside the child/);
  });
});

describe('untyped errors and errors without a place', { skip }, () => {
  test('full validation refuses a date64 value arrow-js cannot read', () => {
    const l = lay(kase(S('tdm'), [A(1, [null, new BigInt64Array([2n ** 60n])])]));
    const e = throwsAt(() => importData(l.arrays[0]!, l.schema, { validate: 'full' }), /^array\.buffers\[1\]$/, /2\^53/);
    assert.equal(e.kind, 'unsupported');
  });

  test('a run-end encoded union under expand imports (arrow-js builders refused it untyped), released exactly once', async () => {
    const schema = S('+r', [S('i', [], { name: 'run_ends', flags: '0' }), S('+us:0', [S('i', [], { name: 'a' })], { name: 'values' })]);
    const values = A(1, [new Int8Array([0])], [A(1, [null, new Int32Array([5])])]);
    const c = kase(schema, [A(2, [], [A(1, [null, new Int32Array([2])]), values])], { expand: true });
    const f = await runOne(c, ids);
    ids += 100;
    assert.deepEqual(f, []);
    const l = lay(c);
    const d = importData(l.arrays[0]!, l.schema, { expand: true });
    assert.deepEqual([...new Vector([d])], [5, 5], 'the one run of the sparse union, twice');
  });

  test('int64 milliseconds past 2^53 under expand: the import reads no value (no "not safe to convert" escapes), full refuses them typed', () => {
    // Run-end encoded date64 and timestamps: arrow-js's builders read each value back (its get() threw
    // "N is not safe to convert to a number" out of the import). Expansion now copies bytes.
    for (const format of ['tdm', 'tsm:', 'tss:UTC']) {
      const schema = S('+r', [S('i', [], { name: 'run_ends', flags: '0' }), S(format, [], { name: 'values' })]);
      const arr = A(3, [], [A(2, [null, new Int32Array([1, 3])]), A(2, [null, new BigInt64Array([5n, 2n ** 60n])])]);
      const l = lay(kase(schema, [arr]));
      const d = importData(l.arrays[0]!, l.schema, { expand: true });
      assert.deepEqual([...new BigInt64Array(d.values.buffer, d.values.byteOffset, 3)], [5n, 2n ** 60n, 2n ** 60n], format);
      const f = lay(kase(schema, [arr]));
      const e = throwsAt(() => importData(f.arrays[0]!, f.schema, { expand: true, validate: 'full' }), /^array\.children\[1\]\.buffers\[1\]$/, /beyond the 2\^53/);
      assert.equal(e.kind, 'unsupported');
    }
  });

  test('a device array whose offsets pointer is 0x10 gives a typed error with the buffer\'s place', () => {
    const c = kase(S('u'), [A(2, [null, new Int32Array([0, 1, 2]), new Uint8Array(2)], [], { rawBuffer: { index: 1, addr: '16' } })]);
    c.device = { type: 1, id: '-1', syncEvent: '0', reserved: false };
    const l = lay(c);
    // CPU memory is read as the host import reads it: the same error, at import.
    throwsAt(() => importDeviceArray(l.arrays[0]!, l.schema), /^device_array\.array\.buffers\[1\]$/, /invalid address 0x10/);
  });
});

describe('release', { skip }, () => {
  test('importTable failing on arrays[1] releases arrays[0] at once', () => {
    const schema = S('+s', [S('i')]);
    const good = A(1, [null], [A(1, [null, new Int32Array([1])])]);
    const bad = A(1, [null], [A(1, [null, new Int32Array([1])])], { nBuffers: '3' });
    const l = lay(kase(schema, [good, bad]));
    assert.throws(() => importTable(l.arrays, l.schema), ArrowDeviceError);
    // No collection in between: the producer's count says it already ran.
    assert.equal(producerLib().count(l.arrayIds[0]!), 1);
    assert.equal(producerLib().count(l.arrayIds[1]!), 1);
  });
});

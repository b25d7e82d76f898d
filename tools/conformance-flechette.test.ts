/**
 * The flechette comparison of the conformance runner (tools/conformance-flechette.ts,
 * `--target flechette`): flechette's own reading of every gold IPC file agrees with
 * the gold JSON, and one changed value, null, type id, dictionary key, run end,
 * date64 or month-day-nano value, or nullable flag in a flechette table is found,
 * at its column and row.
 *
 * Run: node --import tsx --test tools/conformance-flechette.test.ts
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { tableFromIPC, type Table } from '@uwdata/flechette';
import { GOLD, goldSkip } from '../test/helpers/gold.js';
import { caseOfTable, diffFlechette, FLECHETTE_OPTIONS, goldOf } from './conformance-flechette.js';
import { discover, load } from './conformance-lib.js';
import type { CaseData } from './peers/peer.js';

const dir = fileURLToPath(GOLD);

interface Case {
  gold: CaseData;
  file: string;
}

function gold(name: string): Case {
  const files = discover([dir]).get(name);
  if (!files) throw new Error(`no gold case ${name}`);
  const loaded = { ...load(files), files };
  return { gold: goldOf(loaded), file: files.find((f) => f.endsWith('.arrow_file'))! };
}

/** A fresh flechette reading of the case's IPC file (its buffers may be changed by a test). */
const read = (c: Case): Table => tableFromIPC(readFileSync(c.file), FLECHETTE_OPTIONS);

interface B {
  length: number;
  nullCount: number;
  validity: Uint8Array;
  values: { [i: number]: number | bigint; length: number } & ArrayBufferView;
  typeIds: Int8Array;
  children: B[];
  dictionary: { data: B[] };
}

/** The first batch with rows of a column by name. */
function batch0(t: Table, name: string): { b: B; c: number } {
  const c = t.schema.fields.findIndex((f) => f.name === name);
  assert.ok(c >= 0, `no column ${name}`);
  const b = (t.children[c]!.data as unknown as B[]).find((x) => x.length > 0);
  assert.ok(b, `column ${name} has no rows`);
  return { b, c };
}

const valid = (b: B, j: number): boolean => !b.nullCount || ((b.validity[j >> 3]! >> (j & 7)) & 1) === 1;
const firstValid = (b: B): number => {
  for (let j = 0; j < b.length; j++) if (valid(b, j)) return j;
  throw new Error('no valid row');
};

function diff(c: Case, t: Table, exact = true): string | undefined {
  return diffFlechette(c.gold, caseOfTable(t), exact, new Set());
}

describe('the flechette comparison of the conformance runner', { skip: goldSkip }, () => {
  test("flechette's own reading of every gold IPC file agrees with the gold JSON, exactly and logically", () => {
    const cases = [...discover([dir]).keys()];
    assert.equal(cases.length, 32);
    for (const name of cases) {
      const c = gold(name);
      assert.equal(diff(c, read(c)), undefined, name);
      assert.equal(diff(c, read(c), false), undefined, name);
    }
  });

  test('a changed int32 value is found at its column and row', () => {
    const c = gold('generated_primitive');
    const t = read(c);
    const { b, c: col } = batch0(t, 'int32_nullable');
    const j = firstValid(b);
    (b.values as Int32Array)[j]! ^= 1;
    assert.match(diff(c, t) ?? '', new RegExp(`^column ${col} \\(int32_nullable\\) row ${j}: gold `));
  });

  test('a valid bool made null is found', () => {
    const c = gold('generated_primitive');
    const t = read(c);
    const { b } = batch0(t, 'bool_nullable');
    const j = firstValid(b);
    b.validity[j >> 3]! &= ~(1 << (j & 7));
    assert.match(diff(c, t) ?? '', new RegExp(`\\(bool_nullable\\) row ${j}: gold (true|false), flechette null`));
  });

  test('a changed union type id is found (sparse: every member has the row)', () => {
    const c = gold('generated_union');
    const t = read(c);
    const { b, c: col } = batch0(t, 'sparse_1');
    const ids = (t.schema.fields[col]!.type as unknown as { typeIds: number[] }).typeIds;
    b.typeIds[0] = ids.find((x) => x !== b.typeIds[0])!;
    assert.match(diff(c, t) ?? '', /\(sparse_1\) row 0: gold \{t:/);
  });

  test('a changed dictionary key is found', () => {
    const c = gold('generated_dictionary');
    const t = read(c);
    const { b } = batch0(t, 'dict0');
    const j = firstValid(b);
    const n = b.dictionary.data[0]!.length;
    (b.values as Int8Array)[j] = (Number(b.values[j]) + 1) % n;
    assert.match(diff(c, t) ?? '', /\(dict0\) row \d+: gold /);
  });

  test('a changed run end is found', () => {
    const c = gold('generated_run_end_encoded');
    const t = read(c);
    const { b } = batch0(t, 'ree64_float32');
    const ends = b.children[0]!.values as BigInt64Array;
    // Run 0 (129.264...) made one row shorter: its last row is another run's (or, of the batch's only run, none).
    ends[0]! -= 1n;
    assert.match(diff(c, t) ?? '', /\(ree64_float32\) row \d+: gold 129\.\d+, flechette (?!129\.)/);
  });

  test('a date64 changed by 1 ms is found (compared as the stored int64: at() coerces date64 to a number)', () => {
    const c = gold('generated_datetime');
    const t = read(c);
    const { b } = batch0(t, 'f1');
    const j = firstValid(b);
    (b.values as BigInt64Array)[j]! += 1n;
    assert.match(diff(c, t) ?? '', new RegExp(`\\(f1\\) row ${j}: gold -?\\d+n, flechette -?\\d+n`));
  });

  test("a month-day-nano interval's nanoseconds changed by 1 are found", () => {
    const c = gold('generated_interval_mdn');
    const t = read(c);
    const b = t.children[0]!.data[0] as unknown as B;
    const j = firstValid(b);
    const v = new DataView(b.values.buffer, b.values.byteOffset, b.values.byteLength);
    v.setBigInt64(j * 16 + 8, v.getBigInt64(j * 16 + 8, true) + 1n, true);
    assert.match(diff(c, t) ?? '', new RegExp(`row ${j}: gold \\[-?\\d+,-?\\d+,-?\\d+n\\]`));
  });

  test('a changed list element is found', () => {
    const c = gold('generated_nested');
    const t = read(c);
    const { b } = batch0(t, 'list_nullable');
    const child = b.children[0]!;
    const k = firstValid(child);
    (child.values as Int32Array)[k]! ^= 1;
    assert.match(diff(c, t) ?? '', /\(list_nullable\) row \d+: gold \[/);
  });

  test('a field made non-nullable is found in the schema', () => {
    const c = gold('generated_primitive');
    const t = read(c);
    const f = t.schema.fields[0]!;
    (t.schema.fields as unknown[])[0] = { ...f, nullable: false };
    assert.match(diff(c, t) ?? '', /^schema\.children\[0\]\.flags: gold 2, got 0$/);
  });
});

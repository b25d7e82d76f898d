/**
 * The conformance runner's machinery: reading cases, exporting and
 * importing them, comparing, and running one case through a peer in both
 * directions. tools/conformance.ts is the command line around it.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { RecordBatch, RecordBatchReader, Schema, Struct, tableFromIPC, Vector, type Data, type Table } from 'apache-arrow';
import { DeviceType } from '../src/abi/constants.js';
import { freeArrowSchema } from '../src/array/api.js';
import {
  accounting, ArrowDeviceError, createAsyncDeviceStreamReader, dataToView, DeviceArray, exportArray, exportArrayStream,
  exportDeviceArray, exportDeviceArrayStream, freeDeviceArray, exportSchema, importArrayStream, importArrayView, importDeviceArrayStream,
  importDeviceArrayAsync, importDeviceArrayView, importSchemaNode, produceAsyncDeviceStream, type ArrayView, type MemoryOption, type Ptr,
  type SchemaNode, type WebGPUDevice,
} from '../src/index.js';
import { nodeToSchema } from '../src/schema/arrowjs.js';
import { schemaToNode } from '../src/schema/export.js';
import { viewToData } from '../src/array/arrowjs.js';
import { collectUntil } from '../test/helpers/gc.js';
import { diffTables, diffValues, type Tabular } from '../test/helpers/compare.js';
import { readIntegrationJsonFile } from './integration/json.js';
import { diffFlechette, exportFlechette, flechetteOfCase, flechetteSkip, goldOf, importFlechette } from './conformance-flechette.js';
import type { CaseData, CasePtrs, Peer } from './peers/peer.js';

const EXTS = ['.arrow_file', '.arrow', '.stream', '.arrows', '.json.gz', '.json'];

/** Cases by name, each with the files that hold it. */
export function discover(paths: string[]): Map<string, string[]> {
  const cases = new Map<string, string[]>();
  const add = (file: string): void => {
    const ext = EXTS.find((e) => file.endsWith(e));
    if (!ext) return;
    const name = basename(file).slice(0, -ext.length);
    cases.set(name, [...(cases.get(name) ?? []), file]);
  };
  for (const p of paths) {
    if (!existsSync(p)) throw new Error(`no such file or folder: ${p}`);
    if (statSync(p).isDirectory()) for (const f of readdirSync(p).sort()) add(join(p, f));
    else add(p);
  }
  return cases;
}

/** Reads a case from the first of its files that can be read: IPC through arrow-js, else integration JSON. */
export function load(files: string[]): CaseData & { source: string } {
  const byPreference = [...files].sort((a, b) => EXTS.findIndex((e) => a.endsWith(e)) - EXTS.findIndex((e) => b.endsWith(e)));
  const errors: string[] = [];
  for (const f of byPreference) {
    try {
      if (f.endsWith('.json.gz') || f.endsWith('.json')) {
        const c = readIntegrationJsonFile(f);
        return { schema: c.schema, batches: c.batches, source: basename(f) };
      }
      const bytes = readFileSync(f);
      const table: Table = tableFromIPC(bytes);
      // arrow-js 21 may report a wrong table schema when field names repeat; the batches' data types are right.
      const first = table.batches[0];
      const schema = schemaToNode(first ? new Schema((first.data.type as Struct).children, table.schema.metadata) : table.schema);
      // arrow-js reads a file of zero batches as one empty batch: keep it at zero.
      const reader = RecordBatchReader.from(bytes).open();
      const none = reader.isFile() && reader.numRecordBatches === 0;
      return { schema, batches: none ? [] : table.batches.map((b) => dataToView(b.data, schema)), source: basename(f) };
    } catch (e) {
      errors.push(`${basename(f)}: ${(e as Error).message}`);
    }
  }
  throw new Error(`no readable file: ${errors.join('; ')}`);
}

/** Same schema node: formats, names, flags, metadata, recursively. */
export function diffSchemaNodes(a: SchemaNode, b: SchemaNode, path = 'schema'): string | undefined {
  if (a.format !== b.format) return `${path}.format: ${a.format} != ${b.format}`;
  if ((a.name ?? '') !== (b.name ?? '')) return `${path}.name: ${a.name} != ${b.name}`;
  if (a.flags !== b.flags) return `${path}.flags: ${a.flags} != ${b.flags}`;
  const ma = JSON.stringify([...(a.metadata ?? [])]);
  const mb = JSON.stringify([...(b.metadata ?? [])]);
  if (ma !== mb) return `${path}.metadata: ${ma} != ${mb}`;
  if (a.children.length !== b.children.length) return `${path}.n_children: ${a.children.length} != ${b.children.length}`;
  for (let i = 0; i < a.children.length; i++) {
    const d = diffSchemaNodes(a.children[i]!, b.children[i]!, `${path}.children[${i}]`);
    if (d) return d;
  }
  if (!!a.dictionary !== !!b.dictionary) return `${path}.dictionary: present on one side only`;
  if (a.dictionary && b.dictionary) return diffSchemaNodes(a.dictionary, b.dictionary, `${path}.dictionary`);
  return undefined;
}

/**
 * Compares two cases: schemas exactly (unless the peer maps types), then
 * every value. With `--target flechette`, a case imported into flechette is
 * compared with `expected` (there the gold integration JSON, see `runCase`)
 * through what flechette returns (tools/conformance-flechette.ts).
 */
export function diffCases(expected: CaseData, actual: CaseData, exactTypes: boolean): string | undefined {
  if (target === 'flechette' && actual.flechette) return diffFlechette(expected, actual, exactTypes, flechetteLimits);
  if (exactTypes) {
    const d = diffSchemaNodes(expected.schema, actual.schema);
    if (d) return d;
  }
  const rowsE = expected.batches.reduce((n, b) => n + b.length, 0);
  const rowsA = actual.batches.reduce((n, b) => n + b.length, 0);
  if (rowsE !== rowsA) return `rows: ${rowsE} != ${rowsA}`;
  const e = toTable(expected);
  const a = toTable(actual);
  if (!exactTypes) {
    // Peers that map types (DuckDB: large -> regular, etc.) are compared on names and values.
    return diffValues(e, a);
  }
  return diffTables(e, a);
}

/**
 * The case as something table-like. Not an arrow-js `Table`: its
 * constructor compares schemas by field name and rejects repeated names
 * (gold case generated_duplicate_fieldnames), so columns are joined by hand.
 */
function toTable(c: CaseData): Tabular {
  const arrow = nodeToSchema(c.schema, 'schema', { expand: true });
  const type = new Struct(arrow.fields);
  const views = c.batches.length > 0 ? c.batches : [emptyBatch(c.schema)];
  const batches = views.map((v) => new RecordBatch(arrow, viewToData(v, type, 'array', { expand: true }) as Data<Struct>));
  const columns = arrow.fields.map((f, i) => new Vector(batches.map((b) => b.data.children[i]!) as Data[]));
  return {
    schema: arrow,
    numRows: batches.reduce((n, b) => n + b.numRows, 0),
    numCols: arrow.fields.length,
    getChildAt: (i: number) => columns[i] ?? null,
  };
}

/**
 * Waits (collecting garbage) until nothing of ours is live: no import (every
 * struct a peer gave us released by us) and no export beyond those the peer
 * says it holds (`Peer.heldExports`: structs of ours it took and never
 * released, its own leaks). Returns the leak otherwise, saying whose.
 */
export async function settle(peer?: Peer): Promise<string | undefined> {
  const held = (): number => peer?.heldExports?.() ?? 0;
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === held(), 100);
  if (ok) return undefined;
  const a = accounting();
  const theirs = held() > 0 ? ` (${peer!.name} holds ${held()} of them, its own leak)` : '';
  return `leak: ${a.liveImports} imports and ${a.liveExports} exports live${theirs}: ${JSON.stringify(a)}`;
}

/**
 * The transport a run goes through (`--via`): `array` (ArrowSchema +
 * ArrowArray per batch), `device` (ArrowDeviceArray on the CPU), `stream`
 * (ArrowArrayStream), `device-stream` (ArrowDeviceArrayStream), `async`
 * (ArrowAsyncDeviceStreamHandler, see `produceCase`/`readCase`), `cuda`
 * (ArrowDeviceArray in CUDA device memory: every batch is copied to the
 * device on export and imported as a `DeviceArray`, then copied back to the
 * host; a real GPU or the simulated runtime, see tools/conformance.ts),
 * `webgpu` (ArrowDeviceArray in WebGPU buffers: every batch uploaded to a
 * GPUDevice on export, imported with `importDeviceArrayAsync` at `full`,
 * which reads what it checks from the GPU, then copied back with
 * `toHostViewAsync`; Dawn for Node, see tools/conformance.ts).
 */
export type Via = 'array' | 'device' | 'stream' | 'device-stream' | 'async' | 'cuda' | 'webgpu';
export const VIAS: readonly Via[] = ['array', 'device', 'stream', 'device-stream', 'async', 'cuda', 'webgpu'];

let gpuDevice: WebGPUDevice | undefined;
/** The GPUDevice of `--via webgpu`. */
export function setGpuDevice(d: WebGPUDevice): void {
  gpuDevice = d;
}

/**
 * The Arrow library the cases are imported into and exported from
 * (`--target`): `arrow-js` (the main entry; `ArrayView`s compared through
 * arrow-js objects) or `flechette` (arrow-device/flechette: imports into
 * flechette tables, exports from them; tools/conformance-flechette.ts).
 */
export type Target = 'arrow-js' | 'flechette';
export const TARGETS: readonly Target[] = ['arrow-js', 'flechette'];

let target: Target = 'arrow-js';
/** Sets the target of `exportCase`/`importCase`/`diffCases` for the run. */
export function setTarget(t: Target): void {
  target = t;
}
export function currentTarget(): Target {
  return target;
}
/** What flechette's `at()` could not return exactly in the current case (said in its line, not a failure). */
const flechetteLimits = new Set<string>();

let via: Via = 'array';
/** Sets the transport of `exportCase`/`importCase` for the run. */
export function setVia(v: Via): void {
  via = v;
}
export function currentVia(): Via {
  return via;
}

/** Exports a case (schema node + views) as C structs, through the run's transport. */
export function exportCase(c: CaseData, opts: MemoryOption = {}, through: Via = via): CasePtrs {
  // --target flechette: a case that holds a flechette table is exported from it, through arrow-device/flechette.
  if (target === 'flechette' && c.flechette) return exportFlechette(c.flechette, opts, through);
  switch (through) {
    case 'stream':
    case 'device-stream': {
      // Streams carry the case's struct ArrayViews as they are: every type of the spec goes through.
      const stream =
        through === 'stream'
          ? exportArrayStream(c.batches, { ...opts, schema: c.schema })
          : exportDeviceArrayStream(c.batches, { ...opts, schema: c.schema });
      return { schema: 0n, arrays: [], stream };
    }
    case 'device': {
      const schema = exportSchema(c.schema, opts);
      return { schema, arrays: c.batches.map((b) => exportDeviceArray(b, opts)) };
    }
    case 'cuda':
    case 'webgpu': {
      const schema = exportSchema(c.schema, opts);
      const arrays: Ptr[] = [];
      const to = through === 'cuda' ? { deviceType: DeviceType.CUDA, deviceId: 0 } : { deviceType: DeviceType.WEBGPU, gpuDevice };
      try {
        for (const b of c.batches) arrays.push(exportDeviceArray(b, { ...opts, ...to }));
      } catch (e) {
        // A failed copy to the device: what was exported so far is released, nothing leaks.
        for (const a of arrays) freeDeviceArray(a, opts);
        freeArrowSchema(schema, opts);
        throw e;
      }
      return { schema, arrays };
    }
    default: {
      const schema = exportSchema(c.schema, opts);
      return { schema, arrays: c.batches.map((b) => exportArray(b, opts)) };
    }
  }
}

/**
 * Imports C structs as a case (views), through the run's transport. Import
 * consumes the structs (their release is NULL afterwards, success or
 * failure); `free` then frees the struct memory itself, with the allocator
 * of whoever allocated it.
 */
export function importCase(ptrs: CasePtrs, free: (p: bigint) => void, opts: MemoryOption = {}, through: Via = via): CaseData {
  // --target flechette: into a flechette table (only --via array and stream get here, see runCase).
  if (target === 'flechette') return importFlechette(ptrs, free, opts);
  const full = { ...opts, validate: 'full' as const };
  try {
    if (ptrs.stream !== undefined) {
      const r =
        through === 'device-stream'
          ? importDeviceArrayStream(ptrs.stream, { ...full, view: true, toHost: true })
          : importArrayStream(ptrs.stream, { ...full, view: true });
      return { schema: r.schemaNode, batches: r.readAll() };
    }
    const schema = importSchemaNode(ptrs.schema, opts);
    if (through === 'device' || through === 'cuda') {
      return {
        schema,
        batches: ptrs.arrays.map((p) => {
          const v = importDeviceArrayView(p, schema, full);
          if (through === 'cuda' && !(v instanceof DeviceArray && v.deviceType === DeviceType.CUDA)) {
            if (v instanceof DeviceArray) v.release();
            throw new Error('--via cuda: the batch did not come back as CUDA device memory');
          }
          if (!(v instanceof DeviceArray)) return v;
          try {
            return v.toHostView(full);
          } finally {
            v.release();
          }
        }),
      };
    }
    return { schema, batches: ptrs.arrays.map((p) => importArrayView(p, schema, full)) };
  } finally {
    if (ptrs.stream !== undefined) free(ptrs.stream);
    else {
      free(ptrs.schema);
      for (const p of ptrs.arrays) free(p);
    }
  }
}

/**
 * `importCase` for every transport, `webgpu` included (whose imports and
 * copies back are asynchronous: the structs are still consumed at once).
 */
export async function importCaseAsync(ptrs: CasePtrs, free: (p: bigint) => void, opts: MemoryOption = {}, through: Via = via): Promise<CaseData> {
  if (through !== 'webgpu') return importCase(ptrs, free, opts, through);
  const full = { ...opts, validate: 'full' as const };
  const devs: DeviceArray[] = [];
  let schema: SchemaNode;
  try {
    schema = importSchemaNode(ptrs.schema, opts);
    // Every struct moved now (the imports run synchronously up to their device reads), then awaited.
    const pending = ptrs.arrays.map((p) => importDeviceArrayAsync(p, schema, full));
    const settled = await Promise.allSettled(pending);
    for (const r of settled) if (r.status === 'fulfilled') devs.push(r.value);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    for (const d of devs) if (d.deviceType !== DeviceType.WEBGPU) throw new Error('--via webgpu: the batch did not come back as WebGPU memory');
    const batches: ArrayView[] = [];
    for (const d of devs) batches.push(await d.toHostViewAsync(full));
    return { schema, batches };
  } finally {
    for (const d of devs) d.release();
    free(ptrs.schema);
    for (const p of ptrs.arrays) free(p);
  }
}

/** Async transport, our producer side: pushes the case into a consumer's handler until it releases it. */
export async function produceCase(c: CaseData, handler: Ptr): Promise<void> {
  const r = await produceAsyncDeviceStream(c.batches, handler, { schema: c.schema });
  if (r.end !== 'complete') throw new Error(`async produce ended ${r.end}: ${r.error?.message ?? ''}`);
}

/** Async transport, our consumer side: `start` makes a producer push into our handler; reads it all. */
export async function readCase(start: (handler: Ptr) => Promise<unknown>): Promise<CaseData> {
  // keep: every item is compared after the whole stream was read; views carry every type.
  const reader = createAsyncDeviceStreamReader({ validate: 'full', keep: true, view: true, toHost: true });
  let failure: unknown;
  const producing = (async () => start(reader.handler))().catch((e: unknown) => {
    failure = e;
    // A producer that failed before sending the schema never releases the handler: free it.
    if (!reader.deviceType) reader.dispose();
  });
  const batches: ArrayView[] = [];
  try {
    for await (const b of reader) batches.push(b);
  } catch (e) {
    await producing;
    throw failure ?? e;
  }
  await producing;
  if (failure) throw failure;
  await reader.released;
  return { schema: await reader.schemaNodeAsync, batches };
}

/** Every transport carries every type (streams and async streams carry ArrayViews): nothing is skipped for it. */
function transportSkip(_e: unknown): string | undefined {
  return undefined;
}

/** A case's outcome; `peerLeak`: structs of ours the peer took during the case and never released. */
export interface CaseResult {
  status: 'pass' | 'fail' | 'skip';
  detail: string;
  peerLeak?: number;
}

export async function runCase(peer: Peer, name: string, files: string[]): Promise<CaseResult> {
  let data: CaseData & { source: string };
  try {
    data = { ...load(files), files };
  } catch (e) {
    return { status: 'fail', detail: (e as Error).message };
  }
  const why = peer.unsupported(data) ?? peer.supports?.(via) ?? (target === 'flechette' ? flechetteSkip(via) : undefined);
  if (why) return { status: 'skip', detail: why };
  if (via === 'async' && (!peer.asyncRoundTrip || !peer.asyncPeerFirst)) return { status: 'skip', detail: `${peer.name} has no async interface` };
  if (via !== 'array' && !peer.supports) return { status: 'skip', detail: `${peer.name} takes only ArrowArray (--via array)` };
  if (via === 'cuda' && peer.name !== 'self') return { status: 'skip', detail: `--via cuda: ${peer.name} does not read CUDA memory here` };
  if (via === 'webgpu' && peer.name !== 'self') return { status: 'skip', detail: `--via webgpu: ${peer.name} does not read WebGPU memory` };
  const notes: string[] = [data.source];
  /** --target flechette: a difference between our flechette import of the peer's own export and the gold data. */
  let peerExportDiff: string | undefined;
  /** --target flechette: flechette's own IPC reader disagreeing with the gold data (its bug; the case runs on, then fails). */
  let readerDiff: string | undefined;
  flechetteLimits.clear();
  if (target === 'flechette') {
    // The gold data (integration JSON) is the case from here on (arrow-js's reading of the IPC file loses what arrow-js
    // cannot say, e.g. a map's own field names), and the case as flechette's own objects (its IPC reader) is exported.
    try {
      const gold = goldOf(data);
      data = { ...data, schema: gold.schema, batches: gold.batches };
      const json = files.find((f) => f.endsWith('.json.gz') || f.endsWith('.json'));
      if (json) notes[0] = `gold ${basename(json)}`;
      const f = flechetteOfCase(data);
      data.flechette = f.table;
      notes.push(f.note);
      readerDiff = f.readerDiff;
    } catch (e) {
      return { status: 'fail', detail: `flechette: ${(e as Error).stack ?? String(e)}` };
    }
  }
  const heldBefore = peer.heldExports?.() ?? 0;
  // Direction 1: ours first.
  try {
    const d = await (async () => {
      const back = via === 'async' ? await peer.asyncRoundTrip!(data) : await peer.roundTrip(data, exportCase(data));
      return diffCases(data, back.data, peer.exactTypes) ?? (back.note ? (notes.push(back.note), undefined) : undefined);
    })();
    if (d) return { status: 'fail', detail: `ours first: ${d}` };
    const leak = await settle(peer);
    if (leak) return { status: 'fail', detail: `ours first: ${leak}` };
  } catch (e) {
    const skip = peer.skipReason?.(e) ?? transportSkip(e);
    if (skip) return skipped(peer, 'ours first', skip);
    return { status: 'fail', detail: `ours first: ${(e as Error).stack ?? String(e)}` };
  }
  // Direction 2: peer first.
  try {
    const d =
      via === 'async'
        ? await peer.asyncPeerFirst!(data)
        : await peer.peerFirst(data, async (ptrs, free) => {
            const c = await importCaseAsync(ptrs, free, { memory: peer.memory });
            // --target flechette: what we imported of the peer's own export is compared with the gold data too.
            if (target === 'flechette') {
              const undone = peer.undoSchemaChanges ? { ...c, schema: peer.undoSchemaChanges(data.schema, c.schema) } : c;
              peerExportDiff ??= diffCases(data, undone, peer.exactTypes);
            }
            return exportCase(c);
          });
    if (d) return { status: 'fail', detail: `peer first: ${d}` };
    if (peerExportDiff) return { status: 'fail', detail: `peer first: our flechette import of ${peer.name}'s export: ${peerExportDiff}` };
    const leak = await settle(peer);
    if (leak) return { status: 'fail', detail: `peer first: ${leak}` };
  } catch (e) {
    const skip = peer.skipReason?.(e) ?? transportSkip(e);
    if (skip) return skipped(peer, 'peer first', skip);
    return { status: 'fail', detail: `peer first: ${(e as Error).stack ?? String(e)}` };
  }
  void name;
  const held = (peer.heldExports?.() ?? 0) - heldBefore;
  if (held > 0) notes.push(`${peer.name} did not release ${held} of the structs we exported to it (its leak, not ours)`);
  for (const l of flechetteLimits) notes.push(`read around: ${l}`);
  if (readerDiff) return { status: 'fail', detail: `${readerDiff}; otherwise passed: ${notes.join('; ')}` };
  return { status: 'pass', detail: notes.join('; '), ...(held > 0 ? { peerLeak: held } : {}) };
}

/**
 * A case the peer refused part way (its own "not supported"): what was
 * exchanged before the refusal must still be released, so the accounting
 * is checked here too (else a leak would be blamed on the next case).
 */
async function skipped(peer: Peer, direction: string, why: string): Promise<CaseResult> {
  const leak = await settle(peer);
  return leak ? { status: 'fail', detail: `${direction}: ${why}, then ${leak}` } : { status: 'skip', detail: why };
}


/** An empty batch (length 0) of a struct schema: what a peer needs to create a table with no rows. */
export function emptyBatch(schema: SchemaNode): ArrayView {
  return emptyView(schema);
}

function emptyView(node: SchemaNode): ArrayView {
  const t = node.type;
  const offsets = (w: number): Uint8Array => new Uint8Array(w);
  let buffers: (Uint8Array | null)[];
  switch (t.id) {
    case 'null': case 'run_end_encoded': buffers = []; break;
    case 'binary': case 'utf8': buffers = [null, offsets(4), new Uint8Array(0)]; break;
    case 'large_binary': case 'large_utf8': buffers = [null, offsets(8), new Uint8Array(0)]; break;
    case 'binary_view': case 'utf8_view': buffers = [null, new Uint8Array(0), new Uint8Array(0)]; break;
    case 'list': case 'map': buffers = [null, offsets(4)]; break;
    case 'large_list': buffers = [null, offsets(8)]; break;
    case 'list_view': case 'large_list_view': buffers = [null, new Uint8Array(0), new Uint8Array(0)]; break;
    case 'fixed_list': case 'struct': buffers = [null]; break;
    case 'union': buffers = t.mode === 'dense' ? [new Uint8Array(0), new Uint8Array(0)] : [new Uint8Array(0)]; break;
    default: buffers = [null, new Uint8Array(0)];
  }
  return {
    schema: node,
    length: 0,
    offset: 0,
    nullCount: 0,
    buffers,
    children: node.children.map(emptyView),
    dictionary: node.dictionary ? emptyView(node.dictionary) : null,
  };
}

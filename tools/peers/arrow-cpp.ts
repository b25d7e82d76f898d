/**
 * Arrow C++ (the libarrow of the pyarrow wheel, through test/peers/arrow-cpp)
 * as a conformance peer. Arrow C++ keeps every type, so cases are compared
 * exactly; and it reads the case's IPC file itself, so both directions are
 * also checked against Arrow's own reading with Arrow's `Equals`:
 *
 * - ours first: we export -> Arrow imports (and compares with its read of
 *   the `.arrow_file`) -> Arrow exports -> we import -> the runner compares.
 * - peer first: Arrow reads the `.arrow_file` and exports -> we import and
 *   export -> Arrow imports and compares with its read. (Without a file, or
 *   when the runner does not pass the case's files, Arrow's copy is its
 *   import of our export of the case.)
 *
 * Leaks: Arrow allocates every buffer it reads and the private data of every
 * export in its default memory pool, so at the start of each direction (after
 * the runner has settled the previous one) and at close the pool must be back
 * at its size when the peer was made.
 *
 * Set up with test/peers/arrow-cpp/setup.sh.
 */
import { nativeMemory, type SchemaNode } from '../../src/index.js';
import {
  arrowCppMissing, arrowCppPoolBytes, arrowCppVersion, asyncProduce, AsyncConsumer, Batches, freeStruct, releaseAndFree,
} from '../../test/peers/arrow-cpp/arrowcpp.js';
import { collectUntil } from '../../test/helpers/gc.js';
import { currentVia, exportCase, importCase, produceCase, readCase } from '../conformance-lib.js';
import type { CaseData, CasePtrs, Peer } from './peer.js';

/** Frees struct memory we allocated (import has already consumed the struct). */
const freeOurs = (p: bigint): void => nativeMemory().free(p);

/** The case's IPC file, when the runner passes the case's files along. */
function ipcFileOf(c: CaseData): string | undefined {
  const files = (c as CaseData & { files?: readonly string[] }).files;
  return files?.find((f) => f.endsWith('.arrow_file') || f.endsWith('.arrow'));
}

/** Arrow imports structs of ours (moving them), through the run's transport, and frees their memory. */
async function arrowImports(ptrs: CasePtrs): Promise<Batches> {
  try {
    if (ptrs.stream !== undefined) {
      // Arrow's stream import pulls every batch: our get_next runs on the JS thread, Arrow waits on a worker.
      return currentVia() === 'device-stream' ? await Batches.importDeviceStream(ptrs.stream) : await Batches.importStream(ptrs.stream);
    }
    return currentVia() === 'device' ? Batches.importDevice(ptrs.schema, ptrs.arrays) : Batches.import(ptrs.schema, ptrs.arrays);
  } finally {
    if (ptrs.stream !== undefined) freeOurs(ptrs.stream);
    else {
      freeOurs(ptrs.schema);
      for (const p of ptrs.arrays) freeOurs(p);
    }
  }
}

/** Arrow exports a schema and every batch into new structs (memory freed with freeStruct), through the run's transport. */
function arrowExports(b: Batches): CasePtrs {
  const via = currentVia();
  if (via === 'stream') return { schema: 0n, arrays: [], stream: b.exportStream() };
  if (via === 'device-stream') return { schema: 0n, arrays: [], stream: b.exportDeviceStream() };
  const schema = b.exportSchema();
  const arrays: bigint[] = [];
  try {
    for (let i = 0; i < b.count; i++) arrays.push(via === 'device' ? b.exportDeviceBatch(i) : b.exportBatch(i));
  } catch (e) {
    releaseAndFree(schema, 'ArrowSchema');
    for (const p of arrays) releaseAndFree(p, 'ArrowArray');
    throw e;
  }
  return { schema, arrays };
}

/**
 * Workaround (gold case generated_extension): Arrow C++ recognises the
 * canonical extension type arrow.uuid on import, and on export writes the
 * field's metadata back as its own metadata followed by ARROW:extension:name
 * and ARROW:extension:metadata, in that order; the gold file has them the
 * other way round. Same pairs, other order: metadata is a set of pairs to
 * both Arrow C++ (KeyValueMetadata equality ignores order) and arrow-js, but
 * the runner compares it in order. So where a node of `actual` holds an
 * extension type and exactly the original's pairs, take the original's order.
 */
function extensionMetadataInOriginalOrder(original: SchemaNode, actual: SchemaNode): SchemaNode {
  const o = original.metadata;
  const a = actual.metadata;
  const reorder =
    o && a && o.has('ARROW:extension:name') && o.size === a.size && [...o].every(([k, v]) => a.get(k) === v) &&
    [...o.keys()].join('\0') !== [...a.keys()].join('\0');
  const children = actual.children.map((c, i) => (original.children[i] ? extensionMetadataInOriginalOrder(original.children[i]!, c) : c));
  const dictionary =
    actual.dictionary && original.dictionary ? extensionMetadataInOriginalOrder(original.dictionary, actual.dictionary) : actual.dictionary;
  return { ...actual, metadata: reorder ? new Map(o) : a, children, dictionary };
}

/**
 * Workaround (gold case generated_map_non_canonical, seen with --target
 * flechette): Arrow C++ names a map's entries, key and value fields
 * "entries", "key" and "value" whatever the schema says, in its IPC reader
 * and in its C Data import (pyarrow 26: `ipc.open_file(...)` of the gold
 * file, and `Schema._import_from_c` of our export, both say
 * `entries: struct<key, value>`; the gold file says `some_entries:
 * struct<some_key, some_value>`). arrow-js does the same on reading, so the
 * arrow-js target never sees other names. Where a map node of `actual` has
 * exactly those names and the original other ones, take the original's.
 */
function mapNamesOfOriginal(original: SchemaNode, actual: SchemaNode): SchemaNode {
  const named = (n: SchemaNode, name: string): SchemaNode => (n.name === name ? n : { ...n, name });
  let children = actual.children.map((c, i) => (original.children[i] ? mapNamesOfOriginal(original.children[i]!, c) : c));
  const e = children[0];
  const oe = original.children[0];
  if (actual.type.id === 'map' && original.type.id === 'map' && e && oe && e.name === 'entries' && e.children.length === 2 &&
      e.children[0]!.name === 'key' && e.children[1]!.name === 'value' && oe.children.length === 2) {
    children = [{ ...named(e, oe.name ?? ''), children: [named(e.children[0]!, oe.children[0]!.name ?? ''), named(e.children[1]!, oe.children[1]!.name ?? '')] }];
  }
  const dictionary = actual.dictionary && original.dictionary ? mapNamesOfOriginal(original.dictionary, actual.dictionary) : actual.dictionary;
  return { ...actual, children, dictionary };
}

/** What Arrow C++ changes in a schema it exports, undone (both workarounds above). */
function undoArrowChanges(original: SchemaNode, actual: SchemaNode): SchemaNode {
  return mapNamesOfOriginal(original, extensionMetadataInOriginalOrder(original, actual));
}

export async function arrowCppPeer(): Promise<Peer> {
  const missing = arrowCppMissing();
  if (missing) throw new Error(missing);
  const baseline = arrowCppPoolBytes();

  /** Throws when Arrow's pool is not back at the baseline (after letting finalizers run). */
  const checkPool = async (after: string): Promise<void> => {
    if (await collectUntil(() => arrowCppPoolBytes() === baseline, 50)) return;
    throw new Error(`Arrow's memory pool holds ${arrowCppPoolBytes() - baseline} bytes more than at the start, after ${after}`);
  };
  /** The direction whose leftovers the next check would find. */
  let last = 'start';

  return {
    name: `arrow-cpp (Arrow C++ ${arrowCppVersion()})`,
    exactTypes: true,
    unsupported: () => undefined,
    supports: () => undefined,
    undoSchemaChanges: undoArrowChanges,
    async asyncRoundTrip(original) {
      await checkPool(last);
      last = 'ours first (async)';
      // We produce into Arrow's handler (CreateAsyncDeviceStreamHandler); Arrow produces back into ours
      // (ExportAsyncRecordBatchReader, on a thread of its own).
      const consumer = new AsyncConsumer();
      let mid: Batches | undefined;
      let file: Batches | undefined;
      try {
        const collected = consumer.collect();
        await produceCase(original, consumer.handler);
        mid = await collected;
        const path = ipcFileOf(original);
        if (path) {
          file = Batches.readIpcFile(path);
          const d = file.diff(mid, { exactBatches: false });
          if (d) throw new Error(`Arrow C++ finds what it received from us differs from its read of ${path}: ${d}`);
        }
        const m = mid;
        const data = await readCase((h) => asyncProduce(m, h));
        return { data: { ...data, schema: undoArrowChanges(original.schema, data.schema) } };
      } finally {
        file?.free();
        mid?.free();
        consumer.free();
      }
    },
    async asyncPeerFirst(original) {
      await checkPool(last);
      last = 'peer first (async)';
      const path = ipcFileOf(original);
      if (!path) throw new Error('--via async with arrow-cpp needs the case IPC file');
      const theirs = Batches.readIpcFile(path);
      const consumer = new AsyncConsumer();
      try {
        const ours = await readCase((h) => asyncProduce(theirs, h));
        const collected = consumer.collect();
        await produceCase(ours, consumer.handler);
        const back = await collected;
        try {
          const d = theirs.diff(back, { exactBatches: false });
          return d ? `Arrow C++ Equals: ${d}` : undefined;
        } finally {
          back.free();
        }
      } finally {
        consumer.free();
        theirs.free();
      }
    },
    async roundTrip(original, ptrs) {
      await checkPool(last);
      last = 'ours first';
      const mid = await arrowImports(ptrs);
      let file: Batches | undefined;
      try {
        const path = ipcFileOf(original);
        if (path) {
          file = Batches.readIpcFile(path);
          // Values only: arrow-js reads a file with no batches as one empty batch (see load()).
          const d = file.diff(mid, { exactBatches: false });
          if (d) throw new Error(`Arrow C++ finds what it imported from us differs from its read of ${path}: ${d}`);
        }
        const back = arrowExports(mid);
        const data = importCase(back, freeStruct);
        // (...data: --target flechette keeps its table, whose schema diffFlechette compares unordered.)
        return { data: { ...data, schema: undoArrowChanges(original.schema, data.schema) } };
      } finally {
        file?.free();
        mid.free();
      }
    },
    async peerFirst(original, through) {
      await checkPool(last);
      last = 'peer first';
      const path = ipcFileOf(original);
      const theirs = path ? Batches.readIpcFile(path) : await arrowImports(exportCase(original));
      try {
        const ours = await through(arrowExports(theirs), freeStruct);
        const back = await arrowImports(ours);
        try {
          const d = theirs.diff(back);
          return d ? `Arrow C++ Equals: ${d}` : undefined;
        } finally {
          back.free();
        }
      } finally {
        theirs.free();
      }
    },
    async close() {
      await checkPool(last);
    },
  };
}

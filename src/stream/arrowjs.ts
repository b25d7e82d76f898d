/**
 * The arrow-js side of streams: hands src/stream/import.ts what a reader of
 * arrow-js `RecordBatch`es builds with, and src/stream/export.ts how arrow-js
 * tables, readers and batches are exported. Imported for its effect by
 * every entry that hands out arrow-js readers (src/index.ts, src/stream/index.ts,
 * src/adbc/index.ts); a reader of `ArrayView`s (the flechette target) needs
 * none of it, and so loads no apache-arrow.
 */
import { RecordBatch, RecordBatchReader, Table } from 'apache-arrow';
import { exportArray } from '../array/api.js';
import { buildBatch, importedTable } from '../array/build.js';
import { batchSchemaOf } from '../array/plan-arrowjs.js';
import { nodeToSchema } from '../schema/arrowjs.js';
import { batchNodeOf } from '../schema/export.js';
import { asyncSourceError, setStreamArrowJsExports } from './export.js';
import { setStreamArrowJs } from './import.js';

setStreamArrowJs({ buildBatch, importedTable, batchSchemaOf, nodeToSchema });

setStreamArrowJsExports({
  open(source, path) {
    if (source instanceof Table) {
      const first = source.batches[0];
      return { iterator: source.batches[Symbol.iterator](), schema: first ? batchNodeOf(first) : source.schema };
    }
    if (source instanceof RecordBatchReader) {
      if (source.isAsync()) throw asyncSourceError(path, 'an async RecordBatchReader');
      source.open();
      return { iterator: source[Symbol.iterator](), schema: source.schema };
    }
    return undefined;
  },
  isBatch: (x): x is RecordBatch => x instanceof RecordBatch,
  batchNode: (b) => batchNodeOf(b),
  writeBatch(mem, b, out) {
    // Its layout is the stream's (checked by the caller): exported as exportArray does.
    exportArray(b, { memory: mem, into: out });
  },
});

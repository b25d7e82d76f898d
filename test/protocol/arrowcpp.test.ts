/**
 * Arrow C++ (the libarrow of the pyarrow wheel, through the shim of
 * test/peers/arrow-cpp) on both sides of the exchange protocol, with the
 * few lines of glue a binding would write: as a consumer it reads the
 * stream of `arrowExportable(table)[arrow.c_stream]()`
 * (arrow::ImportRecordBatchReader moves the struct out, reads it, releases
 * it); as a producer its exported stream is wrapped in an owned handle and
 * read by `importTable`. Values equal the table's both ways, Arrow's memory
 * pool and our accounting end where they started.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Table, tableFromArrays } from 'apache-arrow';
import { accounting, ArrowSymbols, arrowExportable, importTable, type ArrowStreamExportable } from '../../src/index.js';
import { collectUntil } from '../helpers/gc.js';
import { arrowCppMissing, arrowCppPoolBytes, Batches, callocStruct, freeStruct, SIZEOF } from '../peers/arrow-cpp/arrowcpp.js';
import { wrapStruct } from './handmade.js';

const missing = arrowCppMissing();
const skip = missing && process.env.ARROW_CPP_REQUIRED !== '1' ? missing : false;

describe('Arrow C++ speaks the exchange protocol', { skip }, () => {
  test('Arrow C++ reads a table through arrow.c_stream; we read Arrow\'s stream back through a handle', async () => {
    const t0 = tableFromArrays({ x: Int32Array.from({ length: 1000 }, (_, i) => i * 7), s: Array.from({ length: 1000 }, (_, i) => `v${i}`) });
    const table = new Table([...t0.slice(0, 400).batches, ...t0.slice(400).batches]);
    const pool = arrowCppPoolBytes();
    const base = accounting();

    // Arrow C++ as the consumer: it moves the stream out of our handle (async: get_next runs JS).
    const handle = arrowExportable(table)[ArrowSymbols.stream]();
    const batches = await Batches.importStream(handle.address);
    handle[Symbol.dispose]();
    await handle.released;
    assert.equal(batches.count, 2);

    // Arrow C++ as the producer: its stream in a handle of its own, read by importTable.
    const producer = {
      [Symbol.for('arrow.c_stream')]: () => wrapStruct(batches.exportStream(callocStruct(SIZEOF.ArrowArrayStream)), 'ArrowArrayStream', freeStruct),
    } as unknown as ArrowStreamExportable;
    const back = importTable(producer);
    assert.equal(back.numRows, 1000);
    assert.deepEqual([...back.getChild('x')!], [...table.getChild('x')!]);
    assert.deepEqual([...back.getChild('s')!], [...table.getChild('s')!]);
    back.release();
    batches.free();

    await collectUntil(() => accounting().liveExports === base.liveExports && arrowCppPoolBytes() === pool);
    assert.equal(accounting().liveExports, base.liveExports, 'Arrow released every export');
    assert.equal(accounting().liveImports, base.liveImports);
    assert.equal(accounting().liveHandles, base.liveHandles);
    assert.equal(arrowCppPoolBytes(), pool, "Arrow's pool is back where it started");
  });
});

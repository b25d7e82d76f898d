/**
 * Validation levels mean the same on every memory: the same malformed
 * array gets the same verdict at each level whether its bytes are read on
 * the host (importArrayView), in place as CPU device memory
 * (importDeviceRecordBatch), through the device reader as CPU memory
 * (importDeviceArray), or through a backend's batched reads as memory the
 * host cannot read (EXT_DEV with a backend that copies, as a GPU's would),
 * and through importDeviceArrayAsync where those reads complete later (as
 * WebGPU's mapAsync does).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  Data, DenseUnion, Dictionary, Field, Int32, Int8, List, makeData, RecordBatch, Schema, Struct, Utf8, Vector, type DataType,
} from 'apache-arrow';
import { DeviceType } from '../../src/abi/constants.js';
import { exportArray, exportSchema, freeArrowArray, freeArrowSchema, importArrayView } from '../../src/array/api.js';
import { releaseImport } from '../../src/array/build.js';
import { cpuBackend, setDeviceBackend, type DeviceBackend } from '../../src/device/backend.js';
import { exportDeviceArray, freeDeviceArray, importDeviceArray, importDeviceArrayAsync, importDeviceRecordBatch, DeviceArray } from '../../src/device/index.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { accounting } from '../../src/memory/index.js';
import { collectUntil } from '../helpers/gc.js';
import { writeDeviceFieldsRaw } from './helpers.js';

const copying: DeviceBackend = {
  name: 'test-copying',
  hostReadable: () => false,
  syncForHost: () => {
    throw new Error('never read in place');
  },
  readBatch: (ctx, ranges, small) => cpuBackend.readBatch(ctx, ranges, small),
};
/** The same copies completing later, as WebGPU's mapAsync does: its arrays go through importDeviceArrayAsync. */
const copyingLater: DeviceBackend = {
  name: 'test-copying-later',
  async: true,
  hostReadable: () => false,
  syncForHost: () => {
    throw new Error('never read in place');
  },
  readBatch: async (ctx, ranges, small) => {
    await new Promise((resolve) => setImmediate(resolve));
    await cpuBackend.readBatch(ctx, ranges, small);
  },
};
let previous: DeviceBackend | undefined;
let previousLater: DeviceBackend | undefined;
before(() => {
  previous = setDeviceBackend(DeviceType.EXT_DEV, copying);
  previousLater = setDeviceBackend(DeviceType.ONEAPI, copyingLater);
});
after(() => {
  setDeviceBackend(DeviceType.EXT_DEV, previous);
  setDeviceBackend(DeviceType.ONEAPI, previousLater);
});

const utf8 = (offsets: number[], data = 'abcdefghijklmnop'): Data =>
  makeData({ type: new Utf8(), length: offsets.length - 1, valueOffsets: new Int32Array(offsets), data: new TextEncoder().encode(data) });

/** A struct of one column: the batch every route imports. */
function batchOf(name: string, column: Data): RecordBatch {
  const field = new Field(name, column.type as DataType, true);
  return new RecordBatch(new Schema([field]), makeData({ type: new Struct([field]), length: column.length, children: [column] }));
}

interface Case {
  readonly name: string;
  readonly batch: () => RecordBatch;
  /** The error each level gives (without the root's place), or null where it imports. */
  readonly minimal: string | null;
  readonly default: string | null;
  readonly full: string | null;
}

const cases: Case[] = [
  {
    name: 'utf8 offsets not monotone (0, 6, 3, 9, 12)',
    batch: () => batchOf('s', utf8([0, 6, 3, 9, 12])),
    minimal: null,
    default: null,
    full: '.children[0].buffers[1]: offsets are not monotone at 2: 3 after 6',
  },
  {
    name: 'a negative first offset',
    batch: () => batchOf('s', utf8([-1, 2, 4])),
    minimal: null,
    default: '.children[0].buffers[1]: first offset -1 is negative',
    full: '.children[0].buffers[1]: first offset -1 is negative',
  },
  {
    name: "a list's child shorter than its last offset",
    batch: () => {
      const item = new Field('item', new Int32(), true);
      const child = makeData({ type: new Int32(), length: 2, data: new Int32Array([1, 2]) });
      return batchOf('l', makeData({ type: new List(item), length: 2, valueOffsets: new Int32Array([0, 2, 5]), child }));
    },
    minimal: null,
    default: '.children[0].children[0].length: 2 is less than the 5 its parent needs',
    full: '.children[0].children[0].length: 2 is less than the 5 its parent needs',
  },
  {
    name: 'a dense union type id the union does not declare',
    batch: () => {
      const a = new Field('a', new Int32(), true);
      const type = new DenseUnion([3], [a]);
      const child = makeData({ type: new Int32(), length: 1, data: new Int32Array([7]) });
      return batchOf('u', makeData({ type, length: 2, typeIds: new Int8Array([3, 5]), valueOffsets: new Int32Array([0, 0]), children: [child] }));
    },
    minimal: null,
    default: null,
    full: ".children[0].buffers[0]: type id 5 at 1 is not one of the union's (3)",
  },
  {
    name: 'a dictionary index outside the dictionary',
    batch: () => {
      const dict = utf8([0, 1, 2]);
      const type = new Dictionary(new Utf8(), new Int8());
      return batchOf('d', makeData({ type, length: 2, data: new Int8Array([1, 4]), dictionary: new Vector([dict]) } as never));
    },
    minimal: null,
    default: null,
    full: '.children[0].buffers[1]: dictionary index 4 at 1 is outside the dictionary of length 2',
  },
];

type Route = (batch: RecordBatch, level: 'minimal' | 'default' | 'full') => Promise<string | null>;

/** The verdict of an import (synchronous or not): its error without the root's place, or null. */
async function verdict(prefix: string, fn: () => { release(): void } | Promise<{ release(): void }>): Promise<string | null> {
  let x: { release(): void };
  try {
    x = await fn();
  } catch (e) {
    assert.ok(e instanceof ArrowDeviceError, String(e));
    assert.ok(e.message.startsWith(prefix), e.message);
    return e.message.slice(prefix.length);
  }
  x.release();
  return null;
}

const routes: Record<string, Route> = {
  'host (importArrayView)': async (batch, validate) => {
    const schema = exportSchema(batch.schema);
    const p = exportArray(batch);
    try {
      return await verdict('array', () => {
        const v = importArrayView(p, schema, { validate });
        return { release: () => releaseImport(v) };
      });
    } finally {
      freeArrowArray(p);
      freeArrowSchema(schema);
    }
  },
  'CPU device memory in place (importDeviceRecordBatch)': async (batch, validate) => {
    const p = exportDeviceArray(batch);
    try {
      return await verdict('device_array.array', () => importDeviceRecordBatch(p, batch.schema, { validate }) as { release(): void });
    } finally {
      freeDeviceArray(p);
    }
  },
  'CPU device memory (importDeviceArray)': async (batch, validate) => {
    const p = exportDeviceArray(batch);
    try {
      return await verdict('device_array.array', () => importDeviceArray(p, batch.schema, { validate }));
    } finally {
      freeDeviceArray(p);
    }
  },
  'memory the host cannot read, batched reads (importDeviceArray of EXT_DEV)': async (batch, validate) => {
    const p = exportDeviceArray(batch);
    writeDeviceFieldsRaw(p, { deviceType: DeviceType.EXT_DEV, deviceId: 0 });
    try {
      return await verdict('device_array.array', () => {
        const d = importDeviceArray(p, batch.schema, { validate });
        assert.ok(d instanceof DeviceArray);
        return d;
      });
    } finally {
      freeDeviceArray(p);
    }
  },
  'memory read asynchronously, batched reads awaited (importDeviceArrayAsync of a device like WebGPU)': async (batch, validate) => {
    const p = exportDeviceArray(batch);
    writeDeviceFieldsRaw(p, { deviceType: DeviceType.ONEAPI, deviceId: 0 });
    try {
      return await verdict('device_array.array', async () => {
        const d = await importDeviceArrayAsync(p, batch.schema, { validate });
        assert.ok(d instanceof DeviceArray);
        return d;
      });
    } finally {
      freeDeviceArray(p);
    }
  },
};

describe('validation levels give the same verdict on every memory', () => {
  for (const c of cases) {
    for (const level of ['minimal', 'default', 'full'] as const) {
      test(`${c.name}, ${level}`, async () => {
        for (const [route, fn] of Object.entries(routes)) {
          assert.equal(await fn(c.batch(), level), c[level], `${route} at ${level}`);
        }
      });
    }
  }

  test('nothing is left live', async () => {
    assert.ok(await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0), JSON.stringify(accounting()));
  });
});

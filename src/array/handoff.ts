/**
 * The exchange protocol's methods of an import (`Exchangeable`, build.ts):
 * the struct its owner holds moves unchanged into a new owned handle
 * (`ImportOwner.moveTo`; CDataInterface.rst, "Moving an array"), so the
 * producer's `release` is called exactly once, by whoever ends up owning it.
 */
import { Data, RecordBatch, Vector } from 'apache-arrow';
import { DeviceType } from '../abi/constants.js';
import { ArrowSymbols, type ArrowSchemaExportable } from '../abi/protocol.js';
import { unsupported } from '../errors.js';
import { releaseStruct, writeDeviceFields } from '../memory/cstruct.js';
import { ArrayExportHandles, ExportHandle } from '../memory/handle.js';
import type { Memory } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import type { SchemaNode } from '../schema/node.js';
import { dataToView } from './arrowjs.js';
import { checkDeviceExportOptions, checkRequestedSchema, moveToHandle, schemaHandle, type ArrayHandleKind } from './exchange.js';
import { writeArrayView } from './export.js';
import { ImportedData, ImportedRecordBatch, ImportedVector, ownersOf } from './build.js';
import { batchNodeOf, schemaNodeOf } from '../schema/export.js';
import type { ImportOwner } from './owner.js';
import type { ArrayView } from './view.js';

/** `view` exported zero-copy (as `exportArray` does) into a new handle of kind `want` in `mem`. */
function viewToHandle(mem: Memory, view: ArrayView, want: ArrayHandleKind): ExportHandle {
  const p = mem.alloc(mem.layouts[want].size);
  try {
    writeArrayView(mem, view, p);
    if (want === 'ArrowDeviceArray') writeDeviceFields(mem, p, DeviceType.CPU, -1, 0n);
  } catch (e) {
    // writeArrayView leaves nothing live on failure; a struct written before a later failure is released.
    releaseStruct(mem, 'ArrowArray', p);
    mem.free(p);
    throw e;
  }
  return ExportHandle.adopt(mem, want, p);
}

// --- the protocol methods of ImportedRecordBatch, ImportedVector, ImportedData --------------

type Handed = ImportedRecordBatch | ImportedVector | ImportedData;

/** The one owner behind an imported object, or null for one with no producer behind it (a host copy). */
function ownerOf(x: Handed, path: string): ImportOwner | null {
  const by = ownersOf(x) ?? [];
  if (by.length > 1) throw unsupported(path, 'an object over several imports: hand on each');
  return by[0] ?? null;
}

/** The schema of an imported object: the one its struct was read by, else its arrow-js form's. */
function nodeOfImport(x: Handed, owner: ImportOwner | null): SchemaNode {
  if (owner?.schema) return owner.schema;
  if (x instanceof RecordBatch) return batchNodeOf(x);
  return schemaNodeOf(x instanceof Vector ? x.type : (x as Data).type);
}

/** The object's data as an ArrayView (for one with no producer behind it: exported from JS memory). */
function viewOfImport(x: Handed, node: SchemaNode, path: string): ArrayView {
  if (x instanceof RecordBatch) return dataToView(x.data, node);
  if (x instanceof Vector) {
    if (x.data.length !== 1) throw unsupported(path, `a Vector of ${x.data.length} chunks is not one array`);
    return dataToView(x.data[0]!);
  }
  return dataToView(x as Data);
}

/** `arrow.c_array` / `arrow.c_device_array` of an import: the struct moved on, or its JS copy exported. */
function handOn(x: Handed, requested: unknown, want: ArrayHandleKind, path: string): ArrayExportHandles {
  let owner = ownerOf(x, path);
  const node = nodeOfImport(x, owner);
  checkRequestedSchema(requested, node, path);
  if (owner?.isReleased) {
    // Released: unreadable, unless it never held producer memory (a copy, or all empty): then its
    // objects are plain JS data, exported as such.
    owner.check(path, 'a hand-on');
    owner = null;
  }
  const mem = owner?.mem ?? nativeMemory();
  const schema = schemaHandle(mem, node);
  try {
    return new ArrayExportHandles(schema, owner ? moveToHandle(owner, want) : viewToHandle(mem, viewOfImport(x, node, path), want));
  } catch (e) {
    schema[Symbol.dispose]();
    throw e;
  }
}

function defineExchange(proto: object, what: string): void {
  Object.defineProperties(proto, {
    [ArrowSymbols.schema]: {
      value: function exportSchema(this: Handed): ExportHandle {
        const owner = ownerOf(this, `${what}[arrow.c_schema]`);
        return schemaHandle(owner?.mem ?? nativeMemory(), nodeOfImport(this, owner));
      },
      configurable: true,
      writable: true,
    },
    [ArrowSymbols.array]: {
      value: function exportArray(this: Handed, requestedSchema?: ArrowSchemaExportable | null): ArrayExportHandles {
        return handOn(this, requestedSchema, 'ArrowArray', `${what}[arrow.c_array]`);
      },
      configurable: true,
      writable: true,
    },
    [ArrowSymbols.deviceArray]: {
      value: function exportDeviceArray(this: Handed, requestedSchema?: ArrowSchemaExportable | null, options?: unknown): ArrayExportHandles {
        checkDeviceExportOptions(options, `${what}[arrow.c_device_array]`);
        return handOn(this, requestedSchema, 'ArrowDeviceArray', `${what}[arrow.c_device_array]`);
      },
      configurable: true,
      writable: true,
    },
  });
}

// Installed here rather than in build.ts, which the modules this one needs (arrowjs.ts) extend
// from: build.ts stays a leaf of the layer. array/api.ts loads this module.
defineExchange(ImportedRecordBatch.prototype, 'batch');
defineExchange(ImportedVector.prototype, 'vector');
defineExchange(ImportedData.prototype, 'data');

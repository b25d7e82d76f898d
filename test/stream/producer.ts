/**
 * A hand-made foreign stream producer for tests: an `ArrowArrayStream` or
 * `ArrowDeviceArrayStream` whose callbacks are plain functions registered
 * here, not src/stream's exporter, so a test can make it misbehave in ways
 * no real peer does on demand: fail on batch k with any code and message
 * bytes (invalid UTF-8 included), return a NULL message, have a NULL
 * get_last_error, hand out device arrays with a wrong header. It counts
 * every call. The arrays themselves come from src/array's exporter (tested
 * on its own and against DuckDB). The message buffer is overwritten on
 * every callback, so a consumer that does not copy it at once sees garbage.
 */
import { Int32, vectorFromArray, type RecordBatch } from 'apache-arrow';
import {
  DeviceType, exportArray, exportSchema, freeArrowArray, freeArrowSchema, nativeMemory, type Ptr, type SchemaLike,
} from '../../src/index.js';

const m = nativeMemory();

export interface ProducerOptions {
  device?: boolean;
  /** The stream's device_type (device streams). Default CPU. */
  deviceType?: number;
  schema: SchemaLike;
  batches: RecordBatch[];
  /** get_schema fails with this code. */
  schemaError?: number;
  /** get_next fails with `code` when asked for batch `at`. */
  failAt?: { at: number; code: number };
  /** What get_last_error returns: bytes (a NUL is added), 'null' (a NULL string), or 'no-callback' (NULL get_last_error). */
  message?: Uint8Array | 'null' | 'no-callback';
  /** Device arrays: patch the header of every array. */
  header?: { deviceType?: number; syncEvent?: bigint; reserved?: [bigint, bigint, bigint] };
}

export interface Producer {
  /** The stream struct (malloc'd here; free with `free`). */
  readonly ptr: Ptr;
  readonly calls: { getSchema: number; getNext: number; getLastError: number; release: number };
  free(): void;
}

interface State {
  opts: ProducerOptions;
  next: number;
  message: Ptr;
  calls: Producer['calls'];
}

const states = new Map<number, State>();
let nextId = 1;

const S = m.layouts.ArrowArrayStream;
const D = m.layouts.ArrowDeviceArrayStream;
const privOf = (ptr: Ptr, device: boolean): number => Number(m.readPtr(ptr + BigInt((device ? D : S).offsets.private_data!)));

/** Overwrites the message buffer with the configured text: what a producer that reuses one buffer does. */
function setMessage(st: State): void {
  const msg = st.opts.message;
  if (st.message !== 0n) {
    m.copyIn(st.message, new Uint8Array(256).fill(0x58)); // 'XXXX...', unterminated garbage until rewritten
    m.writeU8(st.message + 255n, 0);
  }
  if (msg instanceof Uint8Array) {
    if (st.message === 0n) st.message = m.alloc(256);
    const b = new Uint8Array(256);
    b.set(msg.subarray(0, 255));
    m.copyIn(st.message, b);
  }
}

function makeCallbacks(device: boolean) {
  const L = device ? D : S;
  const getSchema = m.registerCallback({ name: `tp_gs_${device}`, result: 'int32', params: ['pointer', 'pointer'] }, (p, out) => {
    const st = states.get(privOf(p as bigint, device))!;
    st.calls.getSchema++;
    if (st.opts.schemaError) {
      setMessage(st);
      return st.opts.schemaError;
    }
    exportSchema(st.opts.schema, { into: out as bigint });
    return 0;
  });
  const getNext = m.registerCallback({ name: `tp_gn_${device}`, result: 'int32', params: ['pointer', 'pointer'] }, (p, out) => {
    const st = states.get(privOf(p as bigint, device))!;
    st.calls.getNext++;
    const i = st.next++;
    if (st.opts.failAt && st.opts.failAt.at === i) {
      setMessage(st);
      return st.opts.failAt.code;
    }
    const o = out as bigint;
    const b = st.opts.batches[i];
    if (!b) {
      m.copyIn(o, new Uint8Array(device ? m.layouts.ArrowDeviceArray.size : m.layouts.ArrowArray.size));
      return 0;
    }
    exportArray(b, { into: o });
    if (device) {
      const A = m.layouts.ArrowDeviceArray.offsets;
      const h = st.opts.header ?? {};
      m.writeI64(o + BigInt(A.device_id!), -1n);
      m.writeI32(o + BigInt(A.device_type!), h.deviceType ?? DeviceType.CPU);
      m.writePtr(o + BigInt(A.sync_event!), h.syncEvent ?? 0n);
      const r = h.reserved ?? [0n, 0n, 0n];
      for (let k = 0; k < 3; k++) m.writeI64(o + BigInt(A.reserved! + 8 * k), r[k]!);
    }
    return 0;
  });
  const getLastError = m.registerCallback({ name: `tp_le_${device}`, result: 'pointer', params: ['pointer'] }, (p) => {
    const st = states.get(privOf(p as bigint, device))!;
    st.calls.getLastError++;
    return st.opts.message === 'null' ? 0n : st.message;
  });
  const release = m.registerCallback({ name: `tp_rel_${device}`, result: 'void', params: ['pointer'] }, (p) => {
    const st = states.get(privOf(p as bigint, device))!;
    st.calls.release++;
    setMessage(st); // invalidates any message pointer handed out
    m.writePtr((p as bigint) + BigInt(L.offsets.release!), 0n);
  });
  return { getSchema, getNext, getLastError, release };
}

// Registered at load, outside any callback (koffi cannot call a callback registered inside one);
// the schema and array layers register their release callbacks on first export: do one here.
freeArrowSchema(exportSchema(new Int32()));
freeArrowArray(exportArray(vectorFromArray([1], new Int32())));
const plain = makeCallbacks(false);
const dev = makeCallbacks(true);

/** Makes a stream struct driven by `opts`. */
export function makeProducer(opts: ProducerOptions): Producer {
  const device = opts.device ?? false;
  const L = device ? D : S;
  const cb = device ? dev : plain;
  const id = nextId++;
  const st: State = { opts, next: 0, message: 0n, calls: { getSchema: 0, getNext: 0, getLastError: 0, release: 0 } };
  states.set(id, st);
  const ptr = m.alloc(L.size);
  const o = L.offsets;
  if (device) m.writeI32(ptr + BigInt(o.device_type!), opts.deviceType ?? DeviceType.CPU);
  m.writePtr(ptr + BigInt(o.get_schema!), cb.getSchema);
  m.writePtr(ptr + BigInt(o.get_next!), cb.getNext);
  m.writePtr(ptr + BigInt(o.get_last_error!), opts.message === 'no-callback' ? 0n : cb.getLastError);
  m.writePtr(ptr + BigInt(o.release!), cb.release);
  m.writePtr(ptr + BigInt(o.private_data!), BigInt(id));
  return {
    ptr,
    calls: st.calls,
    free() {
      m.free(ptr);
      m.free(st.message);
    },
  };
}

/**
 * The `onProducerError` hook of the stream readers: when `get_schema` or
 * `get_next` fails, the hook gets the stream while it is still live (before
 * the reader releases it), so a producer's own error API can be asked about
 * it, as ADBC's `AdbcErrorFromArrayStream` is (test/examples/adbc.test.ts
 * does that with real drivers). Here the C producer of
 * test/ownership/counting.c keeps a detail that only its live stream can
 * give (`cp_stream_error_detail`; its state is freed on release), and counts
 * releases; test/stream/producer.ts fails `get_schema` on demand.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Field, Int32, Schema } from 'apache-arrow';
import {
  ArrowDeviceError, Errno, freeArrowArrayStream, freeArrowDeviceArrayStream, importArrayStream, importDeviceArrayStream, nativeMemory,
  StreamProducerError, type Ptr, type StreamImportOptions,
} from '../../src/index.js';
import { counting, countingMissing } from '../ownership/counting.js';
import { makeProducer } from './producer.js';

const m = nativeMemory();

class DetailedError extends Error {
  constructor(readonly detail: string, cause: unknown) {
    super(`driver says: ${detail}`, { cause });
  }
}

/** Reads a stream to its end or first error; returns the error. */
function readAll(ptr: Ptr, onProducerError: StreamImportOptions['onProducerError']): unknown {
  const reader = importArrayStream(ptr, { onProducerError });
  try {
    for (const _ of reader);
  } catch (e) {
    return e;
  }
  return undefined;
}

describe('onProducerError: the failed stream, live, before release', { skip: countingMissing }, () => {
  test('get_next fails: the hook asks the live stream for its detail; its Error is thrown, with the original as cause', () => {
    const c = counting();
    const streams = c.streamReleases();
    const ptr = c.slowStream(4, 3, { failAt: 1, failCode: Errno.EIO });
    const calls: { detail: string | null; releasedYet: number; op: string; message: string | null }[] = [];
    const err = readAll(ptr, (stream, error) => {
      calls.push({ detail: c.streamErrorDetail(stream), releasedYet: c.streamReleases() - streams, op: error.operation, message: error.producerMessage });
      const d = c.streamErrorDetail(stream);
      return d === null ? undefined : new DetailedError(d, error);
    });
    freeArrowArrayStream(ptr);
    assert.deepEqual(calls, [{ detail: `detail of batch 1: code ${Errno.EIO}, from the live stream`, releasedYet: 0, op: 'get_next', message: 'cp: batch 1 failed' }]);
    assert.ok(err instanceof DetailedError, `the hook's error is thrown: ${String(err)}`);
    assert.equal(err.detail, `detail of batch 1: code ${Errno.EIO}, from the live stream`);
    assert.ok(err.cause instanceof StreamProducerError);
    assert.equal(err.cause.errno, Errno.EIO);
    assert.equal(c.streamReleases() - streams, 1, 'released once, after the hook');
    assert.equal(c.doubleReleases(), 0);
  });

  test('a hook that returns nothing leaves the StreamProducerError thrown', () => {
    const c = counting();
    const streams = c.streamReleases();
    const ptr = c.slowStream(2, 1, { failAt: 0, failCode: 42 });
    let called = 0;
    const err = readAll(ptr, () => void called++);
    freeArrowArrayStream(ptr);
    assert.equal(called, 1);
    assert.ok(err instanceof StreamProducerError);
    assert.equal(err.errno, 42);
    assert.equal(err.producerMessage, 'cp: batch 0 failed');
    assert.equal(c.streamReleases() - streams, 1);
  });

  test('a hook that throws: its error is thrown, and the stream is still released once', () => {
    const c = counting();
    const streams = c.streamReleases();
    const ptr = c.slowStream(3, 1, { failAt: 2, failCode: 5 });
    const err = readAll(ptr, () => {
      throw new RangeError('hook failed');
    });
    freeArrowArrayStream(ptr);
    assert.ok(err instanceof RangeError && err.message === 'hook failed');
    assert.equal(c.streamReleases() - streams, 1);
    assert.equal(c.doubleReleases(), 0);
  });

  test('a hook that returns something other than an Error: a typed invalid error', () => {
    const c = counting();
    const ptr = c.slowStream(1, 1, { failAt: 0, failCode: 5 });
    const err = readAll(ptr, (() => 'not an error') as unknown as () => void);
    freeArrowArrayStream(ptr);
    assert.ok(err instanceof ArrowDeviceError && err.kind === 'invalid' && err.path === 'onProducerError', String(err));
  });

  test('get_schema fails: the hook runs at import, with the live stream, operation get_schema', () => {
    const p = makeProducer({ schema: new Schema([new Field('x', new Int32())]), batches: [], schemaError: Errno.EIO, message: new TextEncoder().encode('no schema today') });
    const seen: { op: string; releases: number; live: boolean }[] = [];
    const R = BigInt(m.layouts.ArrowArrayStream.offsets.release!);
    assert.throws(
      () =>
        importArrayStream(p.ptr, {
          onProducerError: (stream, error) => {
            seen.push({ op: error.operation, releases: p.calls.release, live: m.readPtr(stream + R) !== 0n });
            return new Error(`wrapped: ${error.producerMessage}`, { cause: error });
          },
        }),
      /wrapped: no schema today/,
    );
    assert.deepEqual(seen, [{ op: 'get_schema', releases: 0, live: true }]);
    assert.equal(p.calls.release, 1, 'released once, after the hook');
    p.free();
  });

  test('device streams call the hook too', () => {
    const p = makeProducer({ device: true, schema: new Schema([new Field('x', new Int32())]), batches: [], failAt: { at: 0, code: Errno.ENOMEM } });
    let op = '';
    assert.throws(() => {
      for (const _ of importDeviceArrayStream(p.ptr, { onProducerError: (_s, e) => void (op = e.operation) }));
    }, (e: unknown) => e instanceof StreamProducerError && e.errno === Errno.ENOMEM);
    assert.equal(op, 'get_next');
    assert.equal(p.calls.release, 1);
    freeArrowDeviceArrayStream(p.ptr);
  });

  test('a hook that is not a function is refused at import, and the stream released', () => {
    const c = counting();
    const streams = c.streamReleases();
    const ptr = c.slowStream(1, 1);
    assert.throws(
      () => importArrayStream(ptr, { onProducerError: 'log' as unknown as () => void }),
      (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'onProducerError',
    );
    freeArrowArrayStream(ptr);
    assert.equal(c.streamReleases() - streams, 1);
  });
});

/**
 * `isDetached`, apart from src/memory/wasm.ts (which makes it public) so that
 * the import layer checks a view without loading the wasm backend.
 */

/**
 * Whether a view's ArrayBuffer has been detached (by a growth of the memory it viewed, or by a
 * release: a released import detaches the buffers it handed out).
 *
 * @example
 * const batch = importRecordBatch(arrayPtr, schema);
 * const values = batch.getChild('x')!.data[0]!.values;
 * batch.release();
 * isDetached(values); // true: the typed array reads as empty, never as freed memory
 */
export function isDetached(view: ArrayBufferView): boolean {
  const buf = view.buffer as ArrayBuffer & { detached?: boolean };
  if (typeof buf.detached === 'boolean') return buf.detached;
  // Node 20 has no ArrayBuffer.prototype.detached: only a detached buffer has byteLength 0 while
  // a view over it claims bytes, and slicing a view of a detached buffer throws.
  if (view.byteLength > 0) return false;
  try {
    new Uint8Array(view.buffer, 0, 0);
    return false;
  } catch {
    return true;
  }
}

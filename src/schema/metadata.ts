/**
 * The binary metadata encoding of `ArrowSchema.metadata`
 * (CDataInterface.rst, "ArrowSchema.metadata"): an int32 count of pairs, then
 * for each pair an int32 key length, the key's UTF-8 bytes, an int32 value
 * length and the value's bytes; integers in native byte order (little-endian
 * on every platform we run on). No terminator: the reader must know where
 * the blob ends from the lengths alone, so every length is checked against
 * `maxBytes` before it is followed.
 */
import { ArrowDeviceError, invalid, prefixPath } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { rawOf, stage, staged, type Addr, type RawAccess } from '../memory/raw.js';

/** Field or schema metadata (`ArrowSchema.metadata`) decoded: keys and values as UTF-8 strings, in the blob's order. */
export type Metadata = Map<string, string>;

// ignoreBOM: a string that starts with U+FEFF keeps it (by default a decoder drops a leading BOM, and a
// name or key would lose its first character).
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

/**
 * Upper bound on a metadata blob we are willing to read (16 MiB; the spec
 * sets none). Every length is checked against it before its bytes are read,
 * so a larger blob is refused before most of it is touched.
 */
export const MAX_METADATA_BYTES = 16 << 20;
/**
 * Upper bound on the number of key/value pairs (65,536). Each pair costs a
 * few reads, so the count is refused up front, before any pair is read: a
 * blob of millions of empty pairs would otherwise take seconds to reject.
 */
export const MAX_METADATA_PAIRS = 1 << 16;

/** The `n` bytes at `addr` as UTF-8 (one copy, or none where JS reads the memory in place). */
function readUtf8(raw: RawAccess, addr: Addr, n: number, path: string, what: string): string {
  if (n === 0) return '';
  const at = stage(raw, addr, n);
  try {
    return decoder.decode(staged.u8.subarray(at, at + n));
  } catch {
    throw invalid(path, `${what} is not valid UTF-8`);
  }
}

/** The int32 at `addr`. */
function readI32(raw: RawAccess, addr: Addr): number {
  const at = stage(raw, addr, 4);
  return staged.dv.getInt32(at, true);
}

/** Reads the metadata blob at `addr` (NULL: no metadata). */
export function readMetadata(mem: Memory, addr: Ptr, path = 'metadata', maxBytes = MAX_METADATA_BYTES): Metadata | null {
  if (addr === 0n) return null;
  try {
    return readMetadataAt(rawOf(mem), Number(addr), path, maxBytes);
  } catch (e) {
    // A bad address is reported by the memory without a place: this is the place.
    throw e instanceof ArrowDeviceError && e.path === '' ? prefixPath(e, path) : e;
  }
}

/** `readMetadata` of the blob at `base`, a number address (src/memory/raw.ts). */
export function readMetadataAt(raw: RawAccess, base: Addr, path = 'metadata', maxBytes = MAX_METADATA_BYTES): Metadata {
  let pos = 0;
  const need = (n: number, what: string): void => {
    if (n < 0 || pos + n > maxBytes) throw invalid(path, `${what} runs past the end of the metadata (${maxBytes} bytes at most)`);
  };
  need(4, 'pair count');
  const count = readI32(raw, base);
  pos += 4;
  if (count < 0) throw invalid(path, `negative pair count ${count}`);
  if (count > MAX_METADATA_PAIRS) throw invalid(path, `${count} pairs, more than the ${MAX_METADATA_PAIRS} this library reads`);
  // Every pair takes at least its two lengths (8 bytes).
  if (4 + count * 8 > maxBytes) throw invalid(path, `${count} pairs cannot fit in the ${maxBytes} bytes metadata may take`);
  const out: Metadata = new Map();
  for (let i = 0; i < count; i++) {
    need(4, `key length of pair ${i}`);
    const klen = readI32(raw, base + pos);
    pos += 4;
    if (klen < 0) throw invalid(path, `negative key length ${klen} in pair ${i}`);
    need(klen, `key of pair ${i}`);
    const key = readUtf8(raw, base + pos, klen, path, `key of pair ${i}`);
    pos += klen;
    need(4, `value length of pair ${i}`);
    const vlen = readI32(raw, base + pos);
    pos += 4;
    if (vlen < 0) throw invalid(path, `negative value length ${vlen} in pair ${i}`);
    need(vlen, `value of pair ${i}`);
    const value = readUtf8(raw, base + pos, vlen, path, `value of pair ${i}`);
    pos += vlen;
    out.set(key, value);
  }
  return out;
}

/** Encodes metadata into the binary form; null/empty -> null (export writes NULL). */
export function encodeMetadata(md: ReadonlyMap<string, string> | null | undefined): Uint8Array | null {
  if (!md || md.size === 0) return null;
  const parts: Uint8Array[] = [];
  let size = 4;
  for (const [k, v] of md) {
    const kb = encoder.encode(k);
    const vb = encoder.encode(v);
    parts.push(kb, vb);
    size += 8 + kb.length + vb.length;
  }
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  dv.setInt32(0, md.size, true);
  let pos = 4;
  for (const p of parts) {
    dv.setInt32(pos, p.length, true);
    out.set(p, pos + 4);
    pos += 4 + p.length;
  }
  return out;
}

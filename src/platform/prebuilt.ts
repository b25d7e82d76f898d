/**
 * Where the package's one native library is: `prebuilds/<platform>-<arch>/`
 * (native/async-ring.c and native/adbc-run.c, built by tools/build-native.mjs
 * when the package is packed; users never compile it). The async ring
 * (src/async/ring.ts) and the ADBC query run (src/adbc/run.ts) load it.
 */
import { dirname, envVar, existsSync, fileURLToPath, join, runtimeName } from './node.js';

/** The library's file name on this platform. */
export function prebuiltName(): string {
  return `libarrow-device-async.${process.platform === 'darwin' ? 'dylib' : 'so'}`;
}

/**
 * The prebuilt library for this platform: the path `ARROW_DEVICE_ASYNC_RING`
 * names (unless it is `0` or `1`), else `prebuilds/<platform>-<arch>/` of the
 * nearest folder up that has one; or why there is none.
 */
export function findPrebuilt(): { path: string } | { missing: string } {
  const env = envVar('ARROW_DEVICE_ASYNC_RING');
  if (env && env !== '1' && env !== '0') return { path: env };
  let dir = dirname(fileURLToPath(import.meta.url));
  const rel = join('prebuilds', `${process.platform}-${process.arch}`, prebuiltName());
  let denied: string | undefined;
  // src/<layer> and dist/<layer> (or dist/chunks) are two levels below the package root; a compiled copy
  // (.build/run/src/<layer>) four.
  for (let i = 0; i < 6; i++) {
    const p = join(dir, rel);
    try {
      if (existsSync(p)) return { path: p };
    } catch (e) {
      // Deno throws NotCapable for a path outside its --allow-read: look further up, and say so if nothing is found.
      denied ??= (e as Error).message;
    }
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  if (denied !== undefined) return { missing: `cannot look for the prebuilt library on ${runtimeName}: ${denied}` };
  return { missing: `no prebuilt library for ${process.platform}-${process.arch} in this package` };
}

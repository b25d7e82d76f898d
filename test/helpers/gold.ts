/** Arrow's gold integration files (../shared/testdata/arrow-testing), for the tests that read them. */
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ARROW_21_2 } from '../../src/schema/arrowjs.js';

/**
 * The folder, as a URL: shared/ beside the repository, found from the
 * first ancestor that has it above the helpers' folder (the suite also runs
 * compiled, from deeper under .build/: tools/windows.mjs).
 */
export const GOLD: URL = (() => {
  const rel = 'shared/testdata/arrow-testing/';
  for (let up = '../../../'; up.length < 3 * 12; up += '../') {
    const u = new URL(up + rel, import.meta.url);
    if (existsSync(u)) return u;
    if (new URL(up, import.meta.url).pathname === '/') break;
  }
  return new URL('../../../' + rel, import.meta.url);
})();

/** The `.arrow_file` names there; empty when the folder is absent (the suites then skip, saying so). */
export const goldFiles: readonly string[] = (() => {
  try {
    return readdirSync(GOLD).filter((f) => f.endsWith('.arrow_file'));
  } catch {
    return [];
  }
})();

/**
 * The IPC files the arrow-js in use cannot read; tools/integration reads
 * their JSON. arrow-js 21 has no list-view or run-end-encoded types; before
 * 21.2.0 (the peer range's older versions: tools/test-arrow-oldest.mjs) no
 * view types and no large list either (src/schema/arrowjs.ts, `ARROW_21_2`).
 */
export const ARROW_JS_UNREADABLE: ReadonlySet<string> = new Set([
  'generated_list_view.arrow_file',
  'generated_run_end_encoded.arrow_file',
  ...(ARROW_21_2.BinaryView && ARROW_21_2.Utf8View ? [] : ['generated_binary_view.arrow_file']),
  ...(ARROW_21_2.LargeList ? [] : ['generated_nested_large_offsets.arrow_file']),
]);

/** The skip reason of a gold-file suite, or false. */
export const goldSkip: string | false = goldFiles.length ? false : `no gold files at ${fileURLToPath(GOLD)}`;

/** docs/API.md, the API reference, is generated from src/index.ts: it must match what the code says now. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { API_MD, generate } from '../../tools/api-doc.js';

test('docs/API.md is up to date with src/index.ts and its TSDoc (npm run docs regenerates it)', () => {
  const md = generate();
  assert.ok(md.includes('### `importRecordBatch` (function)'), 'the reference lists the public functions');
  assert.equal(readFileSync(API_MD, 'utf8'), md, 'docs/API.md is out of date: run npm run docs');
});

test('every public function has a doc comment', () => {
  const entries = generate().split('\n### ').slice(1);
  const functions = entries.filter((e) => /^`[^`]+` \(function\)/.test(e));
  assert.ok(functions.length > 40, `found ${functions.length} functions`);
  // An entry is documented when text follows its signature block.
  const undocumented = functions.filter((e) => e.split('```').slice(-1)[0]!.split('\n').filter((l) => !l.startsWith('## ')).join('\n').trim() === '').map((e) => e.slice(1, e.indexOf('`', 1)));
  assert.deepEqual(undocumented, [], `functions without TSDoc: ${undocumented.join(', ')}`);
});

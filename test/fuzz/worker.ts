/**
 * The fuzz loop, run in a child process by tools/fuzz.ts (a crash or a hang
 * then ends this process, not the run). Protocol, one line each on stdout:
 * `C <index>` before case <index> runs (the parent's heartbeat and, after a
 * crash, the reproducer's index), `F <json>` for a finding, `D <json>` at
 * the end with the counts (and the values read as flechette's known
 * limits, test/fuzz/flechette.ts). Arguments: --seed N --start I --until
 * <epoch ms> [--cases N] [--mode structs|threads] (threads: test/fuzz/threads.ts).
 */
import { ArrowDeviceError } from '../../src/index.js';
import { loadCorpus, makeCase, type Case } from './cases.js';
import { flechetteLimits } from './flechette.js';
import { layOut, producerLib, type Laid } from './producer.js';
import { checkReleases, runLaid, type Finding } from './runner.js';
import { makeThreadCase, runThreadCase } from './threads.js';

const arg = (name: string, def: number): number => {
  const k = process.argv.indexOf(`--${name}`);
  return k >= 0 ? Number(process.argv[k + 1]) : def;
};
const seed = arg('seed', 1);
let index = arg('start', 0);
const until = arg('until', Date.now() + 10_000);
const limit = arg('cases', Number.POSITIVE_INFINITY);
const mode = process.argv.includes('--mode') ? process.argv[process.argv.indexOf('--mode') + 1] : 'structs';
const say0 = (line: string): void => void process.stdout.write(`${line}\n`);

if (mode === 'threads') {
  // Our exports released and read by a C consumer's threads (test/fuzz/threads.ts).
  let n = 0;
  for (; Date.now() < until && n < limit; index++, n++) {
    const c = makeThreadCase(seed, index);
    say0(`C ${index}`);
    let found;
    try {
      found = await runThreadCase(c);
    } catch (e) {
      found = [{ kind: 'error', message: `the case threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}` }];
    }
    for (const f of found) say0(`F ${JSON.stringify({ index, seed, honest: true, ...f, kind: `threads-${f.kind}`, case: c })}`);
  }
  say0(`D ${JSON.stringify({ cases: n, next: index })}`);
  process.exit(0);
}

const corpus = loadCorpus();
if (corpus.length === 0) {
  process.stdout.write(`D ${JSON.stringify({ cases: 0, skipped: 'no gold files' })}\n`);
  process.exit(0);
}
const L = producerLib();
const say = (line: string): void => void process.stdout.write(`${line}\n`);
const report = (i: number, c: Case, f: Finding, honest: boolean): void => say(`F ${JSON.stringify({ index: i, seed, honest, ...f, case: c })}`);

let run = 0;
let typed = 0;
let accepted = 0;
let nextId = 1;
let pending: { c: Case; laid: Laid; index: number }[] = [];
let leaked = false;

async function settle(): Promise<void> {
  for (const { index: i, f } of await checkReleases(pending)) {
    const p = pending.find((x) => x.index === i)!;
    if (f.kind === 'leak') leaked = true;
    report(i, p.c, f, p.laid.honest);
  }
  pending = [];
  // Unmap the cases' memory, unless a struct was never released (its release may still come).
  if (!leaked && L.mapped() > 10_000) {
    L.freeAll();
    L.resetCounts();
    nextId = 1;
  }
}

let done = 0;
while (Date.now() < until && done < limit) {
  const c = makeCase(corpus, seed, index);
  let laid: Laid;
  try {
    laid = layOut(c, nextId);
  } catch {
    index++;
    continue; // a case the producer cannot map: not a case (and not counted)
  }
  // The heartbeat, before the case runs: after a crash, the parent knows which case it was.
  say(`C ${index}`);
  nextId += laid.ids.length;
  for (const f of runLaid(c, laid)) report(index, c, f, laid.honest);
  pending.push({ c, laid, index });
  run++;
  done++;
  index++;
  if (pending.length >= 32) await settle();
}
await settle();
void ArrowDeviceError;
void typed;
void accepted;
// flechetteLimits: values the flechette reader read as null, flechette being unable to (test/fuzz/flechette.ts).
say(`D ${JSON.stringify({ cases: run, next: index, flechetteLimits: flechetteLimits.values })}`);

/**
 * `npm run fuzz -- [--seconds 60] [--seed N] [--cases N] [--case-timeout 30] [--mode structs|threads] [--save]`:
 * the hostile-producer fuzzer of issue 18 (test/fuzz). The loop runs in a
 * child process (test/fuzz/worker.ts); a crash (signal) or a hang (no
 * heartbeat for --case-timeout seconds) ends the child, is recorded as a
 * finding with its reproducer (seed, case index, mutated description), and
 * a new child goes on from the next case. At the end: cases run, cases per
 * second, findings by kind. Exit status 1 on any finding; with --save each
 * is written to test/fuzz/reproducers/ (test/fuzz/reproducers.test.ts
 * replays them all).
 *
 * Modes: `structs` (the default) lays out mutated structs in guarded memory
 * and drives every importer (test/fuzz/runner.ts); `threads` hands our
 * exports to a C consumer that releases and reads them from several native
 * threads at once (test/fuzz/threads.ts).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { loadCorpus, makeCase } from '../test/fuzz/cases.js';
import { makeThreadCase } from '../test/fuzz/threads.js';

const argv = process.argv.slice(2);
const opt = (name: string, def: number): number => {
  const k = argv.indexOf(`--${name}`);
  if (k < 0) return def;
  const v = Number(argv[k + 1]);
  if (!Number.isFinite(v)) throw new Error(`--${name} needs a number`);
  return v;
};
const seconds = opt('seconds', Number(process.env.FUZZ_SECONDS ?? 60));
const seed = opt('seed', Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000));
const caseTimeout = opt('case-timeout', 30) * 1000;
/** At most this many cases (from index 0): with a fixed seed, a run that is the same on every machine fast enough. */
const maxCases = opt('cases', Number.POSITIVE_INFINITY);
const save = argv.includes('--save');
const mode = argv.includes('--mode') ? argv[argv.indexOf('--mode') + 1]! : 'structs';
if (mode !== 'structs' && mode !== 'threads') throw new Error(`--mode must be structs or threads, got ${mode}`);
const root = fileURLToPath(new URL('..', import.meta.url));
const worker = fileURLToPath(new URL('../test/fuzz/worker.ts', import.meta.url));
const reproDir = fileURLToPath(new URL('../test/fuzz/reproducers/', import.meta.url));

interface Found {
  kind: string;
  message: string;
  index: number;
  seed: number;
  honest?: boolean;
  case?: unknown;
}

const findings: Found[] = [];
const seen = new Set<string>();
let cases = 0;
/** Values the flechette reader skipped as flechette's own limits (test/fuzz/flechette.ts), summed over the children. */
let flechetteLimits = 0;
const start = Date.now();
const deadline = start + seconds * 1000;
let next = 0;

function record(f: Found): void {
  // One reproducer per kind and message shape (numbers aside): the same bug found again is not news.
  const key = `${f.kind} ${f.message.replace(/\d+/g, 'N')}`;
  findings.push(f);
  if (seen.has(key)) return;
  seen.add(key);
  console.log(`FINDING ${f.kind} (seed ${f.seed}, case ${f.index}): ${f.message}`);
  if (save) {
    mkdirSync(reproDir, { recursive: true });
    const c = f.case ?? (mode === 'threads' ? makeThreadCase(f.seed, f.index) : makeCase(loadCorpus(), f.seed, f.index));
    const name = mode === 'threads' && !f.kind.startsWith('threads-') ? `threads-${f.kind}` : f.kind;
    writeFileSync(`${reproDir}/${name}-s${f.seed}-c${f.index}.json`, `${JSON.stringify({ ...f, case: c }, null, 1)}\n`);
  }
}

/** Runs one child from case `from` until the deadline; resolves with the index to go on from. */
function runChild(from: number): Promise<number> {
  return new Promise((resolve) => {
    const limit = Number.isFinite(maxCases) ? ['--cases', String(maxCases - from)] : [];
    const child = spawn(process.execPath, ['--import', 'tsx', worker, '--seed', String(seed), '--start', String(from), '--until', String(deadline), '--mode', mode, ...limit], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let current = from;
    let last = Date.now();
    let hung = false;
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => {
      stderr = (stderr + b.toString()).slice(-4000);
    });
    const timer = setInterval(() => {
      if (Date.now() - last > caseTimeout) {
        hung = true;
        child.kill('SIGKILL');
      }
    }, 500);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const tag = line.slice(0, 2);
      const body = line.slice(2);
      if (tag === 'C ') {
        current = Number(body);
        last = Date.now();
        cases++;
      } else if (tag === 'F ') {
        record(JSON.parse(body) as Found);
      } else if (tag === 'D ') {
        const d = JSON.parse(body) as { skipped?: string; flechetteLimits?: number };
        if (d.skipped) console.log(`fuzz: skipped (${d.skipped})`);
        flechetteLimits += d.flechetteLimits ?? 0;
      }
    });
    child.on('exit', (code, signal) => {
      clearInterval(timer);
      if (hung) {
        record({ kind: 'hang', message: `case ran past ${caseTimeout / 1000} s`, index: current, seed });
        resolve(current + 1);
      } else if (signal || code !== 0) {
        const why = signal ? `signal ${signal}` : `exit code ${code}`;
        record({ kind: 'crash', message: `${why}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`, index: current, seed });
        resolve(current + 1);
      } else {
        resolve(-1);
      }
    });
  });
}

console.log(`fuzz: mode ${mode}, seed ${seed}, ${seconds} s, per-case timeout ${caseTimeout / 1000} s`);
while (Date.now() < deadline && next < maxCases) {
  const from = await runChild(next);
  if (from < 0) break;
  next = from;
}
const secs = (Date.now() - start) / 1000;
const byKind = new Map<string, number>();
for (const f of findings) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
console.log(`fuzz: ${cases} cases in ${secs.toFixed(1)} s (${(cases / secs).toFixed(1)} cases/s), seed ${seed}, mode ${mode}`);
if (Number.isFinite(maxCases) && cases < maxCases && Date.now() >= deadline) {
  // The time cap came first: this run judged fewer cases than asked (a slow machine), say so.
  console.log(`fuzz: the ${seconds} s cap ended the run after ${cases} of the ${maxCases} cases asked`);
}
if (flechetteLimits > 0) {
  console.log(`fuzz: ${flechetteLimits} value(s) not read through flechette, which cannot (date64 or month-day-nano nanoseconds past 2^53)`);
}
console.log(`fuzz: ${findings.length} finding(s)${findings.length ? `: ${[...byKind].map(([k, n]) => `${k} ${n}`).join(', ')}` : ''}`);
process.exit(findings.length ? 1 : 0);

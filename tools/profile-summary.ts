/**
 * Summarises a V8 CPU profile (`node --cpu-prof` writes one) by self time:
 * where the time of a loop goes, function by function and file by file.
 *
 *   node --import tsx tools/profile-summary.ts PROFILE.cpuprofile [--under NAME]... [--top N]
 *
 * Without --under, the whole profile. Each --under NAME restricts a section
 * to the samples whose stack contains a function called NAME (the phases of
 * bench/overhead.profile.ts), so the time of the setup, of the event loop
 * and of the other phase stays out of it. The first section is always the
 * top-level split: the named phases, the garbage collector, idle time, and
 * what ran outside them (FinalizationRegistry callbacks run there).
 *
 * Each section lists self time by function and by file, and inclusive time
 * by function (a function counted once per sample whose stack holds it), which
 * is what tells a callee's cost from its caller's, e.g. schema handling
 * against array reading. With --under, one more section covers the JS that
 * ran outside every phase: the event loop and the FinalizationRegistry
 * callbacks (the releases of collected imports).
 *
 * Calls into native code through koffi (decode, encode, memcpy, calloc,
 * address) have no frame of their own in a V8 profile: their time is the
 * self time of the JS function that makes the call (src/memory/native.js).
 *
 * A sample's weight is the time to the next sample (the profile's
 * timeDeltas), not a count, since the sampling interval stretches on a
 * loaded machine.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const args = process.argv.slice(2);
const file = args.find((a, i) => !a.startsWith('--') && (i === 0 || !args[i - 1]!.startsWith('--')));
if (!file) {
  console.error('usage: profile-summary PROFILE.cpuprofile [--under NAME]... [--top N]');
  process.exit(2);
}
const unders = args.flatMap((a, i) => (a === '--under' ? [args[i + 1]!] : []));
const top = args.includes('--top') ? Number(args[args.indexOf('--top') + 1]) : 15;

const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const byId = new Map<number, ProfileNode>(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

/** The function names from a node up to the root, the node's own first. */
const stacks = new Map<number, string[]>();
function stackOf(id: number): string[] {
  let s = stacks.get(id);
  if (s) return s;
  s = [];
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) s.push(byId.get(cur)!.callFrame.functionName);
  stacks.set(id, s);
  return s;
}

/** Which function a node's self time is charged to: name, file and line (names repeat across files). */
function fnKey(cf: CallFrame): string {
  const name = cf.functionName || '(anonymous)';
  if (!cf.url) return name; // V8's pseudo-nodes ((garbage collector), (program), (idle)) and native code without a script
  return `${name} ${locate(cf.url)}:${cf.lineNumber + 1}`;
}

/** A path short enough to read: from src/, bench/ or node_modules/<pkg>/ on, else the file name. */
function locate(url: string): string {
  const m = /\/(src\/.*|bench\/.*|node_modules\/(?:@[^/]+\/)?[^/]+\/.*)$/.exec(url);
  return m ? m[1]!.replace(/^node_modules\//, '') : url.startsWith('node:') ? url : basename(url);
}

function fileKey(cf: CallFrame): string {
  if (!cf.url) return cf.functionName.startsWith('(') ? cf.functionName : '(native, no script)';
  return locate(cf.url);
}

// Sample i lasts until sample i + 1; the last one gets the mean.
const n = profile.samples.length;
const weights = new Array<number>(n);
let total = 0;
for (let i = 0; i < n; i++) {
  weights[i] = i + 1 < n ? profile.timeDeltas[i + 1]! : total / Math.max(1, n - 1);
  total += weights[i]!;
}

const pct = (x: number, of: number): string => `${((100 * x) / of).toFixed(1).padStart(5)}%`;
const ms = (us: number): string => `${(us / 1000).toFixed(0).padStart(7)} ms`;

function table(title: string, m: Map<string, number>, of: number, rows: number): void {
  console.log(title);
  const sorted = [...m].sort((a, b) => b[1] - a[1]).slice(0, rows);
  for (const [k, v] of sorted) console.log(`  ${pct(v, of)} ${ms(v)}  ${k}`);
}

// Top-level split.
const split = new Map<string, number>();
for (let i = 0; i < n; i++) {
  const stack = stackOf(profile.samples[i]!);
  const own = stack[0]!;
  const phase = unders.find((u) => stack.includes(u));
  const k = phase ?? (own.startsWith('(') ? own : 'other JS/native (event loop, FinalizationRegistry callbacks, setup)');
  split.set(k, (split.get(k) ?? 0) + weights[i]!);
}
console.log(`${file}: ${(total / 1e6).toFixed(2)} s sampled, ${n} samples`);
table('top-level split:', split, total, 20);

/** The ids of a node and its ancestors, to count each function once per sample in inclusive time. */
function ancestors(id: number): number[] {
  const out: number[] = [];
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) out.push(cur);
  return out;
}

const OUTSIDE = Symbol('outside');
type Section = string | undefined | typeof OUTSIDE;
const sections: Section[] = unders.length > 0 ? [...unders, OUTSIDE] : [undefined];
for (const under of sections) {
  const fns = new Map<string, number>();
  const files = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const id = profile.samples[i]!;
    const stack = stackOf(id);
    if (under === OUTSIDE) {
      if (stack[0]!.startsWith('(') || unders.some((u) => stack.includes(u))) continue;
    } else if (under !== undefined && !stack.includes(under)) continue;
    const cf = byId.get(id)!.callFrame;
    const w = weights[i]!;
    sum += w;
    fns.set(fnKey(cf), (fns.get(fnKey(cf)) ?? 0) + w);
    files.set(fileKey(cf), (files.get(fileKey(cf)) ?? 0) + w);
    for (const k of new Set(ancestors(id).map((a) => fnKey(byId.get(a)!.callFrame)))) inclusive.set(k, (inclusive.get(k) ?? 0) + w);
  }
  const label = under === undefined ? 'whole profile' : under === OUTSIDE ? 'JS outside the phases' : `under ${under}`;
  console.log(`\n${label}: ${ms(sum)} (${pct(sum, total)} of the profile); percentages below are of this section`);
  if (sum === 0) continue;
  table('top self time by function:', fns, sum, top);
  table('self time by file:', files, sum, top);
  table('top inclusive time by function:', inclusive, sum, top);
}

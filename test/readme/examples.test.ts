/**
 * Every `@example` block of the public API's TSDoc type-checks (strict), so that an example that no
 * longer matches the API it shows fails here rather than on a reader.
 *
 * The blocks are those of every declaration the two entry points export (src/index.ts is
 * `arrow-device`, src/adbc/index.ts is `arrow-device/adbc`: what TypeDoc documents, see typedoc.json
 * and typedoc.test.ts), and of their members (a class's or interface's own, or a base class's of
 * ours; not private, not `@internal`), found with the TypeScript compiler API (no second TypeDoc run).
 * A block shared by several names (an inherited member, a deprecated alias) is checked once.
 *
 * Each block becomes its own module in a temporary directory: `export {};`, an import of the public
 * names the block uses without importing them (examples call the function they document, and
 * arrow-js's, as if imported: the implicit import the reader supplies), then the block's text as it
 * is. An `import` line in a block stays an import: `arrow-device` and `arrow-device/adbc` resolve to
 * src/ (`paths`), any other package to the repository's node_modules (linked into the directory).
 * Names a reader is assumed to have (`nativeLib`, `schemaPtr`, `conn`, ...) are declared once, with
 * the types the examples give them, in the directory's `ambient.d.ts` (AMBIENT below).
 *
 * A block is what TypeDoc shows as the example's code (see `exampleBlocks`).
 *
 * All blocks are checked in one program (`strict`, the repository's tsconfig.json otherwise); an
 * error is reported with the source file and line in src/, the declaration's name and the diagnostic.
 * The directory is removed after a pass, kept after a failure (or with EXAMPLES_KEEP=1) to read.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SRC = join(ROOT, 'src');

/** The package's public modules: their names, and the files TypeDoc documents them from. */
const ENTRY_POINTS = { 'arrow-device': 'src/index.ts', 'arrow-device/adbc': 'src/adbc/index.ts' } as const;

/**
 * What a block may use without declaring it: each name with the type the examples give it. Kept
 * here (not as a .d.ts under test/, which tsconfig.json would make global to the whole project).
 */
const AMBIENT = String.raw`/// <reference types="@webgpu/types" />
// The names the @example blocks take as the reader's own, with the types the examples give them.
// A module (its imports stay its own); what it declares is global. The WebGPU types are the standard
// ones (@webgpu/types, which the webgpu devDependency brings; bench/webgpu.bench.ts uses them too).
import type { ArrowArrayExportable, AsyncDeviceStreamReader, DeviceArray, Ptr } from 'arrow-device';
import type { AdbcConnection, AdbcDatabase, AdbcError, AdbcPool, AdbcStatement } from 'arrow-device/adbc';
import type { RecordBatch, Schema, Table } from 'apache-arrow';
import type { KoffiFunc } from 'koffi';

/**
 * A C function bound with koffi, typed by its C prototype (koffi's own type for a typed binding): a
 * call returns the C result; '.async(...args, callback)' runs it on a worker thread and returns nothing.
 * (koffi's type for the callback's error is any: whatever the native call threw.)
 */
type C<F extends (...args: never[]) => unknown> = KoffiFunc<F>;

declare global {
  // Structs a native producer filled (their addresses): C Data Interface, C Device Data Interface.
  const schemaPtr: Ptr;
  const arrayPtr: Ptr;
  const arrayPtr2: Ptr;
  const arrayPtrs: Ptr[];
  const streamPtr: Ptr;
  const otherPtr: Ptr;
  const deviceArrayPtr: Ptr;
  const deviceStreamPtr: Ptr;
  /** A struct of whichever kind the example imports. */
  const ptr: Ptr;
  /** An ArrowDeviceArray the next consumer allocated, to move ours into. */
  const nextConsumersStruct: Ptr;
  /** A cudaStream_t of the reader's. */
  const cudaStream: Ptr;

  // What the reader has at hand: arrow-js objects, ours, and what they do with them.
  const table: Table;
  const batch: RecordBatch;
  const schema: Schema;
  /** An object implementing arrow.c_array (PROTOCOL.md). */
  const exportable: ArrowArrayExportable;
  /** Anything: the example finds out whether it implements the protocol. */
  const value: unknown;
  const deviceArray: DeviceArray;
  const reader: AsyncDeviceStreamReader;
  const use: (x: unknown) => void;
  const wanted: (batch: RecordBatch) => boolean;

  /** A native library, through koffi: consumers of what we export, producers that fill what we allocate. */
  const nativeLib: {
    consume: C<(schema: Ptr, array: Ptr) => number>;
    consume_schema: C<(schema: Ptr) => number>;
    consume_array: C<(array: Ptr) => number>;
    consume_stream: C<(stream: Ptr) => number>;
    consume_device: C<(array: Ptr) => number>;
    consume_device_stream: C<(stream: Ptr) => number>;
    produce: C<(schema: Ptr, array: Ptr) => number>;
    produce_schema: C<(schema: Ptr) => number>;
    produce_array: C<(array: Ptr) => number>;
    produce_device: C<(array: Ptr) => number>;
    make_stream: C<(out: Ptr) => number>;
    make_device_stream: C<(out: Ptr) => number>;
    /** A native consumer's ArrowAsyncDeviceStreamHandler. */
    make_handler: C<() => Ptr>;
    /** Starts a producer thread that pushes into the handler. */
    start_producing: C<(handler: Ptr) => void>;
  };
  /** A koffi async callback. */
  const cb: (err: unknown, result: number) => void;
  /** Arrow C++ behind a C shim, and the handle of a RecordBatch it holds. */
  const shim: { export_batch: C<(batch: Ptr, array: Ptr, schema: Ptr) => number> };
  const handle: Ptr;
  /** A GPU library that exports a record batch as an ArrowDeviceArray and its ArrowSchema. */
  const gpuLib: { export_batch: C<(array: Ptr, schema: Ptr) => number> };
  /** A producer's own API, asked about a failed stream while it is live. */
  const driver: { errorFromArrayStream(stream: Ptr): { message: string } | null };
  /** DuckDB's C API: duckdb_arrow_scan(duckdb_connection, const char *table_name, duckdb_arrow_stream), and a connection. */
  const duckdb_arrow_scan: C<(connection: Ptr, tableName: string, stream: Ptr) => number>;
  const con: Ptr;
  /** ADBC's C API: AdbcStatementExecuteQuery and AdbcConnectionGetTableSchema, a statement, a connection, an AdbcError. */
  const executeQuery: C<(statement: Ptr, out: Ptr, rowsAffected: Ptr | null, error: Ptr) => number>;
  const getTableSchema: C<(connection: Ptr, catalog: string | null, dbSchema: string | null, tableName: string, out: Ptr, error: Ptr) => number>;
  const stmtPtr: Ptr;
  const connPtr: Ptr;
  const errPtr: Ptr;

  // arrow-device/adbc: a database, a connection, a statement open; an error caught; Arrow IPC stream bytes; a serialized Substrait plan.
  const db: AdbcDatabase;
  const conn: AdbcConnection;
  const stmt: AdbcStatement;
  const pool: AdbcPool;
  const err: AdbcError;
  const ipcBytes: Uint8Array;
  const planBytes: Uint8Array;

  // WebAssembly: a module's bytes (read from a file), a Parquet file, addresses a wasm32 module returned.
  const wasmBytes: Uint8Array<ArrayBuffer>;
  const parquetBytes: Uint8Array;
  const arrayAddr: number;
  const schemaAddr: number;

  // WebGPU (the standard types): a device, a buffer of it, a compute pass being encoded, a bind group layout.
  const gpuDevice: GPUDevice;
  const gpuBuffer: GPUBuffer;
  const pass: GPUComputePassEncoder;
  const layout: GPUBindGroupLayout;
}
export {};
`;

interface Example {
  /** The public name documented: `arrow-device.importSchema`, `arrow-device/adbc.AdbcConnection.query`. */
  name: string;
  /** The file declaring it, relative to the repository, and the line the block's code starts on. */
  file: string;
  line: number;
  code: string;
}

// --- collecting the blocks -------------------------------------------------------------------

function readConfig(file: string): ts.ParsedCommandLine {
  const host: ts.ParseConfigFileHost = {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); },
  };
  const parsed = ts.getParsedCommandLineOfConfigFile(join(ROOT, file), {}, host);
  if (!parsed) throw new Error(`cannot read ${file}`);
  return parsed;
}

/** Source files parsed once for every program here (src/, the libraries' .d.ts), by name and parse options. */
const parsed = new Map<string, ts.SourceFile>();
/** A compiler host that reuses `parsed` for files outside `scratch` and reads `memory` before the disk. */
function cachingHost(options: ts.CompilerOptions, scratch?: string, memory: ReadonlyMap<string, string> = new Map()): ts.CompilerHost {
  const host = ts.createCompilerHost(options, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (f) => memory.has(f) || fileExists.call(host, f);
  host.readFile = (f) => memory.get(f) ?? readFile.call(host, f);
  host.getSourceFile = (f, lang, onError, create) => {
    const text = memory.get(f);
    const opts = typeof lang === 'object' ? lang : { languageVersion: lang };
    if (text !== undefined) return ts.createSourceFile(f, text, opts, true);
    const key = `${f}\0${opts.languageVersion}\0${opts.impliedNodeFormat}`;
    let sf = parsed.get(key);
    if (!sf) {
      sf = getSourceFile.call(host, f, lang, onError, create);
      if (sf && (scratch === undefined || !f.startsWith(scratch))) parsed.set(key, sf);
    }
    return sf;
  };
  return host;
}

/**
 * The code of an `@example` tag, as TypeDoc 0.28 reads it (its `jsDocCompatibility.exampleTag`): a
 * tag with no code fence is code from the tag on, the text on the tag's line included (less a
 * `<caption>`); a tag with fences is Markdown (its first line a title), whose ```ts fences are each a
 * block (its other fences are not TypeScript: nothing to check). Each block with the src line it starts on.
 */
function exampleBlocks(tag: ts.JSDocTag): { code: string; line: number }[] {
  const sf = tag.getSourceFile();
  const tagLine = sf.getLineAndCharacterOfPosition(tag.tagName.end).line + 1;
  const raw = sf.text.slice(tag.tagName.end, tag.end).replace(/\*\/\s*$/, '');
  // lines[i] is src line tagLine + i, the ` * ` margin off.
  const lines = raw.split('\n').map((l, i) => (i === 0 ? l.replace(/^\s*(<caption>.*?<\/caption>)?/, '') : l.replace(/^\s*\*(?: |$)/, '')));
  const block = (from: number, to: number) => {
    while (from < to && lines[from]!.trim() === '') from++;
    while (to > from && lines[to - 1]!.trim() === '') to--;
    return from < to ? [{ code: lines.slice(from, to).join('\n'), line: tagLine + from }] : [];
  };
  if (!lines.some((l) => /^\s*```/.test(l))) return block(0, lines.length);
  const out: { code: string; line: number }[] = [];
  for (let i = 1; i < lines.length; i++) {
    const open = /^\s*```\s*(\S*)/.exec(lines[i]!);
    if (!open) continue;
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j]!)) j++;
    if (/^(ts|typescript)$/.test(open[1]!)) out.push(...block(i + 1, j));
    i = j;
  }
  return out;
}

function isHidden(d: ts.Declaration): boolean {
  if (ts.getCombinedModifierFlags(d) & ts.ModifierFlags.Private) return true;
  const name = ts.getNameOfDeclaration(d);
  if (name && ts.isPrivateIdentifier(name)) return true;
  return ts.getJSDocTags(d).some((t) => t.tagName.text === 'internal');
}

/** The `@example` blocks of every declaration the entry points export, and of their public members. */
function collectExamples(program: ts.Program): Example[] {
  const checker = program.getTypeChecker();
  const seen = new Set<ts.Node>();
  const out: Example[] = [];
  const visit = (d: ts.Declaration, name: string) => {
    const sf = d.getSourceFile();
    if (seen.has(d) || !sf.fileName.startsWith(`${SRC}/`) || isHidden(d)) return;
    seen.add(d);
    for (const tag of ts.getJSDocTags(d)) {
      if (tag.tagName.text !== 'example' || seen.has(tag)) continue;
      seen.add(tag);
      for (const ex of exampleBlocks(tag)) out.push({ name, file: relative(ROOT, sf.fileName), ...ex });
    }
  };
  for (const [mod, entry] of Object.entries(ENTRY_POINTS)) {
    const file = program.getSourceFile(join(ROOT, entry));
    const modSym = file && checker.getSymbolAtLocation(file);
    if (!modSym) throw new Error(`${entry}: not in the program`);
    for (const exported of checker.getExportsOfModule(modSym)) {
      const sym = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const name = `${mod}.${exported.name}`;
      for (const d of sym.declarations ?? []) {
        visit(d, name);
        // What has no name of its own: constructors, call and index signatures.
        if (ts.isClassLike(d) || ts.isInterfaceDeclaration(d)) {
          for (const m of d.members) if (!m.name || ts.isConstructorDeclaration(m)) visit(m, `${name}.${ts.isConstructorDeclaration(m) ? 'constructor' : '(signature)'}`);
        }
      }
      // Members: instance side and static side (a const object's properties too), inherited ones included.
      const sides = [checker.getTypeOfSymbol(sym)];
      if (sym.flags & (ts.SymbolFlags.Class | ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) sides.push(checker.getDeclaredTypeOfSymbol(sym));
      for (const side of sides) {
        for (const p of checker.getPropertiesOfType(side)) {
          for (const d of p.declarations ?? []) visit(d, `${name}.${p.name}`);
        }
      }
    }
  }
  return out;
}

// --- making each block a module -------------------------------------------------------------------

/** The names each public module exports (arrow-js's too), for the implicit import of each block. */
function publicNames(program: ts.Program, options: ts.CompilerOptions): Map<string, string> {
  const checker = program.getTypeChecker();
  const from = new Map<string, string>();
  const add = (mod: string, fileName: string) => {
    const sym = checker.getSymbolAtLocation(program.getSourceFile(fileName)!);
    for (const e of checker.getExportsOfModule(sym!)) if (!from.has(e.name)) from.set(e.name, mod);
  };
  // Ours first: where arrow-js has the same name, an example means ours.
  add('arrow-device', join(ROOT, ENTRY_POINTS['arrow-device']));
  add('arrow-device/adbc', join(ROOT, ENTRY_POINTS['arrow-device/adbc']));
  const arrow = ts.resolveModuleName('apache-arrow', join(ROOT, ENTRY_POINTS['arrow-device']), options, ts.sys).resolvedModule;
  if (!arrow) throw new Error('apache-arrow: not resolved');
  add('apache-arrow', arrow.resolvedFileName);
  return from;
}

/** The names a block declares (variables, functions, classes, parameters, imports), at any depth. */
function declaredNames(sf: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  const bind = (n: ts.BindingName) => {
    if (ts.isIdentifier(n)) names.add(n.text);
    else for (const e of n.elements) if (!ts.isOmittedExpression(e)) bind(e.name);
  };
  const walk = (n: ts.Node): void => {
    if (ts.isVariableDeclaration(n) || ts.isParameter(n) || ts.isBindingElement(n)) bind(n.name);
    else if ((ts.isFunctionDeclaration(n) || ts.isClassDeclaration(n) || ts.isInterfaceDeclaration(n) || ts.isTypeAliasDeclaration(n)
      || ts.isEnumDeclaration(n) || ts.isImportSpecifier(n) || ts.isNamespaceImport(n) || ts.isImportClause(n)) && n.name) names.add(n.name.text);
    ts.forEachChild(n, walk);
  };
  walk(sf);
  return names;
}

/** A block as a module: `export {};` and the implicit imports on its first line, then its code as written. */
function moduleText(code: string, from: ReadonlyMap<string, string>): string {
  const sf = ts.createSourceFile('block.ts', code, ts.ScriptTarget.ES2022, true);
  const declared = declaredNames(sf);
  const used = new Map<string, Set<string>>();
  const walk = (n: ts.Node): void => {
    if (ts.isIdentifier(n) && !(ts.isPropertyAccessExpression(n.parent) && n.parent.name === n)) {
      const mod = from.get(n.text);
      if (mod && !declared.has(n.text)) used.set(mod, (used.get(mod) ?? new Set()).add(n.text));
    }
    ts.forEachChild(n, walk);
  };
  walk(sf);
  const imports = [...used].map(([mod, names]) => `import { ${[...names].sort().join(', ')} } from '${mod}';`);
  return `export {}; ${imports.join(' ')}\n${code}\n`;
}

// --- type-checking ------------------------------------------------------------------------------------

function examplesOptions(dir: string): ts.CompilerOptions {
  const base = readConfig('tsconfig.json').options;
  return {
    ...base,
    strict: true,
    noEmit: true,
    declaration: false,
    sourceMap: false,
    rootDir: undefined,
    outDir: undefined,
    // The package's two entry points as its sources; any other package from node_modules (linked).
    paths: { 'arrow-device': [join(ROOT, ENTRY_POINTS['arrow-device'])], 'arrow-device/adbc': [join(ROOT, ENTRY_POINTS['arrow-device/adbc'])] },
    typeRoots: [join(ROOT, 'node_modules/@types')],
    // False, so that ambient.d.ts is checked; only the files asked about are, not the libraries' .d.ts.
    skipLibCheck: false,
  };
}

/**
 * Type-checks the blocks (and ambient.d.ts) in one program. `files` maps each block's module path to
 * the block; `memory` holds texts the program reads instead of the disk (the test of a broken block).
 * Returns the errors, each as `src/file.ts:line:column (module.name, module path): TS1234: message`.
 */
function typeCheck(dir: string, files: ReadonlyMap<string, Example>, memory?: ReadonlyMap<string, string>): string[] {
  const options = examplesOptions(dir);
  const ambient = join(dir, 'ambient.d.ts');
  const program = ts.createProgram([ambient, ...files.keys()], options, cachingHost(options, dir, memory));
  const errors: string[] = [];
  const describe = (d: ts.Diagnostic): string => {
    const msg = `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    if (!d.file || d.start === undefined) return msg;
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    const ex = files.get(d.file.fileName);
    if (!ex) return `${relative(dir, d.file.fileName) || d.file.fileName}:${line + 1}:${character + 1}: ${msg}`;
    // Line 0 of a block's module is the implicit imports; line n is the block's line n - 1.
    const where = line === 0 ? `${ex.file}:${ex.line} (the implicit import)` : `${ex.file}:${ex.line + line - 1}:${character + 1}`;
    return `${where} (${ex.name}, ${relative(dir, d.file.fileName)}): ${msg}`;
  };
  for (const d of [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()]) errors.push(describe(d));
  for (const f of [ambient, ...files.keys()]) {
    const sf = program.getSourceFile(f);
    if (!sf) { errors.push(`${f}: not in the program`); continue; }
    for (const d of [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]) errors.push(describe(d));
  }
  return errors;
}

// --- the tests ----------------------------------------------------------------------------------------

let dir: string;
let examples: Example[];
let files: Map<string, Example>;
let names: Map<string, string>;

before(() => {
  const build = readConfig('tsconfig.build.json').options;
  const program = ts.createProgram(Object.values(ENTRY_POINTS).map((e) => join(ROOT, e)), build, cachingHost(build));
  examples = collectExamples(program);
  names = publicNames(program, build);
  dir = mkdtempSync(join(tmpdir(), 'arrow-device-examples-'));
  // ESM, as the package is (a block may await at top level); node_modules as the repository's.
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'junction');
  writeFileSync(join(dir, 'ambient.d.ts'), AMBIENT);
  mkdirSync(join(dir, 'examples'));
  files = new Map();
  examples.forEach((ex, i) => {
    const base = `${String(i + 1).padStart(3, '0')}-${ex.name.replace(/^arrow-device(\/adbc)?\./, '').replace(/[^\w.]/g, '_')}.ts`;
    const path = join(dir, 'examples', base);
    writeFileSync(path, moduleText(ex.code, names));
    files.set(path, ex);
  });
});

let failed = false;
after(() => {
  // Kept when a check failed (or EXAMPLES_KEEP=1), to read the modules the errors name.
  if (failed || process.env.EXAMPLES_KEEP === '1') process.stdout.write(`# the example modules are kept in ${dir}\n`);
  else if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the public API has @example blocks to check', () => {
  assert.ok(examples.length >= 140, `found ${examples.length}`);
});

test('every @example block of the public API type-checks (strict)', () => {
  const errors = typeCheck(dir, files);
  failed ||= errors.length > 0;
  assert.equal(errors.length, 0, `${errors.length} errors in @example blocks:\n${errors.join('\n')}`);
});

test('the check fails on a broken example, naming its file, line, declaration and diagnostic', () => {
  // importSchema's first example, in memory (not written), with two lines added: a call of a name the
  // API does not have (as an example left behind by a rename would), and a result given a wrong type.
  const ex = examples.find((e) => e.name === 'arrow-device.importSchema');
  assert.ok(ex, 'importSchema has an example');
  assert.match(ex.code, /^const schema = importSchema\(schemaPtr\);/);
  const n = ex.code.split('\n').length;
  const broken: Example = { ...ex, code: `${ex.code}\nimportSchemas(schemaPtr);\nconst count: string = schema.fields.length;` };
  const path = join(dir, 'examples', 'broken.ts');
  const errors = typeCheck(dir, new Map([[path, broken]]), new Map([[path, moduleText(broken.code, names)]]));
  const where = (line: number, column: number) => `${ex.file}:${line}:${column} (arrow-device.importSchema, examples/broken.ts)`;
  assert.deepEqual(errors.map((e) => e.split(': TS')[0]), [where(ex.line + n, 1), where(ex.line + n + 1, 7)], errors.join('\n'));
  assert.match(errors[0]!, /: TS2552: Cannot find name 'importSchemas'. Did you mean 'importSchema'\?/);
  assert.match(errors[1]!, /: TS2322: Type 'number' is not assignable to type 'string'/);
});

/**
 * The API reference (docs/API.md), generated from src/index.ts and the
 * TSDoc of what it exports, with the TypeScript compiler the project
 * already uses (no documentation tool to install). Every public name gets
 * its kind, its signature and its doc comment's text.
 *
 *   node --import tsx tools/api-doc.ts          # writes docs/API.md
 *   node --import tsx tools/api-doc.ts --check  # exits 1 when docs/API.md is out of date
 *
 * test/readme/api-doc.test.ts runs the check, so the reference cannot drift
 * from the code.
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const API_MD = join(root, 'docs', 'API.md');

function docOf(sym: ts.Symbol, checker: ts.TypeChecker): string {
  const text = ts.displayPartsToString(sym.getDocumentationComment(checker)).trim();
  const deprecated = sym.getJsDocTags(checker).find((t) => t.name === 'deprecated');
  const dep = deprecated ? `**Deprecated.** ${ts.displayPartsToString(deprecated.text ?? []).trim()}` : '';
  return [dep, text].filter(Boolean).join(' ');
}

function kindOf(sym: ts.Symbol): string {
  const f = sym.flags;
  if (f & ts.SymbolFlags.Class) return 'class';
  if (f & ts.SymbolFlags.Function) return 'function';
  if (f & ts.SymbolFlags.Interface) return 'interface';
  if (f & ts.SymbolFlags.TypeAlias) return 'type';
  if (f & ts.SymbolFlags.Variable) return 'const';
  return 'export';
}

/** The markdown of the reference. */
export function generate(): string {
  const entry = join(root, 'src', 'index.ts');
  const config = ts.readConfigFile(join(root, 'tsconfig.build.json'), (p) => readFileSync(p, 'utf8'));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const program = ts.createProgram([entry], { ...parsed.options, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  if (!source) throw new Error('src/index.ts not found');
  const moduleSym = checker.getSymbolAtLocation(source)!;
  const exports = checker.getExportsOfModule(moduleSym);
  // Sections follow the comments of src/index.ts (`// --- title ---`), names in their order there.
  const text = source.getFullText();
  const sections: { title: string; at: number }[] = [];
  for (const m of text.matchAll(/^\/\/ --- (.+?) -+\s*$/gm)) sections.push({ title: m[1]!, at: m.index! });
  const sectionOf = (pos: number): string => {
    let t = 'other';
    for (const s of sections) if (s.at <= pos) t = s.title;
    return t;
  };
  const byName = new Map<string, number>();
  for (const m of text.matchAll(/\b(?:type\s+)?([A-Za-z_$][\w$]*)(?:\s+as\s+([A-Za-z_$][\w$]*))?\s*[,}\n]/g)) {
    const name = m[2] ?? m[1]!;
    if (!byName.has(name)) byName.set(name, m.index!);
  }
  const out: string[] = [
    '# arrow-device API reference',
    '',
    'Generated from `src/index.ts` and its TSDoc by `tools/api-doc.ts` (`npm run docs`); the test suite',
    'fails when this file is out of date. See the README for how the pieces fit together.',
    '',
  ];
  let current = '';
  const sorted = [...exports].sort((a, b) => (byName.get(a.name) ?? 1e9) - (byName.get(b.name) ?? 1e9));
  for (const exp of sorted) {
    const sym = exp.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exp) : exp;
    const section = sectionOf(byName.get(exp.name) ?? 1e9);
    if (section !== current) {
      current = section;
      out.push(`## ${section[0]!.toUpperCase()}${section.slice(1)}`, '');
    }
    const kind = kindOf(sym);
    out.push(`### \`${exp.name}\` (${kind})`, '');
    const decl = sym.declarations?.[0];
    if (decl && kind === 'function') {
      const type = checker.getTypeOfSymbolAtLocation(sym, decl);
      for (const sig of type.getCallSignatures()) {
        out.push('```ts', `${exp.name}${checker.signatureToString(sig, undefined, ts.TypeFormatFlags.NoTruncation)}`, '```');
      }
    } else if (decl && kind === 'const') {
      const type = checker.getTypeOfSymbolAtLocation(sym, decl);
      out.push('```ts', `const ${exp.name}: ${checker.typeToString(type, undefined, ts.TypeFormatFlags.NoTruncation)}`, '```');
    }
    const doc = docOf(sym, checker);
    if (doc) out.push('', doc.replace(/\n/g, ' ').replace(/\s+/g, ' '));
    out.push('');
  }
  return out.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const md = generate();
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(API_MD, 'utf8');
    } catch {
      // absent: out of date
    }
    if (current !== md) {
      console.error('docs/API.md is out of date: run npm run docs');
      process.exit(1);
    }
    console.log('docs/API.md is up to date');
  } else {
    mkdirSync(dirname(API_MD), { recursive: true });
    writeFileSync(API_MD, md);
    console.log(`wrote ${API_MD}`);
  }
}

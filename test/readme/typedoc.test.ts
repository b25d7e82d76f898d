/**
 * The API reference is TypeDoc's site, built from the TSDoc of the package's public entry points
 * (typedoc.json: `arrow-device` is src/index.ts, `arrow-device/adbc` src/adbc/index.ts,
 * `arrow-device/flechette` src/flechette/index.ts, `arrow-device/flechette/adbc` src/flechette/adbc.ts) by
 * `npm run docs`, which CI runs with warnings as errors. This test runs the same conversion and
 * validation once, with the same options (less the HTML, which `npm run docs` writes), and checks
 * what TypeDoc's own validation does not: every exported function and class carries an `@example`,
 * and every exported name, with the members its declarations define here, a summary.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { before, test } from 'node:test';
import {
  Application, Logger, LogLevel, ReflectionKind, TSConfigReader, TypeDocReader,
  type Comment, type DeclarationReflection, type ProjectReflection, type Reflection,
} from 'typedoc';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Keeps every warning and error TypeDoc reports, with its text, for the assertion's message. */
class CollectingLogger extends Logger {
  readonly messages: string[] = [];
  override log(message: string, level: LogLevel): void {
    super.log(message, level);
    if (level >= LogLevel.Warn) this.messages.push(`${LogLevel[level]}: ${message}`);
  }
}

const hasText = (comment: Comment | undefined): boolean =>
  comment !== undefined && comment.summary.map((p) => p.text).join('').trim() !== '';
const hasExample = (comment: Comment | undefined): boolean =>
  comment?.blockTags.some((t) => t.tag === '@example' && t.content.map((p) => p.text).join('').includes('```')) ?? false;

/** The comments that document a reflection: its own, else its signatures' (a function's, a method's, an accessor's). */
function commentsOf(r: DeclarationReflection): (Comment | undefined)[] {
  if (r.comment) return [r.comment];
  const sigs = [...(r.signatures ?? []), ...(r.getSignature ? [r.getSignature] : []), ...(r.setSignature ? [r.setSignature] : [])];
  return sigs.length > 0 ? sigs.map((s) => s.comment) : [undefined];
}

/** The file that declares a reflection (sources are kept for this test: `disableSources` is off here). */
function fileOf(r: DeclarationReflection): string | undefined {
  return (r.sources ?? r.signatures?.[0]?.sources ?? r.getSignature?.sources)?.[0]?.fullFileName;
}

/**
 * What the reference lacks: `<module>.<name>: <what>` for each exported name without a summary or (a
 * function, a class) an example, and each member without a summary that a class, interface or
 * const object declares in src/ (its own, or a base class's of ours; not those an arrow-js base brings).
 * A name one entry re-exports from another (TypeDoc's reference to it) is checked where it is declared.
 */
function missingDocs(project: ProjectReflection): string[] {
  const missing: string[] = [];
  const src = `${root}src/`;
  const checkMembers = (owner: DeclarationReflection, path: string) => {
    for (const m of owner.children ?? []) {
      if (m.flags.isPrivate || !fileOf(m)?.startsWith(src)) continue;
      if (!commentsOf(m).every(hasText)) missing.push(`${path}.${m.name}: no summary`);
    }
  };
  for (const mod of project.children ?? []) {
    for (const r of mod.children ?? []) {
      // A name a second entry re-exports is a reference to the reflection of the entry declaring it, checked there.
      if (r.kindOf(ReflectionKind.Reference)) continue;
      const path = `${mod.name}.${r.name}`;
      const comments = commentsOf(r);
      if (!comments.every(hasText)) missing.push(`${path}: no summary`);
      if (r.kindOf(ReflectionKind.Function | ReflectionKind.Class) && !comments.every(hasExample)) {
        missing.push(`${path}: no @example`);
      }
      checkMembers(r, path);
    }
  }
  return missing;
}

let project: ProjectReflection;
let logger: CollectingLogger;

before(async () => {
  const app = await Application.bootstrapWithPlugins(
    // Sources on (without git: no link needed), so that members can be told by the file declaring them.
    { options: `${root}typedoc.json`, disableSources: false, disableGit: true, sourceLinkTemplate: '{path}#L{line}' },
    [new TypeDocReader(), new TSConfigReader()],
  );
  logger = new CollectingLogger();
  app.logger = logger;
  const converted = await app.convert();
  assert.ok(converted, `TypeDoc could not convert the entry points:\n${logger.messages.join('\n')}`);
  project = converted;
  app.validate(project);
});

test('TypeDoc converts and validates every entry point with no warning and no error', () => {
  assert.deepEqual(logger.messages, []);
  assert.deepEqual(project.children?.map((m) => m.name).sort(), ['arrow-device', 'arrow-device/adbc', 'arrow-device/flechette', 'arrow-device/flechette/adbc']);
});

test('every exported function and class has a summary and an @example; every other exported name and member, a summary', () => {
  const names = project.children!.flatMap((m) => m.children ?? []);
  assert.ok(names.length > 200, `found ${names.length} exported names`);
  assert.deepEqual(missingDocs(project), []);
});

test('the check fails on a function that lost its example, a class that lost its summary, an undocumented member', () => {
  const find = (name: string): Reflection => project.getChildByName(['arrow-device', name])!;
  const fn = find('importRecordBatch') as DeclarationReflection;
  const cls = find('DeviceArray') as DeclarationReflection;
  const sig = fn.signatures![0]!;
  const [sigComment, clsComment] = [sig.comment!, cls.comment!];
  const member = cls.children!.find((m) => !m.inheritedFrom && m.kindOf(ReflectionKind.Method))!;
  const memberSig = member.signatures![0]!;
  const memberComment = memberSig.comment!;
  try {
    sig.comment = sigComment.clone();
    sig.comment.blockTags = sig.comment.blockTags.filter((t) => t.tag !== '@example');
    cls.comment = clsComment.clone();
    cls.comment.summary = [];
    memberSig.comment = undefined;
    assert.deepEqual(new Set(missingDocs(project)), new Set([
      'arrow-device.importRecordBatch: no @example',
      'arrow-device.DeviceArray: no summary',
      `arrow-device.DeviceArray.${member.name}: no summary`,
    ]));
  } finally {
    sig.comment = sigComment;
    cls.comment = clsComment;
    memberSig.comment = memberComment;
  }
  assert.deepEqual(missingDocs(project), []);
});

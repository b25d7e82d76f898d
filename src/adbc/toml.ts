/**
 * A small TOML reader for ADBC driver manifests and connection profiles
 * (arrow-adbc docs, "Driver Manifests" and "Connection Profiles"): what those
 * files use, read strictly, and a typed error naming the file and line for
 * anything else. The package's runtime dependencies are apache-arrow and
 * koffi only, so the reader is ours.
 *
 * Read: comments; `[table]` and `[a.b]` headers; `key = value` with bare,
 * quoted and dotted keys; basic strings (with escapes), literal strings and
 * their multi-line forms; integers (decimal, `0x`, `0o`, `0b`, `_`
 * separators); floats (`inf`, `nan` too); booleans; arrays (over several
 * lines); inline tables. Not read (an error says so): dates and times,
 * arrays of tables (`[[x]]`).
 */

/** A TOML value as read: strings, integers (bigint, so that `1` and `1.0` stay apart), floats (number), booleans, arrays, tables. */
export type TomlValue = string | number | bigint | boolean | TomlValue[] | TomlTable;
/** A TOML table: keys to values. */
export interface TomlTable {
  [key: string]: TomlValue;
}

/** A file that is not TOML this reader takes: `file:line: what`. */
export class TomlError extends Error {
  override name = 'TomlError';
  constructor(readonly file: string, readonly line: number, readonly detail: string) {
    super(`${file}:${line}: ${detail}`);
  }
}

const BARE_KEY = /[A-Za-z0-9_-]/;

class Reader {
  pos = 0;
  line = 1;
  constructor(readonly text: string, readonly file: string) {}

  fail(detail: string): never {
    throw new TomlError(this.file, this.line, detail);
  }

  peek(n = 0): string {
    return this.text[this.pos + n] ?? '';
  }

  startsWith(s: string): boolean {
    return this.text.startsWith(s, this.pos);
  }

  advance(n = 1): void {
    for (let i = 0; i < n; i++) if (this.text[this.pos++] === '\n') this.line++;
  }

  /** Spaces and tabs. */
  skipBlank(): void {
    while (this.peek() === ' ' || this.peek() === '\t') this.pos++;
  }

  /** Spaces, tabs, newlines and comments (inside arrays). */
  skipAll(): void {
    for (;;) {
      this.skipBlank();
      const c = this.peek();
      if (c === '#') this.skipComment();
      else if (c === '\n' || c === '\r') this.advance();
      else return;
    }
  }

  skipComment(): void {
    while (this.pos < this.text.length && this.peek() !== '\n') this.pos++;
  }

  /** The end of a line: blanks, an optional comment, a newline or the end. */
  endOfLine(): void {
    this.skipBlank();
    if (this.peek() === '#') this.skipComment();
    if (this.peek() === '\r') this.pos++;
    if (this.pos >= this.text.length) return;
    if (this.peek() !== '\n') this.fail(`unexpected ${JSON.stringify(this.peek())} after the value`);
    this.advance();
  }

  key(): string[] {
    const parts: string[] = [];
    for (;;) {
      this.skipBlank();
      const c = this.peek();
      if (c === '"') parts.push(this.basicString());
      else if (c === "'") parts.push(this.literalString());
      else {
        const start = this.pos;
        while (BARE_KEY.test(this.peek())) this.pos++;
        if (this.pos === start) this.fail(c === '' ? 'a key is missing' : `unexpected ${JSON.stringify(c)} in a key`);
        parts.push(this.text.slice(start, this.pos));
      }
      this.skipBlank();
      if (this.peek() !== '.') return parts;
      this.pos++;
    }
  }

  basicString(): string {
    if (this.startsWith('"""')) return this.multiline('"""', true);
    this.pos++;
    let out = '';
    for (;;) {
      const c = this.peek();
      if (c === '' || c === '\n') this.fail('unterminated string');
      this.pos++;
      if (c === '"') return out;
      out += c === '\\' ? this.escape() : c;
    }
  }

  literalString(): string {
    if (this.startsWith("'''")) return this.multiline("'''", false);
    this.pos++;
    const end = this.text.indexOf("'", this.pos);
    const nl = this.text.indexOf('\n', this.pos);
    if (end < 0 || (nl >= 0 && nl < end)) this.fail('unterminated string');
    const s = this.text.slice(this.pos, end);
    this.pos = end + 1;
    return s;
  }

  multiline(delim: string, escapes: boolean): string {
    this.advance(3);
    if (this.startsWith('\r\n')) this.advance(2);
    else if (this.peek() === '\n') this.advance();
    let out = '';
    for (;;) {
      if (this.pos >= this.text.length) this.fail('unterminated multi-line string');
      if (this.startsWith(delim)) {
        // Up to two quotes of the delimiter's kind may end the content (TOML: `""""` ends with one quote).
        let extra = 0;
        while (extra < 2 && this.peek(3 + extra) === delim[0]) extra++;
        out += delim[0]!.repeat(extra);
        this.advance(3 + extra);
        return out;
      }
      const c = this.peek();
      if (escapes && c === '\\') {
        this.pos++;
        // A backslash at the end of a line trims the newline and the blanks after it.
        let j = this.pos;
        while (this.text[j] === ' ' || this.text[j] === '\t') j++;
        if (this.text[j] === '\n' || this.text.startsWith('\r\n', j)) {
          this.pos = j;
          while (/[\s]/.test(this.peek()) && this.peek() !== '') this.advance();
          continue;
        }
        out += this.escape();
        continue;
      }
      out += c;
      this.advance();
    }
  }

  escape(): string {
    const c = this.peek();
    this.pos++;
    switch (c) {
      case 'b': return '\b';
      case 't': return '\t';
      case 'n': return '\n';
      case 'f': return '\f';
      case 'r': return '\r';
      case 'e': return '\x1b';
      case '"': return '"';
      case '\\': return '\\';
      case 'u':
      case 'U': {
        const n = c === 'u' ? 4 : 8;
        const hex = this.text.slice(this.pos, this.pos + n);
        if (!/^[0-9A-Fa-f]+$/.test(hex) || hex.length !== n) this.fail(`bad \\${c} escape`);
        this.pos += n;
        const cp = parseInt(hex, 16);
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) this.fail(`\\${c}${hex} is not a Unicode scalar value`);
        return String.fromCodePoint(cp);
      }
      default:
        return this.fail(`unknown escape \\${c}`);
    }
  }

  value(): TomlValue {
    this.skipBlank();
    const c = this.peek();
    if (c === '"') return this.basicString();
    if (c === "'") return this.literalString();
    if (c === '[') return this.array();
    if (c === '{') return this.inlineTable();
    if (this.startsWith('true') && !BARE_KEY.test(this.peek(4))) return this.pos += 4, true;
    if (this.startsWith('false') && !BARE_KEY.test(this.peek(5))) return this.pos += 5, false;
    const m = /^[+-]?[0-9A-Za-z_.:+-]+/.exec(this.text.slice(this.pos, this.pos + 128));
    if (!m) this.fail(c === '' || c === '\n' ? 'a value is missing' : `unexpected ${JSON.stringify(c)} where a value belongs`);
    this.pos += m[0].length;
    return this.number(m[0]);
  }

  number(s: string): number | bigint {
    if (/^\d{4}-\d{2}-\d{2}|^\d{2}:\d{2}/.test(s)) this.fail(`dates and times are not read here (${s})`);
    if (/^[+-]?(inf|nan)$/.test(s)) return s.endsWith('inf') ? (s.startsWith('-') ? -Infinity : Infinity) : NaN;
    const radix = /^0x[0-9A-Fa-f_]+$/.test(s) ? 16 : /^0o[0-7_]+$/.test(s) ? 8 : /^0b[01_]+$/.test(s) ? 2 : 0;
    if (radix !== 0 || /^[+-]?(0|[1-9](_?\d)*)$/.test(s)) {
      const digits = s.replaceAll('_', '');
      const big = radix === 0 ? BigInt(digits) : BigInt(digits.slice(0, 2) + digits.slice(2));
      if (big > 0x7fffffffffffffffn || big < -0x8000000000000000n) this.fail(`integer ${s} does not fit 64 bits`);
      return big;
    }
    if (/^[+-]?(0|[1-9](_?\d)*)(\.\d(_?\d)*)?([eE][+-]?\d(_?\d)*)?$/.test(s)) return Number(s.replaceAll('_', ''));
    return this.fail(`not a value: ${s}`);
  }

  array(): TomlValue[] {
    this.pos++;
    const out: TomlValue[] = [];
    for (;;) {
      this.skipAll();
      if (this.peek() === ']') {
        this.pos++;
        return out;
      }
      out.push(this.value());
      this.skipAll();
      if (this.peek() === ',') this.pos++;
      else if (this.peek() !== ']') this.fail('expected "," or "]" in an array');
    }
  }

  inlineTable(): TomlTable {
    this.pos++;
    const t = newTable();
    this.skipBlank();
    if (this.peek() === '}') return this.pos++, t;
    for (;;) {
      const k = this.key();
      if (this.peek() !== '=') this.fail(`expected "=" after key ${k.join('.')}`);
      this.pos++;
      setPath(this, t, k, this.value());
      this.skipBlank();
      if (this.peek() === '}') return this.pos++, t;
      if (this.peek() !== ',') this.fail('expected "," or "}" in an inline table');
      this.pos++;
    }
  }
}

/** Tables have no prototype: a key named `__proto__` is a key like any other. */
function newTable(): TomlTable {
  return Object.create(null) as TomlTable;
}

function isTable(v: TomlValue | undefined): v is TomlTable {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Sets `value` at the dotted `key` under `t`, creating tables; a key set twice is an error. */
function setPath(r: Reader, t: TomlTable, key: string[], value: TomlValue): void {
  let cur = t;
  for (const part of key.slice(0, -1)) {
    const next = Object.hasOwn(cur, part) ? cur[part] : (cur[part] = newTable());
    if (!isTable(next)) r.fail(`key ${key.join('.')}: ${part} is already a value, not a table`);
    cur = next;
  }
  const last = key[key.length - 1]!;
  if (Object.hasOwn(cur, last)) r.fail(`key ${key.join('.')} is defined twice`);
  cur[last] = value;
}

/** Parses TOML text; `file` names it in errors. */
export function parseToml(text: string, file = '<toml>'): TomlTable {
  const r: Reader = new Reader(text.startsWith('\uFEFF') ? text.slice(1) : text, file);
  const root = newTable();
  let current = root;
  const headers = new Set<string>();
  while (r.pos < r.text.length) {
    r.skipAll();
    if (r.pos >= r.text.length) break;
    if (r.peek() === '[') {
      if (r.peek(1) === '[') r.fail('arrays of tables ([[...]]) are not read here');
      r.pos++;
      const k = r.key();
      if (r.peek() !== ']') r.fail('expected "]" after a table name');
      r.pos++;
      const name = JSON.stringify(k);
      if (headers.has(name)) r.fail(`table [${k.join('.')}] is defined twice`);
      headers.add(name);
      current = root;
      for (const part of k) {
        const next = Object.hasOwn(current, part) ? current[part] : (current[part] = newTable());
        if (!isTable(next)) r.fail(`table [${k.join('.')}]: ${part} is already a value`);
        current = next;
      }
      r.endOfLine();
      continue;
    }
    const k = r.key();
    if (r.peek() !== '=') r.fail(`expected "=" after key ${k.join('.')}`);
    r.pos++;
    setPath(r, current, k, r.value());
    r.endOfLine();
  }
  return root;
}

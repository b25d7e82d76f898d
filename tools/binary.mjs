// What a built shared library is, read from its own headers: its format
// (ELF, Mach-O, PE), the platform-arch it runs on, in Node's names
// (`linux-x64`, `darwin-arm64`, `win32-x64`), and the symbols it exports.
// tools/build-native.mjs checks that a cross build made what was asked;
// test/package/prebuilds.test.ts that every shipped library exports what
// src/async/ring.ts loads. Only the 64-bit little-endian forms are read:
// the only ones arrow-device runs on (src/memory/native.ts refuses 32-bit).
//
// Plain JavaScript for any Node.
import { readFileSync } from 'node:fs';

/** ELF e_machine and Mach-O cputype to Node's arch names. */
const ELF_ARCH = { 0x3e: 'x64', 0xb7: 'arm64' };
const MACHO_ARCH = { 0x01000007: 'x64', 0x0100000c: 'arm64' };
const PE_ARCH = { 0x8664: 'x64', 0xaa64: 'arm64' };

/** A NUL-terminated string at `at`. */
function cstr(b, at) {
  const end = b.indexOf(0, at);
  return b.toString('latin1', at, end < 0 ? b.length : end);
}

function elf(b) {
  if (b[4] !== 2 || b[5] !== 1) throw new Error('not a 64-bit little-endian ELF file');
  const arch = ELF_ARCH[b.readUInt16LE(18)];
  const shoff = Number(b.readBigUInt64LE(0x28));
  const shentsize = b.readUInt16LE(0x3a);
  const shnum = b.readUInt16LE(0x3c);
  const section = (i) => {
    const o = shoff + i * shentsize;
    return { type: b.readUInt32LE(o + 4), offset: Number(b.readBigUInt64LE(o + 24)), size: Number(b.readBigUInt64LE(o + 32)), link: b.readUInt32LE(o + 40) };
  };
  const exports = [];
  for (let i = 0; i < shnum; i++) {
    const s = section(i);
    if (s.type !== 11) continue; // SHT_DYNSYM: what the dynamic linker resolves
    const strtab = section(s.link);
    for (let o = s.offset; o + 24 <= s.offset + s.size; o += 24) {
      const bind = b[o + 4] >> 4;
      const shndx = b.readUInt16LE(o + 6);
      // Defined (not SHN_UNDEF) and visible outside: STB_GLOBAL or STB_WEAK.
      if (shndx !== 0 && (bind === 1 || bind === 2)) exports.push(cstr(b, strtab.offset + b.readUInt32LE(o)));
    }
  }
  return { format: 'elf', platform: 'linux', arch, exports };
}

function macho(b) {
  const arch = MACHO_ARCH[b.readUInt32LE(4)];
  const ncmds = b.readUInt32LE(16);
  const exports = [];
  let o = 32; // mach_header_64
  for (let i = 0; i < ncmds; i++) {
    const cmd = b.readUInt32LE(o);
    if (cmd === 0x2) {
      // LC_SYMTAB: nlist_64 entries; exported = N_EXT and defined in a section (N_SECT).
      const symoff = b.readUInt32LE(o + 8);
      const nsyms = b.readUInt32LE(o + 12);
      const stroff = b.readUInt32LE(o + 16);
      for (let k = 0; k < nsyms; k++) {
        const e = symoff + 16 * k;
        const type = b[e + 4];
        if ((type & 0x01) !== 0 && (type & 0x0e) === 0x0e) {
          // C names carry a leading underscore in Mach-O.
          const name = cstr(b, stroff + b.readUInt32LE(e));
          exports.push(name.startsWith('_') ? name.slice(1) : name);
        }
      }
    }
    o += b.readUInt32LE(o + 4);
  }
  return { format: 'macho', platform: 'darwin', arch, exports };
}

function pe(b) {
  const h = b.readUInt32LE(0x3c);
  if (b.readUInt32LE(h) !== 0x4550) throw new Error('no PE signature');
  const arch = PE_ARCH[b.readUInt16LE(h + 4)];
  const nsections = b.readUInt16LE(h + 6);
  const optSize = b.readUInt16LE(h + 20);
  const opt = h + 24;
  if (b.readUInt16LE(opt) !== 0x20b) throw new Error('not a PE32+ (64-bit) image');
  const sections = [];
  for (let i = 0; i < nsections; i++) {
    const s = opt + optSize + 40 * i;
    sections.push({ va: b.readUInt32LE(s + 12), vsize: b.readUInt32LE(s + 8), raw: b.readUInt32LE(s + 20) });
  }
  const at = (rva) => {
    const s = sections.find((x) => rva >= x.va && rva < x.va + x.vsize);
    if (!s) throw new Error(`RVA 0x${rva.toString(16)} is in no section`);
    return rva - s.va + s.raw;
  };
  const exports = [];
  const dirRva = b.readUInt32LE(opt + 112); // the export table: data directory 0
  if (dirRva !== 0) {
    const d = at(dirRva);
    const count = b.readUInt32LE(d + 24);
    const names = at(b.readUInt32LE(d + 32));
    for (let i = 0; i < count; i++) exports.push(cstr(b, at(b.readUInt32LE(names + 4 * i))));
  }
  return { format: 'pe', platform: 'win32', arch, exports };
}

/**
 * `{ format, platform, arch, target, exports }` of the library at `file`
 * (`target` is `${platform}-${arch}`); throws for anything else.
 */
export function describeBinary(file) {
  const b = readFileSync(file);
  let d;
  if (b.readUInt32BE(0) === 0x7f454c46) d = elf(b);
  else if (b.readUInt32LE(0) === 0xfeedfacf) d = macho(b);
  else if (b.readUInt16LE(0) === 0x5a4d) d = pe(b);
  else throw new Error(`${file} is not an ELF, Mach-O (64-bit) or PE file`);
  return { ...d, target: `${d.platform}-${d.arch ?? 'unknown'}` };
}

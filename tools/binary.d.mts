// Types for tools/binary.mjs (plain JavaScript for any Node), for the tests that import it.
export interface BinaryDescription {
  format: 'elf' | 'macho' | 'pe';
  platform: 'linux' | 'darwin' | 'win32';
  arch: 'x64' | 'arm64' | undefined;
  /** `${platform}-${arch}`, in Node's names. */
  target: string;
  exports: string[];
}
export function describeBinary(file: string): BinaryDescription;

/*
 * A stand-in for Windows' bcryptprimitives.dll, for the Windows test run under
 * Wine 8 only (tools/windows.mjs puts it in the Wine prefix; it is never
 * shipped). Wine 8 has no such DLL, and the Go runtime (1.22 and later) asks
 * it for ProcessPrng at start: the Go programs and DLLs of the ADBC Flight
 * SQL test (arrow-go's example server, the Flight SQL driver) stop there
 * with "bcryptprimitives.dll not found". ProcessPrng fills a buffer with
 * random bytes and always succeeds; this one asks RtlGenRandom
 * (advapi32's SystemFunction036), which Wine has.
 */
#include <windows.h>

typedef BOOLEAN(WINAPI *GenRandom)(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  static GenRandom gen;
  if (!gen) {
    HMODULE advapi = LoadLibraryA("advapi32.dll");
    gen = advapi ? (GenRandom)(void *)GetProcAddress(advapi, "SystemFunction036") : NULL;
  }
  while (length > 0) {
    ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
    if (!gen || !gen(data, n)) return FALSE;
    data += n;
    length -= n;
  }
  return TRUE;
}

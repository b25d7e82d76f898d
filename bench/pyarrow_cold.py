"""PyArrow's side of bench/cold.bench.ts: the first, second and eighth import
of a query result in a fresh Python process.

Called as a child process (one process per measurement) with three
arguments, the path of the C producer's library (bench/cold.c, built by the
Node side), the number of batches and the rows per batch; prints one JSON
object: {"pyarrow": version, "passes": [ms, ...]}.

Each pass: the producer makes the result (n batches of struct arrays and
one schema, not timed), then, timed, `pa.Schema._import_from_c` of the
schema, `pa.RecordBatch._import_from_c` of every batch against it, and
`pa.Table.from_batches`. Then the table is dropped (its releases run, not
timed) and the producer's block freed. Eight passes: the Node side takes
the first, second and eighth.
"""
import ctypes
import json
import sys
import time

import pyarrow as pa

ARRAY_SIZE = 80  # sizeof(struct ArrowArray) on 64-bit targets
SCHEMA_SIZE = 72

def main():
    lib_path, n, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lib = ctypes.CDLL(lib_path)
    lib.cold_make.restype = ctypes.c_void_p
    lib.cold_make.argtypes = [ctypes.c_int64, ctypes.c_int64]
    lib.cold_fill_schema.argtypes = [ctypes.c_void_p]
    lib.cold_free.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    passes = []
    for _ in range(8):
        base = lib.cold_make(n, rows)
        schema_struct = ctypes.create_string_buffer(SCHEMA_SIZE)
        lib.cold_fill_schema(ctypes.addressof(schema_struct))
        t = time.perf_counter()
        schema = pa.Schema._import_from_c(ctypes.addressof(schema_struct))
        batches = [pa.RecordBatch._import_from_c(base + i * ARRAY_SIZE, schema) for i in range(n)]
        table = pa.Table.from_batches(batches)
        passes.append((time.perf_counter() - t) * 1000)
        assert table.num_rows == n * rows
        del table, batches
        lib.cold_free(base, n)
    print(json.dumps({"pyarrow": pa.__version__, "passes": passes}))

if __name__ == "__main__":
    main()

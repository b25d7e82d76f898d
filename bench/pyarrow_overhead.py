"""PyArrow's side of bench/overhead.bench.ts: the fixed cost of exporting and
importing one record batch through the C Data Interface, schema handled once.

Called by the Node benchmark as a child process with one argument, a JSON
object {"reps": R, "shapes": [{"shape": "1x1", "iterations": N}, ...]}, and
prints one JSON object on stdout:

    {"pyarrow": "26.0.1", "python": "3.11.7", "allocator": "cffi",
     "results": {"1x1": 1.23, "1x1+schema": 2.34, ...}}  # microseconds per batch

"<shape>+schema" is the same loop with the schema exported and imported with
every batch (see measure_with_schema).

The shapes are built here with the same types and values as the Node side
builds them (see the shape table there); only their names cross the process
boundary, so nothing is serialised into the timed region.

Per batch: `RecordBatch._export_to_c(array_ptr)` then
`RecordBatch._import_from_c(array_ptr, schema)` with a `pa.Schema` imported
once before the loop, into one ArrowArray struct allocated once (the import
moves the struct's contents out, so the struct can be reused, as a PyArrow
user would). The imported batch is dropped when the next one replaces it,
so its release (the exporter's private data freed) runs inside the timed
loop, as the Node side's releases do.

Iteration discipline, the same as the Node side's: a warm-up of
min(N, 2000) batches, then R repeats of N batches each, and the median of
the repeats' per-batch times.
"""

import json
import platform
import statistics
import sys
import time

import pyarrow as pa

# pyarrow.cffi needs the cffi package, which a bare `pip install pyarrow`
# (what test/peers/arrow-cpp/setup.sh does) does not bring. ctypes buffers of
# the ABI's sizes are the same zeroed memory, so they stand in for it; the
# JSON says which one allocated the structs.
try:
    from pyarrow.cffi import ffi

    def alloc(kind):
        struct = ffi.new(f"struct {kind}*")
        return struct, int(ffi.cast("uintptr_t", struct))

    ALLOCATOR = "cffi"
except ImportError:
    import ctypes

    # Sizes on a 64-bit platform (the C Data Interface's ABI): ArrowSchema is
    # 9 pointer-sized fields, ArrowArray 10.
    _SIZES = {"ArrowSchema": 72, "ArrowArray": 80}

    def alloc(kind):
        buf = ctypes.create_string_buffer(_SIZES[kind])
        return buf, ctypes.addressof(buf)

    ALLOCATOR = "ctypes"


def int32_batch(rows, columns):
    arrays = [pa.array(range(k, k + rows), pa.int32()) for k in range(columns)]
    fields = [pa.field(f"c{k}", pa.int32(), nullable=False) for k in range(columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def four_columns(rows):
    # i32, f64, utf8, f64: the same values as the Node side's fourColumns(rows).
    return pa.RecordBatch.from_arrays(
        [
            pa.array(range(rows), pa.int32()),
            pa.array([i * 0.5 for i in range(rows)], pa.float64()),
            pa.array([f"v{i % 1000}" for i in range(rows)], pa.utf8()),
            pa.array([i * 1.5 for i in range(rows)], pa.float64()),
        ],
        names=["i", "f", "s", "d"],
    )


SHAPES = {
    "1x1": lambda: int32_batch(1, 1),
    "1x4": lambda: four_columns(1),
    "1x100": lambda: int32_batch(1, 100),
    "1Mx4": lambda: four_columns(1_000_000),
}


def measure(batch, iterations, reps):
    c_schema, schema_ptr = alloc("ArrowSchema")
    c_array, array_ptr = alloc("ArrowArray")
    # The schema is handled once, outside the loop.
    batch.schema._export_to_c(schema_ptr)
    schema = pa.Schema._import_from_c(schema_ptr)

    # Local names, so the loop pays for the two calls and not for lookups.
    export = batch._export_to_c
    import_ = pa.RecordBatch._import_from_c

    # One checked round trip before timing: the figure must be of a real one.
    export(array_ptr)
    check = import_(array_ptr, schema)
    if not check.equals(batch):
        raise SystemExit("pyarrow round trip does not give the batch back")
    del check

    def loop(n):
        t0 = time.perf_counter_ns()
        b = None
        for _ in range(n):
            export(array_ptr)
            b = import_(array_ptr, schema)
        del b
        return (time.perf_counter_ns() - t0) / 1e3 / n

    loop(min(iterations, 2000))  # warm up
    times = [loop(iterations) for _ in range(reps)]
    del c_schema, c_array
    return statistics.median(times)


def measure_with_schema(batch, iterations, reps):
    """The same loop with the schema exported and imported with every batch
    (`_export_to_c(array_ptr, schema_ptr)`, `_import_from_c(array_ptr,
    schema_ptr)`): what a producer handing a new ArrowSchema with each array
    (the PyCapsule protocol's __arrow_c_array__) costs."""
    c_schema, schema_ptr = alloc("ArrowSchema")
    c_array, array_ptr = alloc("ArrowArray")
    export = batch._export_to_c
    import_ = pa.RecordBatch._import_from_c

    export(array_ptr, schema_ptr)
    check = import_(array_ptr, schema_ptr)
    if not check.equals(batch) or not check.schema.equals(batch.schema):
        raise SystemExit("pyarrow round trip with its schema does not give the batch back")
    del check

    def loop(n):
        t0 = time.perf_counter_ns()
        b = None
        for _ in range(n):
            export(array_ptr, schema_ptr)
            b = import_(array_ptr, schema_ptr)
        del b
        return (time.perf_counter_ns() - t0) / 1e3 / n

    loop(min(iterations, 2000))  # warm up
    times = [loop(iterations) for _ in range(reps)]
    del c_schema, c_array
    return statistics.median(times)


def main():
    spec = json.loads(sys.argv[1])
    reps = int(spec["reps"])
    results = {}
    for s in spec["shapes"]:
        name = s["shape"]
        if name not in SHAPES:
            raise SystemExit(f"unknown shape {name!r}")
        results[name] = measure(SHAPES[name](), int(s["iterations"]), reps)
        results[name + "+schema"] = measure_with_schema(SHAPES[name](), int(s["iterations"]), reps)
    print(
        json.dumps(
            {
                "pyarrow": pa.__version__,
                "python": platform.python_version(),
                "allocator": ALLOCATOR,
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()

"""The second driver floor of `npm run bench:service`: the same ADBC driver
library, the same database and the same queries through Python's
adbc_driver_manager (the Apache Arrow ADBC project's driver manager) and
PyArrow, run by bench/service.bench.ts with the .venv's Python
(bench/setup-adbc-python.sh installs adbc-driver-manager there).

Per query, the statement API's fewest calls, as the Node floor makes them:
AdbcStatement, set_sql_query, with parameters bind of a one-row
pyarrow.RecordBatch (no prepare), execute_query, the stream imported into
PyArrow and read to the end (read_all), the rows counted and id summed
(pyarrow.compute.sum), close. Every result is checked: a wrong count or sum
exits 1. Medians of `reps` after `warmup` untimed queries, per shape.

Input: one JSON argument (see bench/service.bench.ts, pythonFloor). Output:
one JSON line.
"""
import json
import sys
import time

import adbc_driver_manager as adbc
import pyarrow as pa
import pyarrow.compute as pc


def main() -> None:
    spec = json.loads(sys.argv[1])
    table_rows = spec["tableRows"]
    kwargs = {"driver": spec["driver"], **spec["databaseOptions"]}
    if spec.get("entrypoint"):
        kwargs["entrypoint"] = spec["entrypoint"]
    db = adbc.AdbcDatabase(**kwargs)
    conn = adbc.AdbcConnection(db)
    ms = {}
    try:
        for shape in spec["shapes"]:
            rows = shape["rows"]
            times = []
            for i in range(spec["warmup"] + spec["reps"]):
                lo = (i * 7919) % (table_rows - rows + 1)
                hi = lo + rows
                t0 = time.perf_counter()
                stmt = adbc.AdbcStatement(conn)
                try:
                    if shape["mode"] == "literal":
                        stmt.set_sql_query(shape["sql"].replace("{lo}", str(lo)).replace("{hi}", str(hi)))
                    else:
                        stmt.set_sql_query(shape["sql"])
                        values = [lo] if shape["nparams"] == 1 else [lo, hi]
                        batch = pa.record_batch([pa.array([x], pa.int32()) for x in values], names=[f"p{k + 1}" for k in range(len(values))])
                        schema_capsule, array_capsule = batch.__arrow_c_array__()
                        stmt.bind(array_capsule, schema_capsule)
                    handle, _ = stmt.execute_query()
                    table = pa.RecordBatchReader._import_from_c(handle.address).read_all()
                    count = table.num_rows
                    total = pc.sum(table.column("id")).as_py() or 0
                finally:
                    stmt.close()
                dt = (time.perf_counter() - t0) * 1000
                want = rows * lo + rows * (rows - 1) // 2
                if count != rows or total != want:
                    print(f"python floor {rows} {shape['mode']}: {count} rows summing to {total}, expected {rows} rows summing to {want}", file=sys.stderr)
                    sys.exit(1)
                if i >= spec["warmup"]:
                    times.append(dt)
            ms[f"{rows} {shape['mode']}"] = sorted(times)[len(times) // 2]  # the median as the Node side takes it
    finally:
        conn.close()
        db.close()
    print(json.dumps({
        "ms": ms,
        "python": sys.version.split()[0],
        "pyarrow": pa.__version__,
        "adbc_driver_manager": adbc.__version__,
    }))


if __name__ == "__main__":
    main()

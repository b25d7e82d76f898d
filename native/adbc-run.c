/*
 * The query run: the driver calls of one small query, made one after the
 * other on the thread that calls adbc_run (a worker thread: koffi's async
 * call), so that a query costs one thread hop instead of one per call.
 *
 * Why: arrow-device/adbc makes every driver call that can wait off the JS
 * thread. Each such call is a hop: queued to a worker, run, and its answer
 * queued back to the JS thread's event loop. A one-row query made
 * AdbcStatementSetSqlQuery, AdbcStatementExecuteQuery and two get_next
 * calls (the batch, then the end), four hops, each tens of microseconds of
 * wake-ups on either side for a call that itself takes a few. Here one
 * call makes them all, in adbc.h's order, and stops at the first failure,
 * saying which step failed; JS then reads the results as if it had made
 * the calls itself (src/adbc/run.ts).
 *
 * A run may first release statements the connection let go (AdbcStatementRelease), so that those
 * releases leave the JS thread without a hop of their own.
 *
 * Nothing here is kept between calls and nothing is freed but by those releases: every struct
 * belongs to the caller, which allocated it zeroed, and every pointer in
 * the job is the caller's. The driver functions are the ones the driver's
 * table holds (adbc.h, "struct AdbcDriver"); the stream's callbacks those
 * the driver put in the stream (CStreamInterface.rst).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "arrow-abi.h"

/* adbc.h's AdbcStatusCode is a uint8_t; its handles are opaque here. */
typedef uint8_t (*set_sql_fn)(void* statement, const char* query, void* error);
typedef uint8_t (*execute_fn)(void* statement, struct ArrowArrayStream* out, int64_t* rows_affected, void* error);
typedef uint8_t (*release_fn)(void* statement, void* error);

/* adbc.h's struct AdbcError, as far as a release's error is read here: to give it back (its release). */
struct run_error {
  char* message;
  int32_t vendor_code;
  char sqlstate[5];
  void (*release)(struct run_error* error);
  void* private_data;
  void* private_driver;
};

/*
 * One run, as JS writes and reads it (every field 8 bytes; adbc_run_job_size: 160 bytes).
 * In: set_sql (NULL: the SQL is set already, e.g. a cached statement), execute, statement, sql, error,
 * stream (a zeroed ArrowArrayStream for execute to fill), schema (a zeroed ArrowSchema for get_schema,
 * or NULL: not asked), arrays (max pointers to zeroed ArrowArrays, each its own allocation of the
 * caller's, since each becomes a batch's owner as it is) and max.
 * stream NULL: a statement that returns no rows (DDL, DML): ExecuteQuery with no stream, and
 * rows_affected filled; nothing else is called.
 * releases: nreleases statements of the same connection that JS let go (AdbcStatementRelease through
 * release, each first, before anything else of the run: the connection is not thread-safe, and this is
 * its turn), each one's status written to release_status[i], its error (release_error, a zeroed
 * ADBC 1.0 AdbcError of the caller's) given back and zeroed again; releases_done counts those made.
 * Out: step (where the run stopped: RUN_DONE or the failed step), status (that step's ADBC status or
 * errno-style return), filled (get_next calls that returned 0; the last of them may be the end),
 * ended (1: *arrays[filled - 1] is the end of the stream, its release NULL; the driver's stream is then
 * released and an ended stream of this library's is in its place) and rows_affected (with no stream:
 * the driver's count, -1 unknown).
 */
struct adbc_run_job {
  set_sql_fn set_sql;
  execute_fn execute;
  void* statement;
  const char* sql;
  void* error;
  struct ArrowArrayStream* stream;
  struct ArrowSchema* schema;
  struct ArrowArray** arrays;
  int64_t max;
  int64_t step;
  int64_t status;
  int64_t filled;
  int64_t ended;
  int64_t rows_affected;
  release_fn release;
  void** releases;
  int64_t* release_status;
  int64_t nreleases;
  struct run_error* release_error;
  int64_t releases_done;
};

enum { RUN_DONE = 0, RUN_SET_SQL = 1, RUN_EXECUTE = 2, RUN_GET_SCHEMA = 3, RUN_GET_NEXT = 4 };

/*
 * Runs the job: the releases JS let go, then SetSqlQuery (if set_sql), ExecuteQuery, then (with a stream) get_schema (if schema) and get_next into
 * *arrays[0..max) until the end of the stream, a failure, or max calls. Returns job->step.
 * After a failed SetSqlQuery or ExecuteQuery, error holds the driver's AdbcError and the stream is
 * untouched (or released by the driver: adbc.h leaves it unfilled); after a failed stream call the
 * stream is live, so that get_last_error can still be read (CStreamInterface.rst: until the next call).
 */
/*
 * What a run leaves in place of a stream it read to the end and released: a stream that has ended
 * (CStreamInterface.rst: get_next gives the released array that marks the end), has no schema to give,
 * and whose release only marks it released. So the consumer's own end-of-stream release, on its thread,
 * costs a call into this library instead of the driver's release (which may talk to a server).
 */
static int ended_get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  (void)s;
  (void)out;
  return EINVAL;
}
static int ended_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  (void)s;
  *out = (struct ArrowArray){0};
  return 0;
}
static const char* ended_get_last_error(struct ArrowArrayStream* s) {
  (void)s;
  return NULL;
}
static void ended_release(struct ArrowArrayStream* s) { s->release = NULL; }

int64_t adbc_run(struct adbc_run_job* job) {
  job->filled = 0;
  job->ended = 0;
  job->status = 0;
  job->releases_done = 0;
  for (int64_t i = 0; job->release && i < job->nreleases; i++) {
    struct run_error* e = job->release_error;
    job->release_status[i] = job->release(job->releases[i], e);
    if (e->release) e->release(e);
    *e = (struct run_error){0};
    job->releases_done = i + 1;
  }
  if (job->set_sql) {
    uint8_t st = job->set_sql(job->statement, job->sql, job->error);
    if (st != 0) {
      job->status = st;
      return job->step = RUN_SET_SQL;
    }
  }
  job->rows_affected = -1;
  uint8_t st = job->execute(job->statement, job->stream, job->stream ? 0 : &job->rows_affected, job->error);
  if (st != 0) {
    job->status = st;
    return job->step = RUN_EXECUTE;
  }
  if (!job->stream) return job->step = RUN_DONE;
  /* A driver that returns OK without filling the stream, or fills it with a NULL callback: nothing is
     called, and JS's import refuses the stream with a typed error naming the field (foreign input). */
  if (!job->stream->release || !job->stream->get_schema || !job->stream->get_next) return job->step = RUN_DONE;
  if (job->schema) {
    int rc = job->stream->get_schema(job->stream, job->schema);
    if (rc != 0) {
      job->status = rc;
      return job->step = RUN_GET_SCHEMA;
    }
  }
  for (int64_t i = 0; i < job->max; i++) {
    int rc = job->stream->get_next(job->stream, job->arrays[i]);
    if (rc != 0) {
      job->status = rc;
      return job->step = RUN_GET_NEXT;
    }
    job->filled = i + 1;
    if (!job->arrays[i]->release) {
      job->ended = 1;
      break;
    }
  }
  if (job->ended) {
    /* Read to the end: the driver's stream is released here, on this worker thread, in the connection's
       turn (Flight SQL's driver ends its call to the server there), and the ended stream takes its place. */
    struct ArrowArrayStream* st = job->stream;
    st->release(st);
    *st = (struct ArrowArrayStream){
        .get_schema = ended_get_schema, .get_next = ended_get_next, .get_last_error = ended_get_last_error,
        .release = ended_release, .private_data = NULL};
  }
  return job->step = RUN_DONE;
}

/* What JS checks before it uses this library's runs: the job's size (a layout change changes it). */
int64_t adbc_run_job_size(void) { return (int64_t)sizeof(struct adbc_run_job); }

/* adbc_run's address, for the package's worker threads (workers.c) to call it as they call a driver. */
uintptr_t adbc_run_fn(void) { return (uintptr_t)&adbc_run; }

/*
 * A malformed ADBC driver (adbc.h 1.0.0 entries only), for test/adbc/run.test.ts: its results are
 * streams that break the C Stream Interface's rules in the ways a buggy driver could, chosen by the SQL
 * text, so that the native query run (native/adbc-run.c) and the plain path can be held side by side on
 * input no real driver gives. Every struct it hands out is counted (fake_live) until released.
 *
 *   "ok N"          N batches of one row (a struct of one int64 "x": i), then the end
 *   "fail-next K"   K good batches, then get_next returns EIO with get_last_error "boom at K"
 *   "fail-schema"   get_schema returns EINVAL
 *   "null-schema"   the stream's get_schema is NULL
 *   "null-next"     the stream's get_next is NULL
 *   "unfilled"      ExecuteQuery returns OK and leaves the stream as it was (release NULL)
 *   "fail-exec"     ExecuteQuery returns INVALID_ARGUMENT (status 5) with a message
 *   "fail-release"  an empty result; the statement's release then returns IO (status 10) with an error
 *                   (counted in fake_live until the caller gives it back)
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/arrow_c_abi.h"

struct AdbcError {
  char* message;
  int32_t vendor_code;
  char sqlstate[5];
  void (*release)(struct AdbcError*);
  void* private_data;
  void* private_driver;
};
struct Handle {
  void* private_data;
  void* private_driver;
};

static int64_t live = 0;
int64_t fake_live(void) { return live; }

static void release_error(struct AdbcError* e) {
  free(e->message);
  e->message = NULL;
  e->release = NULL;
}
static uint8_t fail(struct AdbcError* e, uint8_t status, const char* msg) {
  if (e) {
    e->message = strdup(msg);
    memcpy(e->sqlstate, "42000", 5);
    e->release = release_error;
  }
  return status;
}

/* --- arrays: a struct of one non-null int64 child, one row --- */
static void release_child(struct ArrowArray* a) {
  free((void*)a->buffers[1]);
  free(a->buffers);
  a->release = NULL;
  live--;
}
static void release_batch(struct ArrowArray* a) {
  struct ArrowArray* c = a->children[0];
  if (c->release) c->release(c);
  free(c);
  free(a->children);
  free(a->buffers);
  a->release = NULL;
  live--;
}
static void fill_batch(struct ArrowArray* out, int64_t value) {
  struct ArrowArray* c = calloc(1, sizeof *c);
  int64_t* v = malloc(8);
  *v = value;
  c->length = 1;
  c->n_buffers = 2;
  c->buffers = calloc(2, sizeof(void*));
  c->buffers[1] = v;
  c->release = release_child;
  memset(out, 0, sizeof *out);
  out->length = 1;
  out->n_buffers = 1;
  out->buffers = calloc(1, sizeof(void*));
  out->n_children = 1;
  out->children = calloc(1, sizeof(void*));
  out->children[0] = c;
  out->release = release_batch;
  live += 2;
}

/* --- the schema --- */
static void release_schema(struct ArrowSchema* s) {
  if (s->n_children > 0) {
    struct ArrowSchema* c = s->children[0];
    if (c->release) c->release(c);
    free(c);
    free(s->children);
  }
  s->release = NULL;
  live--;
}
static void fill_schema(struct ArrowSchema* out) {
  struct ArrowSchema* c = calloc(1, sizeof *c);
  c->format = "l";
  c->name = "x";
  c->release = release_schema;
  memset(out, 0, sizeof *out);
  out->format = "+s";
  out->name = "";
  out->n_children = 1;
  out->children = calloc(1, sizeof(void*));
  out->children[0] = c;
  out->release = release_schema;
  live += 2;
}

/* --- the stream --- */
struct stream_state {
  int64_t n, fail_at, next;
  int fail_schema;
  char error[64];
};
static int get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  struct stream_state* st = s->private_data;
  if (st->fail_schema) {
    snprintf(st->error, sizeof st->error, "no schema here");
    return EINVAL;
  }
  fill_schema(out);
  return 0;
}
static int get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  struct stream_state* st = s->private_data;
  if (st->fail_at >= 0 && st->next == st->fail_at) {
    snprintf(st->error, sizeof st->error, "boom at %lld", (long long)st->next);
    return EIO;
  }
  if (st->next >= st->n) {
    memset(out, 0, sizeof *out);
    return 0;
  }
  fill_batch(out, st->next++);
  return 0;
}
static const char* get_last_error(struct ArrowArrayStream* s) {
  struct stream_state* st = s->private_data;
  return st->error[0] ? st->error : NULL;
}
/* The thread the driver was loaded on (the JS thread) and where the last stream was released. */
static pthread_t init_thread;
static int last_stream_release_on_init = -1;
/* 1: the last stream released was released on the thread that loaded the driver; 0: on another; -1: none. */
int fake_stream_released_on_init_thread(void) { return last_stream_release_on_init; }

static void release_stream(struct ArrowArrayStream* s) {
  free(s->private_data);
  s->release = NULL;
  live--;
  last_stream_release_on_init = pthread_equal(pthread_self(), init_thread) ? 1 : 0;
}

/* --- the driver's entries --- */
static uint8_t ok2(void* a, void* e) { (void)a; (void)e; return 0; }
static uint8_t ok3(void* a, void* b, void* e) { (void)a; (void)b; (void)e; return 0; }
static uint8_t ok4(void* a, void* b, void* c, void* e) { (void)a; (void)b; (void)c; (void)e; return 0; }
static void release_counted_error(struct AdbcError* e) {
  release_error(e);
  live--;
}
static uint8_t statement_release(struct Handle* s, struct AdbcError* e) {
  int failing = s->private_data && strcmp(s->private_data, "fail-release") == 0;
  free(s->private_data);
  s->private_data = NULL;
  if (failing && e) {
    fail(e, 10, "fake: the release failed");
    e->release = release_counted_error;
    live++;
    return 10;
  }
  return 0;
}
static uint8_t set_sql(struct Handle* s, const char* q, void* e) {
  (void)e;
  free(s->private_data);
  s->private_data = strdup(q);
  return 0;
}
static uint8_t execute(struct Handle* s, struct ArrowArrayStream* out, int64_t* rows, struct AdbcError* e) {
  const char* q = s->private_data ? s->private_data : "";
  if (rows) *rows = -1;
  if (!out) return 0;
  if (strcmp(q, "fail-exec") == 0) return fail(e, 5, "fake: the execution failed");
  if (strcmp(q, "unfilled") == 0) return 0;
  struct stream_state* st = calloc(1, sizeof *st);
  st->fail_at = -1;
  long long k = 0;
  if (sscanf(q, "ok %lld", &k) == 1) st->n = k;
  else if (sscanf(q, "fail-next %lld", &k) == 1) st->n = k + 10, st->fail_at = k;
  else if (strcmp(q, "fail-schema") == 0) st->fail_schema = 1;
  memset(out, 0, sizeof *out);
  out->get_schema = strcmp(q, "null-schema") == 0 ? NULL : get_schema;
  out->get_next = strcmp(q, "null-next") == 0 ? NULL : get_next;
  out->get_last_error = get_last_error;
  out->release = release_stream;
  out->private_data = st;
  live++;
  return 0;
}

/* The table's slots in adbc.h's order (1.0.0: through StatementSetSubstraitPlan). */
enum {
  DatabaseInit = 3, DatabaseNew, DatabaseSetOption, DatabaseRelease,
  ConnectionInit = 12, ConnectionNew, ConnectionSetOption, ConnectionRelease = 16,
  StatementExecuteQuery = 20, StatementNew = 23, StatementRelease = 25, StatementSetOption, StatementSetSqlQuery,
  SLOTS = 29
};

uint8_t fake_adbc_init(int version, void** table, struct AdbcError* e) {
  if (version != 1000000) return fail(e, 2, "fake: ADBC 1.0.0 only");
  init_thread = pthread_self();
  memset(table, 0, SLOTS * sizeof(void*));
  table[DatabaseInit] = (void*)ok2;
  table[DatabaseNew] = (void*)ok2;
  table[DatabaseSetOption] = (void*)ok4;
  table[DatabaseRelease] = (void*)ok2;
  table[ConnectionInit] = (void*)ok3;
  table[ConnectionNew] = (void*)ok2;
  table[ConnectionSetOption] = (void*)ok4;
  table[ConnectionRelease] = (void*)ok2;
  table[StatementNew] = (void*)ok3;
  table[StatementRelease] = (void*)statement_release;
  table[StatementSetOption] = (void*)ok4;
  table[StatementSetSqlQuery] = (void*)set_sql;
  table[StatementExecuteQuery] = (void*)execute;
  return 0;
}

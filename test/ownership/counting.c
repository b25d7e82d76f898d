/*
 * The ownership fixture: a C producer of record batches (struct<x: int32>)
 * that counts what it hands out. Every array it gives is "outstanding" until
 * its release runs; the peak of that count over a run is what a streaming
 * test asserts, and a second release of one array is counted as an error
 * (never a crash). Arrays can be plain (ArrowArray), CPU device arrays
 * (ArrowDeviceArray) or come from a stream of either kind.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "arrow_c_abi.h"

static int64_t outstanding, peak, releases, double_releases, stream_releases, schema_releases;

int64_t cp_outstanding(void) { return outstanding; }
int64_t cp_peak(void) { return peak; }
int64_t cp_releases(void) { return releases; }
int64_t cp_double_releases(void) { return double_releases; }
int64_t cp_stream_releases(void) { return stream_releases; }
int64_t cp_schema_releases(void) { return schema_releases; }
void cp_reset_peak(void) { peak = outstanding; }

/* ---- schema: struct<x: int32 not null> ------------------------------------------ */

static void release_schema(struct ArrowSchema* s) {
  if (s->release == NULL) { double_releases++; return; }
  for (int64_t i = 0; i < s->n_children; i++) {
    if (s->children[i]->release) s->children[i]->release(s->children[i]);
  }
  free(s->private_data); /* children array + child structs, one block */
  s->release = NULL;
  schema_releases++;
}

static void release_child_schema(struct ArrowSchema* s) { s->release = NULL; }

int cp_make_schema(struct ArrowSchema* out) {
  /* One block: the children pointer array, then the child struct. */
  char* block = calloc(1, sizeof(struct ArrowSchema*) + sizeof(struct ArrowSchema));
  if (!block) return 12;
  struct ArrowSchema** children = (struct ArrowSchema**)block;
  struct ArrowSchema* child = (struct ArrowSchema*)(block + sizeof(struct ArrowSchema*));
  child->format = "i";
  child->name = "x";
  child->release = release_child_schema;
  children[0] = child;
  memset(out, 0, sizeof *out);
  out->format = "+s";
  out->name = "";
  out->n_children = 1;
  out->children = children;
  out->release = release_schema;
  out->private_data = block;
  return 0;
}

/* ---- arrays: struct<x: int32> of `rows` rows, x = start + i ----------------------- */

struct batch_block {
  struct ArrowArray child;
  struct ArrowArray* children[1];
  const void* parent_buffers[1];
  const void* child_buffers[2];
  int32_t* values;
  int released;
};

static void release_child(struct ArrowArray* a) { a->release = NULL; }

static void release_batch(struct ArrowArray* a) {
  if (a->release == NULL) { double_releases++; return; }
  struct batch_block* b = a->private_data;
  if (b->released) { double_releases++; return; }
  b->released = 1;
  if (b->child.release) b->child.release(&b->child);
  free(b->values);
  free(b);
  a->release = NULL;
  outstanding--;
  releases++;
}

int cp_make_batch(struct ArrowArray* out, int64_t rows, int32_t start) {
  struct batch_block* b = calloc(1, sizeof *b);
  if (!b) return 12;
  b->values = malloc(rows > 0 ? (size_t)rows * 4 : 4);
  if (!b->values) { free(b); return 12; }
  for (int64_t i = 0; i < rows; i++) b->values[i] = start + (int32_t)i;
  b->child_buffers[0] = NULL;
  b->child_buffers[1] = b->values;
  b->child.length = rows;
  b->child.n_buffers = 2;
  b->child.buffers = b->child_buffers;
  b->child.release = release_child;
  b->children[0] = &b->child;
  b->parent_buffers[0] = NULL;
  memset(out, 0, sizeof *out);
  out->length = rows;
  out->n_buffers = 1;
  out->n_children = 1;
  out->buffers = b->parent_buffers;
  out->children = b->children;
  out->release = release_batch;
  out->private_data = b;
  outstanding++;
  if (outstanding > peak) peak = outstanding;
  return 0;
}

int cp_make_device_batch(struct ArrowDeviceArray* out, int64_t rows, int32_t start) {
  memset(out, 0, sizeof *out);
  int rc = cp_make_batch(&out->array, rows, start);
  out->device_id = -1;
  out->device_type = ARROW_DEVICE_CPU;
  return rc;
}

/* ---- streams of `n` batches of `rows` rows ------------------------------------------ */

struct stream_state { int64_t n, rows, next; };

static int s_get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) { (void)s; return cp_make_schema(out); }
static int s_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  struct stream_state* st = s->private_data;
  if (st->next >= st->n) { memset(out, 0, sizeof *out); return 0; }
  return cp_make_batch(out, st->rows, (int32_t)(st->next++ * st->rows));
}
static const char* s_last_error(struct ArrowArrayStream* s) { (void)s; return NULL; }
static void s_release(struct ArrowArrayStream* s) {
  if (s->release == NULL) { double_releases++; return; }
  free(s->private_data);
  s->release = NULL;
  stream_releases++;
}

int cp_make_stream(struct ArrowArrayStream* out, int64_t n, int64_t rows) {
  struct stream_state* st = calloc(1, sizeof *st);
  if (!st) return 12;
  st->n = n;
  st->rows = rows;
  out->get_schema = s_get_schema;
  out->get_next = s_get_next;
  out->get_last_error = s_last_error;
  out->release = s_release;
  out->private_data = st;
  return 0;
}

/* ---- a stream that works slowly or fails: what a database driver's stream does ------------------
 * get_next sleeps `sleep_ms` per call (a driver running its query), and fails with `fail_code` when
 * asked for batch `fail_at` (-1: never), with a message from get_last_error. While the stream is
 * live, cp_stream_error_detail() gives more about the failure from the stream itself, as ADBC's
 * AdbcErrorFromArrayStream does; after release it has nothing (the state is freed). Calls of get_next
 * on a thread other than the one that made the stream are counted (an off-thread reader's). */

struct slow_state {
  int64_t n, rows, next, fail_at, sleep_ms;
  int fail_code, failed;
  pthread_t maker;
  char message[128];
  char detail[128];
};

static int64_t off_thread_calls;
int64_t cp_off_thread_calls(void) { return off_thread_calls; }

static int x_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  struct slow_state* st = s->private_data;
  if (!pthread_equal(pthread_self(), st->maker)) off_thread_calls++;
  if (st->sleep_ms > 0) {
    struct timespec ts = { (time_t)(st->sleep_ms / 1000), (long)(st->sleep_ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
  }
  if (st->next == st->fail_at) {
    st->failed = 1;
    snprintf(st->message, sizeof st->message, "cp: batch %lld failed", (long long)st->next);
    snprintf(st->detail, sizeof st->detail, "detail of batch %lld: code %d, from the live stream", (long long)st->next, st->fail_code);
    return st->fail_code;
  }
  if (st->next >= st->n) { memset(out, 0, sizeof *out); return 0; }
  return cp_make_batch(out, st->rows, (int32_t)(st->next++ * st->rows));
}
static const char* x_last_error(struct ArrowArrayStream* s) {
  struct slow_state* st = s->private_data;
  return st->failed ? st->message : NULL;
}
static void x_release(struct ArrowArrayStream* s) {
  if (s->release == NULL) { double_releases++; return; }
  free(s->private_data);
  s->private_data = NULL;
  s->release = NULL;
  stream_releases++;
}

int cp_make_slow_stream(struct ArrowArrayStream* out, int64_t n, int64_t rows, int64_t fail_at, int32_t fail_code, int64_t sleep_ms) {
  struct slow_state* st = calloc(1, sizeof *st);
  if (!st) return 12;
  st->n = n;
  st->rows = rows;
  st->fail_at = fail_at;
  st->fail_code = fail_code;
  st->sleep_ms = sleep_ms;
  st->maker = pthread_self();
  out->get_schema = s_get_schema;
  out->get_next = x_get_next;
  out->get_last_error = x_last_error;
  out->release = x_release;
  out->private_data = st;
  return 0;
}

/* The failure's detail, asked of the live stream (NULL when it has none, or is not one of these). */
const char* cp_stream_error_detail(struct ArrowArrayStream* s) {
  if (!s || s->release != x_release || !s->private_data) return NULL;
  struct slow_state* st = s->private_data;
  return st->failed ? st->detail : NULL;
}

static int d_get_schema(struct ArrowDeviceArrayStream* s, struct ArrowSchema* out) { (void)s; return cp_make_schema(out); }
static int d_get_next(struct ArrowDeviceArrayStream* s, struct ArrowDeviceArray* out) {
  struct stream_state* st = s->private_data;
  if (st->next >= st->n) { memset(out, 0, sizeof *out); return 0; }
  return cp_make_device_batch(out, st->rows, (int32_t)(st->next++ * st->rows));
}
static const char* d_last_error(struct ArrowDeviceArrayStream* s) { (void)s; return NULL; }
static void d_release(struct ArrowDeviceArrayStream* s) {
  if (s->release == NULL) { double_releases++; return; }
  free(s->private_data);
  s->release = NULL;
  stream_releases++;
}

int cp_make_device_stream(struct ArrowDeviceArrayStream* out, int64_t n, int64_t rows) {
  struct stream_state* st = calloc(1, sizeof *st);
  if (!st) return 12;
  st->n = n;
  st->rows = rows;
  out->device_type = ARROW_DEVICE_CPU;
  out->get_schema = d_get_schema;
  out->get_next = d_get_next;
  out->get_last_error = d_last_error;
  out->release = d_release;
  out->private_data = st;
  return 0;
}

/* ---- consumers: what a native library given our exports does ------------------------ */

static int64_t consumed_rows;
int64_t cp_consumed_rows(void) { return consumed_rows; }

/* Takes an ArrowSchema and an ArrowArray, reads the array's length and releases both (a consumer
 * that is done with them). Returns 0, or EINVAL for a released struct. */
int cp_consume(struct ArrowSchema* schema, struct ArrowArray* array) {
  if (!schema || !array || !schema->release || !array->release) return 22;
  consumed_rows += array->length;
  schema->release(schema);
  array->release(array);
  return 0;
}

/* Reads a whole ArrowArrayStream (schema, then every batch until the end), releasing each, then
 * the stream. Returns the number of batches, or -errno on a stream error. */
int64_t cp_consume_stream(struct ArrowArrayStream* stream) {
  struct ArrowSchema schema;
  struct ArrowArray array;
  int64_t n = 0;
  if (!stream || !stream->release) return -22;
  int rc = stream->get_schema(stream, &schema);
  if (rc != 0) { stream->release(stream); return -rc; }
  schema.release(&schema);
  for (;;) {
    rc = stream->get_next(stream, &array);
    if (rc != 0) { stream->release(stream); return -rc; }
    if (array.release == NULL) break;
    consumed_rows += array.length;
    array.release(&array);
    n++;
  }
  stream->release(stream);
  return n;
}

/*
 * bench:adbc's ingest floor: an ArrowArrayStream in C that hands out arrays
 * made before the clock starts, so that a driver ingesting it does its own
 * work and nothing else (no JavaScript runs while it reads: no callback, no
 * thread hop).
 *
 * The arrays and the schema are the caller's (exports of ours). The stream
 * hands out bitwise copies whose root release does nothing, so the caller's
 * structs stay live and are released by the caller after the driver is done
 * (CDataInterface.rst: a consumer releases only the root; children belong
 * to the root's release). The structs are test/include/arrow_c_abi.h's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../test/include/arrow_c_abi.h"

struct replay {
  const struct ArrowSchema* schema;
  const struct ArrowArray* const* arrays;
  int64_t n;
  int64_t next;
};

static void keep_schema(struct ArrowSchema* s) { s->release = NULL; }
static void keep_array(struct ArrowArray* a) { a->release = NULL; }

static int rp_get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  const struct replay* r = (const struct replay*)s->private_data;
  memcpy(out, r->schema, sizeof *out);
  out->release = keep_schema;
  return 0;
}

static int rp_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  struct replay* r = (struct replay*)s->private_data;
  if (r->next >= r->n) {
    memset(out, 0, sizeof *out); /* release NULL: the end */
    return 0;
  }
  memcpy(out, r->arrays[r->next++], sizeof *out);
  out->release = keep_array;
  return 0;
}

static const char* rp_last_error(struct ArrowArrayStream* s) {
  (void)s;
  return NULL;
}

static void rp_release(struct ArrowArrayStream* s) {
  free(s->private_data);
  s->release = NULL;
}

/*
 * Fills `out` with a stream of the `n` arrays at `arrays` (an array of
 * pointers) under `schema`; all stay the caller's, and must outlive the
 * stream. Returns 0, or ENOMEM (12).
 */
int rp_make_stream(struct ArrowArrayStream* out, const struct ArrowSchema* schema, const struct ArrowArray* const* arrays, int64_t n) {
  struct replay* r = (struct replay*)malloc(sizeof *r);
  if (!r) return 12;
  r->schema = schema;
  r->arrays = arrays;
  r->n = n;
  r->next = 0;
  out->get_schema = rp_get_schema;
  out->get_next = rp_get_next;
  out->get_last_error = rp_last_error;
  out->release = rp_release;
  out->private_data = r;
  return 0;
}

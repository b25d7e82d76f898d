/*
 * The fuzzer's hostile producer (test/fuzz): memory, release callbacks and
 * stream callbacks for the mutated C Data Interface structs that
 * test/fuzz/producer.ts lays out.
 *
 * Memory: every allocation (each buffer, each struct, each pointer array)
 * is its own mapping, placed so that its last byte is followed at once by a
 * PROT_NONE guard page: a read one byte past what the struct says faults
 * (and the fuzz driver reports the crash). Large sizes are mapped with
 * MAP_NORESERVE: a buffer of 5 GiB of zeros costs address space, not memory.
 *
 * Releases: every struct's private_data points at a record
 * { id, n, children, dictionary } written by the JS side, naming its *true*
 * children (the struct's own fields may have been mutated to lie). A release
 * counts itself in counts[id], releases those children and the dictionary
 * that are not released yet, and marks the struct released
 * (CDataInterface.rst, "Release callback semantics -- for producers"). The
 * driver checks that every struct handed over is released exactly once.
 *
 * Streams (CDataInterface.rst "C stream interface", CDeviceDataInterface.rst
 * "Device Stream Interface"): get_schema and get_next move prepared structs
 * out (bitwise copy, source marked released), get_next can fail with any
 * code at any batch, and get_last_error returns the prepared message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The structs, from the one header every C peer shares (test/include/arrow_c_abi.h). */
#include "../include/arrow_c_abi.h"

typedef struct {
  int64_t id;
  int64_t n;
  void **children;
  void *dictionary;
} record;

#define MAX_IDS (1 << 20)
static int32_t counts[MAX_IDS];

typedef struct {
  void *base;
  size_t len;
} mapping;
static mapping *maps;
static size_t n_maps, cap_maps;

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* `size` bytes ending flush against a PROT_NONE page; NULL if it cannot be mapped. */
void *fz_guarded(uint64_t size) {
  size_t pg = page();
  size_t body = (size_t)((size + pg - 1) / pg * pg);
  size_t len = body + pg;
  uint8_t *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return NULL;
  if (mprotect(base + body, pg, PROT_NONE) != 0) {
    munmap(base, len);
    return NULL;
  }
  if (n_maps == cap_maps) {
    cap_maps = cap_maps ? cap_maps * 2 : 1024;
    maps = realloc(maps, cap_maps * sizeof *maps);
  }
  maps[n_maps].base = base;
  maps[n_maps].len = len;
  n_maps++;
  return base + body - size;
}

/* Unmaps everything fz_guarded mapped. */
void fz_free_all(void) {
  for (size_t i = 0; i < n_maps; i++) munmap(maps[i].base, maps[i].len);
  n_maps = 0;
}

int64_t fz_mapped(void) { return (int64_t)n_maps; }

int32_t fz_count(int64_t id) { return id >= 0 && id < MAX_IDS ? counts[id] : -1; }

void fz_reset_counts(void) { memset(counts, 0, sizeof counts); }

static void count(record *r) {
  if (r && r->id >= 0 && r->id < MAX_IDS) counts[r->id]++;
}

static void schema_release(struct ArrowSchema *s) {
  record *r = s->private_data;
  count(r);
  if (r) {
    for (int64_t i = 0; i < r->n; i++) {
      struct ArrowSchema *c = r->children[i];
      if (c && c->release) c->release(c);
    }
    struct ArrowSchema *d = r->dictionary;
    if (d && d->release) d->release(d);
  }
  s->release = NULL;
}

static void array_release(struct ArrowArray *a) {
  record *r = a->private_data;
  count(r);
  if (r) {
    for (int64_t i = 0; i < r->n; i++) {
      struct ArrowArray *c = r->children[i];
      if (c && c->release) c->release(c);
    }
    struct ArrowArray *d = r->dictionary;
    if (d && d->release) d->release(d);
  }
  a->release = NULL;
}

/* --- streams ------------------------------------------------------------------------------ */

typedef struct {
  int64_t id;
  struct ArrowSchema *schema; /* prepared, moved out by get_schema */
  int64_t n_arrays;
  void **arrays; /* prepared ArrowArray or ArrowDeviceArray structs */
  int64_t array_size; /* 64 or 80 bytes */
  int64_t next;
  int64_t fail_at; /* get_next fails when asked for this batch (-1: never) */
  int32_t fail_code;
  int32_t schema_code; /* get_schema fails with this code (0: succeeds) */
  const char *message;
} stream_state;

static int do_get_schema(stream_state *st, struct ArrowSchema *out) {
  if (st->schema_code) return st->schema_code;
  if (!st->schema || !st->schema->release) return 22; /* EINVAL: asked twice */
  memcpy(out, st->schema, sizeof *out);
  st->schema->release = NULL;
  return 0;
}

static int do_get_next(stream_state *st, void *out) {
  if (st->next == st->fail_at) return st->fail_code;
  if (st->next >= st->n_arrays) {
    memset(out, 0, (size_t)st->array_size);
    return 0;
  }
  struct ArrowArray *src = st->arrays[st->next++];
  memcpy(out, src, (size_t)st->array_size);
  src->release = NULL;
  return 0;
}

static void do_release(stream_state *st) {
  if (st->id >= 0 && st->id < MAX_IDS) counts[st->id]++;
  if (st->schema && st->schema->release) st->schema->release(st->schema);
  for (int64_t i = 0; i < st->n_arrays; i++) {
    struct ArrowArray *a = st->arrays[i];
    if (a && a->release) a->release(a);
  }
}

static int s_get_schema(struct ArrowArrayStream *s, struct ArrowSchema *out) { return do_get_schema(s->private_data, out); }
static int s_get_next(struct ArrowArrayStream *s, struct ArrowArray *out) { return do_get_next(s->private_data, out); }
static const char *s_last_error(struct ArrowArrayStream *s) { return ((stream_state *)s->private_data)->message; }
static void s_release(struct ArrowArrayStream *s) {
  do_release(s->private_data);
  s->release = NULL;
}

static int d_get_schema(struct ArrowDeviceArrayStream *s, struct ArrowSchema *out) { return do_get_schema(s->private_data, out); }
static int d_get_next(struct ArrowDeviceArrayStream *s, struct ArrowDeviceArray *out) { return do_get_next(s->private_data, out); }
static const char *d_last_error(struct ArrowDeviceArrayStream *s) { return ((stream_state *)s->private_data)->message; }
static void d_release(struct ArrowDeviceArrayStream *s) {
  do_release(s->private_data);
  s->release = NULL;
}

/* The callbacks' addresses, for the JS side to write into structs. */
void *fz_fn(int32_t which) {
  switch (which) {
    case 0: return (void *)schema_release;
    case 1: return (void *)array_release;
    case 2: return (void *)s_get_schema;
    case 3: return (void *)s_get_next;
    case 4: return (void *)s_last_error;
    case 5: return (void *)s_release;
    case 6: return (void *)d_get_schema;
    case 7: return (void *)d_get_next;
    case 8: return (void *)d_last_error;
    case 9: return (void *)d_release;
    default: return NULL;
  }
}

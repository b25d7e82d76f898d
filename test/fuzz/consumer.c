/*
 * The fuzzer's threaded consumer (test/fuzz/threads.ts): releases our
 * exported schemas, arrays, device arrays and streams, and consumes our
 * exported streams, from several native threads at once, as a hostile but
 * spec-abiding consumer would (CDataInterface.rst, "Release callback
 * semantics -- for consumers", "Moving child arrays"; CStreamInterface.rst):
 *
 * - every item is taken by whichever thread comes first (the order and the
 *   thread are the scheduler's);
 * - an array is checksummed from the consumer's thread before it is
 *   released (its buffers must stay pinned until then);
 * - a child may be moved out (bitwise copy, the original marked released),
 *   the parent released at once, and the moved child released later by
 *   some other thread (a queue every thread drains);
 * - a struct may be released a second time through a stale copy taken
 *   before its release (the spec forbids it; our callbacks must ignore it,
 *   never release anything else); each such call is counted;
 * - an item may be kept: not released here, checksummed again after every
 *   other item is gone (a stale release must not have released it);
 * - a stream is read by one thread (get_schema, get_next to the end, an
 *   error, or an early stop), its batches checksummed and handed to the
 *   release queue, so batches are released on other threads while other
 *   streams are read.
 *
 * The checksum covers the one batch shape the fuzzer exports, a struct of
 * x: int32, s: utf8, l: list<int16>, each with nulls, and is computed the
 * same way by the JS side (`checksum` in threads.ts).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../include/arrow_c_abi.h"

enum { K_SCHEMA = 0, K_ARRAY = 1, K_DEVICE_ARRAY = 2, K_STREAM = 3, K_DEVICE_STREAM = 4 };
enum {
  F_KEEP = 1,        /* not released here; checksummed again at the end */
  F_MOVE_CHILD = 2,  /* move child 0 out, release the parent, release the child later */
  F_STALE = 4,       /* release again through a stale copy, later */
  F_STOP_EARLY = 8,  /* streams: stop after `stop_after` batches */
};

/* One item, as the JS side lays it out (int64 fields, 8-byte aligned). */
typedef struct {
  void *ptr;
  int64_t kind;
  int64_t flags;
  int64_t stop_after;
  /* results */
  int64_t checksum;      /* arrays: before release; streams: every batch read */
  int64_t kept_checksum; /* F_KEEP arrays: again at the end */
  int64_t batches;
  int64_t rows;
  int64_t rc;            /* streams: the first non-zero get_schema/get_next code */
  int64_t bad;           /* shape errors seen by the consumer */
  int64_t thread;        /* which thread took it */
  int64_t child_checksum; /* F_MOVE_CHILD arrays: the moved child (column x), read after its parent's release */
  char message[64];      /* streams: get_last_error, copied at once */
} item;

typedef struct deferred {
  int kind; /* 0 schema, 1 array (device arrays are released as their array), 2 stream, 3 device stream */
  void *s;  /* heap copy to release (a moved child or a stale copy) */
  int stale;
  struct deferred *next;
} deferred;

typedef struct {
  item *items;
  int64_t n;
  int64_t next;
  deferred *queue;
  int64_t stale_calls;
  pthread_mutex_t mu;
} run;

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

static int valid(const struct ArrowArray *a, int64_t i) {
  const uint8_t *bits = a->n_buffers > 0 ? a->buffers[0] : NULL;
  if (!bits || a->null_count == 0) return 1;
  int64_t j = a->offset + i;
  return (bits[j >> 3] >> (j & 7)) & 1;
}

/* The checksum of a batch struct<x: int32, s: utf8, l: list<int16>>; `bad` counts shape errors. */
static uint64_t batch_checksum(const struct ArrowArray *b, int64_t *bad) {
  uint64_t h = mix(14695981039346656037ull, (uint64_t)b->length);
  if (b->n_children != 3 || !b->children) {
    (*bad)++;
    return h;
  }
  const struct ArrowArray *x = b->children[0], *s = b->children[1], *l = b->children[2];
  if (x->n_buffers != 2 || s->n_buffers != 3 || l->n_buffers != 2 || l->n_children != 1) {
    (*bad)++;
    return h;
  }
  const struct ArrowArray *li = l->children[0];
  for (int64_t r = 0; r < b->length; r++) {
    int64_t i = b->offset + r;
    if (valid(x, i)) h = mix(h, (uint64_t)(int64_t)((const int32_t *)x->buffers[1])[x->offset + i]);
    else h = mix(h, 0x9e3779b97f4a7c15ull);
    if (valid(s, i)) {
      const int32_t *o = s->buffers[1];
      const uint8_t *d = s->buffers[2];
      int32_t a0 = o[s->offset + i], a1 = o[s->offset + i + 1];
      h = mix(h, (uint64_t)(a1 - a0));
      for (int32_t k = a0; k < a1; k++) h = mix(h, d[k]);
    } else h = mix(h, 0x9e3779b97f4a7c15ull);
    if (valid(l, i)) {
      const int32_t *o = l->buffers[1];
      int32_t a0 = o[l->offset + i], a1 = o[l->offset + i + 1];
      h = mix(h, (uint64_t)(a1 - a0));
      for (int32_t k = a0; k < a1; k++) h = mix(h, valid(li, k) ? (uint64_t)(int64_t)((const int16_t *)li->buffers[1])[li->offset + k] : 7);
    } else h = mix(h, 0x9e3779b97f4a7c15ull);
  }
  return h;
}

static void push(run *R, int kind, void *s, int stale) {
  deferred *d = malloc(sizeof *d);
  d->kind = kind;
  d->s = s;
  d->stale = stale;
  pthread_mutex_lock(&R->mu);
  d->next = R->queue;
  R->queue = d;
  if (stale) R->stale_calls++;
  pthread_mutex_unlock(&R->mu);
}

static void release_deferred(deferred *d) {
  switch (d->kind) {
    case 0: { struct ArrowSchema *s = d->s; if (s->release) s->release(s); break; }
    case 1: { struct ArrowArray *a = d->s; if (a->release) a->release(a); break; }
    case 2: { struct ArrowArrayStream *s = d->s; if (s->release) s->release(s); break; }
    case 3: { struct ArrowDeviceArrayStream *s = d->s; if (s->release) s->release(s); break; }
  }
  free(d->s);
  free(d);
}

/* Releases what the queue holds, until it is empty. */
static void drain(run *R) {
  for (;;) {
    pthread_mutex_lock(&R->mu);
    deferred *d = R->queue;
    if (d) R->queue = d->next;
    pthread_mutex_unlock(&R->mu);
    if (!d) return;
    release_deferred(d);
  }
}

static void *copy_of(const void *p, size_t n) {
  void *c = malloc(n);
  memcpy(c, p, n);
  return c;
}

/* The checksum of an int32 array (column x), as threads.ts computes it. */
static uint64_t int32_checksum(const struct ArrowArray *x) {
  uint64_t h = mix(14695981039346656037ull, (uint64_t)x->length);
  for (int64_t i = 0; i < x->length; i++) {
    h = valid(x, i) ? mix(h, (uint64_t)(int64_t)((const int32_t *)x->buffers[1])[x->offset + i]) : mix(h, 0x9e3779b97f4a7c15ull);
  }
  return h;
}

/* A moved child stays valid after its parent's release (CDataInterface.rst, "Moving child arrays"). */
static void release_schema(run *R, struct ArrowSchema *s, int64_t flags, int64_t *bad) {
  void *stale = (flags & F_STALE) ? copy_of(s, sizeof *s) : NULL;
  struct ArrowSchema *moved = NULL;
  if ((flags & F_MOVE_CHILD) && s->n_children > 0 && s->children[0]->release) {
    moved = copy_of(s->children[0], sizeof *s);
    s->children[0]->release = NULL;
  }
  s->release(s);
  if (moved) {
    if (!moved->format || strcmp(moved->format, "i") != 0 || !moved->name || strcmp(moved->name, "x") != 0) (*bad)++;
    push(R, 0, moved, 0);
  }
  if (stale) push(R, 0, stale, 1);
}

static void release_array(run *R, struct ArrowArray *a, int64_t flags, int64_t *child_checksum) {
  void *stale = (flags & F_STALE) ? copy_of(a, sizeof *a) : NULL;
  struct ArrowArray *moved = NULL;
  if ((flags & F_MOVE_CHILD) && a->n_children > 0 && a->children[0]->release) {
    moved = copy_of(a->children[0], sizeof *a);
    a->children[0]->release = NULL;
  }
  a->release(a);
  if (moved) {
    *child_checksum = (int64_t)int32_checksum(moved);
    push(R, 1, moved, 0);
  }
  if (stale) push(R, 1, stale, 1);
}

/* Reads one stream: every batch checksummed and queued for release by any thread. */
static void consume(run *R, item *it, int device) {
  struct ArrowArrayStream *s = it->ptr;
  struct ArrowDeviceArrayStream *ds = it->ptr;
  struct ArrowSchema schema;
  memset(&schema, 0, sizeof schema);
  int rc = device ? ds->get_schema(ds, &schema) : s->get_schema(s, &schema);
  uint64_t h = 14695981039346656037ull;
  if (rc != 0) {
    it->rc = rc;
  } else {
    if (!schema.format || strcmp(schema.format, "+s") != 0 || schema.n_children != 3) it->bad++;
    release_schema(R, &schema, it->flags & F_MOVE_CHILD, &it->bad);
    for (;;) {
      if ((it->flags & F_STOP_EARLY) && it->batches >= it->stop_after) break;
      struct ArrowDeviceArray out;
      memset(&out, 0, sizeof out);
      rc = device ? ds->get_next(ds, &out) : s->get_next(s, &out.array);
      if (rc != 0) {
        it->rc = rc;
        break;
      }
      if (!out.array.release) break; /* the end */
      if (device && (out.device_type != ARROW_DEVICE_CPU || out.device_id != -1 || out.sync_event)) it->bad++;
      h = mix(h, batch_checksum(&out.array, &it->bad));
      it->batches++;
      it->rows += out.array.length;
      /* Released by whichever thread drains next (moved: the consumer owns this struct). */
      push(R, 1, copy_of(&out.array, sizeof out.array), 0);
    }
    if (it->rc != 0) {
      const char *m = device ? ds->get_last_error(ds) : s->get_last_error(s);
      if (m) strncpy(it->message, m, sizeof it->message - 1);
    }
  }
  it->checksum = (int64_t)h;
  void *stale = (it->flags & F_STALE) ? copy_of(it->ptr, device ? sizeof *ds : sizeof *s) : NULL;
  if (device) ds->release(ds);
  else s->release(s);
  if (stale) push(R, device ? 3 : 2, stale, 1);
}

typedef struct {
  run *R;
  int64_t index;
} worker_arg;

/* For the test of the oracles: 1 makes the consumer leak the first array it would release. */
static int32_t fz_inject;
void fz_set_inject(int32_t v) { __atomic_store_n(&fz_inject, v, __ATOMIC_SEQ_CST); }

static void *worker(void *p) {
  worker_arg *w = p;
  run *R = w->R;
  for (;;) {
    pthread_mutex_lock(&R->mu);
    int64_t k = R->next < R->n ? R->next++ : -1;
    pthread_mutex_unlock(&R->mu);
    if (k < 0) break;
    item *it = &R->items[k];
    it->thread = w->index;
    switch (it->kind) {
      case K_SCHEMA:
        if (!(it->flags & F_KEEP)) release_schema(R, it->ptr, it->flags, &it->bad);
        break;
      case K_ARRAY:
      case K_DEVICE_ARRAY: {
        struct ArrowArray *a = it->ptr; /* a device array's ArrowArray is at offset 0 */
        if (it->kind == K_DEVICE_ARRAY) {
          struct ArrowDeviceArray *d = it->ptr;
          if (d->device_type != ARROW_DEVICE_CPU || d->device_id != -1 || d->sync_event) it->bad++;
        }
        it->checksum = (int64_t)batch_checksum(a, &it->bad);
        /* A consumer bug, on request: the first array it would release is never released. */
        if (!(it->flags & F_KEEP) && __atomic_exchange_n(&fz_inject, 0, __ATOMIC_SEQ_CST) == 1) break;
        if (!(it->flags & F_KEEP)) release_array(R, a, it->flags, &it->child_checksum);
        break;
      }
      case K_STREAM:
      case K_DEVICE_STREAM:
        if (it->flags & F_KEEP) break;
        consume(R, it, it->kind == K_DEVICE_STREAM);
        break;
    }
    /* Now and then, release what others queued (so releases interleave with reads). */
    if (k % 3 == w->index % 3) drain(R);
  }
  drain(R);
  return NULL;
}

/*
 * Runs the items on `threads` threads; returns the number of stale releases
 * made. Call it with koffi's async form: our callbacks run on the JS thread.
 */
int64_t fz_consume(item *items, int64_t n, int32_t threads) {
  run R;
  memset(&R, 0, sizeof R);
  R.items = items;
  R.n = n;
  pthread_mutex_init(&R.mu, NULL);
  if (threads < 1) threads = 1;
  if (threads > 16) threads = 16;
  pthread_t t[16];
  worker_arg args[16];
  for (int i = 0; i < threads; i++) {
    args[i].R = &R;
    args[i].index = i;
    pthread_create(&t[i], NULL, worker, &args[i]);
  }
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  drain(&R);
  /* The kept arrays, read again after everything else (stale releases included) is done. */
  for (int64_t k = 0; k < n; k++) {
    item *it = &items[k];
    if ((it->flags & F_KEEP) && (it->kind == K_ARRAY || it->kind == K_DEVICE_ARRAY)) {
      it->kept_checksum = (int64_t)batch_checksum(it->ptr, &it->bad);
    }
  }
  pthread_mutex_destroy(&R.mu);
  return R.stale_calls;
}

int32_t fz_item_size(void) { return (int32_t)sizeof(item); }

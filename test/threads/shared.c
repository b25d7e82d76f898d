/*
 * The threads fixture (test/threads, bench/workers): a C producer of record
 * batches struct<id: int64, v: float64> whose release records which thread
 * ran it, counted with atomics (the release of a shared import runs on
 * whichever thread lets go last). A second release of one array is counted,
 * never a crash.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "arrow_c_abi.h"

static atomic_llong outstanding, releases, double_releases;
static atomic_ullong last_thread;

/* The calling thread, as a number (pthread_t is an integer or a pointer on every platform we build for). */
uint64_t sp_thread(void) { return (uint64_t)(uintptr_t)pthread_self(); }
int64_t sp_outstanding(void) { return atomic_load(&outstanding); }
int64_t sp_releases(void) { return atomic_load(&releases); }
int64_t sp_double_releases(void) { return atomic_load(&double_releases); }
/* The thread that ran the last release. */
uint64_t sp_last_release_thread(void) { return atomic_load(&last_thread); }

static void release_child_schema(struct ArrowSchema* s) { s->release = NULL; }

static void release_schema(struct ArrowSchema* s) {
  if (s->release == NULL) return;
  for (int64_t i = 0; i < s->n_children; i++) {
    if (s->children[i]->release) s->children[i]->release(s->children[i]);
  }
  free(s->private_data);
  s->release = NULL;
}

int sp_make_schema(struct ArrowSchema* out) {
  char* block = calloc(1, 2 * sizeof(struct ArrowSchema*) + 2 * sizeof(struct ArrowSchema));
  if (!block) return 12;
  struct ArrowSchema** children = (struct ArrowSchema**)block;
  struct ArrowSchema* kids = (struct ArrowSchema*)(block + 2 * sizeof(struct ArrowSchema*));
  kids[0].format = "l";
  kids[0].name = "id";
  kids[0].release = release_child_schema;
  kids[1].format = "g";
  kids[1].name = "v";
  kids[1].release = release_child_schema;
  children[0] = &kids[0];
  children[1] = &kids[1];
  memset(out, 0, sizeof *out);
  out->format = "+s";
  out->name = "";
  out->n_children = 2;
  out->children = children;
  out->release = release_schema;
  out->private_data = block;
  return 0;
}

struct batch {
  struct ArrowArray kids[2];
  struct ArrowArray* children[2];
  const void* parent_buffers[1];
  const void* id_buffers[2];
  const void* v_buffers[2];
  int64_t* ids;
  double* vs;
  int released;
};

static void release_child(struct ArrowArray* a) { a->release = NULL; }

static void release_batch(struct ArrowArray* a) {
  if (a->release == NULL) { atomic_fetch_add(&double_releases, 1); return; }
  struct batch* b = a->private_data;
  if (b->released) { atomic_fetch_add(&double_releases, 1); return; }
  b->released = 1;
  /* Poison before freeing: a reader of freed memory sees garbage, not the old values. */
  for (int64_t i = 0; i < a->length; i++) { b->ids[i] = -1; b->vs[i] = -1.0; }
  free(b->ids);
  free(b->vs);
  free(b);
  a->release = NULL;
  atomic_store(&last_thread, sp_thread());
  atomic_fetch_sub(&outstanding, 1);
  atomic_fetch_add(&releases, 1);
}

/* A batch of `rows` rows: id = start + i, v = (start + i) * 0.5. */
int sp_make_batch(struct ArrowArray* out, int64_t rows, int64_t start) {
  struct batch* b = calloc(1, sizeof *b);
  if (!b) return 12;
  size_t n = rows > 0 ? (size_t)rows : 1;
  b->ids = malloc(n * sizeof(int64_t));
  b->vs = malloc(n * sizeof(double));
  if (!b->ids || !b->vs) { free(b->ids); free(b->vs); free(b); return 12; }
  for (int64_t i = 0; i < rows; i++) { b->ids[i] = start + i; b->vs[i] = (double)(start + i) * 0.5; }
  b->id_buffers[1] = b->ids;
  b->v_buffers[1] = b->vs;
  const void** bufs[2] = { b->id_buffers, b->v_buffers };
  for (int k = 0; k < 2; k++) {
    b->kids[k].length = rows;
    b->kids[k].n_buffers = 2;
    b->kids[k].buffers = bufs[k];
    b->kids[k].release = release_child;
    b->children[k] = &b->kids[k];
  }
  memset(out, 0, sizeof *out);
  out->length = rows;
  out->n_buffers = 1;
  out->n_children = 2;
  out->buffers = b->parent_buffers;
  out->children = b->children;
  out->release = release_batch;
  out->private_data = b;
  atomic_fetch_add(&outstanding, 1);
  return 0;
}

/* The same batch as a CPU ArrowDeviceArray. */
int sp_make_device_batch(struct ArrowDeviceArray* out, int64_t rows, int64_t start) {
  memset(out, 0, sizeof *out);
  int rc = sp_make_batch(&out->array, rows, start);
  out->device_id = -1;
  out->device_type = ARROW_DEVICE_CPU;
  return rc;
}

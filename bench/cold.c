/*
 * The C producer of bench/cold.bench.ts: a query result of N record batches
 * of 4 columns (int64, int32, float64, utf8), each batch's struct array, its
 * children's structs and every buffer allocated on its own, as a producer
 * such as nanoarrow lays them out. Built at bench time; the same library
 * serves our import (through koffi) and PyArrow's (through ctypes), so both
 * read the same structs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "arrow_c_abi.h"

static void release_leaf(struct ArrowArray* a) {
  for (int64_t i = 0; i < a->n_buffers; i++) free((void*)a->buffers[i]);
  free(a->buffers);
  a->release = NULL;
}

static void release_batch(struct ArrowArray* a) {
  for (int64_t i = 0; i < a->n_children; i++) {
    struct ArrowArray* c = a->children[i];
    if (c->release) c->release(c);
    free(c);
  }
  free(a->children);
  free(a->buffers);
  a->release = NULL;
}

static struct ArrowArray* leaf(int64_t rows, int n_buffers, const void** buffers) {
  struct ArrowArray* a = calloc(1, sizeof *a);
  a->length = rows;
  a->n_buffers = n_buffers;
  a->buffers = calloc(n_buffers, sizeof(void*));
  for (int i = 0; i < n_buffers; i++) a->buffers[i] = buffers[i];
  a->release = release_leaf;
  return a;
}

/* One batch of `rows` rows: a = start + i, b = 3i, c = i / 2, d = "s<i % 1000>". */
static void fill_batch(struct ArrowArray* out, int64_t rows, int64_t start) {
  int64_t* a = malloc(rows * 8);
  int32_t* b = malloc(rows * 4);
  double* c = malloc(rows * 8);
  int32_t* offsets = malloc((rows + 1) * 4);
  char* data = malloc(rows * 8 + 1);
  int32_t pos = 0;
  for (int64_t i = 0; i < rows; i++) {
    a[i] = start + i;
    b[i] = (int32_t)(i * 3);
    c[i] = (double)i * 0.5;
    offsets[i] = pos;
    pos += sprintf(data + pos, "s%ld", (long)(i % 1000));
  }
  offsets[rows] = pos;
  memset(out, 0, sizeof *out);
  out->length = rows;
  out->n_buffers = 1;
  out->buffers = calloc(1, sizeof(void*));
  out->n_children = 4;
  out->children = calloc(4, sizeof(void*));
  const void* ba[2] = {NULL, a};
  const void* bb[2] = {NULL, b};
  const void* bc[2] = {NULL, c};
  const void* bd[3] = {NULL, offsets, data};
  out->children[0] = leaf(rows, 2, ba);
  out->children[1] = leaf(rows, 2, bb);
  out->children[2] = leaf(rows, 2, bc);
  out->children[3] = leaf(rows, 3, bd);
  out->release = release_batch;
}

static void release_schema(struct ArrowSchema* s) {
  for (int64_t i = 0; i < s->n_children; i++) {
    struct ArrowSchema* c = s->children[i];
    if (c->release) c->release(c);
    free(c);
  }
  free(s->children);
  s->release = NULL;
}

static void release_field(struct ArrowSchema* s) { s->release = NULL; }

/* The result's schema: struct<a: int64, b: int32, c: float64, d: utf8>, every field nullable. */
void cold_fill_schema(struct ArrowSchema* out) {
  static const char* formats[4] = {"l", "i", "g", "u"};
  static const char* names[4] = {"a", "b", "c", "d"};
  memset(out, 0, sizeof *out);
  out->format = "+s";
  out->name = "";
  out->n_children = 4;
  out->children = calloc(4, sizeof(void*));
  for (int i = 0; i < 4; i++) {
    struct ArrowSchema* f = calloc(1, sizeof *f);
    f->format = formats[i];
    f->name = names[i];
    f->flags = 2; /* ARROW_FLAG_NULLABLE */
    f->release = release_field;
    out->children[i] = f;
  }
  out->release = release_schema;
}

/* `n` batches of `rows` rows in one block of n ArrowArray structs (the consumer moves each out). */
struct ArrowArray* cold_make(int64_t n, int64_t rows) {
  struct ArrowArray* all = calloc(n, sizeof *all);
  for (int64_t i = 0; i < n; i++) fill_batch(&all[i], rows, i * rows);
  return all;
}

/* Frees the block (every batch was moved out, or is released here). */
void cold_free(struct ArrowArray* all, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (all[i].release) all[i].release(&all[i]);
  free(all);
}

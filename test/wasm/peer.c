/*
 * A minimal C Data Interface peer compiled to wasm32 at test time
 * (clang --target=wasm32 -nostdlib, see wasm.ts in this folder): its own
 * allocator over the module's linear memory (which it grows on demand), a
 * producer of int32 and utf8 columns whose release counts its calls, and a
 * consumer that sums an int32 column of a struct array and releases what it
 * was given by calling the producer's release through a function pointer
 * (call_indirect through the module's table).
 */
#include <stdint.h>
#include <stddef.h>

#include "../include/arrow_c_abi.h"

#define EXPORT(name) __attribute__((export_name(#name)))

/* ---- allocator: 16-byte header (size, free flag), first-fit free list, memory.grow on demand ---- */

extern unsigned char __heap_base;
static uintptr_t heap_top;
static uintptr_t heap_end;

struct block {
  uint32_t size; /* payload bytes */
  uint32_t used;
  struct block* next_free;
  uint32_t pad;
};

static struct block* free_list;
static int32_t live_count;
static int32_t live_bytes;
static int32_t grow_count;

static void* memset_(void* p, int v, size_t n) {
  unsigned char* c = p;
  while (n--) *c++ = (unsigned char)v;
  return p;
}

EXPORT(malloc) void* malloc(size_t n) {
  size_t size = (n + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  struct block** prev = &free_list;
  for (struct block* b = free_list; b; prev = &b->next_free, b = b->next_free) {
    if (b->size >= size) {
      *prev = b->next_free;
      b->used = 1;
      live_count++;
      live_bytes += b->size;
      return b + 1;
    }
  }
  if (heap_top == 0) heap_top = ((uintptr_t)&__heap_base + 15) & ~(uintptr_t)15;
  heap_end = __builtin_wasm_memory_size(0) * 65536;
  uintptr_t need = heap_top + sizeof(struct block) + size;
  if (need > heap_end) {
    size_t pages = (need - heap_end + 65535) / 65536;
    if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) return 0;
    grow_count++;
  }
  struct block* b = (struct block*)heap_top;
  heap_top = need;
  b->size = (uint32_t)size;
  b->used = 1;
  b->next_free = 0;
  live_count++;
  live_bytes += b->size;
  return b + 1;
}

EXPORT(free) void free(void* p) {
  if (!p) return;
  struct block* b = (struct block*)p - 1;
  if (!b->used) __builtin_trap(); /* double free */
  b->used = 0;
  live_count--;
  live_bytes -= b->size;
  b->next_free = free_list;
  free_list = b;
}

EXPORT(live_allocations) int32_t live_allocations(void) { return live_count; }
EXPORT(live_allocated_bytes) int32_t live_allocated_bytes(void) { return live_bytes; }
EXPORT(grows) int32_t grows(void) { return grow_count; }

/* ---- producer ---- */

static int32_t array_releases;
static int32_t schema_releases;
EXPORT(array_release_count) int32_t array_release_count(void) { return array_releases; }
EXPORT(schema_release_count) int32_t schema_release_count(void) { return schema_releases; }

/* private_data of a produced array: the buffers and children it owns. */
struct owned {
  void* allocs[8];
  int n;
};

static void release_array(struct ArrowArray* a) {
  if (!a->release) __builtin_trap();
  array_releases++;
  for (int64_t i = 0; i < a->n_children; i++) {
    struct ArrowArray* c = a->children[i];
    if (c->release) c->release(c);
  }
  struct owned* o = a->private_data;
  for (int i = 0; i < o->n; i++) free(o->allocs[i]);
  free(o);
  a->release = 0;
}

static void release_schema(struct ArrowSchema* s) {
  if (!s->release) __builtin_trap();
  schema_releases++;
  for (int64_t i = 0; i < s->n_children; i++) {
    struct ArrowSchema* c = s->children[i];
    if (c->release) c->release(c);
  }
  struct owned* o = s->private_data;
  for (int i = 0; i < o->n; i++) free(o->allocs[i]);
  free(o);
  s->release = 0;
}

static void* own(struct owned* o, size_t n) {
  void* p = malloc(n);
  memset_(p, 0, n);
  o->allocs[o->n++] = p;
  return p;
}

/*
 * Fills `out` with an int32 array of n values (i * 3 - 7), every 5th null
 * when `nulls`; the values buffer starts `misalign` bytes after an aligned
 * address (so a consumer must copy it to view it as Int32Array).
 */
EXPORT(make_int32) void make_int32(struct ArrowArray* out, int32_t n, int32_t nulls, int32_t misalign) {
  struct owned* o = malloc(sizeof(struct owned));
  o->n = 0;
  const void** buffers = own(o, 2 * sizeof(void*));
  unsigned char* valid = own(o, (size_t)(n + 7) / 8 + 1);
  unsigned char* raw = own(o, (size_t)n * 4 + 8);
  int32_t* values = (int32_t*)(raw + misalign);
  int64_t null_count = 0;
  for (int32_t i = 0; i < n; i++) {
    values[i] = i * 3 - 7;
    if (nulls && i % 5 == 4) null_count++;
    else valid[i / 8] |= (unsigned char)(1u << (i % 8));
  }
  buffers[0] = nulls ? valid : 0;
  buffers[1] = values;
  out->length = n;
  out->null_count = null_count;
  out->offset = 0;
  out->n_buffers = 2;
  out->n_children = 0;
  out->buffers = buffers;
  out->children = 0;
  out->dictionary = 0;
  out->private_data = o;
  out->release = release_array;
}

EXPORT(make_int32_schema) void make_int32_schema(struct ArrowSchema* out) {
  struct owned* o = malloc(sizeof(struct owned));
  o->n = 0;
  char* fmt = own(o, 2);
  fmt[0] = 'i';
  out->format = fmt;
  out->name = 0;
  out->metadata = 0;
  out->flags = 2; /* ARROW_FLAG_NULLABLE */
  out->n_children = 0;
  out->children = 0;
  out->dictionary = 0;
  out->private_data = o;
  out->release = release_schema;
}

/* ---- consumer ---- */

static int streq(const char* a, const char* b) {
  while (*a && *a == *b) a++, b++;
  return *a == *b;
}

/* Errors are returned as values below this. */
#define ERR_BASE (-(1LL << 62))

/*
 * Sums the non-null values of int32 column `col` of the struct array
 * (`schema` format "+s"), then releases the array and the schema through
 * their release pointers, as a consumer that took ownership does.
 */
EXPORT(sum_int32_column) int64_t sum_int32_column(struct ArrowSchema* schema, struct ArrowArray* array, int32_t col) {
  int64_t sum = 0;
  if (!schema->release || !array->release) return ERR_BASE - 1;
  if (!streq(schema->format, "+s")) sum = ERR_BASE - 2;
  else if (col < 0 || col >= schema->n_children || col >= array->n_children) sum = ERR_BASE - 3;
  else if (!streq(schema->children[col]->format, "i")) sum = ERR_BASE - 4;
  else {
    struct ArrowArray* c = array->children[col];
    const unsigned char* valid = c->buffers[0];
    const int32_t* values = c->buffers[1];
    int64_t base = array->offset + c->offset;
    for (int64_t i = 0; i < array->length; i++) {
      int64_t k = base + i;
      if (valid && !(valid[k / 8] & (1u << (k % 8)))) continue;
      sum += values[k];
    }
  }
  array->release(array);
  schema->release(schema);
  return sum;
}

/* Calls release(array) twice if asked: the exporter must make the second a no-op or refuse it. */
EXPORT(release_array_ptr) void release_array_ptr(struct ArrowArray* array) {
  if (array->release) array->release(array);
}

/* The function pointer of our own release, as a value JS can pass back to `call`. */
EXPORT(array_release_fn) uintptr_t array_release_fn(void) { return (uintptr_t)&release_array; }

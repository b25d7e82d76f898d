// A CUDA C peer for the device tests (test/device/cuda.test.ts), in the
// shape of the producer example of CDeviceDataInterface.rst.
//
// peer_export: writes a struct batch of n rows with a kernel, on a stream of
// its own, records an event on that stream and exports an ArrowSchema and an
// ArrowDeviceArray whose sync_event points at the event:
//   i:  int32             k * 3 - 7,                      null when k % 5 == 0
//   s:  utf8              k % 7 chars 'a' + (k + j) % 26, null when k % 11 == 0
//   st: struct<a: int64 = k * k - 1000, b: float64 = k * 0.25>, null when k % 13 == 0
// (null slots keep their bytes; consumers must not look at them.)
//
// peer_check: takes an ArrowDeviceArray of that batch from the consumer (it
// owns it from then on), waits on its sync_event with cudaStreamWaitEvent,
// checks every valid value on the device with a kernel, releases it, and
// returns the number of mismatches (0: all good; < 0: a structural error,
// see peer_last_error()).
//
// Build: nvcc -O2 -shared -Xcompiler -fPIC -o libpeer.so peer.cu
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/arrow_c_abi.h"

#define ARROW_FLAG_NULLABLE 2

static char last_error[512];
static int64_t live_exports = 0;

extern "C" const char* peer_last_error(void) { return last_error; }
extern "C" int64_t peer_live_exports(void) { return live_exports; }

#define FAIL(code, ...)                                         \
  do {                                                          \
    snprintf(last_error, sizeof(last_error), __VA_ARGS__);      \
    return (code);                                              \
  } while (0)
#define CUDA_OK(call)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) FAIL(-1, "%s: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)

// --- the values, shared by producer and checker ------------------------------------------

__host__ __device__ static inline int64_t str_offset(int64_t k) {  // sum of j % 7 for j < k
  int64_t r = k % 7;
  return (k / 7) * 21 + r * (r - 1) / 2;
}
__host__ __device__ static inline int valid_bit(const uint8_t* bm, int64_t i) {
  return bm == NULL ? 1 : (bm[i >> 3] >> (i & 7)) & 1;
}

__global__ void fill_values(int64_t n, int32_t* i_vals, int32_t* s_offs, char* s_data, int64_t* a_vals, double* b_vals) {
  int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (k >= n) return;
  i_vals[k] = (int32_t)(k * 3 - 7);
  int64_t at = str_offset(k);
  if (k == 0) s_offs[0] = 0;
  s_offs[k + 1] = (int32_t)str_offset(k + 1);
  for (int64_t j = 0; j < k % 7; j++) s_data[at + j] = (char)('a' + (k + j) % 26);
  a_vals[k] = k * k - 1000;
  b_vals[k] = k * 0.25;
}

// One thread per bitmap byte: bit k is set when k % mod != 0.
__global__ void fill_bits(int64_t n, int mod, uint8_t* bm) {
  int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (b * 8 >= n) return;
  uint8_t v = 0;
  for (int i = 0; i < 8 && b * 8 + i < n; i++)
    if ((b * 8 + i) % mod != 0) v |= (uint8_t)(1 << i);
  bm[b] = v;
}

// --- export --------------------------------------------------------------------------------

struct Private {
  int kind;  // ARROW_DEVICE_CUDA, _HOST, _MANAGED
  int n_allocs;
  void* allocs[16];
  cudaEvent_t* event;
  struct ArrowArray* nodes[6];
  const void** buffer_lists[6];
};

static void release_child(struct ArrowArray* a) { a->release = NULL; }

static void release_root(struct ArrowArray* a) {
  struct Private* p = (struct Private*)a->private_data;
  for (int i = 0; i < 6; i++) {
    if (p->nodes[i] && p->nodes[i]->release) p->nodes[i]->release(p->nodes[i]);
    free(p->nodes[i]);
    free(p->buffer_lists[i]);
  }
  for (int i = 0; i < p->n_allocs; i++) {
    if (p->kind == ARROW_DEVICE_CUDA_HOST) cudaFreeHost(p->allocs[i]);
    else cudaFree(p->allocs[i]);
  }
  cudaEventDestroy(*p->event);
  free(p->event);
  free(a->children);
  free(a->buffers);
  free(p);
  a->release = NULL;
  live_exports--;
}

static void release_schema(struct ArrowSchema* s) {
  for (int64_t i = 0; i < s->n_children; i++) {
    if (s->children[i]->release) s->children[i]->release(s->children[i]);
    free(s->children[i]);
  }
  free(s->children);
  s->release = NULL;
}

static void init_schema(struct ArrowSchema* s, const char* format, const char* name, int64_t n_children) {
  memset(s, 0, sizeof(*s));
  s->format = format;
  s->name = name;
  s->flags = ARROW_FLAG_NULLABLE;
  s->n_children = n_children;
  s->release = release_schema;
  if (n_children > 0) {
    s->children = (struct ArrowSchema**)calloc(n_children, sizeof(struct ArrowSchema*));
    for (int64_t i = 0; i < n_children; i++) s->children[i] = (struct ArrowSchema*)calloc(1, sizeof(struct ArrowSchema));
  }
}

static int alloc_kind(struct Private* p, void** out, size_t size) {
  cudaError_t e;
  size = size ? size : 1;
  if (p->kind == ARROW_DEVICE_CUDA_HOST) e = cudaMallocHost(out, size);
  else if (p->kind == ARROW_DEVICE_CUDA_MANAGED) e = cudaMallocManaged(out, size, cudaMemAttachGlobal);
  else e = cudaMalloc(out, size);
  if (e != cudaSuccess) FAIL(-1, "allocation of %zu bytes: %s", size, cudaGetErrorString(e));
  p->allocs[p->n_allocs++] = *out;
  return 0;
}

static struct ArrowArray* node(struct Private* p, int idx, int64_t length, int64_t null_count, int n_buffers, int n_children) {
  struct ArrowArray* a = idx == 0 ? NULL : (struct ArrowArray*)calloc(1, sizeof(struct ArrowArray));
  if (idx != 0) {
    p->nodes[idx] = a;
    a->length = length;
    a->null_count = null_count;
    a->n_buffers = n_buffers;
    a->n_children = n_children;
    a->buffers = (const void**)calloc(n_buffers, sizeof(void*));
    p->buffer_lists[idx] = a->buffers;
    a->children = n_children ? (struct ArrowArray**)calloc(n_children, sizeof(void*)) : NULL;
    a->release = release_child;
  }
  return a;
}

// Exports the batch. The schema is written to schema_out, the array to out.
extern "C" int peer_export(int64_t n, int32_t device_type, struct ArrowSchema* schema_out, struct ArrowDeviceArray* out) {
  if (device_type != ARROW_DEVICE_CUDA && device_type != ARROW_DEVICE_CUDA_HOST && device_type != ARROW_DEVICE_CUDA_MANAGED)
    FAIL(-2, "device type %d is not a CUDA kind", device_type);
  int device;
  CUDA_OK(cudaGetDevice(&device));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  struct Private* p = (struct Private*)calloc(1, sizeof(struct Private));
  p->kind = device_type;
  int64_t bm_bytes = (n + 7) / 8;
  int64_t data_bytes = str_offset(n);
  void *i_bm, *i_vals, *s_bm, *s_offs, *s_data, *st_bm, *a_vals, *b_vals;
  if (alloc_kind(p, &i_bm, bm_bytes) || alloc_kind(p, &i_vals, n * 4) || alloc_kind(p, &s_bm, bm_bytes) ||
      alloc_kind(p, &s_offs, (n + 1) * 4) || alloc_kind(p, &s_data, data_bytes) || alloc_kind(p, &st_bm, bm_bytes) ||
      alloc_kind(p, &a_vals, n * 8) || alloc_kind(p, &b_vals, n * 8))
    return -1;

  int threads = 256;
  // CUDA keeps one last error per host thread, set by any earlier failed call in it (the JS side's own, in the same
  // thread): clear it, so that the check after the launches reports theirs.
  (void)cudaGetLastError();
  if (n > 0) {
    fill_values<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
        n, (int32_t*)i_vals, (int32_t*)s_offs, (char*)s_data, (int64_t*)a_vals, (double*)b_vals);
    unsigned bblocks = (unsigned)((bm_bytes + threads - 1) / threads);
    fill_bits<<<bblocks, threads, 0, stream>>>(n, 5, (uint8_t*)i_bm);
    fill_bits<<<bblocks, threads, 0, stream>>>(n, 11, (uint8_t*)s_bm);
    fill_bits<<<bblocks, threads, 0, stream>>>(n, 13, (uint8_t*)st_bm);
  } else {
    CUDA_OK(cudaMemsetAsync(s_offs, 0, 4, stream));
  }
  CUDA_OK(cudaGetLastError());

  // Record an event on the stream, as in the spec's example: the data is ready when it fires.
  p->event = (cudaEvent_t*)malloc(sizeof(cudaEvent_t));
  CUDA_OK(cudaEventCreate(p->event));
  CUDA_OK(cudaEventRecord(*p->event, stream));
  CUDA_OK(cudaStreamDestroy(stream));  // destroyed once its work is done; the event stays valid

  int64_t nulls_i = (n + 4) / 5, nulls_s = (n + 10) / 11, nulls_st = (n + 12) / 13;
  memset(out, 0, sizeof(*out));
  struct ArrowArray* root = &out->array;
  root->length = n;
  root->null_count = 0;
  root->n_buffers = 1;
  root->n_children = 3;
  root->buffers = (const void**)calloc(1, sizeof(void*));
  root->children = (struct ArrowArray**)calloc(3, sizeof(void*));
  root->release = release_root;
  root->private_data = p;

  struct ArrowArray* ci = node(p, 1, n, nulls_i, 2, 0);
  ci->buffers[0] = i_bm;
  ci->buffers[1] = i_vals;
  struct ArrowArray* cs = node(p, 2, n, nulls_s, 3, 0);
  cs->buffers[0] = s_bm;
  cs->buffers[1] = s_offs;
  cs->buffers[2] = s_data;
  struct ArrowArray* cst = node(p, 3, n, nulls_st, 1, 2);
  cst->buffers[0] = st_bm;
  struct ArrowArray* ca = node(p, 4, n, 0, 2, 0);
  ca->buffers[1] = a_vals;
  struct ArrowArray* cb = node(p, 5, n, 0, 2, 0);
  cb->buffers[1] = b_vals;
  cst->children[0] = ca;
  cst->children[1] = cb;
  root->children[0] = ci;
  root->children[1] = cs;
  root->children[2] = cst;
  out->device_id = device;
  out->device_type = device_type;
  out->sync_event = p->event;
  live_exports++;

  init_schema(schema_out, "+s", NULL, 3);
  schema_out->flags = 0;
  init_schema(schema_out->children[0], "i", "i", 0);
  init_schema(schema_out->children[1], "u", "s", 0);
  init_schema(schema_out->children[2], "+s", "st", 2);
  init_schema(schema_out->children[2]->children[0], "l", "a", 0);
  init_schema(schema_out->children[2]->children[1], "g", "b", 0);
  return 0;
}

// --- check ---------------------------------------------------------------------------------

struct CheckArgs {
  int64_t n;
  int64_t off_i, off_s, off_st, off_a, off_b;
  const uint8_t *i_bm, *s_bm, *st_bm;
  const int32_t* i_vals;
  const int32_t* s_offs;
  const char* s_data;
  const int64_t* a_vals;
  const double* b_vals;
};

__global__ void check_values(CheckArgs c, unsigned long long* bad) {
  int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (k >= c.n) return;
  unsigned long long errors = 0;
  // int32
  int64_t x = c.off_i + k;
  if (valid_bit(c.i_bm, x) != (k % 5 != 0)) errors++;
  else if (k % 5 != 0 && c.i_vals[x] != (int32_t)(k * 3 - 7)) errors++;
  // utf8
  x = c.off_s + k;
  if (valid_bit(c.s_bm, x) != (k % 11 != 0)) errors++;
  else if (k % 11 != 0) {
    int32_t start = c.s_offs[x], len = c.s_offs[x + 1] - start;
    if (len != k % 7) errors++;
    else
      for (int32_t j = 0; j < len; j++)
        if (c.s_data[start + j] != (char)('a' + (k + j) % 26)) errors++;
  }
  // struct
  x = c.off_st + k;
  if (valid_bit(c.st_bm, x) != (k % 13 != 0)) errors++;
  else if (k % 13 != 0) {
    if (c.a_vals[c.off_a + x] != k * k - 1000) errors++;
    if (c.b_vals[c.off_b + x] != k * 0.25) errors++;
  }
  if (errors) atomicAdd(bad, errors);
}

static int check_node(const struct ArrowArray* a, int64_t n_buffers, int64_t n_children, const char* what) {
  if (a == NULL || a->release == NULL) FAIL(-3, "%s: missing or released", what);
  if (a->n_buffers != n_buffers || a->n_children != n_children)
    FAIL(-3, "%s: %lld buffers and %lld children, expected %lld and %lld", what, (long long)a->n_buffers,
         (long long)a->n_children, (long long)n_buffers, (long long)n_children);
  return 0;
}

// Takes ownership of `in` (releases it on every path). Returns mismatches, or < 0 on error.
extern "C" int64_t peer_check(int64_t n, struct ArrowDeviceArray* in) {
  int64_t result = 0;
  struct ArrowArray* root = &in->array;
  if (root->release == NULL) FAIL(-3, "the array is released");
  do {
    if (in->device_type != ARROW_DEVICE_CUDA && in->device_type != ARROW_DEVICE_CUDA_HOST && in->device_type != ARROW_DEVICE_CUDA_MANAGED) {
      snprintf(last_error, sizeof(last_error), "device type %d is not a CUDA kind", in->device_type);
      result = -3;
      break;
    }
    if (in->reserved[0] || in->reserved[1] || in->reserved[2]) {
      snprintf(last_error, sizeof(last_error), "reserved bytes are not zero");
      result = -3;
      break;
    }
    if (root->length != n) {
      snprintf(last_error, sizeof(last_error), "length %lld, expected %lld", (long long)root->length, (long long)n);
      result = -3;
      break;
    }
    if ((result = check_node(root, 1, 3, "root")) < 0) break;
    struct ArrowArray *ci = root->children[0], *cs = root->children[1], *cst = root->children[2];
    if ((result = check_node(ci, 2, 0, "i")) < 0 || (result = check_node(cs, 3, 0, "s")) < 0 ||
        (result = check_node(cst, 1, 2, "st")) < 0 || (result = check_node(cst->children[0], 2, 0, "st.a")) < 0 ||
        (result = check_node(cst->children[1], 2, 0, "st.b")) < 0)
      break;

    int device = (int)in->device_id;
    if (in->device_type != ARROW_DEVICE_CUDA_HOST && cudaSetDevice(device) != cudaSuccess) {
      snprintf(last_error, sizeof(last_error), "cudaSetDevice(%d) failed", device);
      result = -1;
      break;
    }
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      snprintf(last_error, sizeof(last_error), "cudaStreamCreate failed");
      result = -1;
      break;
    }
    // Wait on the producer's event on our stream before the kernel reads anything.
    if (in->sync_event != NULL) cudaStreamWaitEvent(stream, *(cudaEvent_t*)in->sync_event, 0);
    CheckArgs c;
    c.n = n;
    c.off_i = root->offset + ci->offset;
    c.off_s = root->offset + cs->offset;
    c.off_st = root->offset + cst->offset;
    c.off_a = cst->children[0]->offset;
    c.off_b = cst->children[1]->offset;
    c.i_bm = ci->null_count == 0 ? NULL : (const uint8_t*)ci->buffers[0];
    c.s_bm = cs->null_count == 0 ? NULL : (const uint8_t*)cs->buffers[0];
    c.st_bm = cst->null_count == 0 ? NULL : (const uint8_t*)cst->buffers[0];
    c.i_vals = (const int32_t*)ci->buffers[1];
    c.s_offs = (const int32_t*)cs->buffers[1];
    c.s_data = (const char*)cs->buffers[2];
    c.a_vals = (const int64_t*)cst->children[0]->buffers[1];
    c.b_vals = (const double*)cst->children[1]->buffers[1];
    unsigned long long* bad;
    unsigned long long host_bad = 0;
    cudaError_t e = cudaMallocManaged((void**)&bad, sizeof(*bad), cudaMemAttachGlobal);
    if (e == cudaSuccess) e = cudaMemsetAsync(bad, 0, sizeof(*bad), stream);
    if (e == cudaSuccess && n > 0) {
      (void)cudaGetLastError();  // an earlier failure in this thread, not the launch's (see peer_export)
      check_values<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(c, bad);
      e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) host_bad = *bad;
    cudaFree(bad);
    cudaStreamDestroy(stream);
    if (e != cudaSuccess) {
      snprintf(last_error, sizeof(last_error), "check kernel: %s", cudaGetErrorString(e));
      result = -1;
      break;
    }
    result = (int64_t)host_bad;
    if (result) snprintf(last_error, sizeof(last_error), "%lld values differ", (long long)result);
  } while (0);
  root->release(root);
  return result;
}

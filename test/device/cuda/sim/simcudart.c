/*
 * simcudart: a simulated CUDA runtime for the device tests on machines
 * without a GPU. It exports the entry points src/device/cuda.ts loads (and
 * the few more the C test peer uses), with CUDA's names, signatures and
 * error codes, and it behaves like a GPU where mistakes hide:
 *
 * - Device memory is not host memory. Each cudaMalloc is a memfd mapped
 *   twice: the address handed out is PROT_NONE (a host read or write
 *   crashes with SIGSEGV), and a second read/write mapping is used only by
 *   the simulator's copy engine and by kernels (sim_device_view). Freed
 *   device ranges stay reserved PROT_NONE, so a use after cudaFree is an
 *   error code (or a crash on the host), never someone else's bytes.
 * - Work is asynchronous. Every stream has a worker thread that runs its
 *   ops (copies, memsets, event records, event waits, kernels) in order;
 *   each copy, memset and kernel takes a while (sim_set_delay_us,
 *   SIMCUDA_DELAY_US, 200 us by default, the value when the op was
 *   queued), so a host that reads before synchronising sees the old bytes. An event completes when the work recorded before it has;
 *   cudaStreamWaitEvent holds later work on a stream until the event.
 *   cudaMemcpy is a copy on the legacy default stream (NULL stream), run
 *   after the work queued there, and it waits for completion.
 * - As documented for cudaMemcpyAsync: a copy from pageable host memory is
 *   staged (the source may be reused once the call returns), a copy into
 *   pageable host memory returns only once it is done; pinned
 *   (cudaMallocHost) and managed memory take part asynchronously.
 * - Errors are CUDA's codes: invalid pointers and sizes, copies whose kind
 *   does not match the pointers, use after free (cudaErrorInvalidValue),
 *   device ids out of range (cudaErrorInvalidDevice), unknown or destroyed
 *   streams and events (cudaErrorInvalidResourceHandle), an event recorded
 *   on another device's stream (cudaErrorInvalidResourceHandle).
 * - Counters of live allocations, streams, events and queued ops, for
 *   leak checks after every test.
 *
 * SIMCUDA_DEVICES sets the device count (default 2, so copies between
 * devices run). Everything shared is under one mutex; workers wait on
 * condition variables, so a host thread blocked in a synchronisation never
 * holds the lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cuda_runtime.h"

/* ---- state --------------------------------------------------------------------------- */

enum mem_kind { MEM_PAGEABLE = 0, MEM_DEVICE, MEM_HOST, MEM_MANAGED, MEM_FREED_DEVICE };

struct alloc {
  uintptr_t base;
  size_t size;    /* what was asked for: copies past it are errors */
  size_t mapped;  /* page-rounded */
  enum mem_kind kind;
  int device;
  uint8_t* view;  /* where the engine reads and writes it */
};

enum op_type { OP_COPY, OP_SET, OP_RECORD, OP_WAIT, OP_FN };

/* What an event record produced: done once the work before it ran. Shared by the event, the op and waiters. */
struct fence {
  int done;
  int refs;
};

struct op {
  enum op_type type;
  struct op* next;
  uint64_t duration_ns;   /* how long the op "runs": the delay when it was queued */
  uint64_t not_before_ns; /* 0 until the op reaches the head of its stream */
  uint8_t* dst;
  const uint8_t* src;
  size_t n;
  int value;
  void* staging; /* freed after the op: a staged pageable source */
  struct fence* fence;
  cudaHostFn_t fn;
  void* arg;
};

struct CUstream_st {
  uint32_t magic;
  int device;
  unsigned flags;
  int is_default;
  int destroyed;
  struct op *head, *tail;
  uint64_t queued, completed;
  pthread_cond_t wake;
  pthread_t thread;
  struct worker_rec* rec; /* its thread's entry in g_workers */
  struct CUstream_st* next; /* every stream with a worker, destroyed ones included until they drain */
};

struct CUevent_st {
  uint32_t magic;
  int device;
  struct fence* last; /* the latest record, or NULL */
  struct CUevent_st* next;
};

#define STREAM_MAGIC 0x53545245u
#define EVENT_MAGIC 0x45564e54u
#define MAX_DEVICES 16

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_progress = PTHREAD_COND_INITIALIZER; /* an op completed */
static struct alloc* g_allocs;                               /* sorted by base */
static size_t g_n_allocs, g_cap_allocs;
static struct CUstream_st* g_streams;
static struct CUevent_st* g_events;
static struct CUstream_st* g_default[MAX_DEVICES];
/*
 * Every worker thread, joinable. koffi unloads this library at process exit (dlclose) while the
 * workers still run (default streams live forever; a destroyed stream's worker drains on its own):
 * a worker woken after the unmapping (cudaStreamDestroy's signal, racing the exit) took g_lock in
 * unmapped memory and the process died of SIGSEGV after its last line. The destructor (sim_unload)
 * stops and joins them all first; finished ones are joined when the next stream is made.
 */
struct worker_rec {
  pthread_t thread;
  int finished;
  struct worker_rec* next;
};
static struct worker_rec* g_workers;
static int g_shutdown;
static int64_t g_live_allocs, g_live_streams, g_live_events, g_pending, g_completed;
static int64_t g_delay_us = -1;
static int g_devices = -1;
static __thread int t_device;
static __thread int t_in_engine;
static __thread cudaError_t t_last_error;

static int device_count(void) {
  if (g_devices < 0) {
    const char* e = getenv("SIMCUDA_DEVICES");
    int n = e ? atoi(e) : 2;
    g_devices = n < 0 ? 0 : n > MAX_DEVICES ? MAX_DEVICES : n;
  }
  return g_devices;
}

static int64_t delay_us(void) {
  if (g_delay_us < 0) {
    const char* e = getenv("SIMCUDA_DELAY_US");
    g_delay_us = e ? atoll(e) : 200;
  }
  return g_delay_us;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Every entry point returns through here: CUDA keeps the last error per host thread (cudaGetLastError). */
static cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

/* ---- allocations ---------------------------------------------------------------------- */

/* The allocation containing p, or NULL. Caller holds g_lock. */
static struct alloc* find_alloc(uintptr_t p) {
  size_t lo = 0, hi = g_n_allocs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g_allocs[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  struct alloc* a = &g_allocs[lo - 1];
  return p < a->base + a->mapped ? a : NULL;
}

static int insert_alloc(struct alloc a) {
  if (g_n_allocs == g_cap_allocs) {
    size_t cap = g_cap_allocs ? g_cap_allocs * 2 : 256;
    struct alloc* n = realloc(g_allocs, cap * sizeof(*n));
    if (!n) return -1;
    g_allocs = n;
    g_cap_allocs = cap;
  }
  size_t i = 0, lo = 0, hi = g_n_allocs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g_allocs[mid].base < a.base) lo = mid + 1;
    else hi = mid;
  }
  i = lo;
  memmove(&g_allocs[i + 1], &g_allocs[i], (g_n_allocs - i) * sizeof(*g_allocs));
  g_allocs[i] = a;
  g_n_allocs++;
  return 0;
}

static void remove_alloc(struct alloc* a) {
  size_t i = (size_t)(a - g_allocs);
  memmove(&g_allocs[i], &g_allocs[i + 1], (g_n_allocs - i - 1) * sizeof(*g_allocs));
  g_n_allocs--;
}

static size_t page_round(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (n + pg - 1) / pg * pg;
}

/* A resolved range: what kind of memory [p, p+n) is, and where the engine touches it. */
struct range {
  enum mem_kind kind;
  uint8_t* at;
};

/*
 * Resolves [p, p+n) for the engine. Caller holds g_lock. Pointers that are
 * not ours are pageable host memory. Errors: NULL, a range past the end of
 * its allocation, freed device memory (cudaErrorInvalidValue).
 */
static cudaError_t resolve(const void* ptr, size_t n, struct range* out) {
  uintptr_t p = (uintptr_t)ptr;
  if (p == 0) return cudaErrorInvalidValue;
  struct alloc* a = find_alloc(p);
  if (!a) {
    out->kind = MEM_PAGEABLE;
    out->at = (uint8_t*)ptr;
    return cudaSuccess;
  }
  if (a->kind == MEM_FREED_DEVICE) return cudaErrorInvalidValue;
  if (n > a->size || p - a->base > a->size - n) return cudaErrorInvalidValue;
  out->kind = a->kind;
  out->at = a->view + (p - a->base);
  return cudaSuccess;
}

static cudaError_t check_device(int device) {
  return device >= 0 && device < device_count() ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaMalloc(void** dev_ptr, size_t size) {
  if (!dev_ptr) return ret(cudaErrorInvalidValue);
  if (device_count() == 0) return ret(cudaErrorNoDevice);
  if (size == 0) {
    *dev_ptr = NULL;
    return cudaSuccess;
  }
  size_t mapped = page_round(size);
  int fd = memfd_create("simcuda-device", MFD_CLOEXEC);
  if (fd < 0) return ret(cudaErrorMemoryAllocation);
  void *base = MAP_FAILED, *view = MAP_FAILED;
  if (ftruncate(fd, (off_t)mapped) == 0) {
    base = mmap(NULL, mapped, PROT_NONE, MAP_SHARED, fd, 0);
    view = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (base == MAP_FAILED || view == MAP_FAILED) {
    if (base != MAP_FAILED) munmap(base, mapped);
    if (view != MAP_FAILED) munmap(view, mapped);
    return ret(cudaErrorMemoryAllocation);
  }
  struct alloc a = {(uintptr_t)base, size, mapped, MEM_DEVICE, t_device, view};
  pthread_mutex_lock(&g_lock);
  /* An address range we reserved for freed memory is never handed out again by mmap, but be safe. */
  struct alloc* old = find_alloc((uintptr_t)base);
  if (old) remove_alloc(old);
  int rc = insert_alloc(a);
  if (rc == 0) g_live_allocs++;
  pthread_mutex_unlock(&g_lock);
  if (rc != 0) {
    munmap(base, mapped);
    munmap(view, mapped);
    return ret(cudaErrorMemoryAllocation);
  }
  *dev_ptr = base;
  return cudaSuccess;
}

static cudaError_t host_alloc(void** ptr, size_t size, enum mem_kind kind) {
  if (!ptr) return ret(cudaErrorInvalidValue);
  if (size == 0) {
    *ptr = NULL;
    return cudaSuccess;
  }
  size_t mapped = page_round(size);
  void* p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return ret(cudaErrorMemoryAllocation);
  struct alloc a = {(uintptr_t)p, size, mapped, kind, t_device, p};
  pthread_mutex_lock(&g_lock);
  struct alloc* old = find_alloc((uintptr_t)p);
  if (old) remove_alloc(old); /* a freed device range's address reused: forget it */
  int rc = insert_alloc(a);
  if (rc == 0) g_live_allocs++;
  pthread_mutex_unlock(&g_lock);
  if (rc != 0) {
    munmap(p, mapped);
    return ret(cudaErrorMemoryAllocation);
  }
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return host_alloc(ptr, size, MEM_HOST); }

cudaError_t cudaMallocManaged(void** dev_ptr, size_t size, unsigned int flags) {
  if (flags != 1 && flags != 2) return ret(cudaErrorInvalidValue); /* cudaMemAttachGlobal or cudaMemAttachHost */
  if (device_count() == 0) return ret(cudaErrorNoDevice);
  return host_alloc(dev_ptr, size, MEM_MANAGED);
}

static void wait_all_locked(void);

/* cudaFree synchronises the device first (as the real one does), so no queued op can touch freed memory. */
static cudaError_t free_kind(void* ptr, int host) {
  if (!ptr) return cudaSuccess;
  pthread_mutex_lock(&g_lock);
  struct alloc* a = find_alloc((uintptr_t)ptr);
  int ok = a && a->base == (uintptr_t)ptr && (host ? a->kind == MEM_HOST : (a->kind == MEM_DEVICE || a->kind == MEM_MANAGED));
  if (!ok) {
    pthread_mutex_unlock(&g_lock);
    return ret(cudaErrorInvalidValue);
  }
  wait_all_locked();
  a = find_alloc((uintptr_t)ptr); /* the table may have moved while we waited */
  if (!a || a->base != (uintptr_t)ptr || a->kind == MEM_FREED_DEVICE) {
    pthread_mutex_unlock(&g_lock);
    return ret(cudaErrorInvalidValue); /* freed by another thread meanwhile */
  }
  if (a->kind == MEM_DEVICE) {
    munmap(a->view, a->mapped);
    /* Keep the range reserved and unreadable: a later use is an error, not a read of new data. */
    mmap((void*)a->base, a->mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    a->kind = MEM_FREED_DEVICE;
    a->view = NULL;
  } else {
    munmap((void*)a->base, a->mapped);
    remove_alloc(a);
  }
  g_live_allocs--;
  pthread_mutex_unlock(&g_lock);
  return cudaSuccess;
}

cudaError_t cudaFree(void* dev_ptr) { return free_kind(dev_ptr, 0); }
cudaError_t cudaFreeHost(void* ptr) { return free_kind(ptr, 1); }

/* ---- streams and their workers ---------------------------------------------------------- */

static void fence_unref(struct fence* f) {
  if (f && --f->refs == 0) free(f);
}

static void run_op(struct op* o) {
  switch (o->type) {
    case OP_COPY: memmove(o->dst, o->src, o->n); break;
    case OP_SET: memset(o->dst, o->value, o->n); break;
    case OP_FN:
      t_in_engine = 1;
      o->fn(o->arg);
      t_in_engine = 0;
      break;
    default: break; /* records and waits are handled under the lock */
  }
}

static void* worker(void* arg) {
  struct CUstream_st* s = arg;
  pthread_mutex_lock(&g_lock);
  for (;;) {
    if (g_shutdown) break; /* the library is being unloaded: queued ops are dropped */
    struct op* o = s->head;
    if (!o) {
      if (s->destroyed) break;
      pthread_cond_wait(&s->wake, &g_lock);
      continue;
    }
    uint64_t now = now_ns();
    /* An op starts when the one before it is done, and takes its duration: a stream of k ops takes k delays. */
    if (o->not_before_ns == 0) o->not_before_ns = now + o->duration_ns + 1;
    if (now < o->not_before_ns) {
      uint64_t t = o->not_before_ns;
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      uint64_t wait = t - now;
      ts.tv_sec += (time_t)(wait / 1000000000u);
      ts.tv_nsec += (long)(wait % 1000000000u);
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&s->wake, &g_lock, &ts);
      continue;
    }
    if (o->type == OP_WAIT && !o->fence->done) {
      pthread_cond_wait(&g_progress, &g_lock);
      continue;
    }
    if (o->type == OP_COPY || o->type == OP_SET || o->type == OP_FN) {
      pthread_mutex_unlock(&g_lock);
      run_op(o);
      pthread_mutex_lock(&g_lock);
    } else if (o->type == OP_RECORD) {
      o->fence->done = 1;
    }
    s->head = o->next;
    if (!s->head) s->tail = NULL;
    fence_unref(o->fence);
    free(o->staging);
    free(o);
    s->completed++;
    g_pending--;
    g_completed++;
    pthread_cond_broadcast(&g_progress);
  }
  /* Destroyed and drained: unlink and free. */
  for (struct CUstream_st** pp = &g_streams; *pp; pp = &(*pp)->next) {
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  }
  pthread_cond_broadcast(&g_progress);
  s->rec->finished = 1;
  pthread_mutex_unlock(&g_lock);
  pthread_cond_destroy(&s->wake);
  free(s);
  return NULL;
}

/* Joins the workers that finished (caller holds g_lock; a finished worker never takes it again). */
static void reap_workers_locked(void) {
  for (struct worker_rec** pp = &g_workers; *pp;) {
    struct worker_rec* r = *pp;
    if (r->finished) {
      pthread_join(r->thread, NULL);
      *pp = r->next;
      free(r);
    } else {
      pp = &r->next;
    }
  }
}

/* At unload: every worker stopped and joined before the code they run is unmapped. */
__attribute__((destructor)) static void sim_unload(void) {
  pthread_mutex_lock(&g_lock);
  g_shutdown = 1;
  for (struct CUstream_st* s = g_streams; s; s = s->next) pthread_cond_signal(&s->wake);
  pthread_cond_broadcast(&g_progress);
  struct worker_rec* list = g_workers;
  g_workers = NULL;
  pthread_mutex_unlock(&g_lock);
  while (list) {
    struct worker_rec* next = list->next;
    /* A worker inside a host function that waits on a thread that is exiting would never return:
       bounded, and said. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    if (!pthread_equal(list->thread, pthread_self()) && pthread_timedjoin_np(list->thread, NULL, &deadline) != 0) {
      fprintf(stderr, "simcudart: a stream worker did not stop at unload\n");
    }
    free(list);
    list = next;
  }
}

/* Caller holds g_lock. */
static struct CUstream_st* new_stream(int device, unsigned flags, int is_default) {
  struct CUstream_st* s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->magic = STREAM_MAGIC;
  s->device = device;
  s->flags = flags;
  s->is_default = is_default;
  reap_workers_locked();
  struct worker_rec* rec = calloc(1, sizeof(*rec));
  if (!rec) {
    free(s);
    return NULL;
  }
  s->rec = rec;
  pthread_cond_init(&s->wake, NULL);
  int rc = pthread_create(&s->thread, NULL, worker, s);
  if (rc != 0) {
    pthread_cond_destroy(&s->wake);
    free(rec);
    free(s);
    return NULL;
  }
  rec->thread = s->thread;
  rec->next = g_workers;
  g_workers = rec;
  s->next = g_streams;
  g_streams = s;
  return s;
}

/*
 * The stream a handle names, or NULL (cudaErrorInvalidResourceHandle).
 * NULL, cudaStreamLegacy (1) and cudaStreamPerThread (2) are the current
 * device's default stream. Caller holds g_lock.
 */
static struct CUstream_st* lookup_stream(cudaStream_t h) {
  uintptr_t v = (uintptr_t)h;
  if (v == 0 || v == 1 || v == 2) {
    int d = t_device;
    if (!g_default[d]) g_default[d] = new_stream(d, 0, 1);
    return g_default[d];
  }
  for (struct CUstream_st* s = g_streams; s; s = s->next)
    if (s == h && !s->destroyed && !s->is_default) return s;
  return NULL;
}

static struct CUevent_st* lookup_event(cudaEvent_t h) {
  for (struct CUevent_st* e = g_events; e; e = e->next)
    if (e == h) return e;
  return NULL;
}

/* Queues an op on s (caller holds g_lock; o is filled but for the queue fields). */
static void enqueue(struct CUstream_st* s, struct op* o) {
  o->next = NULL;
  /* Copies, memsets and kernels take time; records and waits take none. */
  o->duration_ns = o->type == OP_RECORD || o->type == OP_WAIT ? 0 : (uint64_t)delay_us() * 1000u;
  o->not_before_ns = 0;
  if (s->tail) s->tail->next = o;
  else s->head = o;
  s->tail = o;
  s->queued++;
  g_pending++;
  pthread_cond_signal(&s->wake);
}

/* Blocks until everything queued on s so far has run. Caller holds g_lock. */
static void wait_stream_locked(struct CUstream_st* s) {
  uint64_t target = s->queued;
  while (s->completed < target) pthread_cond_wait(&g_progress, &g_lock);
}

/* Blocks until every stream (destroyed ones still draining too) is idle. Caller holds g_lock. */
static void wait_all_locked(void) {
  for (;;) {
    int busy = 0;
    for (struct CUstream_st* s = g_streams; s; s = s->next)
      if (s->completed < s->queued) busy = 1;
    if (!busy) return;
    pthread_cond_wait(&g_progress, &g_lock);
  }
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (!stream || flags > 1) return ret(cudaErrorInvalidValue);
  if (device_count() == 0) return ret(cudaErrorNoDevice);
  pthread_mutex_lock(&g_lock);
  struct CUstream_st* s = new_stream(t_device, flags, 0);
  if (s) g_live_streams++;
  pthread_mutex_unlock(&g_lock);
  if (!s) return ret(cudaErrorMemoryAllocation);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

/* As documented: returns at once; work already queued still runs, then the resources go. */
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  pthread_mutex_lock(&g_lock);
  struct CUstream_st* s = (uintptr_t)stream <= 2 ? NULL : lookup_stream(stream);
  if (!s) {
    pthread_mutex_unlock(&g_lock);
    return ret(cudaErrorInvalidResourceHandle);
  }
  s->destroyed = 1;
  s->magic = 0;
  g_live_streams--;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&g_lock);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  pthread_mutex_lock(&g_lock);
  struct CUstream_st* s = lookup_stream(stream);
  if (s) wait_stream_locked(s);
  pthread_mutex_unlock(&g_lock);
  return s ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  pthread_mutex_lock(&g_lock);
  struct CUstream_st* s = lookup_stream(stream);
  cudaError_t e = !s ? cudaErrorInvalidResourceHandle : s->completed < s->queued ? cudaErrorNotReady : cudaSuccess;
  pthread_mutex_unlock(&g_lock);
  return e == cudaErrorInvalidResourceHandle ? ret(e) : e;
}

cudaError_t cudaDeviceSynchronize(void) {
  pthread_mutex_lock(&g_lock);
  wait_all_locked();
  pthread_mutex_unlock(&g_lock);
  return cudaSuccess;
}

/* ---- copies and memsets ---------------------------------------------------------------- */

static int device_side(enum mem_kind k) { return k == MEM_DEVICE || k == MEM_MANAGED; }
static int host_side(enum mem_kind k) { return k != MEM_DEVICE; }

/* Whether the pointers match the kind the caller named (managed memory is both host and device). */
static cudaError_t check_kind(enum cudaMemcpyKind kind, enum mem_kind dst, enum mem_kind src) {
  switch ((int)kind) {
    case cudaMemcpyHostToHost: return host_side(dst) && host_side(src) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToDevice: return device_side(dst) && host_side(src) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return host_side(dst) && device_side(src) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice: return device_side(dst) && device_side(src) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDefault: return cudaSuccess;
    default: return cudaErrorInvalidMemcpyDirection;
  }
}

static cudaError_t copy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream, int sync) {
  if ((int)kind < 0 || (int)kind > 4) return ret(cudaErrorInvalidMemcpyDirection);
  if (count == 0) return cudaSuccess;
  struct op* o = calloc(1, sizeof(*o));
  if (!o) return ret(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&g_lock);
  struct range d, s;
  cudaError_t e = resolve(dst, count, &d);
  if (e == cudaSuccess) e = resolve(src, count, &s);
  if (e == cudaSuccess) e = check_kind(kind, d.kind, s.kind);
  struct CUstream_st* st = NULL;
  if (e == cudaSuccess && !(st = lookup_stream(stream))) e = cudaErrorInvalidResourceHandle;
  if (e == cudaSuccess && s.kind == MEM_PAGEABLE && !sync) {
    /* Pageable source: staged now, so the caller may reuse it as soon as we return. */
    o->staging = malloc(count);
    if (!o->staging) e = cudaErrorMemoryAllocation;
    else memcpy(o->staging, s.at, count);
  }
  if (e != cudaSuccess) {
    pthread_mutex_unlock(&g_lock);
    free(o->staging);
    free(o);
    return ret(e);
  }
  o->type = OP_COPY;
  o->dst = d.at;
  o->src = o->staging ? o->staging : s.at;
  o->n = count;
  enqueue(st, o);
  /* cudaMemcpy, and cudaMemcpyAsync into pageable memory, return only once the copy is done. */
  if (sync || d.kind == MEM_PAGEABLE) wait_stream_locked(st);
  pthread_mutex_unlock(&g_lock);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  return copy(dst, src, count, kind, NULL, 1);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy(dst, src, count, kind, stream, 0);
}

static cudaError_t set(void* dev_ptr, int value, size_t count, cudaStream_t stream, int sync) {
  if (count == 0) return cudaSuccess;
  struct op* o = calloc(1, sizeof(*o));
  if (!o) return ret(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&g_lock);
  struct range d;
  cudaError_t e = resolve(dev_ptr, count, &d);
  /* Memset takes memory the runtime knows (device, pinned, managed), not pageable host memory. */
  if (e == cudaSuccess && d.kind == MEM_PAGEABLE) e = cudaErrorInvalidValue;
  struct CUstream_st* st = NULL;
  if (e == cudaSuccess && !(st = lookup_stream(stream))) e = cudaErrorInvalidResourceHandle;
  if (e != cudaSuccess) {
    pthread_mutex_unlock(&g_lock);
    free(o);
    return ret(e);
  }
  o->type = OP_SET;
  o->dst = d.at;
  o->value = value;
  o->n = count;
  enqueue(st, o);
  if (sync) wait_stream_locked(st);
  pthread_mutex_unlock(&g_lock);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dev_ptr, int value, size_t count, cudaStream_t stream) {
  return set(dev_ptr, value, count, stream, 0);
}

cudaError_t cudaMemset(void* dev_ptr, int value, size_t count) { return set(dev_ptr, value, count, NULL, 1); }

/* ---- events ---------------------------------------------------------------------------- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (!event || flags > 0xf) return ret(cudaErrorInvalidValue);
  if (device_count() == 0) return ret(cudaErrorNoDevice);
  struct CUevent_st* ev = calloc(1, sizeof(*ev));
  if (!ev) return ret(cudaErrorMemoryAllocation);
  ev->magic = EVENT_MAGIC;
  ev->device = t_device;
  pthread_mutex_lock(&g_lock);
  ev->next = g_events;
  g_events = ev;
  g_live_events++;
  pthread_mutex_unlock(&g_lock);
  *event = ev;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  struct op* o = calloc(1, sizeof(*o));
  struct fence* f = calloc(1, sizeof(*f));
  if (!o || !f) {
    free(o);
    free(f);
    return ret(cudaErrorMemoryAllocation);
  }
  pthread_mutex_lock(&g_lock);
  struct CUevent_st* ev = lookup_event(event);
  struct CUstream_st* s = ev ? lookup_stream(stream) : NULL;
  /* "event and stream must be on the same device" (cudaEventRecord's documentation). */
  if (!ev || !s || s->device != ev->device) {
    pthread_mutex_unlock(&g_lock);
    free(o);
    free(f);
    return ret(cudaErrorInvalidResourceHandle);
  }
  f->refs = 2; /* the event's, the op's */
  fence_unref(ev->last);
  ev->last = f;
  o->type = OP_RECORD;
  o->fence = f;
  enqueue(s, o);
  pthread_mutex_unlock(&g_lock);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  pthread_mutex_lock(&g_lock);
  struct CUevent_st* ev = lookup_event(event);
  if (!ev) {
    pthread_mutex_unlock(&g_lock);
    return ret(cudaErrorInvalidResourceHandle);
  }
  struct fence* f = ev->last; /* never recorded: complete */
  if (f) {
    f->refs++; /* the event may be destroyed while we wait */
    while (!f->done) pthread_cond_wait(&g_progress, &g_lock);
    fence_unref(f);
  }
  pthread_mutex_unlock(&g_lock);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  pthread_mutex_lock(&g_lock);
  struct CUevent_st* ev = lookup_event(event);
  cudaError_t e = !ev ? cudaErrorInvalidResourceHandle : ev->last && !ev->last->done ? cudaErrorNotReady : cudaSuccess;
  pthread_mutex_unlock(&g_lock);
  return e == cudaErrorInvalidResourceHandle ? ret(e) : e;
}

/* As documented: an event destroyed before its work is done is released once the work is (the fence lives on). */
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  pthread_mutex_lock(&g_lock);
  struct CUevent_st** pp = &g_events;
  while (*pp && *pp != event) pp = &(*pp)->next;
  if (!*pp) {
    pthread_mutex_unlock(&g_lock);
    return ret(cudaErrorInvalidResourceHandle);
  }
  struct CUevent_st* ev = *pp;
  *pp = ev->next;
  fence_unref(ev->last);
  g_live_events--;
  pthread_mutex_unlock(&g_lock);
  ev->magic = 0;
  free(ev);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (flags > 1) return ret(cudaErrorInvalidValue);
  struct op* o = calloc(1, sizeof(*o));
  if (!o) return ret(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&g_lock);
  struct CUevent_st* ev = lookup_event(event);
  struct CUstream_st* s = ev ? lookup_stream(stream) : NULL;
  if (!ev || !s) {
    pthread_mutex_unlock(&g_lock);
    free(o);
    return ret(cudaErrorInvalidResourceHandle);
  }
  if (ev->last && !ev->last->done) {
    /* Waits for the record as it is now: a later re-record of the event does not move this wait. */
    o->type = OP_WAIT;
    o->fence = ev->last;
    o->fence->refs++;
    enqueue(s, o);
    o = NULL;
  }
  pthread_mutex_unlock(&g_lock);
  free(o);
  return cudaSuccess;
}

static cudaError_t launch(cudaStream_t stream, cudaHostFn_t fn, void* arg) {
  if (!fn) return ret(cudaErrorInvalidValue);
  struct op* o = calloc(1, sizeof(*o));
  if (!o) return ret(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&g_lock);
  struct CUstream_st* s = lookup_stream(stream);
  if (!s) {
    pthread_mutex_unlock(&g_lock);
    free(o);
    return ret(cudaErrorInvalidResourceHandle);
  }
  o->type = OP_FN;
  o->fn = fn;
  o->arg = arg;
  enqueue(s, o);
  pthread_mutex_unlock(&g_lock);
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) { return launch(stream, fn, user_data); }
cudaError_t sim_launch_kernel(cudaStream_t stream, cudaHostFn_t fn, void* args) { return launch(stream, fn, args); }

void* sim_device_view(const void* ptr) {
  if (!t_in_engine) {
    fprintf(stderr, "simcudart: sim_device_view called outside a kernel: the host cannot touch device memory\n");
    abort();
  }
  if (!ptr) return NULL;
  pthread_mutex_lock(&g_lock);
  struct alloc* a = find_alloc((uintptr_t)ptr);
  void* at = (void*)ptr;
  if (a && a->kind == MEM_FREED_DEVICE) at = NULL;
  else if (a) at = a->view + ((uintptr_t)ptr - a->base);
  pthread_mutex_unlock(&g_lock);
  if (!at) {
    fprintf(stderr, "simcudart: a kernel touched freed device memory at %p\n", ptr);
    abort();
  }
  return at;
}

/* ---- devices, versions, errors ------------------------------------------------------------ */

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return ret(cudaErrorInvalidValue);
  *version = 12080;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return ret(cudaErrorInvalidValue);
  *version = 12080;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return ret(cudaErrorInvalidValue);
  *count = device_count();
  return *count == 0 ? ret(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return ret(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  cudaError_t e = check_device(device);
  if (e != cudaSuccess) return ret(e);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    default: return "unknown error";
  }
}

/* ---- simulator extensions ------------------------------------------------------------------ */

static int64_t locked_read(const int64_t* v) {
  pthread_mutex_lock(&g_lock);
  int64_t r = *v;
  pthread_mutex_unlock(&g_lock);
  return r;
}

int64_t sim_live_allocations(void) { return locked_read(&g_live_allocs); }
int64_t sim_live_streams(void) { return locked_read(&g_live_streams); }
int64_t sim_live_events(void) { return locked_read(&g_live_events); }
int64_t sim_pending_ops(void) { return locked_read(&g_pending); }
int64_t sim_completed_ops(void) { return locked_read(&g_completed); }

int64_t sim_set_delay_us(int64_t us) {
  pthread_mutex_lock(&g_lock);
  int64_t prev = delay_us();
  g_delay_us = us < 0 ? 0 : us;
  pthread_mutex_unlock(&g_lock);
  return prev;
}

const char* sim_name(void) { return "simcudart"; }

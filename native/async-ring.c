/*
 * arrow-device's one native piece: an ArrowAsyncDeviceStreamHandler
 * (CDeviceDataInterface.rst, "Async Device Stream Interface") whose
 * on_next_task, on_error and release never wait for the JS thread.
 *
 * Why: a native producer calls its handler from its own thread. A handler
 * whose callbacks are JS functions (koffi callbacks) makes every call a hop
 * to the JS thread, and the producer's thread waits until JS has run it:
 * tens of microseconds per batch, whatever the batch. Here each call moves
 * its contents into a ring (the task, and copies of the metadata and
 * message, which are valid only during the call) and returns. JS takes the
 * ring's contents in one plain call per burst (ring_take) and is woken by a
 * "doorbell", a byte in a pipe its event loop watches, only when it found
 * the ring empty and waits: one wake-up per burst instead of one per call.
 *
 * on_schema, once per stream, still goes to JS and waits for its answer
 * (a non-zero return must reach the producer).
 *
 * The producer serializes the handler's calls (the spec); the mutex guards
 * the ring against ring_take on the JS thread. Built with -z nodelete
 * (tools/build-native.mjs): a producer thread still calling the handler
 * while the process exits never runs in an unmapped library.
 *
 * Shipped prebuilt (prebuilds/<platform>-<arch>/, made when the package is
 * packed): users never compile it. Where there is none, the reader uses JS
 * callbacks (src/async/ring.ts says why).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The structs this file touches, as CDeviceDataInterface.rst and CDataInterface.rst define them. */
struct ArrowSchema;
struct ArrowDeviceArray;

struct ArrowAsyncTask {
  int (*extract_data)(struct ArrowAsyncTask* self, struct ArrowDeviceArray* out);
  void* private_data;
};

struct ArrowAsyncProducer {
  int32_t device_type;
  void (*request)(struct ArrowAsyncProducer* self, int64_t n);
  void (*cancel)(struct ArrowAsyncProducer* self);
  const char* additional_metadata;
  void* private_data;
};

struct ArrowAsyncDeviceStreamHandler {
  int (*on_schema)(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowSchema* stream_schema);
  int (*on_next_task)(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowAsyncTask* task, const char* metadata);
  void (*on_error)(struct ArrowAsyncDeviceStreamHandler* self, int code, const char* message, const char* metadata);
  void (*release)(struct ArrowAsyncDeviceStreamHandler* self);
  struct ArrowAsyncProducer* producer;
  void* private_data;
};

enum { EV_TASK = 1, EV_END = 2, EV_ERROR = 3, EV_RELEASE = 4 };

/* The most tasks a ring holds (the reader uses JS callbacks for larger queues): no size computed
   from it overflows. */
#define MAX_CAPACITY ((int64_t)1 << 24)

/* Metadata is copied up to this many bytes (the JS reader refuses more anyway). */
#define METADATA_MAX (16 << 20)
#define MESSAGE_MAX (1 << 16)

/* One handler call, as JS reads it (ring_event_size: 40 bytes on 64-bit targets). */
struct ring_event {
  int32_t kind;
  int32_t code;                /* on_error's code; for a task: 0, -1 malformed metadata (or an invalid pointer), -2 no memory for its copy */
  struct ArrowAsyncTask task;  /* moved out of on_next_task (valid only during the call) */
  char* metadata;              /* a copy (free with ring_free_copy), or NULL */
  char* message;               /* on_error's message, a copy, or NULL */
};

struct ring {
  struct ArrowAsyncDeviceStreamHandler handler; /* first: the handler's address is the ring's */
  pthread_mutex_t mu;
  struct ring_event* ev;
  int64_t cap, head, len;
  int armed;      /* JS found the ring empty and waits for the doorbell */
  int bell_fd[2]; /* the doorbell: a pipe whose read end JS's event loop watches */
  int (*js_on_schema)(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowSchema* schema);
  int64_t doorbells; /* wake-ups rung, for tests and benchmarks */
  /* The producer's request and cancel, called by JS through ring_request/ring_cancel: the producer may
     free its ArrowAsyncProducer once it has called release (the spec keeps it valid only until then),
     and release only queues here, so the ring knows when that is and JS must ask it. */
  int released;        /* the producer called release: no call into it any more */
  int64_t in_call;     /* JS is inside request or cancel now */
  pthread_t call_thread;
  pthread_cond_t calls_done;
};

/*
 * A copy of an ArrowSchema.metadata-encoded blob (int32 count, then an int32
 * length and its bytes per key and per value). Each length is checked
 * before it is followed; a blob that does not parse within METADATA_MAX is
 * "malformed" (the JS side reports it with the batch).
 */
/* Addresses below this are never valid (the JS side's MIN_VALID_ADDRESS: Linux's mmap_min_addr, the
   first 64 KiB Windows reserves); a pointer there is refused, not read. */
#define MIN_VALID_ADDRESS ((uintptr_t)0x10000)

static char* copy_metadata(const char* md, int32_t* code) {
  *code = 0;
  if (!md) return NULL;
  if ((uintptr_t)md < MIN_VALID_ADDRESS) goto bad;
  int32_t n;
  memcpy(&n, md, 4);
  int64_t pos = 4;
  if (n < 0 || n > (1 << 16)) goto bad;
  for (int64_t i = 0; i < 2 * (int64_t)n; i++) {
    int32_t len;
    if (pos + 4 > METADATA_MAX) goto bad;
    memcpy(&len, md + pos, 4);
    if (len < 0 || pos + 4 + len > METADATA_MAX) goto bad;
    pos += 4 + len;
  }
  char* out = malloc((size_t)pos);
  if (!out) {
    *code = -2;
    return NULL;
  }
  memcpy(out, md, (size_t)pos);
  return out;
bad:
  *code = -1;
  return NULL;
}

/*
 * Appends `e`. A task may not take the last two slots (they stay free for
 * the end, an error and the release, which must never be lost); past that
 * the ring grows (a producer sending more than was requested). Returns 0,
 * or ENOMEM when a task found no room and the ring could not grow.
 */
static int push(struct ring* r, struct ring_event e) {
  pthread_mutex_lock(&r->mu);
  int64_t need = r->len + 1 + (e.kind == EV_TASK ? 2 : 0);
  if (need > r->cap) {
    int64_t cap = r->cap * 2;
    struct ring_event* ev = cap <= 2 * MAX_CAPACITY ? malloc(sizeof *ev * (size_t)cap) : NULL;
    if (ev) {
      for (int64_t i = 0; i < r->len; i++) ev[i] = r->ev[(r->head + i) % r->cap];
      free(r->ev);
      r->ev = ev;
      r->cap = cap;
      r->head = 0;
    } else if (e.kind == EV_TASK || r->len == r->cap) {
      pthread_mutex_unlock(&r->mu);
      return ENOMEM;
    }
  }
  r->ev[(r->head + r->len++) % r->cap] = e;
  if (r->armed) {
    /* One byte per arming (non-blocking: were the pipe ever full, JS has a byte to read already, and
       the write is dropped, which loses nothing). Under the lock, so the
       ring (and the pipe) cannot be freed before it is done. The producer's thread goes on at once:
       JS wakes on its own loop. (A JS callback here would make this thread wait until JS has run it,
       and the two threads would then take turns: a wake per batch.) */
    r->armed = 0;
    r->doorbells++;
    ssize_t w;
    do w = write(r->bell_fd[1], "", 1);
    while (w < 0 && errno == EINTR);
  }
  pthread_mutex_unlock(&r->mu);
  /* Nothing of the ring is touched after the unlock: JS may have taken the release and freed it. */
  return 0;
}

static int ring_on_schema(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowSchema* schema) {
  struct ring* r = (struct ring*)self;
  return r->js_on_schema(self, schema);
}

static int ring_on_next_task(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowAsyncTask* task, const char* metadata) {
  struct ring_event e = {0};
  if (!task) {
    e.kind = EV_END;
  } else {
    e.kind = EV_TASK;
    e.task = *task; /* moved: the task is valid only during this call */
    e.metadata = copy_metadata(metadata, &e.code);
  }
  int rc = push((struct ring*)self, e);
  if (rc != 0) free(e.metadata);
  return rc;
}

static void ring_on_error(struct ArrowAsyncDeviceStreamHandler* self, int code, const char* message, const char* metadata) {
  int32_t md_code;
  struct ring_event e = {.kind = EV_ERROR, .code = code, .metadata = copy_metadata(metadata, &md_code)};
  if (message && (uintptr_t)message >= MIN_VALID_ADDRESS) {
    size_t n = strnlen(message, MESSAGE_MAX);
    e.message = malloc(n + 1);
    if (e.message) {
      memcpy(e.message, message, n);
      e.message[n] = 0;
    }
  }
  if (push((struct ring*)self, e) != 0) {
    free(e.metadata);
    free(e.message);
  }
}

static void ring_release(struct ArrowAsyncDeviceStreamHandler* self) {
  struct ring* r = (struct ring*)self;
  /* From now on JS calls nothing of the producer, and a call in progress ends before the producer may
     free what it calls (unless the producer releases from inside that call, on JS's own thread). */
  pthread_mutex_lock(&r->mu);
  r->released = 1;
  while (r->in_call > 0 && !pthread_equal(r->call_thread, pthread_self())) pthread_cond_wait(&r->calls_done, &r->mu);
  pthread_mutex_unlock(&r->mu);
  struct ring_event e = {.kind = EV_RELEASE};
  push(r, e); /* a slot is always free for it (see push) */
}

/* Enters a call into the producer from JS; 0 (no call) once the producer released the handler or
   left the function NULL. */
static struct ArrowAsyncProducer* enter_call(struct ring* r) {
  pthread_mutex_lock(&r->mu);
  struct ArrowAsyncProducer* p = r->released ? NULL : r->handler.producer;
  if (p) {
    r->in_call++;
    r->call_thread = pthread_self();
  }
  pthread_mutex_unlock(&r->mu);
  return p;
}

static void leave_call(struct ring* r) {
  pthread_mutex_lock(&r->mu);
  if (--r->in_call == 0) pthread_cond_broadcast(&r->calls_done);
  pthread_mutex_unlock(&r->mu);
}

/* The producer's request(n), unless it has released the handler: 1 if called. */
int32_t ring_request(struct ring* r, int64_t n) {
  struct ArrowAsyncProducer* p = enter_call(r);
  if (!p) return 0;
  int called = p->request != NULL;
  if (called) p->request(p, n);
  leave_call(r);
  return called;
}

/* The producer's cancel, unless it has released the handler: 1 if called. */
int32_t ring_cancel(struct ring* r) {
  struct ArrowAsyncProducer* p = enter_call(r);
  if (!p) return 0;
  int called = p->cancel != NULL;
  if (called) p->cancel(p);
  leave_call(r);
  return called;
}

/*
 * A handler whose private_data is `private_data`, for at most `capacity`
 * tasks in flight (the reader's queue size); `js_on_schema` is a JS
 * callback. NULL when out of memory or pipes. Starts armed: the first call
 * rings.
 */
struct ring* ring_new(int (*js_on_schema)(struct ArrowAsyncDeviceStreamHandler*, struct ArrowSchema*), void* private_data,
                      int64_t capacity) {
  if (capacity > MAX_CAPACITY) return NULL;
  struct ring* r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->cap = (capacity > 0 ? capacity : 1) + 4;
  r->ev = malloc(sizeof *r->ev * (size_t)r->cap);
  if (!r->ev) {
    free(r);
    return NULL;
  }
  r->handler.on_schema = ring_on_schema;
  r->handler.on_next_task = ring_on_next_task;
  r->handler.on_error = ring_on_error;
  r->handler.release = ring_release;
  r->handler.private_data = private_data;
  r->js_on_schema = js_on_schema;
  r->armed = 1;
#ifdef __linux__
  int piped = pipe2(r->bell_fd, O_CLOEXEC | O_NONBLOCK); /* no window in which a fork inherits them */
#else
  int piped = pipe(r->bell_fd);
  if (piped == 0)
    for (int i = 0; i < 2; i++) {
      fcntl(r->bell_fd[i], F_SETFD, FD_CLOEXEC);
      fcntl(r->bell_fd[i], F_SETFL, O_NONBLOCK);
    }
#endif
  if (piped != 0) {
    free(r->ev);
    free(r);
    return NULL;
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->calls_done, NULL);
  return r;
}

/* The read end of the doorbell pipe, for JS to watch and to close. */
int32_t ring_bell_fd(struct ring* r) { return r->bell_fd[0]; }

/*
 * Moves up to `max` events into `out` (max * ring_event_size() bytes) and
 * returns how many. With `arm`, finding the ring empty arms the doorbell,
 * under the same lock as the producer's push, so no wake-up is lost: JS
 * arms only when it is about to wait, so pushes while it works need no hop.
 */
int64_t ring_take(struct ring* r, uint8_t* out, int64_t max, int32_t arm) {
  pthread_mutex_lock(&r->mu);
  int64_t n = r->len < max ? r->len : max;
  for (int64_t i = 0; i < n; i++) memcpy(out + i * sizeof(struct ring_event), &r->ev[(r->head + i) % r->cap], sizeof(struct ring_event));
  r->head = (r->head + n) % r->cap;
  r->len -= n;
  if (n == 0 && arm) r->armed = 1;
  pthread_mutex_unlock(&r->mu);
  return n;
}

int64_t ring_doorbells(struct ring* r) {
  pthread_mutex_lock(&r->mu);
  int64_t n = r->doorbells;
  pthread_mutex_unlock(&r->mu);
  return n;
}

int64_t ring_event_size(void) { return (int64_t)sizeof(struct ring_event); }

/* The ABI version JS checks before use: bumped whenever an export or struct_event changes. */
int32_t ring_version(void) { return 3; }

void ring_free_copy(char* p) { free(p); }

/* Once JS has taken the release (nothing calls the handler any more), or for a ring never handed out. */
void ring_free(struct ring* r) {
  pthread_mutex_lock(&r->mu);
  for (int64_t i = 0; i < r->len; i++) {
    free(r->ev[(r->head + i) % r->cap].metadata);
    free(r->ev[(r->head + i) % r->cap].message);
  }
  pthread_mutex_unlock(&r->mu);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->calls_done);
  /* The read end is JS's to close (its socket owns it); the write end is ours. */
  close(r->bell_fd[1]);
  free(r->ev);
  free(r);
}

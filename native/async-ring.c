/*
 * arrow-device's one native piece, for the async device stream interface
 * (CDeviceDataInterface.rst, "Async Device Stream Interface"), in two parts:
 *
 * - the ring: an ArrowAsyncDeviceStreamHandler whose on_next_task, on_error
 *   and release never wait for the JS thread (a native producer into our
 *   reader);
 * - the pump: an ArrowAsyncProducer whose request, cancel, extract_data and
 *   the batches' releases never wait for the JS thread either, and a thread
 *   of ours that calls a native consumer's handler (our producer into a
 *   native consumer). See "The pump" below.
 *
 * Why: the other side calls us from its own threads. A callback that is a
 * JS function (a koffi callback) makes every call a hop to the JS thread,
 * and the calling thread waits until JS has run it: tens of microseconds
 * per batch, whatever the batch. Here each call is answered in C under a
 * mutex and JS is woken by a "doorbell", a byte in a pipe its event loop
 * watches, only when it is waiting: one wake-up per burst instead of one or
 * more per batch.
 *
 * The ring: each handler call moves its contents into a ring (the task, and
 * copies of the metadata and message, which are valid only during the
 * call) and returns. JS takes the ring's contents in one plain call per
 * burst (ring_take).
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
 * packed): users never compile it. Where there is none, the reader and the
 * producer use JS callbacks (src/async/ring.ts says why).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arrow-abi.h"

/* The device structs this file touches, as CDeviceDataInterface.rst defines them (the others: arrow-abi.h). */
struct ArrowDeviceArray {
  struct ArrowArray array;
  int64_t device_id;
  int32_t device_type;
  void* sync_event;
  int64_t reserved[3];
};

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

/* A doorbell pipe, both ends close-on-exec and non-blocking. 0, or -1 (errno set). */
static int open_bell(int fd[2]) {
#ifdef __linux__
  return pipe2(fd, O_CLOEXEC | O_NONBLOCK); /* no window in which a fork inherits them */
#else
  if (pipe(fd) != 0) return -1;
  for (int i = 0; i < 2; i++) {
    fcntl(fd[i], F_SETFD, FD_CLOEXEC);
    fcntl(fd[i], F_SETFL, O_NONBLOCK);
  }
  return 0;
#endif
}

/* One byte into the doorbell (non-blocking: were the pipe ever full, JS has a byte to read already,
   and the write is dropped, which loses nothing). */
static void ring_bell(int fd) {
  ssize_t w;
  do w = write(fd, "", 1);
  while (w < 0 && errno == EINTR);
}

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
    ring_bell(r->bell_fd[1]);
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
  if (open_bell(r->bell_fd) != 0) {
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
int32_t ring_version(void) { return 4; }

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

/* ------------------------------------------------------------------------------------------ the pump */

/*
 * The pump: our producer into a native consumer's handler.
 *
 * JS exports each batch (zero-copy) and queues it with one plain call
 * (pump_task, pump_push); everything the consumer does then runs in C:
 * - a dispatcher thread of ours calls the handler's callbacks, in order and
 *   one at a time (the spec: never concurrently), so the JS thread never
 *   waits in a call into the consumer;
 * - request and cancel add credit or stop, under the mutex;
 * - extract_data moves the exported ArrowDeviceArray into the consumer's,
 *   with a release of ours in front of JS's: the consumer's release moves
 *   the struct (bitwise, which the C data interface allows) into a list
 *   that JS drains and releases with its own release, on its own thread.
 *   A child the consumer moved out and releases alone still calls JS's
 *   release for that child (a hop, but correct: JS never waits here).
 * JS learns of changes through the doorbell when it waits (pump_state arms
 * it): for credit, or for anything (the end of the stream, arrays to take).
 *
 * Lifetimes: the task struct handed to on_next_task lives until its
 * extract_data (the spec makes it valid only during the call; Arrow C++'s
 * consumer keeps the pointer and extracts later); its record then lives
 * until the consumer releases the array. The ArrowAsyncProducer is the
 * pump's first member, and JS frees the pump only after the handler's
 * release, every task's extract_data and every array's release, plus a
 * grace period (Arrow C++'s consumer calls request after the release; our
 * request then is a no-op that counts it).
 */

enum { CMD_SCHEMA = 1, CMD_TASK = 2, CMD_END = 3, CMD_ERROR = 4, CMD_RELEASE = 5 };

struct pump;

/* A task handed to the consumer, and after its extraction the record behind the consumer's release. */
struct pump_task {
  struct ArrowAsyncTask task; /* first: what on_next_task gets */
  struct pump* pump;
  struct ArrowDeviceArray array;          /* the batch JS exported, moved in */
  void (*js_release)(struct ArrowArray*); /* JS's release, behind ours once the consumer has the array */
  void* js_private_data;
};

struct command {
  int32_t kind;
  int32_t code;   /* on_error's code */
  void* ptr;      /* the schema (JS's, valid until JS sees the call handled), or the task */
  char* metadata; /* a copy, freed after the call */
  char* message;  /* a copy, freed after the call */
};

struct pump {
  struct ArrowAsyncProducer producer; /* first: the consumer's `self` is the pump */
  struct ArrowAsyncDeviceStreamHandler* handler;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* the dispatcher waits for commands */
  struct command* cmds;
  int64_t cap, head, len;
  char* additional_metadata; /* a copy, for the producer's lifetime */
  /* State, read by JS with pump_state. */
  int64_t credit;
  int cancelled;
  int64_t bad_request;  /* the first n <= 0 request asked for (INT64_MIN for 0), or 0 */
  int32_t consumer_rc;  /* the first non-zero return of on_schema / on_next_task */
  int released;         /* the handler's release returned */
  int64_t handled;      /* commands the dispatcher finished */
  int64_t delivered;    /* tasks on_next_task was called with */
  int64_t tasks;        /* tasks made and not extracted yet */
  int64_t lent;         /* arrays extracted and not released yet */
  int64_t late_calls;   /* request/cancel after the handler's release (ignored) */
  struct ArrowArray* freed; /* arrays given back, for JS to release */
  int64_t freed_cap, freed_len;
  int armed; /* JS waits: 1 for credit (or cancel, a bad request, a consumer's non-zero return), 2 for anything */
  int bell_fd[2];
  int64_t doorbells;
};

/* Under the mutex: rings if JS waits for a change of this level (1: what production waits for; 2: any). */
static void pump_changed(struct pump* p, int level) {
  if (p->armed == 0 || p->armed < level) return;
  p->armed = 0;
  p->doorbells++;
  ring_bell(p->bell_fd[1]); /* under the lock: the pump (and its pipe) outlive it */
}

static void pump_request(struct ArrowAsyncProducer* self, int64_t n) {
  struct pump* p = (struct pump*)self;
  pthread_mutex_lock(&p->mu);
  if (p->released) {
    p->late_calls++;
  } else if (!p->cancelled) {
    if (n <= 0) {
      /* Reported through on_error by JS (never from the consumer's call): the first one. */
      if (!p->bad_request) p->bad_request = n == 0 ? INT64_MIN : n;
    } else {
      p->credit = n > INT64_MAX - p->credit ? INT64_MAX : p->credit + n;
    }
    pump_changed(p, 1);
  }
  pthread_mutex_unlock(&p->mu);
}

static void pump_cancel(struct ArrowAsyncProducer* self) {
  struct pump* p = (struct pump*)self;
  pthread_mutex_lock(&p->mu);
  if (p->released) {
    p->late_calls++;
  } else if (!p->cancelled) {
    p->cancelled = 1; /* idempotent: a second cancel changes nothing */
    pump_changed(p, 1);
  }
  pthread_mutex_unlock(&p->mu);
}

/*
 * Queues a struct JS must release (moved bitwise: the consumer's is marked
 * released by the caller). `from_task`: a task's array nobody took (the
 * task is done); else an array the consumer released.
 */
static void give_back(struct pump* p, const struct ArrowArray* a, int from_task) {
  pthread_mutex_lock(&p->mu);
  if (from_task) p->tasks--;
  else p->lent--;
  if (p->freed_len == p->freed_cap) {
    int64_t cap = p->freed_cap ? p->freed_cap * 2 : 16;
    struct ArrowArray* f = realloc(p->freed, sizeof *f * (size_t)cap);
    if (f) {
      p->freed = f;
      p->freed_cap = cap;
    }
  }
  /* Out of memory: the array is leaked (its buffers stay alive), never released twice or lost mid-use. */
  if (p->freed_len < p->freed_cap) p->freed[p->freed_len++] = *a;
  pump_changed(p, 2);
  pthread_mutex_unlock(&p->mu);
}

/* The release the consumer sees: gives the struct back to JS, whose release runs on the JS thread. */
static void pump_array_release(struct ArrowArray* a) {
  struct pump_task* t = a->private_data;
  struct pump* p = t->pump;
  a->release = t->js_release;
  a->private_data = t->js_private_data;
  free(t);
  give_back(p, a, 0);
  a->release = NULL; /* released, for the consumer */
}

/*
 * Every task handed out, by a handle (a slot and its generation) that its
 * private_data carries instead of its address: extract_data runs exactly
 * once (the spec), and a consumer that calls it again, through the struct
 * or a copy of it, gets EINVAL instead of a second move (a double release)
 * or a read of freed memory. One table for the process, under its own lock.
 */
struct task_slot {
  struct pump_task* task; /* NULL: free */
  uint32_t gen;
};
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static struct task_slot* slots;
static uint32_t* free_slots;
static uint32_t n_slots, n_free;
#define HANDLE_SHIFT (sizeof(uintptr_t) * 4) /* the slot below, the generation above */
#define SLOT_MAX ((uint32_t)1 << (HANDLE_SHIFT > 24 ? 24 : HANDLE_SHIFT - 1))

/* A handle for `t`, or NULL when out of memory (or slots). */
static void* task_handle(struct pump_task* t) {
  void* h = NULL;
  pthread_mutex_lock(&slots_mu);
  if (n_free == 0 && n_slots < SLOT_MAX) {
    uint32_t cap = n_slots ? 2 * n_slots : 64;
    struct task_slot* s = realloc(slots, sizeof *s * cap);
    if (s) slots = s;
    uint32_t* f = s ? realloc(free_slots, sizeof *f * cap) : NULL;
    if (f) {
      free_slots = f;
      for (uint32_t i = cap; i > n_slots; i--) {
        slots[i - 1] = (struct task_slot){NULL, 0};
        free_slots[n_free++] = i - 1;
      }
      n_slots = cap;
    }
  }
  if (n_free > 0) {
    uint32_t i = free_slots[--n_free];
    slots[i].task = t;
    uintptr_t gen = slots[i].gen & (((uintptr_t)1 << HANDLE_SHIFT) - 1);
    h = (void*)((gen << HANDLE_SHIFT) | (uintptr_t)(i + 1));
  }
  pthread_mutex_unlock(&slots_mu);
  return h;
}

/* The task behind a handle, taken out of the table (its handle is dead from now on); NULL if none. */
static struct pump_task* take_task(void* handle) {
  uintptr_t h = (uintptr_t)handle;
  uintptr_t low = h & (((uintptr_t)1 << HANDLE_SHIFT) - 1);
  uintptr_t gen = h >> HANDLE_SHIFT;
  struct pump_task* t = NULL;
  pthread_mutex_lock(&slots_mu);
  if (low >= 1 && low <= n_slots) {
    struct task_slot* s = &slots[low - 1];
    if (s->task && (s->gen & (((uintptr_t)1 << HANDLE_SHIFT) - 1)) == gen) {
      t = s->task;
      s->task = NULL;
      s->gen++;
      free_slots[n_free++] = (uint32_t)(low - 1);
    }
  }
  pthread_mutex_unlock(&slots_mu);
  return t;
}

/* CDeviceDataInterface.rst, ArrowAsyncTask.extract_data: exactly once; NULL out only cleans up. */
static int pump_extract(struct ArrowAsyncTask* task, struct ArrowDeviceArray* out) {
  struct pump_task* t = task ? take_task(task->private_data) : NULL;
  if (!t) return EINVAL; /* extracted already (through this struct or a copy), or not ours */
  task->private_data = NULL;
  struct pump* p = t->pump;
  if (!out) {
    give_back(p, &t->array.array, 1);
    free(t);
    return 0;
  }
  *out = t->array; /* moved: ownership goes to `out` */
  t->js_release = out->array.release;
  t->js_private_data = out->array.private_data;
  out->array.release = pump_array_release;
  out->array.private_data = t;
  pthread_mutex_lock(&p->mu);
  p->tasks--;
  p->lent++;
  pump_changed(p, 2);
  pthread_mutex_unlock(&p->mu);
  return 0;
}

static void* pump_dispatch(void* arg) {
  struct pump* p = arg;
  struct ArrowAsyncDeviceStreamHandler* h = p->handler;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (p->len == 0) pthread_cond_wait(&p->cv, &p->mu);
    struct command c = p->cmds[p->head];
    p->head = (p->head + 1) % p->cap;
    p->len--;
    /* After the consumer's non-zero return nothing but release may reach it; after a cancel, neither
       tasks nor the end (production stopped at the cancel: JS queued those before it knew). */
    int skip = c.kind != CMD_RELEASE && (p->consumer_rc != 0 || (p->cancelled && (c.kind == CMD_TASK || c.kind == CMD_END)));
    pthread_mutex_unlock(&p->mu);
    int rc = 0;
    int task_delivered = 0;
    if (skip) {
      if (c.kind == CMD_TASK) pump_extract(c.ptr, NULL); /* never handed over: cleaned up here */
    } else if (c.kind == CMD_SCHEMA) {
      rc = h->on_schema(h, c.ptr);
    } else if (c.kind == CMD_TASK) {
      task_delivered = 1;
      /* A non-zero return leaves the task to the consumer: it may have moved it, and extract_data is
         its to call (calling it here could run it twice). */
      rc = h->on_next_task(h, c.ptr, c.metadata);
    } else if (c.kind == CMD_END) {
      rc = h->on_next_task(h, NULL, NULL);
    } else if (c.kind == CMD_ERROR) {
      h->on_error(h, c.code, c.message, c.metadata);
    } else if (c.kind == CMD_RELEASE) {
      h->release(h);
    }
    free(c.metadata);
    free(c.message);
    pthread_mutex_lock(&p->mu);
    int stop = rc != 0 && p->consumer_rc == 0;
    if (stop) p->consumer_rc = rc;
    p->delivered += task_delivered;
    if (c.kind == CMD_RELEASE) p->released = 1;
    p->handled++;
    pump_changed(p, stop ? 1 : 2);
    pthread_mutex_unlock(&p->mu);
    /* After the release nothing of the pump is touched: JS may free it from now on. */
    if (c.kind == CMD_RELEASE) return NULL;
  }
}

/*
 * A pump for `handler`: fills handler->producer (the spec: before any
 * callback) and starts the dispatcher. `metadata`: the producer's
 * additional_metadata (`metadata_len` bytes, copied; NULL for none). NULL
 * when out of memory, pipes or threads (JS then calls the handler itself).
 */
struct pump* pump_new(struct ArrowAsyncDeviceStreamHandler* handler, int32_t device_type, const char* metadata, int64_t metadata_len) {
  struct pump* p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->cap = 16;
  p->cmds = malloc(sizeof *p->cmds * (size_t)p->cap);
  if (metadata && metadata_len > 0) {
    p->additional_metadata = malloc((size_t)metadata_len);
    if (p->additional_metadata) memcpy(p->additional_metadata, metadata, (size_t)metadata_len);
  }
  if (!p->cmds || (metadata && metadata_len > 0 && !p->additional_metadata) || open_bell(p->bell_fd) != 0) {
    free(p->cmds);
    free(p->additional_metadata);
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->producer.device_type = device_type;
  p->producer.request = pump_request;
  p->producer.cancel = pump_cancel;
  p->producer.additional_metadata = p->additional_metadata;
  p->producer.private_data = p;
  p->handler = handler;
  p->armed = 0;
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED); /* it ends after the release; nobody joins */
  int started = pthread_create(&thread, &attr, pump_dispatch, p);
  pthread_attr_destroy(&attr);
  if (started != 0) {
    close(p->bell_fd[0]);
    close(p->bell_fd[1]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->cmds);
    free(p->additional_metadata);
    free(p);
    return NULL;
  }
  handler->producer = &p->producer;
  return p;
}

/* The read end of the pump's doorbell pipe, for JS to watch and to close. */
int32_t pump_bell_fd(struct pump* p) { return p->bell_fd[0]; }

/* A task holding the batch JS exported into `array` (moved in: `array` is marked released). NULL when out of memory (`array` untouched). */
struct pump_task* pump_task(struct pump* p, struct ArrowDeviceArray* array) {
  struct pump_task* t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->task.extract_data = pump_extract;
  t->task.private_data = task_handle(t);
  if (!t->task.private_data) {
    free(t);
    return NULL;
  }
  t->pump = p;
  t->array = *array;
  array->array.release = NULL;
  pthread_mutex_lock(&p->mu);
  p->tasks++;
  pthread_mutex_unlock(&p->mu);
  return t;
}

static char* copy_bytes(const uint8_t* b, int64_t n) {
  if (!b || n <= 0) return NULL;
  char* c = malloc((size_t)n);
  if (c) memcpy(c, b, (size_t)n);
  return c;
}

/*
 * Queues one handler call for the dispatcher. `metadata` and `message` are
 * copied (`metadata_len`, `message_len` bytes; the message with its NUL).
 * 0, or ENOMEM (nothing queued; a task stays the caller's to clean up).
 */
int32_t pump_push(struct pump* p, int32_t kind, int32_t code, void* ptr, const uint8_t* metadata, int64_t metadata_len,
                  const uint8_t* message, int64_t message_len) {
  struct command c = {.kind = kind, .code = code, .ptr = ptr};
  c.metadata = copy_bytes(metadata, metadata_len);
  c.message = copy_bytes(message, message_len);
  if ((metadata_len > 0 && !c.metadata) || (message_len > 0 && !c.message)) goto nomem;
  pthread_mutex_lock(&p->mu);
  if (p->len == p->cap) {
    int64_t cap = p->cap * 2;
    struct command* cmds = malloc(sizeof *cmds * (size_t)cap);
    if (!cmds) {
      pthread_mutex_unlock(&p->mu);
      goto nomem;
    }
    for (int64_t i = 0; i < p->len; i++) cmds[i] = p->cmds[(p->head + i) % p->cap];
    free(p->cmds);
    p->cmds = cmds;
    p->cap = cap;
    p->head = 0;
  }
  p->cmds[(p->head + p->len++) % p->cap] = c;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return 0;
nomem:
  free(c.metadata);
  free(c.message);
  return ENOMEM;
}

/*
 * The state for JS, into `out` [12]: credit, cancelled, bad_request,
 * consumer_rc, released, handled, freed arrays waiting, delivered, tasks,
 * lent, late calls, doorbells. Takes `take` credits when that many are
 * there and production may go on (returns 1 if it did). `arm` (1 or 2, see
 * pump_changed): JS waits for the doorbell next; armed under the same lock
 * as every change, so no wake-up is lost.
 */
int32_t pump_state(struct pump* p, int64_t take, int32_t arm, int64_t* out) {
  pthread_mutex_lock(&p->mu);
  int32_t took = take > 0 && p->credit >= take && !p->cancelled && !p->bad_request && !p->consumer_rc;
  if (took) p->credit -= take;
  out[0] = p->credit;
  out[1] = p->cancelled;
  out[2] = p->bad_request;
  out[3] = p->consumer_rc;
  out[4] = p->released;
  out[5] = p->handled;
  out[6] = p->freed_len;
  out[7] = p->delivered;
  out[8] = p->tasks;
  out[9] = p->lent;
  out[10] = p->late_calls;
  out[11] = p->doorbells;
  if (arm) p->armed = arm;
  pthread_mutex_unlock(&p->mu);
  return took;
}

/* Moves up to `max` given-back ArrowArrays into `out` (max * sizeof(struct ArrowArray) bytes); returns how many. */
int64_t pump_take_freed(struct pump* p, uint8_t* out, int64_t max) {
  pthread_mutex_lock(&p->mu);
  int64_t n = p->freed_len < max ? p->freed_len : max;
  memcpy(out, p->freed + (p->freed_len - n), sizeof(struct ArrowArray) * (size_t)n);
  p->freed_len -= n;
  pthread_mutex_unlock(&p->mu);
  return n;
}

int64_t pump_array_size(void) { return (int64_t)sizeof(struct ArrowArray); }

/*
 * Once the handler's release was handled, and no task and no array is out
 * (or never, for a pump whose consumer keeps them): frees the pump. The
 * read end of the pipe is JS's to close.
 */
void pump_free(struct pump* p) {
  pthread_mutex_lock(&p->mu);
  for (int64_t i = 0; i < p->len; i++) {
    free(p->cmds[(p->head + i) % p->cap].metadata);
    free(p->cmds[(p->head + i) % p->cap].message);
  }
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  close(p->bell_fd[1]);
  free(p->cmds);
  free(p->freed);
  free(p->additional_metadata);
  free(p);
}

/* Cleans up a task JS made and could not queue (its array comes back through pump_take_freed). */
int32_t pump_task_drop(struct pump_task* t) { return pump_extract(&t->task, NULL); }

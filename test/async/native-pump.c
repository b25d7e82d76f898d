/*
 * PROTOTYPE, test-only (compiled at test time, never shipped): the "small
 * native piece" of issue 13 for the producer side, to measure what it would
 * buy when we push to a native consumer's ArrowAsyncDeviceStreamHandler
 * (CDeviceDataInterface.rst, "Async Device Stream Interface").
 *
 * Without it every call the consumer makes into us from its own threads is
 * a koffi hop that waits for the JS thread (extract_data, the batch's
 * release, request), and every handler call we make is an async call on a
 * koffi worker. Here:
 * - request and cancel are C: they add credit under a mutex, and ring a
 *   doorbell (a koffi callback) only when JS waits for credit;
 * - a dispatcher thread of ours calls the handler's callbacks, in order and
 *   one at a time, from a queue JS fills with one plain call per item;
 * - extract_data is C: it moves an ArrowDeviceArray JS exported beforehand
 *   into the consumer's, with a release of ours in front of JS's: the
 *   consumer's release only queues the struct (a bitwise move, which the C
 *   data interface allows), and JS runs its own release on it later, when it
 *   drains the queue.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../include/arrow_c_abi.h"

enum { CMD_SCHEMA = 1, CMD_TASK = 2, CMD_END = 3, CMD_ERROR = 4, CMD_RELEASE = 5 };

struct pump;

/* A task handed to the consumer: the batch JS exported, moved out by extract_data. */
struct pump_task {
  struct pump* pump;
  struct ArrowDeviceArray array;
};

/* What our release in front of JS's needs to give the struct back to JS. */
struct release_record {
  struct pump* pump;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

struct command {
  int kind;
  int code;
  void* ptr;      /* the schema, the task, or the error message */
  char* metadata; /* per-task metadata (JS memory, valid until the call returned: JS waits for `done`) */
};

struct pump {
  struct ArrowAsyncProducer producer; /* first: the consumer's `self` is the pump */
  struct ArrowAsyncDeviceStreamHandler* handler;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct command* cmds;
  int64_t cap, head, len;
  /* credit and state, read by JS with pump_state */
  int64_t credit;
  int cancelled;
  int64_t bad_request; /* the first n <= 0, or 0 */
  int consumer_rc;     /* a non-zero return of on_schema / on_next_task */
  int released;        /* the handler's release was called */
  int64_t handled;     /* commands the dispatcher finished */
  /* arrays the consumer released, for JS to release (ArrowArray bitwise moved here) */
  struct ArrowArray* freed;
  int64_t freed_cap, freed_len;
  int armed; /* JS waits for a change: 0 no, 1 for credit, 2 for anything (see arm_off) */
  void (*doorbell)(struct pump*);
  int64_t doorbells;
};

/*
 * Under the mutex: wake JS if it waits for this kind of change (1: credit, cancel, a bad request, a
 * consumer's non-zero return; 2: also a handled call or an array given back, which only a JS waiting for
 * the end needs). Returns the doorbell to ring after unlocking, or NULL.
 */
static void (*arm_off(struct pump* p, int level))(struct pump*) {
  if (p->armed < level) return NULL;
  p->armed = 0;
  p->doorbells++;
  return p->doorbell;
}

static void pump_request(struct ArrowAsyncProducer* self, int64_t n) {
  struct pump* p = (struct pump*)self;
  pthread_mutex_lock(&p->mu);
  if (!p->cancelled) {
    if (n <= 0) {
      if (!p->bad_request) p->bad_request = n == 0 ? INT64_MIN : n; /* reported through on_error by JS, never from here */
    } else {
      p->credit += n;
    }
  }
  void (*bell)(struct pump*) = arm_off(p, 1);
  pthread_mutex_unlock(&p->mu);
  if (bell) bell(p);
}

static void pump_cancel(struct ArrowAsyncProducer* self) {
  struct pump* p = (struct pump*)self;
  pthread_mutex_lock(&p->mu);
  p->cancelled = 1;
  void (*bell)(struct pump*) = arm_off(p, 1);
  pthread_mutex_unlock(&p->mu);
  if (bell) bell(p);
}

/* Queues a released struct for JS: nothing of JS runs on the consumer's thread. */
static void give_back(struct pump* p, struct ArrowArray* a) {
  pthread_mutex_lock(&p->mu);
  if (p->freed_len == p->freed_cap) {
    p->freed_cap = p->freed_cap ? p->freed_cap * 2 : 16;
    p->freed = realloc(p->freed, sizeof *p->freed * (size_t)p->freed_cap);
  }
  p->freed[p->freed_len++] = *a;
  void (*bell)(struct pump*) = arm_off(p, 2);
  pthread_mutex_unlock(&p->mu);
  if (bell) bell(p);
}

static void deferred_release(struct ArrowArray* a) {
  struct release_record* r = a->private_data;
  struct pump* p = r->pump;
  a->release = r->release;
  a->private_data = r->private_data;
  free(r);
  give_back(p, a);
  a->release = NULL; /* released, for the consumer: the struct is ours again */
}

static int pump_extract(struct ArrowAsyncTask* task, struct ArrowDeviceArray* out) {
  struct pump_task* t = task->private_data;
  if (!t) return EINVAL;
  task->private_data = NULL;
  if (!out) {
    give_back(t->pump, &t->array.array); /* not wanted: JS releases it */
  } else {
    *out = t->array; /* move */
    struct release_record* r = malloc(sizeof *r);
    r->pump = t->pump;
    r->release = out->array.release;
    r->private_data = out->array.private_data;
    out->array.release = deferred_release;
    out->array.private_data = r;
  }
  free(t);
  return 0;
}

static void* dispatcher(void* arg) {
  struct pump* p = arg;
  struct ArrowAsyncDeviceStreamHandler* h = p->handler;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (p->len == 0) pthread_cond_wait(&p->cv, &p->mu);
    struct command c = p->cmds[p->head];
    p->head = (p->head + 1) % p->cap;
    p->len--;
    int stopped = p->consumer_rc != 0;
    pthread_mutex_unlock(&p->mu);
    int rc = 0;
    if (stopped && c.kind != CMD_RELEASE) {
      /* The consumer returned non-zero: nothing but release may reach it; queued tasks are cleaned up. */
      if (c.kind == CMD_TASK) {
        struct ArrowAsyncTask task = {.extract_data = pump_extract, .private_data = c.ptr};
        pump_extract(&task, NULL);
      }
    } else if (c.kind == CMD_SCHEMA) {
      rc = h->on_schema(h, c.ptr);
    } else if (c.kind == CMD_TASK) {
      struct ArrowAsyncTask task = {.extract_data = pump_extract, .private_data = c.ptr};
      rc = h->on_next_task(h, &task, c.metadata);
      if (rc != 0 && task.private_data) pump_extract(&task, NULL); /* never extracted: clean up */
    } else if (c.kind == CMD_END) {
      rc = h->on_next_task(h, NULL, NULL);
    } else if (c.kind == CMD_ERROR) {
      h->on_error(h, c.code, c.ptr, c.metadata);
    } else if (c.kind == CMD_RELEASE) {
      h->release(h);
    }
    pthread_mutex_lock(&p->mu);
    int stop = rc != 0 && !p->consumer_rc;
    if (stop) p->consumer_rc = rc;
    if (c.kind == CMD_RELEASE) p->released = 1;
    p->handled++;
    void (*bell)(struct pump*) = arm_off(p, stop ? 1 : 2);
    pthread_mutex_unlock(&p->mu);
    if (bell) bell(p);
    if (c.kind == CMD_RELEASE) return NULL;
  }
}

/* Fills handler->producer and starts the dispatcher. */
struct pump* pump_new(struct ArrowAsyncDeviceStreamHandler* handler, void (*doorbell)(struct pump*), int32_t device_type,
                      const char* additional_metadata) {
  struct pump* p = calloc(1, sizeof *p);
  p->producer.device_type = device_type;
  p->producer.request = pump_request;
  p->producer.cancel = pump_cancel;
  p->producer.additional_metadata = additional_metadata;
  p->producer.private_data = p;
  p->handler = handler;
  p->doorbell = doorbell;
  p->cap = 64;
  p->cmds = malloc(sizeof *p->cmds * (size_t)p->cap);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  handler->producer = &p->producer;
  pthread_create(&p->thread, NULL, dispatcher, p);
  return p;
}

/* A task holding the batch JS exported into `array` (moved in: the caller's struct is marked released). */
struct pump_task* pump_task(struct pump* p, struct ArrowDeviceArray* array) {
  struct pump_task* t = malloc(sizeof *t);
  t->pump = p;
  t->array = *array;
  array->array.release = NULL;
  return t;
}

/* Queues one handler call for the dispatcher. */
void pump_push(struct pump* p, int32_t kind, int32_t code, void* ptr, char* metadata) {
  pthread_mutex_lock(&p->mu);
  if (p->len == p->cap) {
    int64_t cap = p->cap * 2;
    struct command* c = malloc(sizeof *c * (size_t)cap);
    for (int64_t i = 0; i < p->len; i++) c[i] = p->cmds[(p->head + i) % p->cap];
    free(p->cmds);
    p->cmds = c;
    p->cap = cap;
    p->head = 0;
  }
  p->cmds[(p->head + p->len++) % p->cap] = (struct command){.kind = kind, .code = code, .ptr = ptr, .metadata = metadata};
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/*
 * The state for JS: [credit, cancelled, bad_request, consumer_rc, released, handled, freed].
 * Takes `take` credits if that many are there (returns whether it did). `arm` (1 or 2, see arm_off): JS
 * waits for the doorbell next; arming under the same lock as every change, no wake-up is lost.
 */
int32_t pump_state(struct pump* p, int64_t take, int32_t arm, int64_t* out /* [7] */) {
  pthread_mutex_lock(&p->mu);
  int32_t took = take > 0 && p->credit >= take && !p->cancelled;
  if (took) p->credit -= take;
  out[0] = p->credit;
  out[1] = p->cancelled;
  out[2] = p->bad_request;
  out[3] = p->consumer_rc;
  out[4] = p->released;
  out[5] = p->handled;
  out[6] = p->freed_len;
  if (arm) p->armed = arm;
  pthread_mutex_unlock(&p->mu);
  return took;
}

/* Moves up to `max` released ArrowArrays into `out` (JS-allocated, max * sizeof(struct ArrowArray)); returns how many. */
int64_t pump_take_freed(struct pump* p, struct ArrowArray* out, int64_t max) {
  pthread_mutex_lock(&p->mu);
  int64_t n = p->freed_len < max ? p->freed_len : max;
  memcpy(out, p->freed + (p->freed_len - n), sizeof *out * (size_t)n);
  p->freed_len -= n;
  pthread_mutex_unlock(&p->mu);
  return n;
}

int64_t pump_array_size(void) { return sizeof(struct ArrowArray); }

int64_t pump_doorbells(struct pump* p) {
  pthread_mutex_lock(&p->mu);
  int64_t n = p->doorbells;
  pthread_mutex_unlock(&p->mu);
  return n;
}

/* After the release was handled and every array given back: joins the dispatcher, frees the pump. */
void pump_free(struct pump* p) {
  pthread_join(p->thread, NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->cmds);
  free(p->freed);
  free(p);
}

/*
 * PROTOTYPE, test-only (compiled at test time, never shipped): the "small
 * native piece" issue 13 allows for the async consumer, to measure what it
 * would buy. It is an ArrowAsyncDeviceStreamHandler
 * (CDeviceDataInterface.rst, "Async Device Stream Interface") whose
 * on_next_task, on_error and release never wait for the JS thread: they
 * move the call's contents into a ring (the task, copies of the metadata
 * and message, which are valid only during the call) and return. JS drains
 * the ring with one plain call per burst (ring_take) and is woken by a
 * "doorbell" only when it has found the ring empty and is waiting: one
 * koffi hop per burst instead of one per batch. on_schema, once per
 * stream, still goes to JS and waits for its answer (a non-zero return must
 * reach the producer).
 *
 * The handler callbacks are serialized by the producer (the spec); the
 * mutex guards the ring against ring_take on the JS thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../include/arrow_c_abi.h"

enum { EV_TASK = 1, EV_END = 2, EV_ERROR = 3, EV_RELEASE = 4 };

/* One handler call, as JS reads it: 40 bytes (ring_event_size). */
struct ring_event {
  int32_t kind;
  int32_t code;                /* on_error's code; for a task, -1 when its metadata was malformed */
  struct ArrowAsyncTask task;  /* moved out of on_next_task (valid only during the call) */
  char* metadata;              /* a copy (ring_free_copy), or NULL */
  char* message;               /* on_error's message, a copy, or NULL */
};

struct ring {
  struct ArrowAsyncDeviceStreamHandler handler; /* first: the handler's address is the ring's */
  pthread_mutex_t mu;
  struct ring_event* ev;
  int64_t cap, head, len;
  int armed; /* JS found the ring empty and waits for the doorbell */
  void (*doorbell)(struct ring* self);
  int (*js_on_schema)(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowSchema* schema);
  int64_t doorbells; /* for the benchmark: hops made */
};

/* A copy of ArrowSchema.metadata-encoded bytes (int32 count, then int32 length + bytes per key and value). */
static char* copy_metadata(const char* md, int* malformed) {
  *malformed = 0;
  if (!md) return NULL;
  const int64_t cap = 1 << 20; /* as the JS reader: metadata is capped */
  int32_t n;
  memcpy(&n, md, 4);
  int64_t pos = 4;
  if (n < 0 || n > 10000) goto bad;
  for (int32_t i = 0; i < 2 * n; i++) {
    int32_t len;
    if (pos + 4 > cap) goto bad;
    memcpy(&len, md + pos, 4);
    if (len < 0 || pos + 4 + len > cap) goto bad;
    pos += 4 + len;
  }
  char* out = malloc((size_t)pos);
  if (out) memcpy(out, md, (size_t)pos);
  return out;
bad:
  *malformed = 1;
  return NULL;
}

static void push(struct ring* r, struct ring_event e) {
  pthread_mutex_lock(&r->mu);
  if (r->len == r->cap) {
    /* More than requested (a producer ignoring back-pressure): grow rather than lose a call. */
    int64_t cap = r->cap * 2;
    struct ring_event* ev = malloc(sizeof *ev * (size_t)cap);
    for (int64_t i = 0; i < r->len; i++) ev[i] = r->ev[(r->head + i) % r->cap];
    free(r->ev);
    r->ev = ev;
    r->cap = cap;
    r->head = 0;
  }
  r->ev[(r->head + r->len++) % r->cap] = e;
  int bell = r->armed;
  void (*doorbell)(struct ring*) = r->doorbell;
  r->armed = 0;
  if (bell) r->doorbells++;
  pthread_mutex_unlock(&r->mu);
  /* Nothing of the ring is touched after the unlock: JS may have taken the release and freed it.
     A koffi callback from this (the producer's) thread: it waits until JS has run it, once per burst;
     JS looks the ring up by address, so a bell for a freed ring rings nothing. */
  if (bell) doorbell(r);
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
    int malformed;
    e.kind = EV_TASK;
    e.task = *task; /* move: the task is valid only during this call */
    e.metadata = copy_metadata(metadata, &malformed);
    e.code = malformed ? -1 : 0;
  }
  push((struct ring*)self, e);
  return 0;
}

static void ring_on_error(struct ArrowAsyncDeviceStreamHandler* self, int code, const char* message, const char* metadata) {
  int malformed;
  struct ring_event e = {.kind = EV_ERROR, .code = code, .metadata = copy_metadata(metadata, &malformed)};
  if (message) {
    size_t n = strnlen(message, 1 << 16);
    e.message = malloc(n + 1);
    if (e.message) {
      memcpy(e.message, message, n);
      e.message[n] = 0;
    }
  }
  push((struct ring*)self, e);
}

static void ring_release(struct ArrowAsyncDeviceStreamHandler* self) {
  struct ring_event e = {.kind = EV_RELEASE};
  push((struct ring*)self, e);
}

/* A handler whose private_data is `private_data`; `doorbell` and `js_on_schema` are JS callbacks. */
struct ring* ring_new(void (*doorbell)(struct ring*), int (*js_on_schema)(struct ArrowAsyncDeviceStreamHandler*, struct ArrowSchema*),
                      void* private_data, int64_t capacity) {
  struct ring* r = calloc(1, sizeof *r);
  r->handler.on_schema = ring_on_schema;
  r->handler.on_next_task = ring_on_next_task;
  r->handler.on_error = ring_on_error;
  r->handler.release = ring_release;
  r->handler.private_data = private_data;
  r->cap = capacity > 4 ? capacity : 4;
  r->ev = malloc(sizeof *r->ev * (size_t)r->cap);
  r->doorbell = doorbell;
  r->js_on_schema = js_on_schema;
  pthread_mutex_init(&r->mu, NULL);
  return r;
}

/*
 * Moves up to `max` events into `out` (JS memory, max * 40 bytes) and
 * returns how many. Finding the ring empty arms the doorbell, under the
 * same lock as the producer's push, so no wake-up is lost.
 */
int64_t ring_take(struct ring* r, uint8_t* out, int64_t max) {
  pthread_mutex_lock(&r->mu);
  int64_t n = r->len < max ? r->len : max;
  for (int64_t i = 0; i < n; i++) memcpy(out + i * sizeof(struct ring_event), &r->ev[(r->head + i) % r->cap], sizeof(struct ring_event));
  r->head = (r->head + n) % r->cap;
  r->len -= n;
  /* Only a take that found nothing arms the doorbell: JS waits for it next. A take that found events
     comes back by itself once they are handled, so pushes meanwhile need no hop. */
  if (n == 0) r->armed = 1;
  pthread_mutex_unlock(&r->mu);
  return n;
}

int64_t ring_doorbells(struct ring* r) {
  pthread_mutex_lock(&r->mu);
  int64_t n = r->doorbells;
  pthread_mutex_unlock(&r->mu);
  return n;
}

int64_t ring_event_size(void) { return sizeof(struct ring_event); }

void ring_free_copy(char* p) { free(p); }

/* After JS drained the release: nothing calls the handler any more. */
void ring_free(struct ring* r) {
  pthread_mutex_lock(&r->mu);
  for (int64_t i = 0; i < r->len; i++) {
    free(r->ev[(r->head + i) % r->cap].metadata);
    free(r->ev[(r->head + i) % r->cap].message);
  }
  pthread_mutex_unlock(&r->mu);
  pthread_mutex_destroy(&r->mu);
  free(r->ev);
  free(r);
}

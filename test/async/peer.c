/*
 * A C test peer for the async device stream interface
 * (CDeviceDataInterface.rst, "Async Device Stream Interface"), with real
 * threads: a producer that pushes batches from its own pthread, and a
 * consumer whose handler callbacks hand tasks to a worker thread that
 * extracts them and calls request() from that thread. Written here from the
 * spec; it covers what no other peer does (a producer thread we control,
 * errors and cancellation at chosen points), beside Arrow C++, not instead.
 *
 * Batches are struct<x: int32> on the CPU; batch b has `rows` rows with
 * x = b * rows + i, so a consumer can check every value by its sum.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../include/arrow_c_abi.h"

/* ---------------------------------------------------------------- schema */

static void release_child_schema(struct ArrowSchema* s) { s->release = NULL; }

static void release_schema(struct ArrowSchema* s) {
  struct ArrowSchema** children = s->children;
  if (children[0]->release) children[0]->release(children[0]);
  free(children[0]);
  free(children);
  s->release = NULL;
}

static void make_schema(struct ArrowSchema* out) {
  struct ArrowSchema* child = calloc(1, sizeof *child);
  child->format = "i";
  child->name = "x";
  child->flags = 2; /* nullable */
  child->release = release_child_schema;
  struct ArrowSchema** children = calloc(1, sizeof *children);
  children[0] = child;
  memset(out, 0, sizeof *out);
  out->format = "+s";
  out->name = "";
  out->n_children = 1;
  out->children = children;
  out->release = release_schema;
}

/* ---------------------------------------------------------------- arrays */

struct batch_data {
  int32_t* values;
  const void* child_buffers[2];
  const void* parent_buffers[1];
  struct ArrowArray child;
  struct ArrowArray* children[1];
};

static int64_t live_batches = 0; /* batches made and not released yet (atomically updated) */

static void release_child_array(struct ArrowArray* a) { a->release = NULL; }

static void release_batch(struct ArrowArray* a) {
  struct batch_data* d = a->private_data;
  if (d->child.release) d->child.release(&d->child);
  free(d->values);
  free(d);
  a->release = NULL;
  __atomic_sub_fetch(&live_batches, 1, __ATOMIC_SEQ_CST);
}

static void make_batch(struct ArrowDeviceArray* out, int64_t b, int64_t rows) {
  struct batch_data* d = calloc(1, sizeof *d);
  d->values = malloc(sizeof(int32_t) * (rows > 0 ? rows : 1));
  for (int64_t i = 0; i < rows; i++) d->values[i] = (int32_t)(b * rows + i);
  d->child_buffers[0] = NULL;
  d->child_buffers[1] = d->values;
  d->child = (struct ArrowArray){.length = rows, .n_buffers = 2, .buffers = d->child_buffers, .release = release_child_array};
  d->children[0] = &d->child;
  d->parent_buffers[0] = NULL;
  memset(out, 0, sizeof *out);
  out->array = (struct ArrowArray){
      .length = rows, .n_buffers = 1, .n_children = 1, .buffers = d->parent_buffers,
      .children = d->children, .release = release_batch, .private_data = d};
  out->device_id = -1;
  out->device_type = ARROW_DEVICE_CPU;
  __atomic_add_fetch(&live_batches, 1, __ATOMIC_SEQ_CST);
}

int64_t peer_live_batches(void) { return __atomic_load_n(&live_batches, __ATOMIC_SEQ_CST); }

/* -------------------------------------------------------------- producer */

/* What the peer producer was asked to do, and what it saw. */
struct producer {
  struct ArrowAsyncProducer self;
  struct ArrowAsyncDeviceStreamHandler* handler;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t n_batches, rows;
  int64_t error_at;     /* call on_error instead of batch error_at (-1: never) */
  int64_t credit;       /* requested and not produced yet */
  int cancelled;
  int bad_request;      /* request(n <= 0) seen */
  /* observations, for the tests */
  int64_t produced, extracted, extracted_null, requests, max_credit;
  int schema_rc, next_rc, finished;
  /* The spec lets a producer free its ArrowAsyncProducer once it has called the handler's release: this
     one keeps it, and counts the consumer's request and cancel calls that come after (a bug). */
  int released;
  int64_t calls_after_release;
  int go; /* error_at -4: the end waits for peer_go */
  char metadata[64];
};

static void producer_request(struct ArrowAsyncProducer* self, int64_t n) {
  struct producer* p = self->private_data;
  pthread_mutex_lock(&p->mu);
  if (p->released) {
    p->calls_after_release++;
    pthread_mutex_unlock(&p->mu);
    return;
  }
  p->requests++;
  if (!p->cancelled) {
    if (n <= 0) p->bad_request = 1; /* reported through on_error by the producer thread, never from here */
    else p->credit += n;
    if (p->credit > p->max_credit) p->max_credit = p->credit;
  }
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static void producer_cancel(struct ArrowAsyncProducer* self) {
  struct producer* p = self->private_data;
  pthread_mutex_lock(&p->mu);
  if (p->released) {
    p->calls_after_release++;
    pthread_mutex_unlock(&p->mu);
    return;
  }
  p->cancelled = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

struct task_data {
  struct producer* p;
  int64_t b;
};

static int task_extract(struct ArrowAsyncTask* self, struct ArrowDeviceArray* out) {
  struct task_data* t = self->private_data;
  pthread_mutex_lock(&t->p->mu);
  if (out) t->p->extracted++;
  else t->p->extracted_null++;
  pthread_mutex_unlock(&t->p->mu);
  if (out) make_batch(out, t->b, t->p->rows);
  free(t);
  self->private_data = NULL;
  return 0;
}

static const char* batch_metadata(char* buf, int64_t b) {
  /* One key-value pair in ArrowSchema.metadata encoding: "batch" -> decimal b. */
  char value[24];
  int vlen = 0;
  int64_t x = b;
  char tmp[24];
  do { tmp[vlen++] = (char)('0' + x % 10); x /= 10; } while (x > 0);
  for (int i = 0; i < vlen; i++) value[i] = tmp[vlen - 1 - i];
  int32_t count = 1, klen = 5;
  int32_t vl = vlen;
  memcpy(buf, &count, 4);
  memcpy(buf + 4, &klen, 4);
  memcpy(buf + 8, "batch", 5);
  memcpy(buf + 13, &vl, 4);
  memcpy(buf + 17, value, (size_t)vlen);
  return buf;
}

static void* producer_main(void* arg) {
  struct producer* p = arg;
  struct ArrowAsyncDeviceStreamHandler* h = p->handler;
  h->producer = &p->self;
  if (p->error_at == -2) {
    /* an error before the schema: on_error, then release */
    h->on_error(h, EIO, "producer failed before the schema", NULL);
    goto done;
  }
  struct ArrowSchema schema;
  make_schema(&schema);
  p->schema_rc = h->on_schema(h, &schema);
  if (schema.release) schema.release(&schema); /* the consumer should have moved it */
  if (p->schema_rc != 0) goto done;            /* no on_error after a non-zero return */
  for (int64_t b = 0; b <= p->n_batches; b++) {
    pthread_mutex_lock(&p->mu);
    while (p->credit == 0 && !p->cancelled && !p->bad_request) pthread_cond_wait(&p->cv, &p->mu);
    int cancelled = p->cancelled, bad = p->bad_request;
    if (!cancelled && !bad) p->credit--;
    pthread_mutex_unlock(&p->mu);
    if (bad) {
      h->on_error(h, EINVAL, "request: n must be > 0", NULL);
      goto done;
    }
    if (cancelled) break; /* a successful cancel: no on_error, just release */
    if (b == p->error_at) {
      char md[32];
      h->on_error(h, EIO, "producer failed on purpose", batch_metadata(md, b));
      goto done;
    }
    if (b == p->n_batches) {
      if (p->error_at == -4) {
        pthread_mutex_lock(&p->mu);
        while (!p->go) pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
      }
      p->next_rc = h->on_next_task(h, NULL, NULL); /* end of stream */
      break;
    }
    struct ArrowAsyncTask task = {.extract_data = task_extract};
    struct task_data* t = malloc(sizeof *t);
    t->p = p;
    t->b = b;
    task.private_data = t;
    char md[32];
    /* error_at -3: every task's metadata pointer is one no consumer may read (below 64 KiB). */
    p->next_rc = h->on_next_task(h, &task, p->error_at == -3 ? (const char*)0x10 : batch_metadata(md, b));
    pthread_mutex_lock(&p->mu);
    p->produced++;
    pthread_mutex_unlock(&p->mu);
    if (p->next_rc != 0) {
      if (task.private_data) free(task.private_data); /* never extracted */
      break;                                         /* no on_error after a non-zero return */
    }
  }
done:
  h->release(h);
  pthread_mutex_lock(&p->mu);
  p->released = 1;
  p->finished = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/*
 * Starts a producer thread pushing `n_batches` batches of `rows` rows to
 * `handler`. error_at: -1 never; -2 before the schema; k >= 0 instead of batch k; -3 never, but
 * every task's metadata pointer is invalid (0x10); -4 never, but the end waits for peer_go.
 */
void peer_go(void* handle) {
  struct producer* p = handle;
  pthread_mutex_lock(&p->mu);
  p->go = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* Whether the producer has called the handler's release (a plain call: it never waits). */
int peer_released(void* handle) {
  struct producer* p = handle;
  pthread_mutex_lock(&p->mu);
  int r = p->released;
  pthread_mutex_unlock(&p->mu);
  return r;
}

/* How many tasks the producer has pushed so far (a plain call: it never waits). */
int64_t peer_produced(void* handle) {
  struct producer* p = handle;
  pthread_mutex_lock(&p->mu);
  int64_t n = p->produced;
  pthread_mutex_unlock(&p->mu);
  return n;
}

/*
 * (peer_produce's error_at, above.)
 */
void* peer_produce(struct ArrowAsyncDeviceStreamHandler* handler, int64_t n_batches, int64_t rows, int64_t error_at) {
  struct producer* p = calloc(1, sizeof *p);
  p->self.device_type = ARROW_DEVICE_CPU;
  p->self.request = producer_request;
  p->self.cancel = producer_cancel;
  /* additional_metadata: {"rows": "<n_batches * rows>"}; valid for the producer's lifetime */
  int64_t total = n_batches * rows;
  char value[24];
  int vlen = 0;
  do { value[vlen++] = (char)('0' + total % 10); total /= 10; } while (total > 0);
  for (int i = 0; i < vlen / 2; i++) { char c = value[i]; value[i] = value[vlen - 1 - i]; value[vlen - 1 - i] = c; }
  int32_t count = 1, klen = 4, vl = vlen;
  memcpy(p->metadata, &count, 4);
  memcpy(p->metadata + 4, &klen, 4);
  memcpy(p->metadata + 8, "rows", 4);
  memcpy(p->metadata + 12, &vl, 4);
  memcpy(p->metadata + 16, value, (size_t)vlen);
  p->self.additional_metadata = p->metadata;
  p->self.private_data = p;
  p->handler = handler;
  p->n_batches = n_batches;
  p->rows = rows;
  p->error_at = error_at;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if (pthread_create(&p->thread, NULL, producer_main, p) != 0) {
    free(p);
    return NULL;
  }
  return p;
}

/* Joins the producer thread (call it with koffi's async form) and fills stats; frees the producer. */
void peer_produce_wait(void* handle, int64_t* stats /* [9] */) {
  struct producer* p = handle;
  pthread_join(p->thread, NULL);
  stats[0] = p->produced;
  stats[1] = p->extracted;
  stats[2] = p->extracted_null;
  stats[3] = p->requests;
  stats[4] = p->max_credit;
  stats[5] = p->cancelled;
  stats[6] = p->schema_rc;
  stats[8] = p->calls_after_release;
  stats[7] = p->next_rc;
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p);
}

/* -------------------------------------------------------------- consumer */

/*
 * A consumer with a worker thread: on_next_task moves the task into a queue;
 * the worker extracts each task, checks and sums the batch, releases it and
 * calls request(1) from its own thread. cancel_after >= 0: cancel after
 * that many batches and extract what still arrives with a NULL out.
 * fail_at >= 0: on_next_task extracts that task with a NULL out and returns
 * EIO. hold: the worker keeps every batch it extracted and releases them
 * all only after the handler's release (a consumer that builds a table from
 * the stream). Each task's metadata, when there is one, holds one pair
 * whose value is a decimal number: they are counted and summed.
 * misbehave (bits, breaking the spec on purpose): 1 extracts every task
 * again through the same struct and through a copy made before the first
 * extraction (both must fail, with nothing moved); 2 calls request and
 * cancel after the handler's release (from peer_consumer_wait's thread).
 */
struct consumer {
  struct ArrowAsyncDeviceStreamHandler handler;
  pthread_t worker;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct ArrowAsyncTask queue[64];
  int qhead, qlen;
  int end_of_stream, released, cancel_sent;
  int in_producer_call; /* the worker is inside request/cancel: release waits for it */
  int64_t cancel_after, initial_request;
  int request_zero; /* send request(0) once, to test the producer's on_error(EINVAL) */
  pthread_t creator; /* the thread that made the consumer (the JS thread): which thread calls the handler? */
  /* observations */
  int64_t batches, rows, bad_values, extracted_null, errors, error_code, schema_children, device_mismatch;
  int64_t calls_on_creator; /* handler callbacks made on the creating thread (the producer's async form: none) */
  int64_t fail_at, tasks_seen, md_count, md_sum;
  int hold, waited, refused, misbehave;
  int64_t bad_extracts_refused; /* extra extract_data calls that returned non-zero and moved nothing */
  int64_t calls_after_refusal;
  struct ArrowDeviceArray* held;
  int64_t held_len, held_cap;
  int64_t sum;
  char schema_format[16], error_message[128], additional_metadata[64];
};

static void note_thread(struct consumer* c) {
  if (pthread_equal(pthread_self(), c->creator)) __atomic_add_fetch(&c->calls_on_creator, 1, __ATOMIC_SEQ_CST);
}

static int consumer_on_schema(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowSchema* schema) {
  struct consumer* c = self->private_data;
  note_thread(c);
  strncpy(c->schema_format, schema->format ? schema->format : "(null)", sizeof c->schema_format - 1);
  c->schema_children = schema->n_children;
  const char* md = self->producer->additional_metadata;
  if (md) memcpy(c->additional_metadata, md, sizeof c->additional_metadata);
  schema->release(schema); /* we do not need it after checking it */
  if (c->request_zero) self->producer->request(self->producer, 0);
  else self->producer->request(self->producer, c->initial_request);
  return 0;
}

static int consumer_on_next_task(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowAsyncTask* task, const char* md) {
  struct consumer* c = self->private_data;
  note_thread(c);
  if (task && md) {
    /* int32 pairs, then the key's length and bytes, then the value's (CDataInterface.rst, metadata) */
    int32_t n, klen, vlen;
    memcpy(&n, md, 4);
    memcpy(&klen, md + 4, 4);
    memcpy(&vlen, md + 8 + klen, 4);
    char v[24] = {0};
    memcpy(v, md + 12 + klen, vlen < 23 ? vlen : 23);
    if (n == 1) {
      c->md_count++;
      c->md_sum += strtoll(v, NULL, 10);
    }
  }
  if (c->refused) c->calls_after_refusal++; /* the producer must stop at a non-zero return */
  if (task && c->tasks_seen++ == c->fail_at) {
    task->extract_data(task, NULL); /* not taken: the producer cleans up */
    /* Slow to answer: a producer that runs ahead has queued more tasks by now, which must not come. */
    struct timespec ms20 = {0, 20 * 1000 * 1000};
    nanosleep(&ms20, NULL);
    c->refused = 1;
    return EIO;
  }
  pthread_mutex_lock(&c->mu);
  if (!task) c->end_of_stream = 1;
  else if (c->qlen < 64) c->queue[(c->qhead + c->qlen++) % 64] = *task; /* move: the task is valid only during this call */
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return 0;
}

static void consumer_on_error(struct ArrowAsyncDeviceStreamHandler* self, int code, const char* message, const char* md) {
  (void)md;
  struct consumer* c = self->private_data;
  note_thread(c);
  pthread_mutex_lock(&c->mu);
  c->errors++;
  c->error_code = code;
  if (message) strncpy(c->error_message, message, sizeof c->error_message - 1);
  pthread_mutex_unlock(&c->mu);
}

static void consumer_release(struct ArrowAsyncDeviceStreamHandler* self) {
  struct consumer* c = self->private_data;
  note_thread(c);
  pthread_mutex_lock(&c->mu);
  c->released++;
  /* The producer may free its ArrowAsyncProducer once this returns: no call of ours may still be in it. */
  while (c->in_producer_call) pthread_cond_wait(&c->cv, &c->mu);
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void* consumer_main(void* arg) {
  struct consumer* c = arg;
  for (;;) {
    pthread_mutex_lock(&c->mu);
    while (c->qlen == 0 && !c->released) pthread_cond_wait(&c->cv, &c->mu);
    if (c->qlen == 0 && c->released) {
      pthread_mutex_unlock(&c->mu);
      break;
    }
    struct ArrowAsyncTask task = c->queue[c->qhead];
    c->qhead = (c->qhead + 1) % 64;
    c->qlen--;
    int cancelled = c->cancel_sent;
    pthread_mutex_unlock(&c->mu);
    if (cancelled) {
      task.extract_data(&task, NULL); /* let the producer clean up */
      pthread_mutex_lock(&c->mu);
      c->extracted_null++;
      pthread_mutex_unlock(&c->mu);
      continue;
    }
    struct ArrowDeviceArray out;
    memset(&out, 0, sizeof out);
    struct ArrowAsyncTask copy = task;
    if (task.extract_data(&task, &out) != 0 || !out.array.release) continue;
    if (c->misbehave & 1) {
      for (int k = 0; k < 2; k++) {
        struct ArrowAsyncTask* again = k == 0 ? &task : &copy;
        struct ArrowDeviceArray twice;
        memset(&twice, 0, sizeof twice);
        if (again->extract_data(again, &twice) != 0 && !twice.array.release) c->bad_extracts_refused++;
        else if (twice.array.release) twice.array.release(&twice.array); /* moved twice: a producer's bug */
      }
    }
    if (out.device_type != ARROW_DEVICE_CPU) c->device_mismatch++;
    struct ArrowArray* a = &out.array;
    int64_t n = a->length;
    if (a->n_children == 1 && a->children[0]->n_buffers == 2) {
      struct ArrowArray* x = a->children[0];
      const int32_t* v = x->buffers[1];
      const uint8_t* valid = x->buffers[0];
      for (int64_t i = 0; i < n; i++) {
        int64_t k = i + x->offset + a->offset;
        if (valid && !(valid[k >> 3] & (1 << (k & 7)))) continue;
        c->sum += v[k];
      }
    } else {
      c->bad_values++;
    }
    if (c->hold) {
      if (c->held_len == c->held_cap) {
        c->held_cap = c->held_cap ? 2 * c->held_cap : 16;
        c->held = realloc(c->held, sizeof *c->held * (size_t)c->held_cap);
      }
      c->held[c->held_len++] = out; /* moved */
    } else {
      a->release(a);
    }
    pthread_mutex_lock(&c->mu);
    c->batches++;
    c->rows += n;
    int do_cancel = c->cancel_after >= 0 && c->batches >= c->cancel_after && !c->cancel_sent;
    if (do_cancel) c->cancel_sent = 1;
    /* After release the producer is gone: call nothing of it (the spec's ArrowAsyncProducer lifetime). */
    int call = !c->released;
    if (call) c->in_producer_call = 1;
    pthread_mutex_unlock(&c->mu);
    if (call) {
      if (do_cancel) c->handler.producer->cancel(c->handler.producer);
      else c->handler.producer->request(c->handler.producer, 1); /* from this thread, not the producer's */
      pthread_mutex_lock(&c->mu);
      c->in_producer_call = 0;
      pthread_cond_broadcast(&c->cv);
      pthread_mutex_unlock(&c->mu);
    }
  }
  /* After the handler's release, once peer_consumer_wait asks: the batches held go now, from this
     thread (the producer, whose stream is over, must still take them back). */
  pthread_mutex_lock(&c->mu);
  while (c->hold && !c->waited) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  for (int64_t i = 0; i < c->held_len; i++) c->held[i].array.release(&c->held[i].array);
  free(c->held);
  return NULL;
}

/* A handler for a producer to push to. Returns the handler's address; the consumer is behind it. */
struct ArrowAsyncDeviceStreamHandler* peer_consumer(int64_t initial_request, int64_t cancel_after, int request_zero, int64_t fail_at,
                                                    int hold, int misbehave) {
  struct consumer* c = calloc(1, sizeof *c);
  c->misbehave = misbehave;
  c->fail_at = fail_at;
  c->hold = hold;
  c->handler.on_schema = consumer_on_schema;
  c->handler.on_next_task = consumer_on_next_task;
  c->handler.on_error = consumer_on_error;
  c->handler.release = consumer_release;
  c->handler.private_data = c;
  c->initial_request = initial_request > 0 ? initial_request : 1;
  c->cancel_after = cancel_after;
  c->request_zero = request_zero;
  c->creator = pthread_self();
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  pthread_create(&c->worker, NULL, consumer_main, c);
  return &c->handler;
}

/*
 * Waits until the handler was released (call with koffi's async form) and the
 * worker finished; fills stats and frees the consumer. timeout_ms: give up
 * (stats[0] = -1) rather than hang a test forever.
 */
void peer_consumer_wait(struct ArrowAsyncDeviceStreamHandler* handler, int64_t timeout_ms, int64_t* stats /* [15] */,
                        char* message /* [128] */, char* schema_format /* [16] */, char* additional_metadata /* [64] */) {
  struct consumer* c = handler->private_data;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (timeout_ms % 1000) * 1000000;
  if (deadline.tv_nsec >= 1000000000) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000; }
  pthread_mutex_lock(&c->mu);
  int timed_out = 0;
  while (!c->released && !timed_out) timed_out = pthread_cond_timedwait(&c->cv, &c->mu, &deadline) != 0;
  c->waited = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (!timed_out && (c->misbehave & 2)) {
    /* After the release: the producer may have freed its ArrowAsyncProducer by the spec; ours (JS and the
       pump) keep it a grace period and ignore such calls, as Arrow C++'s consumer makes them. */
    c->handler.producer->request(c->handler.producer, 1);
    c->handler.producer->cancel(c->handler.producer);
  }
  if (timed_out) {
    stats[0] = -1;
    return; /* leak the consumer rather than free what a producer may still call */
  }
  pthread_join(c->worker, NULL);
  stats[0] = c->batches;
  stats[1] = c->rows;
  stats[2] = c->sum;
  stats[3] = c->errors;
  stats[4] = c->error_code;
  stats[5] = c->released;
  stats[6] = c->extracted_null;
  stats[7] = c->end_of_stream;
  stats[8] = c->bad_values + c->device_mismatch;
  stats[9] = c->schema_children;
  stats[10] = __atomic_load_n(&c->calls_on_creator, __ATOMIC_SEQ_CST);
  stats[11] = c->md_count;
  stats[12] = c->md_sum;
  stats[13] = c->calls_after_refusal;
  stats[14] = c->bad_extracts_refused;
  memcpy(message, c->error_message, 128);
  memcpy(schema_format, c->schema_format, 16);
  memcpy(additional_metadata, c->additional_metadata, 64);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

/* ------------------------------------------------------------- benchmark */

struct storm {
  void (*fn)(int64_t);
  int64_t n;
};

static void* storm_main(void* arg) {
  struct storm* s = arg;
  for (int64_t i = 0; i < s->n; i++) s->fn(i);
  return NULL;
}

/*
 * Calls `fn` n times from a new thread and joins it (call with koffi's
 * async form): the cost of one cross-thread callback into JS, which every
 * async handler callback pays.
 */
void peer_call_from_thread(void (*fn)(int64_t), int64_t n) {
  struct storm s = {fn, n};
  pthread_t t;
  pthread_create(&t, NULL, storm_main, &s);
  pthread_join(t, NULL);
}

/* ------------------------------------------------------------------ ping-pong */

/*
 * The floor of a wake-up through a doorbell pipe (what the native ring and
 * pump do), for the benchmark: JS pings (a plain call that signals a
 * thread), the thread writes one byte into a pipe, and JS's event loop
 * reads it and pings again. One round trip = one queue-1 batch of the ring
 * or pump without the batch. POSIX only, as the native ring is: the
 * Windows build of this peer (tools/windows.mjs) leaves it out.
 */
#ifndef _WIN32
#include <fcntl.h>
#include <unistd.h>

struct pingpong {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t pending;
  int stop;
  int fd[2];
  pthread_t thread;
};

static void* pingpong_main(void* arg) {
  struct pingpong* p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (!p->pending && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
    if (p->stop) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    p->pending--;
    pthread_mutex_unlock(&p->mu);
    ssize_t w;
    do w = write(p->fd[1], "", 1);
    while (w < 0 && errno == EINTR);
  }
}

void* peer_pingpong_new(void) {
  struct pingpong* p = calloc(1, sizeof *p);
  if (pipe(p->fd) != 0) {
    free(p);
    return NULL;
  }
  fcntl(p->fd[0], F_SETFL, O_NONBLOCK);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  pthread_create(&p->thread, NULL, pingpong_main, p);
  return p;
}

int peer_pingpong_fd(void* h) { return ((struct pingpong*)h)->fd[0]; }

void peer_pingpong_ping(void* h) {
  struct pingpong* p = h;
  pthread_mutex_lock(&p->mu);
  p->pending++;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* The read end is JS's to close (its socket owns it). */
void peer_pingpong_free(void* h) {
  struct pingpong* p = h;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  close(p->fd[1]);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p);
}
#endif /* _WIN32 */

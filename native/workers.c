/*
 * The package's own worker threads, for the foreign calls that may wait:
 * every ADBC driver call arrow-device makes off the JS thread, a stream's
 * off-thread get_next, the query run (adbc-run.c).
 *
 * Why: koffi's async call form runs on libuv's thread pool, 4 threads unless
 * UV_THREADPOOL_SIZE said more before the process started, and shared with
 * node:fs, node:dns and node:zlib. Sixteen connections waiting on a server
 * then queue behind four threads, and a file read waits behind them. Here a
 * pool of threads of our own runs the calls: a thread is started when a
 * call finds none idle (up to max_threads, so the threads follow the calls
 * in flight, which a connection's one-call-at-a-time bounds by the
 * connections in use), and one idle for idle_ms ends.
 *
 * JS hears of finished calls through notify, a C pointer to a JS function
 * (koffi's callback: called from a thread that is not JS's, it queues the
 * call to the JS thread's event loop and waits for it, as koffi's own async
 * calls are answered), made only when JS has said it waits (armed), so a
 * burst of calls finishing costs one wake-up; JS then takes the finished
 * calls' tags in one plain call (workers_take). A pipe watched by the event
 * loop, as the async ring's doorbell, was measured first: Node's reading of
 * it cost about 45 us more per wake-up.
 *
 * A call is a function pointer and up to 9 integer arguments (pointers,
 * size_t, int, int8_t: JS writes each as a 64-bit slot). It is made through
 * a pointer type of the same arity whose parameters and result are all
 * uint64_t. On the targets this library ships for (x86-64 System V, AAPCS64
 * and Apple's arm64) integer arguments travel in 64-bit registers, so the
 * callee reads a narrower one from the low bits it expects. Past the
 * registers (six on x86-64, eight on arm64) they go in 8-byte stack slots,
 * where Apple's arm64 packs narrower ones: ADBC's calls put only pointers
 * there (GetObjects' 7th to 9th, GetStatistics' 7th). JS masks the result to
 * the callee's return type.
 * Functions with floating-point arguments never come here (JS uses koffi).
 *
 * Nothing here frees a job: the job belongs to JS (its memory, its strings),
 * which reuses it once its tag came back.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define MAX_ARGS 9

/* One call, as JS writes and reads it (every field 8 bytes; workers_job_size: 112 bytes). */
struct worker_job {
  uint64_t fn;             /* in: the function */
  int64_t nargs;           /* in: 0..MAX_ARGS */
  uint64_t args[MAX_ARGS]; /* in */
  uint64_t ret;            /* out: what the function returned (all 64 bits; JS masks) */
  int64_t tag;             /* in: JS's name for the call, handed back by workers_take */
  struct worker_job* next; /* the queue's link: this file's */
};

struct workers {
  pthread_mutex_t mu;
  pthread_cond_t work;
  struct worker_job *queue, *queue_tail; /* submitted, not started */
  struct worker_job *done, *done_tail;   /* finished, not taken */
  int64_t threads, idle, max_threads, idle_ms;
  int64_t queued; /* jobs in queue: an idle thread already signalled for one is not idle for the next */
  int64_t started, calls; /* threads ever started, calls ever run: for tests */
  int armed;
  void (*notify)(void);
  int64_t notified;
};

typedef uint64_t u;
typedef u (*f0)(void);
typedef u (*f1)(u);
typedef u (*f2)(u, u);
typedef u (*f3)(u, u, u);
typedef u (*f4)(u, u, u, u);
typedef u (*f5)(u, u, u, u, u);
typedef u (*f6)(u, u, u, u, u, u);
typedef u (*f7)(u, u, u, u, u, u, u);
typedef u (*f8)(u, u, u, u, u, u, u, u);
typedef u (*f9)(u, u, u, u, u, u, u, u, u);

static u call(const struct worker_job* j) {
  const u* a = j->args;
  switch (j->nargs) {
    case 0: return ((f0)j->fn)();
    case 1: return ((f1)j->fn)(a[0]);
    case 2: return ((f2)j->fn)(a[0], a[1]);
    case 3: return ((f3)j->fn)(a[0], a[1], a[2]);
    case 4: return ((f4)j->fn)(a[0], a[1], a[2], a[3]);
    case 5: return ((f5)j->fn)(a[0], a[1], a[2], a[3], a[4]);
    case 6: return ((f6)j->fn)(a[0], a[1], a[2], a[3], a[4], a[5]);
    case 7: return ((f7)j->fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    case 8: return ((f8)j->fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
    default: return ((f9)j->fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]);
  }
}

static void* worker(void* arg) {
  struct workers* w = arg;
  /* A driver's write to a socket its server closed fails with EPIPE on this thread, never a SIGPIPE
     that ends the process whatever the runtime's disposition of it (a blocked signal stays pending on
     this thread), as on the runtime's own threads, which ignore it. */
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, NULL);
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->queue) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_sec += w->idle_ms / 1000;
      until.tv_nsec += (long)(w->idle_ms % 1000) * 1000000L;
      if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
      }
      w->idle++;
      int rc = pthread_cond_timedwait(&w->work, &w->mu, &until);
      w->idle--;
      if (rc == ETIMEDOUT && !w->queue) {
        w->threads--;
        pthread_mutex_unlock(&w->mu);
        return NULL;
      }
    }
    struct worker_job* j = w->queue;
    w->queued--;
    w->queue = j->next;
    if (!w->queue) w->queue_tail = NULL;
    pthread_mutex_unlock(&w->mu);

    u r = call(j);

    pthread_mutex_lock(&w->mu);
    j->ret = r;
    j->next = NULL;
    if (w->done_tail) w->done_tail->next = j;
    else w->done = j;
    w->done_tail = j;
    w->calls++;
    if (w->armed) {
      w->armed = 0;
      w->notified++;
      /* Unlocked: JS's answer to it takes the lock (workers_take). */
      pthread_mutex_unlock(&w->mu);
      w->notify();
      pthread_mutex_lock(&w->mu);
    }
  }
}

/*
 * A pool of at most max_threads threads (none started yet), each ending after idle_ms without a call,
 * that calls notify when a call finishes and JS waits. NULL when out of memory.
 */
struct workers* workers_new(int64_t max_threads, int64_t idle_ms, void (*notify)(void)) {
  if (!notify) return NULL;
  struct workers* w = calloc(1, sizeof *w);
  if (!w) return NULL;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->work, NULL);
  w->max_threads = max_threads < 1 ? 1 : max_threads;
  w->idle_ms = idle_ms < 1 ? 1 : idle_ms;
  w->notify = notify;
  w->armed = 1; /* JS waits from the start: the first call to finish notifies */
  return w;
}

/*
 * Queues the call. Returns 0, or an errno where a needed thread could not start and none runs (the call
 * is then not queued). The pool lives as long as the process: its threads may be inside a driver when
 * JS's thread ends.
 */
int32_t workers_submit(struct workers* w, struct worker_job* j) {
  if (j->nargs < 0 || j->nargs > MAX_ARGS) return EINVAL;
  j->next = NULL;
  pthread_mutex_lock(&w->mu);
  if (w->idle <= w->queued && w->threads < w->max_threads) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Drivers recurse deeply (DuckDB's planner): the stack of a main thread, not a secondary one's
       (512 KiB on macOS). Reserved address space; only what is touched is memory. */
    pthread_attr_setstacksize(&attr, (size_t)8 << 20);
    pthread_t t;
    int rc = pthread_create(&t, &attr, worker, w);
    pthread_attr_destroy(&attr);
    if (rc == 0) {
      w->threads++;
      w->started++;
    } else if (w->threads == 0) {
      pthread_mutex_unlock(&w->mu);
      return rc;
    }
    /* else: the running threads take it in turn */
  }
  if (w->queue_tail) w->queue_tail->next = j;
  else w->queue = j;
  w->queue_tail = j;
  w->queued++;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
  return 0;
}

/*
 * Takes up to max finished calls' tags into out, in the order they finished. With arm, and
 * fewer than max finished, the next call to finish notifies. Returns how many were taken.
 */
int64_t workers_take(struct workers* w, int64_t* out, int64_t max, int32_t arm) {
  int64_t n = 0;
  pthread_mutex_lock(&w->mu);
  while (n < max && w->done) {
    struct worker_job* j = w->done;
    w->done = j->next;
    if (!w->done) w->done_tail = NULL;
    out[n++] = j->tag;
  }
  /* Fewer than max: none is left, so the next to finish must notify. */
  if (n < max && arm) w->armed = 1;
  pthread_mutex_unlock(&w->mu);
  return n;
}

/* What tests and benchmarks read: 0 threads now, 1 idle now, 2 ever started, 3 calls run, 4 notifies. */
int64_t workers_stat(struct workers* w, int32_t which) {
  pthread_mutex_lock(&w->mu);
  int64_t v = which == 0 ? w->threads : which == 1 ? w->idle : which == 2 ? w->started : which == 3 ? w->calls : w->notified;
  pthread_mutex_unlock(&w->mu);
  return v;
}

/* What JS checks before it uses the pool: the job's size (a layout change changes it). */
int64_t workers_job_size(void) { return (int64_t)sizeof(struct worker_job); }

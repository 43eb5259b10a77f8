/* A preloaded wall-clock stack sampler: where a host-bound run spends its
 * time, waiting included (no perf on the GPU machine). A timer on
 * CLOCK_MONOTONIC signals the main thread every SAMPLER_US microseconds
 * (default 500), and with SAMPLER_THREADS=all every thread the executable
 * itself starts too (a thread whose start routine is in the executable,
 * not in a shared library such as a driver; a timer each, from its start to its
 * routine's return); the handler records the signalled thread's
 * backtrace. At exit the distinct stacks are written to SAMPLER_OUT.PID
 * (default stack-samples.txt.PID), most frequent first, one per line:
 *
 *   COUNT  object+0xOFFSET  object+0xOFFSET ...   (innermost first)
 *
 * where OFFSET is the address less the object's load base, so an
 * executable's frames resolve against its unstripped build's symbols
 * (experiments/gpu/stack_samples.py).
 *
 * Build: cc -O2 -shared -fPIC stack-sampler.c -o stack-sampler.so -ldl -lrt -lpthread
 * Run:   env LD_PRELOAD=./stack-sampler.so SAMPLER_OUT=out.txt program ...
 *
 * Frames come from the unwinder (backtrace), warmed in the constructor so
 * that the handler does not load it; a sample that arrives while the
 * buffer is full is dropped and counted. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DEPTH 40
#define MAX_SAMPLES 600000

struct sample {
  int depth;
  void *frames[DEPTH];
};

static struct sample *samples;
static volatile long taken, dropped;
static timer_t timer;

static long claimed;

static void on_tick(int sig, siginfo_t *info, void *context) {
  (void)sig, (void)info, (void)context;
  long at = __atomic_fetch_add(&claimed, 1, __ATOMIC_RELAXED);
  if (at >= MAX_SAMPLES) {
    __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  samples[at].depth = 0;
  samples[at].depth = backtrace(samples[at].frames, DEPTH);
  __atomic_fetch_add(&taken, 1, __ATOMIC_RELAXED);
}

static int signo_used;
static long period_us = 500;

/* A timer that signals the calling thread every period_us; 0 on success. */
static int tick_this_thread(timer_t *t) {
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = signo_used;
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  if (timer_create(CLOCK_MONOTONIC, &ev, t) != 0) return -1;
  struct itimerspec every = {{period_us / 1000000, (period_us % 1000000) * 1000},
                             {period_us / 1000000, (period_us % 1000000) * 1000}};
  return timer_settime(*t, 0, &every, NULL);
}

/* Threads the executable starts (their start routine is in it, not in a
 * shared library such as a driver), with SAMPLER_THREADS=all. */
static int wraps(void *(*routine)(void *)) {
  const char *which = getenv("SAMPLER_THREADS");
  Dl_info of_routine;
  return which && strcmp(which, "all") == 0 && dladdr((void *)routine, &of_routine) && of_routine.dli_fname &&
         !strstr(of_routine.dli_fname, ".so");
}

/* Runs routine(arg) with a timer of the thread's own. */
static void *run_thread(void *(*routine)(void *), void *arg) {
  timer_t t;
  int ticking = tick_this_thread(&t) == 0;
  void *result = routine(arg);
  if (ticking) timer_delete(t);
  return result;
}

#include "thread-start.h"

static int by_frames(const void *a, const void *b) {
  const struct sample *x = a, *y = b;
  if (x->depth != y->depth) return x->depth - y->depth;
  return memcmp(x->frames, y->frames, sizeof(void *) * (size_t)x->depth);
}

struct stack {
  long count;
  const struct sample *s;
};

static int by_count(const void *a, const void *b) {
  const struct stack *x = a, *y = b;
  return (y->count > x->count) - (y->count < x->count);
}

static void report(void) {
  timer_delete(timer);
  long n = taken < MAX_SAMPLES ? taken : MAX_SAMPLES;
  const char *base = getenv("SAMPLER_OUT");
  char path[4096];
  snprintf(path, sizeof path, "%s.%ld", base ? base : "stack-samples.txt", (long)getpid());
  FILE *f = fopen(path, "w");
  if (!f || !samples) return;
  qsort(samples, (size_t)n, sizeof *samples, by_frames);
  struct stack *stacks = calloc((size_t)n + 1, sizeof *stacks);
  long distinct = 0;
  for (long i = 0; i < n; i++) {
    if (distinct > 0 && by_frames(stacks[distinct - 1].s, &samples[i]) == 0) {
      stacks[distinct - 1].count++;
    } else {
      stacks[distinct++] = (struct stack){1, &samples[i]};
    }
  }
  qsort(stacks, (size_t)distinct, sizeof *stacks, by_count);
  fprintf(f, "# samples %ld, dropped %ld, distinct %ld\n", n, dropped, distinct);
  for (long i = 0; i < distinct; i++) {
    fprintf(f, "%ld", stacks[i].count);
    /* Frame 0 is this handler, frame 1 the signal trampoline. */
    for (int d = 2; d < stacks[i].s->depth; d++) {
      void *pc = stacks[i].s->frames[d];
      Dl_info where;
      if (dladdr(pc, &where) && where.dli_fname) {
        const char *name = strrchr(where.dli_fname, '/');
        fprintf(f, " %s+%#lx", name ? name + 1 : where.dli_fname,
                (unsigned long)((char *)pc - (char *)where.dli_fbase));
      } else {
        fprintf(f, " ?+%p", pc);
      }
    }
    fputc('\n', f);
  }
  fclose(f);
}

__attribute__((constructor)) static void start(void) {
  samples = malloc(sizeof *samples * MAX_SAMPLES);
  if (!samples) return;
  void *warm[4];
  backtrace(warm, 4);
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_sigaction = on_tick;
  act.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&act.sa_mask);
  signo_used = SIGRTMIN + 3;
  sigaction(signo_used, &act, NULL);
  const char *us = getenv("SAMPLER_US");
  if (us && atol(us) > 0) period_us = atol(us);
  if (tick_this_thread(&timer) != 0) return;
  atexit(report);
}

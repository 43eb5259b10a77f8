/* For a preloaded library (segv-trace.c, stack-sampler.c): its own
 * pthread_create, which starts each thread the including file chooses
 * through that file's run_thread, so that it can set the thread up first.
 * The including file defines, before including this:
 *
 *   static int wraps(void *(*routine)(void *));         start it through run_thread?
 *   static void *run_thread(void *(*routine)(void *), void *arg);  runs routine(arg)
 *
 * A thread whose bookkeeping cannot be allocated starts as it would have. */
#ifndef THREAD_START_H
#define THREAD_START_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

struct start {
  void *(*routine)(void *);
  void *arg;
};

static void *trampoline(void *p) {
  struct start s = *(struct start *)p;
  free(p);
  return run_thread(s.routine, s.arg);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*routine)(void *), void *arg) {
  static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  if (!real) real = dlsym(RTLD_NEXT, "pthread_create");
  struct start *s = wraps(routine) ? malloc(sizeof *s) : NULL;
  if (!s) return real(thread, attr, routine, arg);
  s->routine = routine;
  s->arg = arg;
  return real(thread, attr, trampoline, s);
}
#endif

/* A preloaded SIGSEGV/SIGBUS reporter for a process that dies without a
 * word: every thread (also those a driver starts) gets an alternate signal
 * stack, so that a fault on an exhausted stack is still reported, and the
 * handler prints the faulting address, the thread, its stack pointer and
 * stack bounds, and a backtrace (exported symbols only), then dies of the
 * signal as before.
 *
 * Build: cc -O2 -shared -fPIC segv-trace.c -o segv-trace.so -ldl -lpthread
 * Run:   LD_PRELOAD=./segv-trace.so program ...
 *
 * Rust's runtime installs its own handler only when none is set, so this
 * one stays in force. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ALT_BYTES (256 * 1024)

static void give_altstack(void) {
  stack_t alt = {.ss_sp = malloc(ALT_BYTES), .ss_size = ALT_BYTES, .ss_flags = 0};
  if (alt.ss_sp) sigaltstack(&alt, NULL);
}

/* Writes to stderr; a failed write leaves nothing better to do. */
static void say(const char *line, int n) {
  if (write(2, line, n) < 0) return;
}

static void on_fault(int sig, siginfo_t *info, void *context) {
  char line[512];
  ucontext_t *uc = context;
  unsigned long sp = (unsigned long)uc->uc_mcontext.gregs[REG_RSP];
  unsigned long pc = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
  char name[32] = "?";
  pthread_getname_np(pthread_self(), name, sizeof name);
  int n = snprintf(line, sizeof line, "\n== segv-trace: signal %d at address %p, pc %#lx, sp %#lx, thread %ld (%s)\n",
                   sig, info->si_addr, pc, sp, (long)syscall(SYS_gettid), name);
  say(line, n);
  pthread_attr_t attr;
  void *base = NULL;
  size_t size = 0, guard = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_getguardsize(&attr, &guard);
    n = snprintf(line, sizeof line, "== segv-trace: thread stack %p..%p (%zu bytes, guard %zu); sp %s it\n", base,
                 (char *)base + size, size, guard,
                 sp >= (unsigned long)base && sp < (unsigned long)base + size ? "inside" : "OUTSIDE");
    say(line, n);
  }
  Dl_info where;
  if (dladdr((void *)pc, &where) && where.dli_fname) {
    n = snprintf(line, sizeof line, "== segv-trace: pc in %s (+%#lx), near %s\n", where.dli_fname,
                 pc - (unsigned long)where.dli_fbase, where.dli_sname ? where.dli_sname : "?");
    say(line, n);
  }
  void *frames[64];
  int count = backtrace(frames, 64);
  backtrace_symbols_fd(frames, count, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

static int wraps(void *(*routine)(void *)) {
  (void)routine;
  return 1;
}

static void *run_thread(void *(*routine)(void *), void *arg) {
  give_altstack();
  return routine(arg);
}

#include "thread-start.h"

__attribute__((constructor)) static void install(void) {
  void *warm[1];
  backtrace(warm, 1); /* loads libgcc now, not in the handler */
  give_altstack();
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &action, NULL);
  sigaction(SIGBUS, &action, NULL);
}

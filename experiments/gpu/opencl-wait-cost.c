/* What does waiting for an OpenCL event cost the host on NVIDIA's driver,
 * and how soon does each way of waiting learn that it completed? hetero
 * bridges a wait across two contexts by a thread blocked in
 * clWaitForEvents per pending bridge (at most 64; beyond, a completion
 * callback), and the split wave on two GPUs keeps hundreds pending when the
 * host enqueues far ahead (docs/results/multi-device-h200x2/).
 *
 * One GPU, one context, one in-order queue; a one-work-item kernel that
 * runs for about RUN_MS (calibrated first). For each case the kernel is
 * launched, the waiters set up, and the main thread polls the event's
 * status in a tight loop to see when it completed (the reference time).
 * Cases:
 *
 *   threads T   T threads each in clWaitForEvents on the kernel's event
 *   callback    a completion callback (clSetEventCallback)
 *   poll S      one thread reading the status every S microseconds
 *               (0: in a tight loop)
 *
 * Printed per case, medians over REPS: the process's CPU time during the
 * kernel's run in cores (CPU seconds per wall second, the main thread's
 * polling included: about 1), and how long after the reference each
 * waiter learnt of the completion (the latest waiter's, for threads).
 *
 * Build: cc -O2 opencl-wait-cost.c -o opencl-wait-cost path/to/libOpenCL.so.1 -lpthread
 * Run:   opencl-wait-cost [RUN_MS (50)] [REPS (5)] */
#include <pthread.h>
#include <unistd.h>

#include "opencl-min.h"

extern cl_int clSetEventCallback(cl_event, cl_int, void (*)(cl_event, cl_int, void *), void *);

static const char *source =
    "__kernel void spin(__global float *a, int n) {\n"
    "  float x = a[0];\n"
    "  for (int i = 0; i < n; ++i) x = x * 0.9999f + 1.0f;\n"
    "  a[0] = x;\n"
    "}\n";

static cl_command_queue queue;
static cl_kernel kernel;
static cl_mem buffer;

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static cl_event launch(int n) {
  size_t one = 1;
  cl_event done;
  check(clSetKernelArg(kernel, 0, sizeof(cl_mem), &buffer), "clSetKernelArg");
  check(clSetKernelArg(kernel, 1, sizeof(int), &n), "clSetKernelArg");
  check(clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &one, &one, 0, NULL, &done), "clEnqueueNDRangeKernel");
  check(clFlush(queue), "clFlush");
  return done;
}

static int complete(cl_event e) {
  cl_int s = 1;
  check(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL), "clGetEventInfo");
  return s <= CL_COMPLETE;
}

/* When each waiter learnt of the completion, in now_ms(). */
#define MAX_THREADS 256
static double learnt[MAX_THREADS];
struct waiter {
  cl_event event;
  int index;
  int poll_us;
};

static void *wait_thread(void *p) {
  struct waiter *w = p;
  check(clWaitForEvents(1, &w->event), "clWaitForEvents");
  learnt[w->index] = now_ms();
  return NULL;
}

static void *poll_thread(void *p) {
  struct waiter *w = p;
  while (!complete(w->event)) {
    if (w->poll_us > 0) usleep(w->poll_us);
  }
  learnt[w->index] = now_ms();
  return NULL;
}

static void on_complete(cl_event e, cl_int status, void *data) {
  (void)e;
  (void)status;
  learnt[(intptr_t)data] = now_ms();
}

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, n, sizeof *v, by_double);
  return v[n / 2];
}

/* kind 't': `count` waiting threads; 'c': a callback; 'p': a polling
 * thread every `count` µs. Prints one line. */
static void run_case(const char *label, char kind, int count, int n, int reps) {
  double cores[32], late[32];
  for (int r = 0; r < reps; ++r) {
    int waiters = kind == 't' ? count : 1;
    for (int i = 0; i < waiters; ++i) learnt[i] = -1;
    cl_event e = launch(n);
    double c0 = cpu_s(), t0 = now_ms();
    pthread_t threads[MAX_THREADS];
    struct waiter w[MAX_THREADS];
    for (int i = 0; i < waiters; ++i) {
      w[i] = (struct waiter){e, i, count};
      if (kind == 't') pthread_create(&threads[i], NULL, wait_thread, &w[i]);
      if (kind == 'p') pthread_create(&threads[i], NULL, poll_thread, &w[i]);
    }
    if (kind == 'c') check(clSetEventCallback(e, CL_COMPLETE, on_complete, (void *)0), "clSetEventCallback");
    while (!complete(e)) {
    }
    double seen = now_ms(), c1 = cpu_s();
    cores[r] = (c1 - c0) / ((seen - t0) / 1e3);
    if (kind != 'c') {
      for (int i = 0; i < waiters; ++i) pthread_join(threads[i], NULL);
    } else {
      while (learnt[0] < 0) usleep(10);
    }
    double last = 0;
    for (int i = 0; i < waiters; ++i) last = learnt[i] - seen > last ? learnt[i] - seen : last;
    late[r] = last;
    clReleaseEvent(e);
  }
  printf("%-12s cpu %6.2f cores   learnt %8.3f ms after the poll (median of %d)\n", label, median(cores, reps),
         median(late, reps), reps);
  fflush(stdout);
}

int main(int argc, char **argv) {
  double run_ms = argc > 1 ? atof(argv[1]) : 50;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (reps > 32) reps = 32;
  cl_device_id device;
  char name[256];
  cl_context ctx = first_context(&device, name, sizeof name);
  cl_int err;
  queue = clCreateCommandQueue(ctx, device, 0, &err);
  check(err, "clCreateCommandQueue");
  kernel = build_kernel(ctx, device, 1, &source, "", "spin");
  buffer = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  check(err, "clCreateBuffer");
  /* Calibrate: iterations for about run_ms. */
  int n = 1 << 16;
  for (;;) {
    double t0 = now_ms();
    cl_event e = launch(n);
    check(clWaitForEvents(1, &e), "clWaitForEvents");
    clReleaseEvent(e);
    double took = now_ms() - t0;
    if (took >= run_ms / 4 || n > (1 << 29)) {
      n = (int)(n * (run_ms / took));
      break;
    }
    n *= 4;
  }
  printf("%s: a kernel of about %.0f ms; each case %d times\n", name, run_ms, reps);
  run_case("threads 1", 't', 1, n, reps);
  run_case("threads 8", 't', 8, n, reps);
  run_case("threads 64", 't', 64, n, reps);
  run_case("threads 256", 't', 256, n, reps);
  run_case("callback", 'c', 0, n, reps);
  run_case("poll 0", 'p', 0, n, reps);
  run_case("poll 20", 'p', 20, n, reps);
  run_case("poll 100", 'p', 100, n, reps);
  return 0;
}

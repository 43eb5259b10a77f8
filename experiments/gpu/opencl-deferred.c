/* Does NVIDIA's OpenCL run launches that were enqueued behind an open
 * user event slower than the same launches enqueued behind nothing?
 *
 * In the split wave on two GPUs (docs/results/multi-device-h200x2/), a
 * round of 100 steps takes 3.4 ms when nothing gates it and 4.1 to 6.5 ms
 * after the first halo exchange, although the host is not the bound then.
 * From the first exchange on, each round's launches sit in their queue
 * behind a wait on a user event (hetero's bridge across contexts) or on a
 * command that does. A driver that holds such commands on the host and
 * submits each when the one before it completes would add a round trip to
 * every step.
 *
 * One GPU, one context, a profiling queue Q. A kernel that reads and
 * writes MIB MiB (about a wave step's time at 4096^2 / 2 rows) is launched
 * N times on Q, flushed every 16 launches as hetero does, only the first
 * and last launch returning an event; the span is the last launch's end
 * less the first's start (device clock). Cases, REPS each, medians:
 *
 *   direct       nothing gates the launches
 *   gated        the first waits on a user event that another thread
 *                completes 10 ms after the launches were enqueued
 *   set-early    the first waits on a user event the host completes
 *                right after enqueueing it, before the other N-1
 *   native-gate  the first waits on the event of a launch on a second
 *                queue P of the context, itself behind a user event that
 *                is completed 10 ms later (a wait on a neighbour's halo
 *                copy that a bridge gates)
 *   gated-busy   as gated, while this thread keeps enqueueing launches
 *                on a queue of a second context, held behind a user event
 *                of its own until the span ends (the host enqueueing the
 *                other device's work meanwhile, without using the GPU)
 *
 * Printed: µs a launch (span / N) and the ratio to direct.
 *
 * Build: cc -O2 opencl-deferred.c -o opencl-deferred path/to/libOpenCL.so.1 -lpthread
 * Run:   opencl-deferred [N (100)] [REPS (5)] [MIB (24)] */
#include <pthread.h>
#include <unistd.h>

#include "opencl-min.h"

static const char *source =
    "__kernel void busy(__global float *a, __global const float *b, int n, float s) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < (size_t)n) a[i] = 0.5f * b[i] + s;\n"
    "}\n";

static int n_launches = 100;
static size_t items;

struct env {
  cl_context ctx, other_ctx;
  cl_device_id device;
  cl_command_queue q, p, r;
  cl_kernel k, k_other;
  cl_mem a, b, pa, pb, other_a, other_b;
};

/* Floats the side launches (P's gate, R's busy ones) touch. */
#define SIDE 256

/* A launch over `count` floats of a and b (alternating which is written). */
static void launch(cl_command_queue q, cl_kernel k, cl_mem a, cl_mem b, size_t count, int step, cl_uint nwait,
                   const cl_event *wait, cl_event *event) {
  int n = (int)count;
  float s = 1e-6f * (float)step;
  /* Ping-pong between the two buffers, as the wave's fields rotate. */
  cl_mem x = step % 2 ? b : a, y = step % 2 ? a : b;
  check(clSetKernelArg(k, 0, sizeof(cl_mem), &x), "clSetKernelArg");
  check(clSetKernelArg(k, 1, sizeof(cl_mem), &y), "clSetKernelArg");
  check(clSetKernelArg(k, 2, sizeof(int), &n), "clSetKernelArg");
  check(clSetKernelArg(k, 3, sizeof(float), &s), "clSetKernelArg");
  size_t global = (count + 255) / 256 * 256, local = 256;
  check(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, nwait, wait, event), "clEnqueueNDRangeKernel");
  if (step % 16 == 15) check(clFlush(q), "clFlush");
}

static int is_complete(cl_event e) {
  cl_int status = 1;
  check(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL), "clGetEventInfo");
  return status == CL_COMPLETE;
}

static void *open_later(void *p) {
  usleep(10000);
  check(clSetUserEventStatus((cl_event)p, CL_COMPLETE), "clSetUserEventStatus");
  return NULL;
}

enum which { DIRECT, GATED, SET_EARLY, NATIVE_GATE, GATED_BUSY, CASES };
static const char *names[CASES] = {"direct", "gated", "set-early", "native-gate", "gated-busy"};

/* One run of case `c`: the span in µs. */
static double run(struct env *e, enum which c) {
  cl_int err;
  cl_event user = NULL, gate = NULL, first = NULL, last = NULL, hold = NULL;
  pthread_t opener;
  int threaded = 0;
  cl_uint nwait = 0;
  const cl_event *wait = NULL;
  if (c != DIRECT) {
    user = clCreateUserEvent(e->ctx, &err);
    check(err, "clCreateUserEvent");
  }
  if (c == NATIVE_GATE) {
    launch(e->p, e->k, e->pa, e->pb, SIDE, 0, 1, &user, &gate);
    check(clFlush(e->p), "clFlush");
    nwait = 1;
    wait = &gate;
  } else if (c != DIRECT) {
    nwait = 1;
    wait = &user;
  }
  launch(e->q, e->k, e->a, e->b, items, 0, nwait, wait, &first);
  if (c == SET_EARLY) check(clSetUserEventStatus(user, CL_COMPLETE), "clSetUserEventStatus");
  for (int i = 1; i < n_launches; i++) launch(e->q, e->k, e->a, e->b, items, i, 0, NULL, i == n_launches - 1 ? &last : NULL);
  check(clFlush(e->q), "clFlush");
  if (c == GATED || c == NATIVE_GATE || c == GATED_BUSY) {
    pthread_create(&opener, NULL, open_later, user);
    threaded = 1;
  }
  if (c == GATED_BUSY) {
    hold = clCreateUserEvent(e->other_ctx, &err);
    check(err, "clCreateUserEvent");
    int i = 0;
    launch(e->r, e->k_other, e->other_a, e->other_b, SIDE, i++, 1, &hold, NULL);
    while (!is_complete(last) && i < 20000) launch(e->r, e->k_other, e->other_a, e->other_b, SIDE, i++, 0, NULL, NULL);
  }
  check(clWaitForEvents(1, &last), "clWaitForEvents");
  if (threaded) pthread_join(opener, NULL);
  if (hold) {
    check(clSetUserEventStatus(hold, CL_COMPLETE), "clSetUserEventStatus");
    check(clFinish(e->r), "clFinish");
    check(clReleaseEvent(hold), "clReleaseEvent");
  }
  check(clFinish(e->q), "clFinish");
  check(clFinish(e->p), "clFinish");
  double span = (double)(stamp(last, CL_PROFILING_COMMAND_END) - stamp(first, CL_PROFILING_COMMAND_START)) / 1e3;
  check(clReleaseEvent(first), "clReleaseEvent");
  check(clReleaseEvent(last), "clReleaseEvent");
  if (gate) check(clReleaseEvent(gate), "clReleaseEvent");
  if (user) check(clReleaseEvent(user), "clReleaseEvent");
  return span;
}

static cl_mem buffer(cl_context ctx, size_t bytes) {
  cl_int err;
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  check(err, "clCreateBuffer");
  return m;
}

int main(int argc, char **argv) {
  if (argc > 1) n_launches = atoi(argv[1]);
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  size_t mib = argc > 3 ? (size_t)atol(argv[3]) : 24;
  if (n_launches < 2 || reps < 1 || reps > 64 || mib == 0) {
    fprintf(stderr, "usage: opencl-deferred [N >= 2] [REPS <= 64] [MIB > 0]\n");
    return 2;
  }
  items = mib << 18; /* floats in MIB MiB */
  struct env e;
  char name[256];
  e.ctx = first_context(&e.device, name, sizeof name);
  cl_int err;
  e.other_ctx = clCreateContext(NULL, 1, &e.device, NULL, NULL, &err);
  check(err, "clCreateContext");
  e.q = clCreateCommandQueue(e.ctx, e.device, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "clCreateCommandQueue");
  e.p = clCreateCommandQueue(e.ctx, e.device, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "clCreateCommandQueue");
  e.r = clCreateCommandQueue(e.other_ctx, e.device, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "clCreateCommandQueue");
  e.k = build_kernel(e.ctx, e.device, 1, &source, "", "busy");
  e.k_other = build_kernel(e.other_ctx, e.device, 1, &source, "", "busy");
  e.a = buffer(e.ctx, items * sizeof(float));
  e.b = buffer(e.ctx, items * sizeof(float));
  e.pa = buffer(e.ctx, SIDE * sizeof(float));
  e.pb = buffer(e.ctx, SIDE * sizeof(float));
  e.other_a = buffer(e.other_ctx, SIDE * sizeof(float));
  e.other_b = buffer(e.other_ctx, SIDE * sizeof(float));
  printf("device: %s; %d launches of %zu MiB read + written, %d runs a case\n", name, n_launches, mib, reps);
  double medians[CASES];
  for (int c = 0; c < CASES; c++) {
    double spans[64];
    for (int i = 0; i <= reps; i++) {
      double span = run(&e, (enum which)c);
      if (i > 0) spans[i - 1] = span; /* the first run warms up */
    }
    qsort(spans, (size_t)reps, sizeof *spans, by_value);
    medians[c] = spans[reps / 2];
    printf("%-12s %8.1f us a launch (median span %9.1f us; min %9.1f, max %9.1f)  %.2fx direct\n", names[c],
           medians[c] / n_launches, medians[c], spans[0], spans[reps - 1], medians[c] / medians[0]);
  }
  return 0;
}

/* What makes a wave launch cost NVIDIA's OpenCL driver twice the host
 * time of a one-block launch?
 *
 * The split wave on two GPUs spends about 60% of its host time inside
 * clEnqueueNDRangeKernel, about 10 us a launch of wave_rows (13
 * parameters, a 16 x 525 grid of 256-wide blocks, enqueued as a
 * three-dimensional range, 3 or 4 arguments changed a launch), where the
 * bench's one-block launch of a 4-parameter kernel costs about 5 us
 * (docs/results/multi-device-h200x2/opencl-profile/). This program
 * enqueues N launches a run, without events, on a profiling queue,
 * flushed every 16 launches as hetero does, and prints the host's time a
 * launch (the median of REPS runs, each after the device finished the
 * run before), for one change at a time:
 *
 *   wave-3d      wave_rows's shape as hetero launches it: 3 dimensions,
 *                [4096, 525, 1] items, 4 arguments set a launch
 *   wave-2d      the same range as 2 dimensions
 *   wave-1d      the same number of items as 1 dimension
 *   all-args     wave-3d setting all 13 arguments
 *   no-args      wave-3d setting none (the same launch again)
 *   one-block    wave-3d over one block of 256
 *   small-4      a 4-parameter kernel over one block, 3 dimensions, as
 *                hetero launches the bench's affine_u32
 *   small-4-1d   the same as 1 dimension, as the bench's raw path does
 *   evented      wave-3d, each launch returning an event (released later)
 *   polled       wave-3d while a second thread reads the status of a
 *                pending command's event in a loop, yielding between
 *                reads, as hetero's bridge thread does while a bridge is
 *                young (its `Poller`)
 *   polled-50us  the same, sleeping 50 us between reads
 *   gated        wave-3d with that command pending behind its user
 *                event, and no thread reading it
 *   polled-done  wave-3d while the second thread reads, in a loop, the
 *                status of a command that has completed (nothing gated)
 *   self-read    wave-3d, the launching thread itself reading that
 *                completed command's status after every launch (no
 *                second thread, nothing gated)
 *   wave-3d-end  wave-3d again, last: the first case of a run is the
 *                noisiest, so the run's plain launch is measured twice
 *
 * The kernels return at once (the device's time is not what is measured;
 * an empty launch of wave-3d's size still takes the device a few us, so
 * N is kept below the depth at which the driver blocks the enqueue).
 *
 * Build: cc -O2 opencl-launch-cost.c -o opencl-launch-cost path/to/libOpenCL.so.1 -lpthread
 * Run:   opencl-launch-cost [N (256)] [REPS (21)] */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "opencl-min.h"

static const char *source =
    "__kernel void rows(__global const float *a, __global const float *b, __global float *c, uint nx, uint ny,\n"
    "                   uint begin, uint end, uint out_first, uint u_first, float c2, uint sx, uint sy, float s) {\n"
    "  if (end == 7u && begin == 7u) c[get_global_id(0)] = a[0] + b[0] + c2 + s + (float)(nx + ny + out_first\n"
    "      + u_first + sx + sy);\n"
    "}\n"
    "__kernel void small(__global uint *x, uint n, uint a, uint b) {\n"
    "  if (n == 7u && a == 7u) x[get_global_id(0)] = b;\n"
    "}\n";

enum shape {
  WAVE_3D, WAVE_2D, WAVE_1D, ALL_ARGS, NO_ARGS, ONE_BLOCK, SMALL_4, SMALL_4_1D, EVENTED, POLLED, POLLED_50US,
  GATED, POLLED_DONE, SELF_READ, WAVE_3D_END, CASES
};
static const char *names[CASES] = {"wave-3d",   "wave-2d", "wave-1d",    "all-args", "no-args",    "one-block",
                                   "small-4",   "small-4-1d", "evented", "polled",   "polled-50us",
                                   "gated",     "polled-done", "self-read", "wave-3d-end"};

/* The polling thread of the polled cases: reads `event`'s status until
 * `stop`, yielding or sleeping `nap_us` between reads. */
struct poller {
  cl_event event;
  int nap_us;
  volatile int stop;
  long reads;
};

static void *poll_loop(void *p) {
  struct poller *poller = p;
  while (!poller->stop) {
    cl_int status = 0;
    clGetEventInfo(poller->event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    poller->reads++;
    if (poller->nap_us > 0) usleep((useconds_t)poller->nap_us);
    else sched_yield();
  }
  return NULL;
}

struct env {
  cl_command_queue q, side;
  cl_context ctx;
  cl_kernel rows, small;
  cl_mem f[3];
  cl_event *events;
  cl_event done; /* self-read's completed command */
};

static void set(cl_kernel k, cl_uint i, size_t size, const void *v) { check(clSetKernelArg(k, i, size, v), "clSetKernelArg"); }

/* The 13 arguments, or (`changed`) only those a split round's launch
 * changes: the three fields and the source value. */
static void rows_args(struct env *e, int step, int changed) {
  cl_uint nx = 4096, ny = 4096, begin = 2048, end = 4096, out_first = 0, u_first = 0, sx = 100, sy = 100;
  float c2 = 0.1f, s = 1e-6f * (float)step;
  for (int i = 0; i < 3; i++) set(e->rows, (cl_uint)i, sizeof(cl_mem), &e->f[(step + i) % 3]);
  set(e->rows, 12, sizeof s, &s);
  if (changed) return;
  set(e->rows, 3, sizeof nx, &nx);
  set(e->rows, 4, sizeof ny, &ny);
  set(e->rows, 5, sizeof begin, &begin);
  set(e->rows, 6, sizeof end, &end);
  set(e->rows, 7, sizeof out_first, &out_first);
  set(e->rows, 8, sizeof u_first, &u_first);
  set(e->rows, 9, sizeof c2, &c2);
  set(e->rows, 10, sizeof sx, &sx);
  set(e->rows, 11, sizeof sy, &sy);
}

static void launch(struct env *e, enum shape c, int step) {
  size_t g3[3] = {4096, 525, 1}, l3[3] = {256, 1, 1};
  size_t g1[1] = {4096 * 525}, l1[1] = {256};
  size_t b3[3] = {256, 1, 1};
  cl_kernel k = e->rows;
  cl_uint dims = 3;
  const size_t *g = g3, *l = l3;
  cl_event *event = NULL;
  switch (c) {
    case WAVE_3D:
    case WAVE_3D_END: rows_args(e, step, 1); break;
    case WAVE_2D: rows_args(e, step, 1); dims = 2; break;
    case WAVE_1D: rows_args(e, step, 1); dims = 1; g = g1; l = l1; break;
    case ALL_ARGS: rows_args(e, step, 0); break;
    case NO_ARGS: break;
    case ONE_BLOCK: rows_args(e, step, 1); g = b3; break;
    case SMALL_4:
    case SMALL_4_1D: {
      cl_uint n = 1024, a = 1, b = (cl_uint)step;
      k = e->small;
      set(k, 0, sizeof(cl_mem), &e->f[0]);
      set(k, 1, sizeof n, &n);
      set(k, 2, sizeof a, &a);
      set(k, 3, sizeof b, &b);
      g = b3;
      if (c == SMALL_4_1D) { dims = 1; g = l1; l = l1; }
      break;
    }
    case EVENTED: rows_args(e, step, 1); event = &e->events[step]; break;
    case POLLED:
    case POLLED_50US:
    case GATED:
    case POLLED_DONE:
    case SELF_READ: rows_args(e, step, 1); break;
    case CASES: break;
  }
  check(clEnqueueNDRangeKernel(e->q, k, dims, NULL, g, l, 0, NULL, event), "clEnqueueNDRangeKernel");
  if (c == SELF_READ) {
    cl_int status = 0;
    check(clGetEventInfo(e->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL), "clGetEventInfo");
  }
  if (step % 16 == 15) check(clFlush(e->q), "clFlush");
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 21;
  if (n < 16 || reps < 1 || reps > 256) {
    fprintf(stderr, "usage: opencl-launch-cost [N >= 16] [REPS <= 256]\n");
    return 2;
  }
  struct env e;
  cl_device_id device;
  char name[256];
  cl_context ctx = first_context(&device, name, sizeof name);
  cl_int err;
  e.ctx = ctx;
  e.q = clCreateCommandQueue(ctx, device, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "clCreateCommandQueue");
  e.side = clCreateCommandQueue(ctx, device, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "clCreateCommandQueue");
  e.rows = build_kernel(ctx, device, 1, &source, "-cl-std=CL1.2", "rows");
  e.small = build_kernel(ctx, device, 1, &source, "-cl-std=CL1.2", "small");
  for (int i = 0; i < 3; i++) {
    e.f[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096 * 4, NULL, &err);
    check(err, "clCreateBuffer");
  }
  e.events = calloc((size_t)n, sizeof(cl_event));
  printf("device: %s; %d launches a run, %d runs a case; host us a launch (median, min, max)\n", name, n, reps);
  rows_args(&e, 0, 0);
  double base = 0;
  for (int c = 0; c < CASES; c++) {
    double per[256];
    /* The polled and gated cases: a launch on a second queue, held behind
     * a user event (gated, polled, polled-50us) or run to completion
     * first (polled-done, self-read); a thread reads its event's status until the
     * case ends (the polled cases). */
    int gated = c == POLLED || c == POLLED_50US || c == GATED;
    int polled = c == POLLED || c == POLLED_50US || c == POLLED_DONE;
    int side = gated || polled || c == SELF_READ;
    struct poller poller = {NULL, c == POLLED_50US ? 50 : 0, 0, 0};
    cl_event gate = NULL;
    pthread_t thread;
    if (side) {
      if (gated) {
        gate = clCreateUserEvent(e.ctx, &err);
        check(err, "clCreateUserEvent");
      }
      cl_uint one = 1;
      check(clSetKernelArg(e.small, 0, sizeof(cl_mem), &e.f[0]), "clSetKernelArg");
      for (cl_uint i = 1; i < 4; i++) check(clSetKernelArg(e.small, i, sizeof one, &one), "clSetKernelArg");
      size_t b[1] = {256};
      check(clEnqueueNDRangeKernel(e.side, e.small, 1, NULL, b, b, gated ? 1 : 0, gated ? &gate : NULL,
                                   &poller.event),
            "clEnqueueNDRangeKernel");
      check(gated ? clFlush(e.side) : clFinish(e.side), gated ? "clFlush" : "clFinish");
      if (polled) pthread_create(&thread, NULL, poll_loop, &poller);
      e.done = poller.event;
    }
    for (int r = 0; r <= reps; r++) {
      double t0 = now_ms();
      for (int i = 0; i < n; i++) launch(&e, (enum shape)c, i);
      double t1 = now_ms();
      check(clFinish(e.q), "clFinish");
      if (c == EVENTED)
        for (int i = 0; i < n; i++) check(clReleaseEvent(e.events[i]), "clReleaseEvent");
      if (r > 0) per[r - 1] = (t1 - t0) * 1e3 / n; /* the first run warms up */
    }
    if (polled) {
      poller.stop = 1;
      pthread_join(thread, NULL);
    }
    if (gate) {
      check(clSetUserEventStatus(gate, CL_COMPLETE), "clSetUserEventStatus");
      check(clReleaseEvent(gate), "clReleaseEvent");
    }
    if (poller.event) {
      check(clFinish(e.side), "clFinish");
      check(clReleaseEvent(poller.event), "clReleaseEvent");
    }
    qsort(per, (size_t)reps, sizeof *per, by_value);
    if (c == 0) base = per[reps / 2];
    printf("%-11s %6.2f us  (%6.2f, %6.2f)  %.2fx wave-3d", names[c], per[reps / 2], per[0], per[reps - 1],
           per[reps / 2] / base);
    if (polled) printf("  (%ld status reads)", poller.reads);
    printf("\n");
  }
  return 0;
}

/* Does NVIDIA's OpenCL enqueue kernels for two GPUs faster from a thread
 * each than from one thread? The split wave on two GPUs is bound by the
 * host's enqueueing, 63% of it inside clEnqueueNDRangeKernel
 * (docs/results/multi-device-h200x2/opencl-profile/), all from one thread.
 *
 * A context and an in-order queue per GPU (as hetero's default on NVIDIA),
 * a kernel with wave_rows's argument shape (three buffers, five integers,
 * a float) over ITEMS work-items (default one work-group of 256, so the
 * device's time is small and the host's enqueueing is what is timed; more
 * make the device the bound, and show what a deep queue costs the host). Each launch sets every argument, as
 * hetero binds them. Cases, LAUNCHES launches a device each, REPS times:
 *
 *   one-device   device 0 alone, from this thread
 *   one-thread   both devices, alternating launches, from this thread
 *   two-threads  both devices, a thread each, started together
 *
 * Printed: the host's wall time to enqueue (to the last enqueue's return)
 * and to finish, per launch, the median over REPS.
 *
 * Then, as hetero orders work on one GPU after work on another whose
 * context differs (a user event that a waiting thread completes): one
 * launch on device 0 waiting on a user event that another thread
 * completes after 20 ms, then LAUNCHES more behind it. Printed: how long
 * the gated launch's enqueue and the rest took to return: a driver that
 * queues behind an open user event returns at once; one that holds the
 * enqueueing thread until the event completes takes the 20 ms.
 *
 * Build: cc -O2 opencl-launch-threads.c -o opencl-launch-threads path/to/libOpenCL.so.1 -lpthread
 * Run:   opencl-launch-threads [LAUNCHES (2000)] [REPS (7)] [ITEMS (256)] [FLAGS: e, p, s, o, x] [SUBS (64)] */
#include <pthread.h>
#include <unistd.h>

#include "opencl-min.h"

static const char *source =
    "__kernel void rows(__global float *a, __global const float *b, __global const float *c, int nx, int ny,\n"
    "                   int begin, int end, int pad, float s) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < (size_t)nx) a[i] = 0.5f * b[i] + 0.25f * c[i] + s * (float)(begin + end + pad + ny);\n"
    "}\n";

static size_t items = 256;
/* As hetero enqueues: an event returned by every launch (kept until the
 * run ends, as hetero's tracking keeps them until complete), queues with
 * profiling on, and buffers passed as sub-buffers at row offsets. */
static int with_events, with_profiling, with_subbuffers, with_overlap, with_parents;
#define MAX_SUBS 64
static int subs = MAX_SUBS; /* sub-buffers made and used in turn */

struct gpu {
  cl_context ctx;
  cl_command_queue queue;
  cl_kernel kernel;
  cl_mem a, b, c;
  cl_mem whole[3], subs[3][MAX_SUBS];
  cl_event *events;
};


static void launch(struct gpu *g, int step) {
  int nx = 256, ny = 256, begin = step % 7, end = 200, pad = 2;
  float s = 1e-6f * (float)step;
  cl_mem *a = &g->a, *b = &g->b, *c = &g->c;
  if (with_subbuffers) {
    /* One parent buffer for all three, or with 'x' one each (as the wave
     * passes three fields). */
    int pb = with_parents ? 1 : 0, pc = with_parents ? 2 : 0;
    a = &g->subs[0][step % subs];
    b = &g->subs[pb][(step + 1) % subs];
    c = &g->subs[pc][(step + 2) % subs];
  }
  check(clSetKernelArg(g->kernel, 0, sizeof(cl_mem), a), "clSetKernelArg");
  check(clSetKernelArg(g->kernel, 1, sizeof(cl_mem), b), "clSetKernelArg");
  check(clSetKernelArg(g->kernel, 2, sizeof(cl_mem), c), "clSetKernelArg");
  check(clSetKernelArg(g->kernel, 3, sizeof(int), &nx), "clSetKernelArg");
  check(clSetKernelArg(g->kernel, 4, sizeof(int), &ny), "clSetKernelArg");
  check(clSetKernelArg(g->kernel, 5, sizeof(int), &begin), "clSetKernelArg");
  check(clSetKernelArg(g->kernel, 6, sizeof(int), &end), "clSetKernelArg");
  check(clSetKernelArg(g->kernel, 7, sizeof(int), &pad), "clSetKernelArg");
  check(clSetKernelArg(g->kernel, 8, sizeof(float), &s), "clSetKernelArg");
  size_t global = items, local = 256;
  cl_event *event = with_events ? &g->events[step] : NULL;
  check(clEnqueueNDRangeKernel(g->queue, g->kernel, 1, NULL, &global, &local, 0, NULL, event), "clEnqueueNDRangeKernel");
  if (step % 16 == 15) check(clFlush(g->queue), "clFlush");
}

static int launches = 2000;

struct job {
  struct gpu *g;
  double enqueued;
};

static void *run_one(void *p) {
  struct job *job = p;
  double t0 = now_ms();
  for (int i = 0; i < launches; i++) launch(job->g, i);
  job->enqueued = now_ms() - t0;
  check(clFinish(job->g->queue), "clFinish");
  return NULL;
}

static void release_events(struct gpu *g) {
  for (int i = 0; with_events && i < launches; i++) check(clReleaseEvent(g->events[i]), "clReleaseEvent");
}

/* Completes the user event `p` after 20 ms. */
static void *open_later(void *p) {
  usleep(20000);
  check(clSetUserEventStatus((cl_event)p, CL_COMPLETE), "clSetUserEventStatus");
  return NULL;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return v[n / 2];
}

int main(int argc, char **argv) {
  if (argc > 1) launches = atoi(argv[1]);
  int reps = argc > 2 ? atoi(argv[2]) : 7;
  if (argc > 3) items = (size_t)atol(argv[3]) / 256 * 256;
  const char *flags = argc > 4 ? argv[4] : "";
  with_events = strchr(flags, 'e') != NULL;
  with_profiling = strchr(flags, 'p') != NULL;
  with_subbuffers = strchr(flags, 's') != NULL;
  with_overlap = strchr(flags, 'o') != NULL;
  with_parents = strchr(flags, 'x') != NULL;
  if (argc > 5) subs = atoi(argv[5]);
  if (subs < 3 || subs > MAX_SUBS) {
    fprintf(stderr, "SUBS: 3 to %d\n", MAX_SUBS);
    return 2;
  }
  printf("events %d, profiling %d, sub-buffers %d (%d), overlapping %d, a parent each %d\n", with_events,
         with_profiling, with_subbuffers, subs, with_overlap, with_parents);
  if (launches <= 0 || reps <= 0 || reps > 64 || items == 0) {
    fprintf(stderr, "usage: opencl-launch-threads [LAUNCHES] [REPS <= 64] [ITEMS >= 256]\n");
    return 2;
  }
  cl_platform_id platform;
  first_device(&platform);
  cl_device_id devices[2];
  cl_uint found = 0;
  /* Two GPUs, else any two devices (PoCL's, to try the program). */
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_GPU, 2, devices, &found) != 0 || found < 2) {
    check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 2, devices, &found), "clGetDeviceIDs");
  }
  if (found < 2) {
    fprintf(stderr, "two devices of one platform needed, found %u\n", found);
    return 1;
  }
  struct gpu gpus[2];
  for (int d = 0; d < 2; d++) {
    cl_int err;
    char name[256] = {0};
    clGetDeviceInfo(devices[d], CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    printf("device %d: %s\n", d, name);
    gpus[d].ctx = clCreateContext(NULL, 1, &devices[d], NULL, NULL, &err);
    check(err, "clCreateContext");
    gpus[d].queue =
        clCreateCommandQueue(gpus[d].ctx, devices[d], with_profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    check(err, "clCreateCommandQueue");
    gpus[d].kernel = build_kernel(gpus[d].ctx, devices[d], 1, &source, "", "rows");
    cl_mem *bufs[3] = {&gpus[d].a, &gpus[d].b, &gpus[d].c};
    for (int i = 0; i < 3; i++) {
      *bufs[i] = clCreateBuffer(gpus[d].ctx, CL_MEM_READ_WRITE, 256 * sizeof(float), NULL, &err);
      check(err, "clCreateBuffer");
    }
    gpus[d].events = calloc((size_t)launches, sizeof(cl_event));
    /* Sub-buffers of one row each, or with 'o' of 32 rows each, each
     * starting a row after the last (overlapping, as a band's shrinking
     * row ranges do). */
    size_t row = 4096 * sizeof(float), rows = with_overlap ? 32 : 1;
    for (int p = 0; p < 3; p++) {
      gpus[d].whole[p] = clCreateBuffer(gpus[d].ctx, CL_MEM_READ_WRITE, (MAX_SUBS + rows) * row, NULL, &err);
      check(err, "clCreateBuffer");
      for (int i = 0; i < subs; i++) {
        size_t region[2] = {(size_t)i * row, rows * row};
        gpus[d].subs[p][i] =
            clCreateSubBuffer(gpus[d].whole[p], CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, region, &err);
        check(err, "clCreateSubBuffer");
      }
    }
    float zero = 0.0f;
    for (int i = 0; i < 3; i++) {
      check(clEnqueueFillBuffer(gpus[d].queue, *bufs[i], &zero, sizeof zero, 0, 256 * sizeof(float), 0, NULL, NULL),
            "clEnqueueFillBuffer");
    }
    check(clFinish(gpus[d].queue), "clFinish");
  }
  const char *cases[3] = {"one-device", "one-thread", "two-threads"};
  for (int c = 0; c < 3; c++) {
    double enq[64], fin[64];
    for (int r = 0; r < reps + 1; r++) {
      double t0 = now_ms(), enqueued;
      if (c == 0) {
        struct job job = {&gpus[0], 0};
        run_one(&job);
        enqueued = job.enqueued;
        release_events(&gpus[0]);
      } else if (c == 1) {
        for (int i = 0; i < launches; i++) {
          launch(&gpus[0], i);
          launch(&gpus[1], i);
        }
        enqueued = now_ms() - t0;
        check(clFinish(gpus[0].queue), "clFinish");
        check(clFinish(gpus[1].queue), "clFinish");
        release_events(&gpus[0]);
        release_events(&gpus[1]);
      } else {
        struct job jobs[2] = {{&gpus[0], 0}, {&gpus[1], 0}};
        pthread_t threads[2];
        for (int d = 0; d < 2; d++) pthread_create(&threads[d], NULL, run_one, &jobs[d]);
        for (int d = 0; d < 2; d++) pthread_join(threads[d], NULL);
        for (int d = 0; d < 2; d++) release_events(&gpus[d]);
        enqueued = jobs[0].enqueued > jobs[1].enqueued ? jobs[0].enqueued : jobs[1].enqueued;
      }
      double finished = now_ms() - t0;
      if (r > 0) { /* the first is a warm-up */
        enq[r - 1] = enqueued;
        fin[r - 1] = finished;
      }
    }
    int per = c == 0 ? launches : 2 * launches;
    double e = median(enq, reps), f = median(fin, reps);
    printf("%-12s %zu items, %d launches: enqueued in %.2f ms (%.2f us a launch), finished in %.2f ms (%.2f us a launch)\n",
           cases[c], items, per, e, 1e3 * e / per, f, 1e3 * f / per);
  }
  cl_int err;
  cl_event gate = clCreateUserEvent(gpus[0].ctx, &err);
  check(err, "clCreateUserEvent");
  pthread_t opener;
  double t0 = now_ms();
  pthread_create(&opener, NULL, open_later, gate);
  size_t global = 256, local = 256;
  check(clEnqueueNDRangeKernel(gpus[0].queue, gpus[0].kernel, 1, NULL, &global, &local, 1, &gate, NULL),
        "clEnqueueNDRangeKernel");
  double gated = now_ms() - t0;
  int was = with_events;
  with_events = 0;
  for (int i = 0; i < launches; i++) launch(&gpus[0], i);
  with_events = was;
  double rest = now_ms() - t0;
  check(clFinish(gpus[0].queue), "clFinish");
  double finished = now_ms() - t0;
  pthread_join(opener, NULL);
  printf("gated: the launch behind an open user event returned after %.2f ms, %d launches behind it after %.2f ms, "
         "finished after %.2f ms (the event completed at 20 ms)\n",
         gated, launches, rest, finished);
  clReleaseEvent(gate);
  return 0;
}

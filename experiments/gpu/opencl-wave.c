/* The wave workload's synchronous variant through raw OpenCL calls, without
 * hetero, run again and again in one process.
 *
 * On NVIDIA's OpenCL, hetero's wave variants at 4096^2 were reported at
 * 4.5 to 54 times the others' time in the same process, while their copies
 * took their usual time. This program asked whether the runtime does that
 * with no hetero in between. It never did; the cause was a timing error in
 * hetero (docs/results/opencl-timing-h100/). It builds hetero's
 * own wave kernel (the
 * OpenCL prelude, the common functions and wave.kern, as hetero assembles
 * them) and runs `steps` steps on five rotating fields, reading every
 * `every`-th new field into its slot of a pinned (CL_MEM_ALLOC_HOST_PTR,
 * mapped) array on the same in-order queue, `reps` times, in two styles:
 *
 *   plain    each command's event is released at once; the queue is
 *            flushed after every 16 commands (hetero's flush policy)
 *   spans    as hetero's timeline does it: every command's event is kept
 *            until the run ends; before each step the previous step's
 *            event is queried once flushed, and a marker is enqueued when
 *            it has completed (a completed command cannot stand for a
 *            timed recording); the queue is also flushed when its oldest
 *            unflushed command is 100 us old
 *
 * For each run it prints the host wall time, the device span (first
 * step's start to the last command's end, from profiling), the summed
 * step times, the longest step, and the summed gaps between steps.
 *
 * Build: cc -O2 opencl-wave.c -o opencl-wave path/to/libOpenCL.so.1
 * Run:   opencl-wave KERNELS_DIR [reps (8)] [side (4096)] [steps (1000)] [every (100)]
 *        KERNELS_DIR is hetero's kernels/src.
 *
 * The OpenCL declarations it needs are in opencl-min.h. */
#include "opencl-min.h"

static char *slurp(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = calloc(n + 1, 1);
  if (fread(text, 1, n, f) != (size_t)n) exit(2);
  fclose(f);
  return text;
}

struct wave {
  cl_command_queue queue;
  cl_kernel kernel;
  cl_mem fields[5];
  float *pinned;
  cl_uint side;
  int steps, every;
};

/* The queue's flush policy: after 16 unflushed commands, or (spans) when
 * the oldest unflushed one is 100 us old. */
struct flusher {
  int unflushed;
  double oldest;
};

static void enqueued(struct wave *w, struct flusher *f, int spans) {
  double t = now_ms();
  if (f->unflushed++ == 0) f->oldest = t;
  if (f->unflushed >= 16 || (spans && t - f->oldest >= 0.1)) {
    check(clFlush(w->queue), "clFlush");
    f->unflushed = 0;
  }
}

/* One run; prints its line. */
static void run(struct wave *w, int spans, int rep) {
  int snapshots = w->steps / w->every, count = 0;
  cl_event *steps = calloc(w->steps, sizeof(cl_event)), *kept = calloc(2 * w->steps + snapshots, sizeof(cl_event));
  size_t cells = (size_t)w->side * w->side, bytes = cells * 4;
  float zero = 0;
  for (int i = 0; i < 5; ++i)
    check(clEnqueueFillBuffer(w->queue, w->fields[i], &zero, 4, 0, bytes, 0, NULL, NULL), "clEnqueueFillBuffer");
  check(clFinish(w->queue), "clFinish");
  struct flusher f = {0, 0};
  size_t global[3] = {(w->side + 255) / 256 * 256, (w->side + 3) / 4, 1}, local[3] = {256, 1, 1};
  cl_uint sx = w->side / 2, c2bits;
  float c2 = 0.25f;
  memcpy(&c2bits, &c2, 4);
  int markers = 0;
  double t0 = now_ms();
  for (int s = 0; s < w->steps; ++s) {
    if (spans && s > 0 && f.unflushed == 0) {
      cl_int status = 1;
      check(clGetEventInfo(steps[s - 1], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL),
            "clGetEventInfo");
      if (status == CL_COMPLETE) {
        check(clEnqueueMarkerWithWaitList(w->queue, 0, NULL, &kept[count++]), "clEnqueueMarkerWithWaitList");
        ++markers;
        enqueued(w, &f, spans);
      }
    }
    float src = (s % 25 == 0) ? 1.0f : 0.0f;
    cl_mem a = w->fields[s % 5], b = w->fields[(s + 1) % 5], c = w->fields[(s + 2) % 5];
    check(clSetKernelArg(w->kernel, 0, sizeof a, &a), "clSetKernelArg");
    check(clSetKernelArg(w->kernel, 1, sizeof b, &b), "clSetKernelArg");
    check(clSetKernelArg(w->kernel, 2, sizeof c, &c), "clSetKernelArg");
    check(clSetKernelArg(w->kernel, 3, 4, &w->side), "clSetKernelArg");
    check(clSetKernelArg(w->kernel, 4, 4, &w->side), "clSetKernelArg");
    check(clSetKernelArg(w->kernel, 5, 4, &c2), "clSetKernelArg");
    check(clSetKernelArg(w->kernel, 6, 4, &sx), "clSetKernelArg");
    check(clSetKernelArg(w->kernel, 7, 4, &sx), "clSetKernelArg");
    check(clSetKernelArg(w->kernel, 8, 4, &src), "clSetKernelArg");
    check(clEnqueueNDRangeKernel(w->queue, w->kernel, 3, NULL, global, local, 0, NULL, &steps[s]),
          "clEnqueueNDRangeKernel");
    enqueued(w, &f, spans);
    if ((s + 1) % w->every == 0) {
      size_t slot = (s + 1) / w->every - 1;
      cl_event copied;
      check(clEnqueueReadBuffer(w->queue, c, CL_FALSE, 0, bytes, w->pinned + slot * cells, 0, NULL, &copied),
            "clEnqueueReadBuffer");
      if (spans) {
        kept[count++] = copied;
      } else {
        clReleaseEvent(copied);
      }
      enqueued(w, &f, spans);
    }
  }
  double host_ms = now_ms() - t0;
  check(clFlush(w->queue), "clFlush");
  check(clWaitForEvents(1, &steps[w->steps - 1]), "clWaitForEvents");
  check(clFinish(w->queue), "clFinish");
  double wall_ms = now_ms() - t0;
  double sum = 0, longest = 0, gaps = 0;
  cl_ulong first = stamp(steps[0], CL_PROFILING_COMMAND_START), last = 0, previous_end = 0;
  for (int s = 0; s < w->steps; ++s) {
    cl_ulong a = stamp(steps[s], CL_PROFILING_COMMAND_START), b = stamp(steps[s], CL_PROFILING_COMMAND_END);
    double ms = (b - a) / 1e6;
    sum += ms;
    if (ms > longest) longest = ms;
    if (s > 0 && a > previous_end) gaps += (a - previous_end) / 1e6;
    previous_end = b;
    if (b > last) last = b;
  }
  printf("%-6s %3d %10.3f %10.3f %10.3f %10.3f %9.3f %10.3f %7d\n", spans ? "spans" : "plain", rep, wall_ms,
         host_ms, (last - first) / 1e6, sum, longest, gaps, markers);
  fflush(stdout);
  for (int s = 0; s < w->steps; ++s) clReleaseEvent(steps[s]);
  for (int i = 0; i < count; ++i) clReleaseEvent(kept[i]);
  free(steps);
  free(kept);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s KERNELS_DIR [reps] [side] [steps] [every]\n", argv[0]);
    return 2;
  }
  int reps = argc > 2 ? atoi(argv[2]) : 8;
  struct wave w = {0};
  w.side = argc > 3 ? (cl_uint)strtoul(argv[3], NULL, 10) : 4096;
  w.steps = argc > 4 ? atoi(argv[4]) : 1000;
  w.every = argc > 5 ? atoi(argv[5]) : 100;
  if (reps < 1 || w.side < 5 || w.steps < 1 || w.every < 1 || w.every > w.steps) {
    fprintf(stderr, "usage: %s KERNELS_DIR [reps >= 1] [side >= 5] [steps >= 1] [every in 1..=steps]\n", argv[0]);
    return 2;
  }
  /* hetero's assembly: prelude, common functions, then the kernel file. */
  char *prelude = slurp(argv[1], "prelude/opencl.h"), *common = slurp(argv[1], "portable/common.kern"),
       *wave = slurp(argv[1], "portable/wave.kern");
  const char *parts[5] = {prelude, "\n", common, "\n#line 1\n", wave};

  cl_device_id device;
  char name[256];
  cl_context ctx = first_context(&device, name, sizeof name);
  cl_int err;
  w.queue = clCreateCommandQueue(ctx, device, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "clCreateCommandQueue");
  w.kernel = build_kernel(ctx, device, 5, parts, "-cl-std=CL1.2", "wave_step");
  size_t bytes = (size_t)w.side * w.side * 4, snapshots = w.steps / w.every;
  for (int i = 0; i < 5; ++i) {
    w.fields[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    check(err, "clCreateBuffer");
  }
  cl_mem host = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes * snapshots, NULL, &err);
  check(err, "clCreateBuffer");
  cl_command_queue mapper = clCreateCommandQueue(ctx, device, 0, &err);
  check(err, "clCreateCommandQueue");
  w.pinned = clEnqueueMapBuffer(mapper, host, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes * snapshots, 0, NULL,
                                NULL, &err);
  check(err, "clEnqueueMapBuffer");
  memset(w.pinned, 0, bytes * snapshots);

  printf("device: %s; %u^2 cells, %d steps, a snapshot every %d, %d runs of each style\n", name, w.side, w.steps,
         w.every, reps);
  printf("%-6s %3s %10s %10s %10s %10s %9s %10s %7s\n", "style", "run", "wall ms", "enqueue ms", "device ms",
         "steps ms", "max step", "gaps ms", "markers");
  run(&w, 0, -1); /* warm-up */
  for (int r = 0; r < reps; ++r) {
    run(&w, 0, r);
    run(&w, 1, r);
  }
  return 0;
}

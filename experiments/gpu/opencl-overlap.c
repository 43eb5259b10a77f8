/* Copy/compute overlap through raw OpenCL calls, without hetero.
 *
 * One in-order queue computes (a kernel that rewrites a device buffer
 * `rounds` times); another copies a device buffer to pinned host memory (a
 * CL_MEM_ALLOC_HOST_PTR buffer mapped once). The kernel's rounds are
 * calibrated so that one kernel takes about as long as one copy, then
 * `count` kernels and `count` copies run in these arrangements:
 *
 *   compute-only     the kernels alone, on the compute queue
 *   copy-only        the copies alone, on the copy queue
 *   one-queue        kernel, copy, kernel, copy... on the compute queue
 *   two-queues       kernels and copies on their own queues, each flushed
 *                    after every enqueue
 *   two-unflushed    as two-queues, but the copy queue is flushed only by
 *                    the final wait (what a runtime that flushes a queue
 *                    only when something waits on it does)
 *   two-events       as two-queues, with wave's dependencies: copy i waits
 *                    for kernel i's event, kernel i+2 for copy i's event
 *   two-pageable     as two-queues, copying to malloc'd (pageable) memory
 *
 * For each it prints the wall time (host clock, after one warm-up run) and
 * the share of the shorter of compute and copy that was hidden:
 * (compute + copy - time) / min(compute, copy).
 *
 * Build: cc -O2 opencl-overlap.c -o opencl-overlap path/to/libOpenCL.so.1
 * Run:   opencl-overlap [copy MiB (default 64)] [count (default 20)]
 *
 * The OpenCL declarations it needs are in opencl-min.h. */
#include "opencl-min.h"

static const char *SOURCE =
    "__kernel void work(__global float *a, uint rounds) {\n"
    "  size_t i = get_global_id(0);\n"
    "  float v = a[i];\n"
    "  for (uint r = 0; r < rounds; ++r) v = v * 0.999f + 0.001f;\n"
    "  a[i] = v;\n"
    "}\n";

enum arrangement { COMPUTE_ONLY, COPY_ONLY, ONE_QUEUE, TWO_QUEUES, TWO_UNFLUSHED, TWO_EVENTS, TWO_PAGEABLE, COUNT };
static const char *NAMES[COUNT] = {"compute-only",  "copy-only",  "one-queue",   "two-queues",
                                   "two-unflushed", "two-events", "two-pageable"};

struct setup {
  cl_command_queue compute, copier;
  cl_kernel kernel;
  cl_mem work, source;
  void *pinned, *pageable;
  size_t cells, bytes;
  int count;
};

static void kernel_on(struct setup *s, cl_command_queue q, cl_uint waits, const cl_event *list, cl_event *ev) {
  size_t global = s->cells, local = 256;
  check(clEnqueueNDRangeKernel(q, s->kernel, 1, NULL, &global, &local, waits, list, ev), "clEnqueueNDRangeKernel");
}

static void copy_on(struct setup *s, cl_command_queue q, void *dst, cl_uint waits, const cl_event *list,
                    cl_event *ev) {
  check(clEnqueueReadBuffer(q, s->source, CL_FALSE, 0, s->bytes, dst, waits, list, ev), "clEnqueueReadBuffer");
}

/* Runs one arrangement; returns its wall time in ms. */
static double run(struct setup *s, enum arrangement a) {
  cl_event *kernels = calloc(s->count, sizeof(cl_event)), *copies = calloc(s->count, sizeof(cl_event));
  double t0 = now_ms();
  for (int i = 0; i < s->count; ++i) {
    switch (a) {
    case COMPUTE_ONLY:
      kernel_on(s, s->compute, 0, NULL, NULL);
      check(clFlush(s->compute), "clFlush");
      break;
    case COPY_ONLY:
      copy_on(s, s->copier, s->pinned, 0, NULL, NULL);
      check(clFlush(s->copier), "clFlush");
      break;
    case ONE_QUEUE:
      kernel_on(s, s->compute, 0, NULL, NULL);
      copy_on(s, s->compute, s->pinned, 0, NULL, NULL);
      check(clFlush(s->compute), "clFlush");
      break;
    case TWO_QUEUES:
    case TWO_UNFLUSHED:
    case TWO_PAGEABLE:
      kernel_on(s, s->compute, 0, NULL, NULL);
      check(clFlush(s->compute), "clFlush");
      copy_on(s, s->copier, a == TWO_PAGEABLE ? s->pageable : s->pinned, 0, NULL, NULL);
      if (a != TWO_UNFLUSHED) check(clFlush(s->copier), "clFlush");
      break;
    case TWO_EVENTS:
      kernel_on(s, s->compute, i >= 2, i >= 2 ? &copies[i - 2] : NULL, &kernels[i]);
      check(clFlush(s->compute), "clFlush");
      copy_on(s, s->copier, s->pinned, 1, &kernels[i], &copies[i]);
      check(clFlush(s->copier), "clFlush");
      break;
    default:
      break;
    }
  }
  check(clFinish(s->compute), "clFinish");
  check(clFinish(s->copier), "clFinish");
  double t = now_ms() - t0;
  for (int i = 0; i < s->count; ++i) {
    if (kernels[i]) clReleaseEvent(kernels[i]);
    if (copies[i]) clReleaseEvent(copies[i]);
  }
  free(kernels);
  free(copies);
  return t;
}

static double kernel_ms(struct setup *s, cl_uint rounds) {
  check(clSetKernelArg(s->kernel, 1, sizeof rounds, &rounds), "clSetKernelArg");
  run(s, COMPUTE_ONLY);
  return run(s, COMPUTE_ONLY) / s->count;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  int count = argc > 2 ? atoi(argv[2]) : 20;
  if (mib == 0 || count < 3) {
    fprintf(stderr, "usage: %s [copy MiB > 0] [count >= 3]\n", argv[0]);
    return 2;
  }
  cl_platform_id platform = NULL;
  cl_device_id device = first_device(&platform);
  char name[256] = {0}, pname[256] = {0};
  clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
  printf("device: %s (%s)\n", name, pname);

  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  check(err, "clCreateContext");
  struct setup s = {0};
  s.count = count;
  s.bytes = mib << 20;
  s.cells = (16u << 20) / 4; /* the kernel rewrites 16 MiB */
  s.compute = clCreateCommandQueue(ctx, device, 0, &err);
  check(err, "clCreateCommandQueue");
  s.copier = clCreateCommandQueue(ctx, device, 0, &err);
  check(err, "clCreateCommandQueue");
  s.kernel = build_kernel(ctx, device, 1, &SOURCE, "", "work");
  s.work = clCreateBuffer(ctx, CL_MEM_READ_WRITE, s.cells * 4, NULL, &err);
  check(err, "clCreateBuffer");
  s.source = clCreateBuffer(ctx, CL_MEM_READ_WRITE, s.bytes, NULL, &err);
  check(err, "clCreateBuffer");
  cl_mem host = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, s.bytes, NULL, &err);
  check(err, "clCreateBuffer");
  s.pinned = clEnqueueMapBuffer(s.copier, host, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, s.bytes, 0, NULL, NULL, &err);
  check(err, "clEnqueueMapBuffer");
  memset(s.pinned, 0, s.bytes);
  s.pageable = malloc(s.bytes);
  memset(s.pageable, 0, s.bytes);
  check(clSetKernelArg(s.kernel, 0, sizeof s.work, &s.work), "clSetKernelArg");

  /* Calibrate: one kernel about as long as one copy. */
  run(&s, COPY_ONLY);
  double copy_one = run(&s, COPY_ONLY) / count;
  cl_uint rounds = 64;
  double k = kernel_ms(&s, rounds);
  for (int tries = 0; tries < 4 && k > 0; ++tries) {
    double scaled = rounds * copy_one / k;
    rounds = scaled < 1 ? 1 : scaled > 1e7 ? 10000000 : (cl_uint)scaled;
    k = kernel_ms(&s, rounds);
  }
  printf("copy: %zu MiB, %.3f ms each (%.1f GB/s); kernel: %u rounds, %.3f ms each; %d of each\n", mib, copy_one,
         s.bytes / copy_one / 1e6, rounds, k, count);

  double t[COUNT];
  for (int a = 0; a < COUNT; ++a) {
    run(&s, a); /* warm-up */
    t[a] = run(&s, a);
  }
  double compute = t[COMPUTE_ONLY], copy = t[COPY_ONLY];
  double shorter = compute < copy ? compute : copy, ideal = compute > copy ? compute : copy;
  printf("%-14s %10s %10s %8s\n", "arrangement", "ms", "of ideal", "hidden");
  for (int a = 0; a < COUNT; ++a) {
    if (a == COMPUTE_ONLY || a == COPY_ONLY) {
      printf("%-14s %10.3f\n", NAMES[a], t[a]);
    } else {
      printf("%-14s %10.3f %9.2fx %7.0f%%\n", NAMES[a], t[a], t[a] / ideal, 100 * (compute + copy - t[a]) / shorter);
    }
  }
  return 0;
}

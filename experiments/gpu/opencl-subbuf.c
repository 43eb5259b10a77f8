/* Does NVIDIA's OpenCL fault when a kernel object still has, as an
 * argument, a sub-buffer that was released? Without hetero.
 *
 * hetero passes a kernel argument at a byte offset into a buffer as a
 * sub-buffer of it, and releases the sub-buffer with the buffer; the
 * kernel object keeps the last arguments set on it. Each case below runs
 * in its own child process, which prints a marker after each step, and
 * the parent prints how the child ended:
 *
 *   plain      the argument is a whole buffer; the buffer is released,
 *              then the kernel, the queue and the context
 *   sub        the argument is a sub-buffer; sub-buffer and buffer are
 *              released, then the kernel, the queue and the context
 *   sub-reset  as sub, but the argument is set to NULL after the kernel
 *              ran and before the sub-buffer is released
 *   sub-reuse  as sub, but the kernel is then launched again with another
 *              buffer before it is released
 *   sub-many   300 rounds of: a new buffer, a launch on a sub-buffer of it,
 *              release of both, with one kernel object throughout
 *   sub-many-reset  as sub-many, the argument set to NULL after each launch
 *   mixed      hetero's stress with scans, in raw calls: four buffers, each
 *              with sub-buffers at multiples of 1 KiB made on first use and
 *              released with it; random fills, copies, host reads and
 *              writes, kernels on whole buffers, and a kernel with a
 *              __local argument reading a sub-buffer of one buffer and
 *              writing one of another; every 40 commands one buffer is
 *              released (after a clFinish) and made again
 *   mixed-nofinish  as mixed, without the clFinish before a release
 *   mixed-nolocal   as mixed, the two-buffer kernel without the __local argument
 *   mixed-ops=LETTERS  as mixed with only the commands named: f fill,
 *              c copy, r read, w write, k kernel on a whole buffer,
 *              s kernel on sub-buffers
 *   subs-OVERLAP-USE[-N]  one buffer with N (default 2) sub-buffers, from
 *              1, 2, ... KiB to the end (OVERLAP overlap) or of 1 KiB each
 *              (apart), each used by a kernel (used) or not (unused); then
 *              released
 *   seq:T,T,...  a sequence on one buffer, each step printed: cN makes
 *              sub-buffer N (1: from 1 KiB to the end, 2: from 2 KiB to the
 *              end, 3: 1-3 KiB, 4: 2-4 KiB, 5: 3-4 KiB), uN runs a kernel on
 *              it, uNM one kernel reading N and writing M, p a kernel on the
 *              whole buffer, f clFinish, rN releases sub-buffer N, R the
 *              buffer
 *
 * Build: cc -O2 opencl-subbuf.c -o opencl-subbuf path/to/libOpenCL.so.1
 * Run:   opencl-subbuf [case...]   (default: every case) */
#include <sys/wait.h>
#include <unistd.h>

#include "opencl-min.h"

static const char *SOURCE = "__kernel void add(__global uint *a, uint n) {\n"
                            "  size_t i = get_global_id(0);\n"
                            "  if (i < n) a[i] += 1;\n"
                            "}\n"
                            "__kernel void pass(__global const uint *a, __global uint *b, uint n, __local uint *t) {\n"
                            "  size_t i = get_global_id(0);\n"
                            "  t[get_local_id(0)] = i < n ? a[i] : 0;\n"
                            "  barrier(CLK_LOCAL_MEM_FENCE);\n"
                            "  if (i < n) b[i] = t[get_local_id(0)] + 1;\n"
                            "}\n"
                            "__kernel void pass2(__global const uint *a, __global uint *b, uint n) {\n"
                            "  size_t i = get_global_id(0);\n"
                            "  if (i < n) b[i] = a[i] + 1;\n"
                            "}\n";

#define ELEMS 4096
#define OFFSET 1024 /* bytes: a multiple of every device's base alignment */

static void step(const char *what) {
  fprintf(stderr, "  %s\n", what);
  fflush(stderr);
}

/* The sub-buffer of `buffer` over `length` bytes from `origin`. */
static cl_mem sub_of(cl_mem buffer, size_t origin, size_t length) {
  size_t region[2] = {origin, length};
  cl_int err;
  cl_mem sub = clCreateSubBuffer(buffer, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, region, &err);
  check(err, "clCreateSubBuffer");
  return sub;
}

static void launch(cl_command_queue q, cl_kernel k, cl_mem arg, cl_uint n) {
  check(clSetKernelArg(k, 0, sizeof arg, &arg), "clSetKernelArg");
  check(clSetKernelArg(k, 1, sizeof n, &n), "clSetKernelArg");
  size_t global = ELEMS;
  check(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL), "clEnqueueNDRangeKernel");
  check(clFinish(q), "clFinish");
}

static void reset(cl_kernel k) {
  check(clSetKernelArg(k, 0, sizeof(cl_mem), NULL), "clSetKernelArg(NULL)");
}

#define SLOTS 4
#define OFFSETS 16 /* sub-buffers at k KiB, k in 1..OFFSETS-1 */

struct slot {
  cl_mem mem;
  cl_mem subs[OFFSETS];
};

static cl_mem sub_at(struct slot *s, int k) {
  if (!s->subs[k]) s->subs[k] = sub_of(s->mem, (size_t)k * OFFSET, ELEMS * 4 - (size_t)k * OFFSET);
  return s->subs[k];
}

static void release_slot(struct slot *s) {
  static int first = 1;
  if (first) step("first release");
  for (int k = 0; k < OFFSETS; ++k)
    if (s->subs[k]) check(clReleaseMemObject(s->subs[k]), "clReleaseMemObject(sub)");
  check(clReleaseMemObject(s->mem), "clReleaseMemObject");
  memset(s, 0, sizeof *s);
  if (first) step("first release returned");
  first = 0;
}

static int mixed(cl_context ctx, cl_device_id device, cl_command_queue q, const char *name) {
  int finish = strstr(name, "nofinish") == NULL, local = strstr(name, "nolocal") == NULL;
  const char *ops = strncmp(name, "mixed-ops=", 10) == 0 ? name + 10 : "fcrwks";
  cl_int err;
  cl_kernel add = build_kernel(ctx, device, 1, &SOURCE, "", "add");
  cl_kernel pass = build_kernel(ctx, device, 1, &SOURCE, "", local ? "pass" : "pass2");
  struct slot slots[SLOTS] = {0};
  static cl_uint host[ELEMS];
  unsigned seed = 12345;
  for (int op = 0; op < 6000; ++op) {
    if (op % 40 == 39) {
      if (finish) check(clFinish(q), "clFinish");
      release_slot(&slots[(seed >> 24) % SLOTS]);
    }
    for (int i = 0; i < SLOTS; ++i)
      if (!slots[i].mem) {
        slots[i].mem = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ELEMS * 4, NULL, &err);
        check(err, "clCreateBuffer");
      }
    seed = seed * 1103515245u + 12345u;
    int a = (seed >> 8) % SLOTS, b = (a + 1 + (seed >> 12) % (SLOTS - 1)) % SLOTS, k = 1 + (seed >> 16) % (OFFSETS - 1);
    cl_uint zero = 0, n = ELEMS - k * OFFSET / 4;
    int kind = (seed >> 20) % 6;
    if (!strchr(ops, "fcrwks"[kind])) continue;
    switch (kind) {
    case 0:
      check(clEnqueueFillBuffer(q, slots[a].mem, &zero, 4, 0, ELEMS * 4, 0, NULL, NULL), "clEnqueueFillBuffer");
      break;
    case 1:
      check(clEnqueueCopyBuffer(q, slots[a].mem, slots[b].mem, 0, 0, ELEMS * 4, 0, NULL, NULL), "clEnqueueCopyBuffer");
      break;
    case 2:
      check(clEnqueueReadBuffer(q, slots[a].mem, CL_TRUE, 0, ELEMS * 4, host, 0, NULL, NULL), "clEnqueueReadBuffer");
      break;
    case 3:
      check(clEnqueueWriteBuffer(q, slots[a].mem, CL_TRUE, 0, ELEMS * 4, host, 0, NULL, NULL), "clEnqueueWriteBuffer");
      break;
    case 4: {
      cl_uint all = ELEMS;
      check(clSetKernelArg(add, 0, sizeof(cl_mem), &slots[a].mem), "clSetKernelArg");
      check(clSetKernelArg(add, 1, sizeof all, &all), "clSetKernelArg");
      size_t global = ELEMS;
      check(clEnqueueNDRangeKernel(q, add, 1, NULL, &global, NULL, 0, NULL, NULL), "clEnqueueNDRangeKernel");
      break;
    }
    default: {
      cl_mem from = sub_at(&slots[a], k), to = sub_at(&slots[b], k);
      check(clSetKernelArg(pass, 0, sizeof from, &from), "clSetKernelArg");
      check(clSetKernelArg(pass, 1, sizeof to, &to), "clSetKernelArg");
      check(clSetKernelArg(pass, 2, sizeof n, &n), "clSetKernelArg");
      if (local) check(clSetKernelArg(pass, 3, 256 * 4, NULL), "clSetKernelArg(local)");
      size_t global = ELEMS, group = 256;
      check(clEnqueueNDRangeKernel(q, pass, 1, NULL, &global, &group, 0, NULL, NULL), "clEnqueueNDRangeKernel");
      break;
    }
    }
  }
  check(clFinish(q), "clFinish");
  step("every command returned");
  for (int i = 0; i < SLOTS; ++i)
    if (slots[i].mem) release_slot(&slots[i]);
  step("every buffer released");
  check(clReleaseKernel(add), "clReleaseKernel");
  check(clReleaseKernel(pass), "clReleaseKernel");
  return 0;
}

static int two_subs(cl_context ctx, cl_device_id device, cl_command_queue q, const char *name) {
  int overlap = strstr(name, "overlap") != NULL, used = strstr(name, "-used") != NULL;
  const char *dash = strrchr(name, '-');
  int count = dash && dash[1] >= '0' && dash[1] <= '9' ? atoi(dash + 1) : 2;
  if (count < 1 || count >= OFFSETS) count = 2;
  cl_int err;
  cl_kernel k = build_kernel(ctx, device, 1, &SOURCE, "", "add");
  cl_mem buffer = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ELEMS * 4, NULL, &err);
  check(err, "clCreateBuffer");
  cl_uint zero = 0;
  check(clEnqueueFillBuffer(q, buffer, &zero, 4, 0, ELEMS * 4, 0, NULL, NULL), "clEnqueueFillBuffer");
  cl_mem subs[OFFSETS];
  for (int i = 0; i < count; ++i) {
    size_t origin = (size_t)(i + 1) * OFFSET;
    subs[i] = sub_of(buffer, origin, overlap ? ELEMS * 4 - origin : OFFSET);
    if (used) launch(q, k, subs[i], OFFSET / 4);
  }
  check(clFinish(q), "clFinish");
  step("sub-buffers made");
  for (int i = 0; i < count; ++i) {
    check(clReleaseMemObject(subs[i]), "clReleaseMemObject(sub)");
    step("a sub-buffer released");
  }
  check(clReleaseMemObject(buffer), "clReleaseMemObject");
  check(clReleaseKernel(k), "clReleaseKernel");
  return 0;
}

static int sequence(cl_context ctx, cl_device_id device, cl_command_queue q, const char *tokens) {
  static const size_t regions[6][2] = {{0, 0}, {1024, 15360}, {2048, 14336}, {1024, 2048}, {2048, 2048}, {3072, 1024}};
  cl_int err;
  cl_kernel add = build_kernel(ctx, device, 1, &SOURCE, "", "add");
  cl_kernel pass = build_kernel(ctx, device, 1, &SOURCE, "", "pass2");
  cl_mem buffer = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ELEMS * 4, NULL, &err), subs[6] = {0};
  check(err, "clCreateBuffer");
  cl_uint zero = 0, n = 256;
  check(clEnqueueFillBuffer(q, buffer, &zero, 4, 0, ELEMS * 4, 0, NULL, NULL), "clEnqueueFillBuffer");
  char list[256];
  snprintf(list, sizeof list, "%s", tokens);
  for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
    int a = t[1] ? t[1] - '0' : 0, b = t[1] && t[2] ? t[2] - '0' : 0;
    if ((a < 0 || a > 5) || (b < 0 || b > 5)) a = b = 0;
    switch (t[0]) {
    case 'c':
      subs[a] = sub_of(buffer, regions[a][0], regions[a][1]);
      break;
    case 'u':
      if (b) {
        check(clSetKernelArg(pass, 0, sizeof(cl_mem), &subs[a]), "clSetKernelArg");
        check(clSetKernelArg(pass, 1, sizeof(cl_mem), &subs[b]), "clSetKernelArg");
        check(clSetKernelArg(pass, 2, sizeof n, &n), "clSetKernelArg");
        size_t global = 256;
        check(clEnqueueNDRangeKernel(q, pass, 1, NULL, &global, NULL, 0, NULL, NULL), "clEnqueueNDRangeKernel");
      } else {
        launch(q, add, subs[a], n);
      }
      break;
    case 'p': launch(q, add, buffer, ELEMS); break;
    case 'f': check(clFinish(q), "clFinish"); break;
    case 'r': check(clReleaseMemObject(subs[a]), "clReleaseMemObject(sub)"); break;
    case 'R': check(clReleaseMemObject(buffer), "clReleaseMemObject"); break;
    default: fprintf(stderr, "unknown step %s\n", t); return 1;
    }
    step(t);
  }
  check(clFinish(q), "clFinish");
  check(clReleaseKernel(add), "clReleaseKernel");
  check(clReleaseKernel(pass), "clReleaseKernel");
  return 0;
}

static int run(const char *name) {
  cl_platform_id platform;
  cl_device_id device = first_device(&platform);
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  check(err, "clCreateContext");
  cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
  check(err, "clCreateCommandQueue");
  if (strncmp(name, "mixed", 5) == 0 || strncmp(name, "subs-", 5) == 0 || strncmp(name, "seq:", 4) == 0) {
    if (name[0] == 'm')
      mixed(ctx, device, q, name);
    else if (strncmp(name, "seq:", 4) == 0)
      sequence(ctx, device, q, name + 4);
    else
      two_subs(ctx, device, q, name);
    check(clReleaseCommandQueue(q), "clReleaseCommandQueue");
    check(clReleaseContext(ctx), "clReleaseContext");
    step("context released");
    return 0;
  }
  cl_kernel k = build_kernel(ctx, device, 1, &SOURCE, "", "add");
  size_t bytes = ELEMS * 4;
  int many = strncmp(name, "sub-many", 8) == 0;
  int resets = strstr(name, "reset") != NULL;
  for (int round = 0; round < (many ? 300 : 1); ++round) {
    cl_mem buffer = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    check(err, "clCreateBuffer");
    if (strcmp(name, "plain") == 0) {
      launch(q, k, buffer, ELEMS);
      step("launched on the buffer");
      check(clReleaseMemObject(buffer), "clReleaseMemObject");
      step("buffer released");
      continue;
    }
    size_t origin = (size_t)OFFSET * (1 + round % 3);
    cl_mem sub = sub_of(buffer, origin, bytes - origin);
    launch(q, k, sub, (ELEMS - OFFSET) / 4);
    if (!many) step("launched on the sub-buffer");
    if (resets) reset(k);
    check(clReleaseMemObject(sub), "clReleaseMemObject(sub)");
    check(clReleaseMemObject(buffer), "clReleaseMemObject");
    if (!many) step("sub-buffer and buffer released");
  }
  if (many) step("every round returned");
  if (strcmp(name, "sub-reuse") == 0) {
    cl_mem other = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    check(err, "clCreateBuffer");
    launch(q, k, other, ELEMS);
    step("launched again on another buffer");
    check(clReleaseMemObject(other), "clReleaseMemObject");
  }
  check(clReleaseKernel(k), "clReleaseKernel");
  step("kernel released");
  check(clReleaseCommandQueue(q), "clReleaseCommandQueue");
  step("queue released");
  check(clReleaseContext(ctx), "clReleaseContext");
  step("context released");
  return 0;
}

int main(int argc, char **argv) {
  const char *all[] = {"plain", "sub", "sub-reset", "sub-reuse", "sub-many", "sub-many-reset",
                       "mixed", "mixed-nofinish", "mixed-nolocal"};
  int count = argc > 1 ? argc - 1 : (int)(sizeof all / sizeof *all);
  const char **names = argc > 1 ? (const char **)argv + 1 : all;
  for (int i = 0; i < count; ++i) {
    printf("%s:\n", names[i]);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) exit(run(names[i]));
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFSIGNALED(status))
      printf("%s: killed by signal %d\n", names[i], WTERMSIG(status));
    else
      printf("%s: exit %d\n", names[i], WEXITSTATUS(status));
    fflush(stdout);
  }
  return 0;
}

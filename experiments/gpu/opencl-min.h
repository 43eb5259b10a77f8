/* The few OpenCL declarations the raw experiment programs need (opencl-overlap.c,
 * opencl-wave.c, opencl-subbuf.c), written out so that they build without OpenCL headers, and
 * their helpers: exit on a failed call, a millisecond host clock, the
 * device to use, and building one kernel. */
#ifndef OPENCL_MIN_H
#define OPENCL_MIN_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef void *cl_platform_id, *cl_device_id, *cl_context, *cl_command_queue, *cl_mem, *cl_program, *cl_kernel,
    *cl_event;

#define CL_DEVICE_TYPE_GPU (1 << 2)
#define CL_DEVICE_TYPE_ALL 0xFFFFFFFF
#define CL_DEVICE_NAME 0x102B
#define CL_PLATFORM_NAME 0x0902
#define CL_MEM_READ_WRITE (1 << 0)
#define CL_MEM_ALLOC_HOST_PTR (1 << 4)
#define CL_MAP_READ (1 << 0)
#define CL_MAP_WRITE (1 << 1)
#define CL_TRUE 1
#define CL_FALSE 0
#define CL_PROGRAM_BUILD_LOG 0x1183
#define CL_QUEUE_PROFILING_ENABLE (1 << 1)
#define CL_EVENT_COMMAND_EXECUTION_STATUS 0x11D3
#define CL_COMPLETE 0
#define CL_PROFILING_COMMAND_START 0x1282
#define CL_PROFILING_COMMAND_END 0x1283
#define CL_BUFFER_CREATE_TYPE_REGION 0x1220

extern cl_int clGetPlatformIDs(cl_uint, cl_platform_id *, cl_uint *);
extern cl_int clGetPlatformInfo(cl_platform_id, cl_uint, size_t, void *, size_t *);
extern cl_int clGetDeviceIDs(cl_platform_id, cl_bitfield, cl_uint, cl_device_id *, cl_uint *);
extern cl_int clGetDeviceInfo(cl_device_id, cl_uint, size_t, void *, size_t *);
extern cl_context clCreateContext(const intptr_t *, cl_uint, const cl_device_id *, void *, void *, cl_int *);
extern cl_command_queue clCreateCommandQueue(cl_context, cl_device_id, cl_bitfield, cl_int *);
extern cl_mem clCreateBuffer(cl_context, cl_bitfield, size_t, void *, cl_int *);
extern cl_program clCreateProgramWithSource(cl_context, cl_uint, const char **, const size_t *, cl_int *);
extern cl_int clBuildProgram(cl_program, cl_uint, const cl_device_id *, const char *, void *, void *);
extern cl_int clGetProgramBuildInfo(cl_program, cl_device_id, cl_uint, size_t, void *, size_t *);
extern cl_kernel clCreateKernel(cl_program, const char *, cl_int *);
extern cl_int clSetKernelArg(cl_kernel, cl_uint, size_t, const void *);
extern cl_int clEnqueueNDRangeKernel(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                                     const size_t *, cl_uint, const cl_event *, cl_event *);
extern cl_int clEnqueueReadBuffer(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void *, cl_uint,
                                  const cl_event *, cl_event *);
extern cl_int clEnqueueWriteBuffer(cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void *, cl_uint,
                                   const cl_event *, cl_event *);
extern cl_int clEnqueueCopyBuffer(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint, const cl_event *,
                                  cl_event *);
extern cl_int clEnqueueFillBuffer(cl_command_queue, cl_mem, const void *, size_t, size_t, size_t, cl_uint,
                                  const cl_event *, cl_event *);
extern cl_int clEnqueueMarkerWithWaitList(cl_command_queue, cl_uint, const cl_event *, cl_event *);
extern void *clEnqueueMapBuffer(cl_command_queue, cl_mem, cl_uint, cl_bitfield, size_t, size_t, cl_uint,
                                const cl_event *, cl_event *, cl_int *);
extern cl_int clFlush(cl_command_queue);
extern cl_int clFinish(cl_command_queue);
extern cl_int clWaitForEvents(cl_uint, const cl_event *);
extern cl_int clGetEventInfo(cl_event, cl_uint, size_t, void *, size_t *);
extern cl_int clGetEventProfilingInfo(cl_event, cl_uint, size_t, void *, size_t *);
extern cl_int clReleaseEvent(cl_event);
extern cl_mem clCreateSubBuffer(cl_mem, cl_bitfield, cl_uint, const void *, cl_int *);
extern cl_int clReleaseMemObject(cl_mem);
extern cl_int clReleaseKernel(cl_kernel);
extern cl_int clReleaseProgram(cl_program);
extern cl_int clReleaseCommandQueue(cl_command_queue);
extern cl_int clReleaseContext(cl_context);
extern cl_event clCreateUserEvent(cl_context, cl_int *);
extern cl_int clSetUserEventStatus(cl_event, cl_int);

static void check(cl_int status, const char *call) {
  if (status != 0) {
    fprintf(stderr, "%s failed: OpenCL status %d\n", call, status);
    exit(1);
  }
}

/* Orders doubles for qsort. */
static inline int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* An event's profiling time `what` (CL_PROFILING_COMMAND_START or _END), ns. */
static inline cl_ulong stamp(cl_event e, cl_uint what) {
  cl_ulong t = 0;
  check(clGetEventProfilingInfo(e, what, sizeof t, &t, NULL), "clGetEventProfilingInfo");
  return t;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The first GPU of any platform, else the first device of any kind; its
 * platform in *platform. Exits when there is none. */
static cl_device_id first_device(cl_platform_id *platform) {
  cl_platform_id platforms[8];
  cl_uint np = 0;
  check(clGetPlatformIDs(8, platforms, &np), "clGetPlatformIDs");
  cl_bitfield types[2] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ALL};
  for (int t = 0; t < 2; ++t) {
    for (cl_uint p = 0; p < np; ++p) {
      cl_device_id device = NULL;
      cl_uint nd = 0;
      if (clGetDeviceIDs(platforms[p], types[t], 1, &device, &nd) == 0 && nd > 0) {
        *platform = platforms[p];
        return device;
      }
    }
  }
  fprintf(stderr, "no OpenCL device\n");
  exit(1);
}

/* A context for first_device(): the device in *device, its name in
 * name[len]. Exits when there is none or the context cannot be made. */
static cl_context first_context(cl_device_id *device, char *name, size_t len) {
  cl_platform_id platform = NULL;
  *device = first_device(&platform);
  memset(name, 0, len);
  clGetDeviceInfo(*device, CL_DEVICE_NAME, len - 1, name, NULL);
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, device, NULL, NULL, &err);
  check(err, "clCreateContext");
  return ctx;
}

/* Kernel `name` of the program built from `count` source strings with
 * `options`; prints the build log and exits when the build fails. */
static cl_kernel build_kernel(cl_context ctx, cl_device_id device, cl_uint count, const char **sources,
                              const char *options, const char *name) {
  cl_int err;
  cl_program program = clCreateProgramWithSource(ctx, count, sources, NULL, &err);
  check(err, "clCreateProgramWithSource");
  if (clBuildProgram(program, 1, &device, options, NULL, NULL) != 0) {
    char log[8192] = {0};
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    fprintf(stderr, "build failed:\n%s\n", log);
    exit(1);
  }
  cl_kernel kernel = clCreateKernel(program, name, &err);
  check(err, "clCreateKernel");
  return kernel;
}

#endif

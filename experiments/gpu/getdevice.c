/* What it costs to ask which device is current, per call, on this machine:
 * the driver's cuCtxGetCurrent and cuCtxGetDevice, the CUDA runtime's
 * cudaGetDevice, and hipGetDevice as the HIP-on-NVIDIA harness answers it.
 * Each is called 10^6 times after 10^5 warm-up calls; the median of five
 * such rounds is printed in nanoseconds per call.
 *
 *   gcc -O2 experiments/gpu/getdevice.c -o getdevice -ldl
 *   ./getdevice libcuda.so.1 <libcudart.so.11.0> <harness libamdhip64.so>
 *
 * Everything is loaded with dlopen, so no header is needed. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*int_fn)(int *);
typedef int (*ptr_fn)(void **);
typedef int (*init_fn)(unsigned);
typedef int (*set_fn)(int);
typedef int (*free_fn)(void *);

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define ROUNDS 5
#define CALLS 1000000

/* Median ns per call of `call(arg)`, or -1 when it fails. */
static double time_calls(int (*call)(void *), void *arg) {
    double r[ROUNDS];
    for (int i = 0; i < 100000; i++)
        if (call(arg) != 0) return -1;
    for (int k = 0; k < ROUNDS; k++) {
        double t = now_ns();
        for (int i = 0; i < CALLS; i++) call(arg);
        r[k] = (now_ns() - t) / CALLS;
    }
    qsort(r, ROUNDS, sizeof r[0], cmp);
    return r[ROUNDS / 2];
}

static void *cu_get_current, *cu_get_device, *cuda_get_device, *hip_get_device;
static int c_ctx(void *a) { void *c; (void)a; return ((ptr_fn)cu_get_current)(&c); }
static int c_dev(void *a) { int d; (void)a; return ((int_fn)cu_get_device)(&d); }
static int rt_dev(void *a) { int d; (void)a; return ((int_fn)cuda_get_device)(&d); }
static int hip_dev(void *a) { int d; (void)a; return ((int_fn)hip_get_device)(&d); }

static void *need(void *lib, const char *name) {
    void *f = lib ? dlsym(lib, name) : NULL;
    if (!f) { fprintf(stderr, "getdevice: %s not found\n", name); exit(2); }
    return f;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: getdevice LIBCUDA LIBCUDART HARNESS\n"); return 2; }
    void *cuda = dlopen(argv[1], RTLD_NOW), *rt = dlopen(argv[2], RTLD_NOW), *hip = dlopen(argv[3], RTLD_NOW);
    if (!cuda || !rt || !hip) { fprintf(stderr, "getdevice: %s\n", dlerror()); return 2; }
    ((init_fn)need(cuda, "cuInit"))(0);
    if (((set_fn)need(rt, "cudaSetDevice"))(0) != 0 || ((free_fn)need(rt, "cudaFree"))(NULL) != 0) {
        fprintf(stderr, "getdevice: could not make device 0 current\n");
        return 1;
    }
    cu_get_current = need(cuda, "cuCtxGetCurrent");
    cu_get_device = need(cuda, "cuCtxGetDevice");
    cuda_get_device = need(rt, "cudaGetDevice");
    hip_get_device = need(hip, "hipGetDevice");
    printf("ns per call, median of %d rounds of %d calls\n", ROUNDS, CALLS);
    printf("cuCtxGetCurrent          %7.1f\n", time_calls(c_ctx, NULL));
    printf("cuCtxGetDevice           %7.1f\n", time_calls(c_dev, NULL));
    printf("cudaGetDevice            %7.1f\n", time_calls(rt_dev, NULL));
    printf("hipGetDevice (harness)   %7.1f\n", time_calls(hip_dev, NULL));
    return 0;
}

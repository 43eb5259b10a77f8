/* Which CUDA driver calls need their context current, and what making it
 * current costs, with two contexts of one GPU (the primary one, P, and a
 * created one, C): the situation of two GPUs, where each has its own.
 *
 * 1. Each stream-ordered call hetero makes (copies, peer copies, fills,
 *    event record and query, cross-context waits, stream query and
 *    synchronize, a kernel launch, a graph launch, stream-ordered
 *    allocation) is made on C's objects while P is current, and again
 *    from a thread with no context current; the result code is printed,
 *    and the bytes are checked.
 * 2. cuCtxSetCurrent alternating P and C: ns a switch; with a CUDA
 *    runtime named, also cudaSetDevice(0) making P current again after C
 *    (what hipSetDevice does on NVIDIA, through the HIP harness).
 * 3. A 4 KiB peer copy both ways, waited for (the bench's round), three
 *    ways, alternated: the raw pair; each copy followed by an event record
 *    (hetero's tracking) with the context made current before each call
 *    as hetero does; the same calls without making it current.
 *    Medians of 1000 rounds in microseconds.
 *
 *   gcc -O2 experiments/gpu/ctx-current.c -o ctx-current -ldl -lpthread
 *   ./ctx-current libcuda.so.1 [libcudart.so]
 *
 * Loaded with dlopen: no CUDA header needed. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef void *CUcontext, *CUstream, *CUevent, *CUmodule, *CUfunction, *CUgraph, *CUgraphExec, *CUgraphNode;
typedef uint64_t CUdeviceptr;

#define F(ret, name, args) static ret(*name) args
F(CUresult, cuInit, (unsigned));
F(CUresult, cuDeviceGet, (int *, int));
F(CUresult, cuDevicePrimaryCtxRetain, (CUcontext *, int));
F(CUresult, cuCtxCreate_v2, (CUcontext *, unsigned, int));
F(CUresult, cuCtxSetCurrent, (CUcontext));
F(CUresult, cuCtxGetCurrent, (CUcontext *));
F(CUresult, cuStreamCreate, (CUstream *, unsigned));
F(CUresult, cuStreamSynchronize, (CUstream));
F(CUresult, cuStreamQuery, (CUstream));
F(CUresult, cuStreamWaitEvent, (CUstream, CUevent, unsigned));
F(CUresult, cuEventCreate, (CUevent *, unsigned));
F(CUresult, cuEventRecord, (CUevent, CUstream));
F(CUresult, cuEventQuery, (CUevent));
F(CUresult, cuEventSynchronize, (CUevent));
F(CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t));
F(CUresult, cuMemAllocHost_v2, (void **, size_t));
F(CUresult, cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, CUstream));
F(CUresult, cuMemcpyDtoHAsync_v2, (void *, CUdeviceptr, size_t, CUstream));
F(CUresult, cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, size_t, CUstream));
F(CUresult, cuMemcpyPeerAsync, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream));
F(CUresult, cuMemsetD32Async, (CUdeviceptr, unsigned, size_t, CUstream));
F(CUresult, cuMemAllocAsync, (CUdeviceptr *, size_t, CUstream));
F(CUresult, cuMemFreeAsync, (CUdeviceptr, CUstream));
F(CUresult, cuModuleLoadData, (CUmodule *, const void *));
F(CUresult, cuModuleGetFunction, (CUfunction *, CUmodule, const char *));
F(CUresult, cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **));
F(CUresult, cuStreamBeginCapture_v2, (CUstream, int));
F(CUresult, cuStreamEndCapture, (CUstream, CUgraph *));
F(CUresult, cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long));
F(CUresult, cuGraphLaunch, (CUgraphExec, CUstream));

static void load(void *lib, void **slot, const char *name) {
    *slot = dlsym(lib, name);
    if (!*slot) { fprintf(stderr, "ctx-current: %s not found\n", name); exit(2); }
}
#define L(name) load(lib, (void **)&name, #name)

#define OK(call)                                                                   \
    do {                                                                           \
        CUresult r_ = (call);                                                      \
        if (r_ != 0) { fprintf(stderr, "ctx-current: %s: %d\n", #call, r_); exit(1); } \
    } while (0)

/* Stores 7 at its argument's first word. */
static const char *PTX =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry seven(.param .u64 p) {\n"
    "  .reg .b64 %rd<2>;\n  .reg .b32 %r<2>;\n"
    "  ld.param.u64 %rd1, [p];\n  cvta.to.global.u64 %rd1, %rd1;\n"
    "  mov.u32 %r1, 7;\n  st.global.u32 [%rd1], %r1;\n  ret;\n}\n";

#define N 4096
static CUcontext P, C;
static CUstream sP, sC, sCap;
static CUevent eP, eC;
static CUdeviceptr dP[2], dC[2];
static CUfunction seven;
static uint32_t *host;

/* Every stream-ordered call on C's objects, whatever is current; each
 * code printed; the bytes checked at the end. */
static void calls_on_c(const char *who) {
    CUresult r;
    int bad = 0;
#define TRY(name, call) do { r = (call); printf("  %-26s %-20s %d\n", who, name, r); bad |= r != 0; } while (0)
    for (int i = 0; i < N / 4; i++) host[i] = 0xA0000000u + i;
    TRY("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2(dC[0], host, N, sC));
    TRY("cuMemsetD32Async", cuMemsetD32Async(dC[1], 5, N / 4, sC));
    TRY("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync_v2(dC[1], dC[0], N / 2, sC));
    TRY("cuMemcpyPeerAsync C->P", cuMemcpyPeerAsync(dP[1], P, dC[1], C, N, sC));
    TRY("cuEventRecord", cuEventRecord(eC, sC));
    TRY("cuStreamWaitEvent P", cuStreamWaitEvent(sC, eP, 0));
    /* CUDA_ERROR_NOT_READY (600) is an answer too. */
    TRY("cuEventQuery", (r = cuEventQuery(eC)) == 600 ? 0 : r);
    TRY("cuStreamQuery", (r = cuStreamQuery(sC)) == 600 ? 0 : r);
    CUdeviceptr tmp = 0;
    TRY("cuMemAllocAsync", cuMemAllocAsync(&tmp, N, sC));
    if (tmp) TRY("cuMemFreeAsync", cuMemFreeAsync(tmp, sC));
    void *args[] = {&dC[0]};
    TRY("cuLaunchKernel", cuLaunchKernel(seven, 1, 1, 1, 1, 1, 1, 0, sC, args, NULL));
    TRY("cuStreamSynchronize", cuStreamSynchronize(sC));
    TRY("cuEventSynchronize", cuEventSynchronize(eC));
    uint32_t back[N / 4], peer[N / 4];
    TRY("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2(back, dC[0], N, sC));
    TRY("cuMemcpyPeerAsync P->C", cuMemcpyPeerAsync(dC[0], C, dP[1], P, N, sC));
    TRY("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2(peer, dC[0], N, sC));
    TRY("cuStreamSynchronize", cuStreamSynchronize(sC));
    /* back: 7 then host's words; peer: half host's words, half 5s. */
    int ok = back[0] == 7 && peer[0] == 0xA0000000u && peer[N / 8] == 5;
    for (int i = 1; i < N / 4; i++) ok &= back[i] == 0xA0000000u + i;
    for (int i = 1; i < N / 8; i++) ok &= peer[i] == 0xA0000000u + i;
    for (int i = N / 8; i < N / 4; i++) ok &= peer[i] == 5;
    printf("  %-26s %-20s %s\n", who, "bytes", bad ? "(a call failed)" : ok ? "as expected" : "WRONG");
}

static void *bare_thread(void *arg) {
    (void)arg;
    CUcontext cur = (CUcontext)1;
    cuCtxGetCurrent(&cur);
    printf("  new thread: current context %s\n", cur ? "set" : "none");
    calls_on_c("no context current");
    return NULL;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* hetero's enter: ask, set when another context is current. */
static void enter(CUcontext c, int switching) {
    if (!switching) return;
    CUcontext cur;
    if (cuCtxGetCurrent(&cur) == 0 && cur == c) return;
    OK(cuCtxSetCurrent(c));
}

#define ROUNDS 1000
/* 0: raw pair; 1: tracked, entering; 2: tracked, not entering. */
static double round_us(int way) {
    double t[ROUNDS];
    for (int k = -100; k < ROUNDS; k++) {
        double t0 = now_us();
        if (way == 0) {
            OK(cuMemcpyPeerAsync(dC[1], C, dP[0], P, N, sC));
            OK(cuMemcpyPeerAsync(dP[1], P, dC[0], C, N, sP));
            OK(cuStreamSynchronize(sP));
            OK(cuStreamSynchronize(sC));
        } else {
            int s = way == 1;
            enter(C, s); OK(cuMemcpyPeerAsync(dC[1], C, dP[0], P, N, sC));
            enter(C, s); OK(cuEventRecord(eC, sC));
            enter(P, s); OK(cuMemcpyPeerAsync(dP[1], P, dC[0], C, N, sP));
            enter(P, s); OK(cuEventRecord(eP, sP));
            enter(P, s); OK(cuStreamSynchronize(sP));
            enter(C, s); OK(cuStreamSynchronize(sC));
        }
        if (k >= 0) t[k] = now_us() - t0;
    }
    qsort(t, ROUNDS, sizeof t[0], cmp);
    return t[ROUNDS / 2];
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) { fprintf(stderr, "usage: ctx-current LIBCUDA [LIBCUDART]\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "ctx-current: %s\n", dlerror()); return 2; }
    L(cuInit); L(cuDeviceGet); L(cuDevicePrimaryCtxRetain); L(cuCtxCreate_v2); L(cuCtxSetCurrent);
    L(cuCtxGetCurrent); L(cuStreamCreate); L(cuStreamSynchronize); L(cuStreamQuery); L(cuStreamWaitEvent);
    L(cuEventCreate); L(cuEventRecord); L(cuEventQuery); L(cuEventSynchronize); L(cuMemAlloc_v2);
    L(cuMemAllocHost_v2); L(cuMemcpyHtoDAsync_v2); L(cuMemcpyDtoHAsync_v2); L(cuMemcpyDtoDAsync_v2);
    L(cuMemcpyPeerAsync); L(cuMemsetD32Async); L(cuMemAllocAsync); L(cuMemFreeAsync); L(cuModuleLoadData);
    L(cuModuleGetFunction); L(cuLaunchKernel); L(cuStreamBeginCapture_v2); L(cuStreamEndCapture);
    L(cuGraphInstantiateWithFlags); L(cuGraphLaunch);
    int dev;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&P, dev));
    OK(cuCtxCreate_v2(&C, 0, dev)); /* current now */
    for (int k = 0; k < 2; k++) {
        CUcontext c = k ? C : P;
        OK(cuCtxSetCurrent(c));
        OK(cuStreamCreate(k ? &sC : &sP, 1));
        OK(cuEventCreate(k ? &eC : &eP, 2));
        OK(cuMemAlloc_v2(k ? &dC[0] : &dP[0], N));
        OK(cuMemAlloc_v2(k ? &dC[1] : &dP[1], N));
    }
    CUmodule m;
    OK(cuCtxSetCurrent(C));
    OK(cuModuleLoadData(&m, PTX));
    OK(cuModuleGetFunction(&seven, m, "seven"));
    OK(cuStreamCreate(&sCap, 1));
    OK(cuMemAllocHost_v2((void **)&host, N));
    OK(cuCtxSetCurrent(P));
    OK(cuEventRecord(eP, sP));

    printf("1. C's stream-ordered calls (result codes; 0 is success)\n");
    calls_on_c("P current");
    pthread_t th;
    pthread_create(&th, NULL, bare_thread, NULL);
    pthread_join(th, NULL);
    /* A graph of C captured with C current, launched with P current. */
    OK(cuCtxSetCurrent(C));
    CUgraph g;
    CUgraphExec ge;
    void *args[] = {&dC[1]};
    OK(cuStreamBeginCapture_v2(sCap, 2));
    OK(cuLaunchKernel(seven, 1, 1, 1, 1, 1, 1, 0, sCap, args, NULL));
    OK(cuStreamEndCapture(sCap, &g));
    OK(cuGraphInstantiateWithFlags(&ge, g, 0));
    OK(cuCtxSetCurrent(P));
    uint32_t word = 0;
    printf("  %-26s %-20s %d\n", "P current", "cuGraphLaunch", cuGraphLaunch(ge, sC));
    OK(cuMemcpyDtoHAsync_v2(&word, dC[1], 4, sC));
    OK(cuStreamSynchronize(sC));
    printf("  %-26s %-20s %s\n", "P current", "graph's bytes", word == 7 ? "as expected" : "WRONG");

    printf("2. cuCtxSetCurrent alternating P and C\n");
    double s[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now_us();
        for (int i = 0; i < 100000; i++) OK(cuCtxSetCurrent(i & 1 ? C : P));
        s[r] = (now_us() - t0) * 1e3 / 100000;
    }
    qsort(s, 5, sizeof s[0], cmp);
    printf("  ns a switch, median of 5 rounds of 1e5: %.0f\n", s[2]);
    if (argc == 3) {
        void *rt = dlopen(argv[2], RTLD_NOW);
        CUresult (*set_device)(int) = rt ? (CUresult(*)(int))dlsym(rt, "cudaSetDevice") : NULL;
        if (!set_device) { fprintf(stderr, "ctx-current: %s: no cudaSetDevice\n", argv[2]); return 2; }
        OK(set_device(0));
        for (int r = 0; r < 5; r++) {
            double t0 = now_us();
            for (int i = 0; i < 100000; i++) {
                OK(cuCtxSetCurrent(C));
                OK(set_device(0));
            }
            s[r] = (now_us() - t0) * 1e3 / 100000;
        }
        qsort(s, 5, sizeof s[0], cmp);
        CUcontext cur;
        OK(cuCtxGetCurrent(&cur));
        printf("  ns a cuCtxSetCurrent(C) and cudaSetDevice(0) pair, median of 5 rounds of 1e5: %.0f (%s current after)\n",
               s[2], cur == P ? "P" : "not P");
    }

    printf("3. 4 KiB both ways between P and C, waited for: median of %d rounds, us\n", ROUNDS);
    const char *name[] = {"raw pair", "tracked, entering", "tracked, not entering"};
    for (int r = 0; r < 3; r++)
        for (int way = 0; way < 3; way++) printf("  round %d  %-22s %6.2f\n", r + 1, name[way], round_us(way));
    return 0;
}

// HIP on NVIDIA GPUs, as a shared library that the hip backend can load.
//
// HIP's NVIDIA-platform headers define every HIP call as a `static inline`
// function over the CUDA runtime, driver API and NVRTC. This file gives
// each HIP and hiprtc function that hetero's hip backend binds an exported
// `extern "C"` wrapper named `hetero_<name>`; build.sh links the library
// with `--defsym=<name>=hetero_<name>` so it exports the HIP names, and
// installs it as both libamdhip64.so and libhiprtc.so. A test harness: on
// AMD GPUs the backend loads ROCm's own libraries.
//
// Two translations are needed because the backend's bindings come from a
// newer HIP than these headers: device attribute numbers (the bindings'
// `hipDeviceAttribute_t` values are mapped by name below), and the driver's
// context, which the CUDA runtime creates lazily but the driver API calls
// (module load, launch, stream memory operations) need.
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

// The v2 entry point of the CUDA 12+ driver (the CUDA 11.8 headers only
// declare v1, which needs stream memory operations enabled in the driver).
extern "C" CUresult cuStreamWaitValue32_v2(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
// Likewise the v2 kernel node call, whose parameters end in two fields the
// CUDA 11.8 struct lacks (a kernel and a context, both unused here).
struct KernelNodeParamsV2 {
    CUDA_KERNEL_NODE_PARAMS v1;
    void* kern;
    CUcontext ctx;
};
extern "C" CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const KernelNodeParamsV2*);

// Makes the device's primary context current on this thread, as HIP on
// AMD does implicitly.
static hipError_t bind_context() {
    CUcontext current = nullptr;
    if (cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != nullptr) return hipSuccess;
    return hipCUDAErrorTohipError(cudaFree(nullptr));
}

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT hipError_t hetero_hipInit(unsigned int flags) { return hipInit(flags); }
EXPORT hipError_t hetero_hipGetDeviceCount(int* count) { return hipGetDeviceCount(count); }
EXPORT hipError_t hetero_hipSetDevice(int device) {
    hipError_t e = hipSetDevice(device);
    return e == hipSuccess ? bind_context() : e;
}
// The backend skips hipSetDevice when hipGetDevice names its device; on AMD
// that device is then ready on this thread, so bind the context here too.
//
// With a context current, the CUDA runtime's current device is that
// context's device. A context's device never changes, so the answer is kept
// per thread next to the context it belongs to and used while that context
// is still current: one cuCtxGetCurrent (a thread-local read), as
// hipGetDevice is a thread-local read on AMD. On an H100 host this took
// 16 ns a call, against 34 ns for cudaGetDevice and 12 ns for
// cuCtxGetCurrent alone (experiments/gpu/getdevice.c; its report,
// 2026-11-22-h100-like-for-like, is in git history). The cache assumes a context
// is not destroyed and another made at its address for another device
// while a thread holds it current; neither hetero nor the harness destroys
// a primary context.
static thread_local CUcontext device_of_context = nullptr;
static thread_local int device_of = -1;

EXPORT hipError_t hetero_hipGetDevice(int* device) {
    if (device == nullptr) return hipErrorInvalidValue;
    CUcontext current = nullptr;
    if (cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != nullptr) {
        if (current != device_of_context) {
            CUdevice bound = 0;
            if (cuCtxGetDevice(&bound) != CUDA_SUCCESS) return hipErrorInvalidContext;
            // A CUdevice is its ordinal, as cuDeviceGet hands it out.
            device_of_context = current;
            device_of = static_cast<int>(bound);
        }
        *device = device_of;
        return hipSuccess;
    }
    hipError_t e = hipGetDevice(device);
    return e == hipSuccess ? bind_context() : e;
}
EXPORT hipError_t hetero_hipDeviceGetName(char* name, int len, hipDevice_t device) { return hipDeviceGetName(name, len, device); }
EXPORT hipError_t hetero_hipDeviceGetPCIBusId(char* id, int len, int device) { return hipDeviceGetPCIBusId(id, len, device); }
EXPORT hipError_t hetero_hipDeviceTotalMem(size_t* bytes, hipDevice_t device) { return hipDeviceTotalMem(bytes, device); }
EXPORT hipError_t hetero_hipDriverGetVersion(int* version) { return hipDriverGetVersion(version); }
EXPORT hipError_t hetero_hipRuntimeGetVersion(int* version) { return hipRuntimeGetVersion(version); }

// The bindings' attribute numbers (HIP 6) to this header's names.
EXPORT hipError_t hetero_hipDeviceGetAttribute(int* value, int attribute, int device) {
    hipDeviceAttribute_t attr;
    switch (attribute) {
        case 23: attr = hipDeviceAttributeComputeCapabilityMajor; break;
        case 26: attr = hipDeviceAttributeMaxBlockDimX; break;
        case 27: attr = hipDeviceAttributeMaxBlockDimY; break;
        case 28: attr = hipDeviceAttributeMaxBlockDimZ; break;
        case 29: attr = hipDeviceAttributeMaxGridDimX; break;
        case 30: attr = hipDeviceAttributeMaxGridDimY; break;
        case 31: attr = hipDeviceAttributeMaxGridDimZ; break;
        case 56: attr = hipDeviceAttributeMaxThreadsPerBlock; break;
        case 61: attr = hipDeviceAttributeComputeCapabilityMinor; break;
        case 63: attr = hipDeviceAttributeMultiprocessorCount; break;
        case 74: attr = hipDeviceAttributeMaxSharedMemoryPerBlock; break;
        case 87: attr = hipDeviceAttributeWarpSize; break;
        default: return hipErrorInvalidValue;
    }
    return hipDeviceGetAttribute(value, attr, device);
}

EXPORT hipError_t hetero_hipStreamCreateWithPriority(hipStream_t* stream, unsigned int flags, int priority) {
    return hipStreamCreateWithPriority(stream, flags, priority);
}
EXPORT hipError_t hetero_hipStreamDestroy(hipStream_t stream) { return hipStreamDestroy(stream); }
EXPORT hipError_t hetero_hipStreamSynchronize(hipStream_t stream) { return hipStreamSynchronize(stream); }
EXPORT hipError_t hetero_hipStreamQuery(hipStream_t stream) { return hipStreamQuery(stream); }
EXPORT hipError_t hetero_hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
    return hipStreamWaitEvent(stream, event, flags);
}
EXPORT hipError_t hetero_hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned int flags, uint32_t) {
    hipError_t e = bind_context();
    if (e != hipSuccess) return e;
    return hipCUResultTohipError(cuStreamWaitValue32_v2((CUstream)stream, (CUdeviceptr)ptr, value, flags));
}

EXPORT hipError_t hetero_hipEventCreateWithFlags(hipEvent_t* event, unsigned int flags) { return hipEventCreateWithFlags(event, flags); }
EXPORT hipError_t hetero_hipEventRecord(hipEvent_t event, hipStream_t stream) { return hipEventRecord(event, stream); }
EXPORT hipError_t hetero_hipEventQuery(hipEvent_t event) { return hipEventQuery(event); }
EXPORT hipError_t hetero_hipEventSynchronize(hipEvent_t event) { return hipEventSynchronize(event); }
EXPORT hipError_t hetero_hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) { return hipEventElapsedTime(ms, start, stop); }
EXPORT hipError_t hetero_hipEventDestroy(hipEvent_t event) { return hipEventDestroy(event); }

EXPORT hipError_t hetero_hipMallocAsync(void** ptr, size_t size, hipStream_t stream) { return hipMallocAsync(ptr, size, stream); }
EXPORT hipError_t hetero_hipFreeAsync(void* ptr, hipStream_t stream) { return hipFreeAsync(ptr, stream); }
EXPORT hipError_t hetero_hipMalloc(void** ptr, size_t size) { return hipMalloc(ptr, size); }
EXPORT hipError_t hetero_hipFree(void* ptr) { return hipFree(ptr); }
EXPORT hipError_t hetero_hipHostMalloc(void** ptr, size_t size, unsigned int flags) { return hipHostMalloc(ptr, size, flags); }
EXPORT hipError_t hetero_hipHostFree(void* ptr) { return hipHostFree(ptr); }
EXPORT hipError_t hetero_hipHostGetDevicePointer(void** device, void* host, unsigned int flags) {
    return hipHostGetDevicePointer(device, host, flags);
}
EXPORT hipError_t hetero_hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t bytes, hipStream_t stream) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipMemcpyHtoDAsync(dst, src, bytes, stream) : e;
}
EXPORT hipError_t hetero_hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t bytes, hipStream_t stream) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipMemcpyDtoHAsync(dst, src, bytes, stream) : e;
}
// Peer copies and access: the CUDA runtime's, after binding the context
// as every call that enqueues does.
EXPORT hipError_t hetero_hipDeviceCanAccessPeer(int* can, int device, int peer) {
    return hipDeviceCanAccessPeer(can, device, peer);
}
EXPORT hipError_t hetero_hipDeviceEnablePeerAccess(int peer, unsigned int flags) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipDeviceEnablePeerAccess(peer, flags) : e;
}
// Memory pools grant peers access on their own (peer access does not
// cover stream-ordered allocations). hipMemAccessDesc has
// cudaMemAccessDesc's layout and values; pools pass as opaque handles.
EXPORT hipError_t hetero_hipDeviceGetMemPool(void** pool, int device) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipCUDAErrorTohipError(cudaDeviceGetMemPool(reinterpret_cast<cudaMemPool_t*>(pool), device)) : e;
}
EXPORT hipError_t hetero_hipMemPoolSetAccess(void* pool, const void* descs, size_t count) {
    return hipCUDAErrorTohipError(
        cudaMemPoolSetAccess(static_cast<cudaMemPool_t>(pool), static_cast<const cudaMemAccessDesc*>(descs), count));
}
EXPORT hipError_t hetero_hipMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes, hipStream_t stream) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream) : e;
}
EXPORT hipError_t hetero_hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t bytes, hipStream_t stream) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipMemcpyDtoDAsync(dst, src, bytes, stream) : e;
}
EXPORT hipError_t hetero_hipMemsetD32Async(hipDeviceptr_t dst, int value, size_t count, hipStream_t stream) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipMemsetD32Async(dst, value, count, stream) : e;
}

EXPORT hipError_t hetero_hipModuleLoadData(hipModule_t* module, const void* image) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipModuleLoadData(module, image) : e;
}
EXPORT hipError_t hetero_hipModuleGetFunction(hipFunction_t* function, hipModule_t module, const char* name) {
    return hipModuleGetFunction(function, module, name);
}
EXPORT hipError_t hetero_hipFuncGetAttribute(int* value, int attribute, hipFunction_t function) {
    return hipCUResultTohipError(cuFuncGetAttribute(value, (CUfunction_attribute)attribute, function));
}
EXPORT hipError_t hetero_hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                               unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                               hipStream_t stream, void** params, void** extra) {
    hipError_t e = bind_context();
    return e == hipSuccess ? hipModuleLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra) : e;
}
// Graphs: the CUDA runtime's calls, whose handles HIP's NVIDIA platform
// types are (hipStreamCaptureMode numbers CUDA's modes the same way).
EXPORT hipError_t hetero_hipStreamBeginCapture(hipStream_t stream, int mode) {
    hipError_t e = bind_context();
    if (e != hipSuccess) return e;
    return hipCUDAErrorTohipError(cudaStreamBeginCapture((cudaStream_t)stream, (cudaStreamCaptureMode)mode));
}
EXPORT hipError_t hetero_hipStreamEndCapture(hipStream_t stream, void** graph) {
    return hipCUDAErrorTohipError(cudaStreamEndCapture((cudaStream_t)stream, (cudaGraph_t*)graph));
}
EXPORT hipError_t hetero_hipGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags) {
    return hipCUDAErrorTohipError(cudaGraphInstantiateWithFlags((cudaGraphExec_t*)exec, (cudaGraph_t)graph, flags));
}
EXPORT hipError_t hetero_hipGraphExecUpdate(void* exec, void* graph, void** node, unsigned int* result) {
    cudaGraphExecUpdateResult r = cudaGraphExecUpdateSuccess;
    cudaError_t e = cudaGraphExecUpdate((cudaGraphExec_t)exec, (cudaGraph_t)graph, (cudaGraphNode_t*)node, &r);
    if (result) *result = (unsigned int)r;
    return e == cudaErrorGraphExecUpdateFailure ? (hipError_t)910 : hipCUDAErrorTohipError(e);
}
// The capture's current dependencies: the runtime's call (HIP numbers
// capture statuses as CUDA does; graph nodes are CUDA's).
EXPORT hipError_t hetero_hipStreamGetCaptureInfo_v2(hipStream_t stream, int* status, unsigned long long* id,
                                                    void** graph, const void** dependencies, size_t* count) {
    cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamGetCaptureInfo_v2((cudaStream_t)stream, &s, id, (cudaGraph_t*)graph,
                                                (const cudaGraphNode_t**)dependencies, count);
    if (status) *status = (int)s;
    return hipCUDAErrorTohipError(e);
}
// HIP's kernel node parameters as the backend passes them: AMD's layout
// (the NVIDIA-platform headers make hipKernelNodeParams CUDA's struct,
// whose fields are in another order).
struct AmdKernelNodeParams {
    struct { unsigned int x, y, z; } blockDim;
    void** extra;
    void* func;
    struct { unsigned int x, y, z; } gridDim;
    void** kernelParams;
    unsigned int sharedMemBytes;
};
// They name a module's function (a CUfunction here), which the CUDA
// runtime's call does not take: the driver's does.
EXPORT hipError_t hetero_hipGraphExecKernelNodeSetParams(void* exec, void* node, const AmdKernelNodeParams* p) {
    if (p == nullptr) return hipErrorInvalidValue;
    KernelNodeParamsV2 params = {};
    params.v1.func = (CUfunction)p->func;
    params.v1.gridDimX = p->gridDim.x;
    params.v1.gridDimY = p->gridDim.y;
    params.v1.gridDimZ = p->gridDim.z;
    params.v1.blockDimX = p->blockDim.x;
    params.v1.blockDimY = p->blockDim.y;
    params.v1.blockDimZ = p->blockDim.z;
    params.v1.sharedMemBytes = p->sharedMemBytes;
    params.v1.kernelParams = p->kernelParams;
    params.v1.extra = p->extra;
    return hipCUResultTohipError(cuGraphExecKernelNodeSetParams_v2((CUgraphExec)exec, (CUgraphNode)node, &params));
}
EXPORT hipError_t hetero_hipGraphLaunch(void* exec, hipStream_t stream) {
    hipError_t e = bind_context();
    if (e != hipSuccess) return e;
    return hipCUDAErrorTohipError(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream));
}
EXPORT hipError_t hetero_hipGraphDestroy(void* graph) { return hipCUDAErrorTohipError(cudaGraphDestroy((cudaGraph_t)graph)); }
EXPORT hipError_t hetero_hipGraphExecDestroy(void* exec) {
    return hipCUDAErrorTohipError(cudaGraphExecDestroy((cudaGraphExec_t)exec));
}

EXPORT const char* hetero_hipGetErrorName(hipError_t e) { return hipGetErrorName(e); }
EXPORT const char* hetero_hipGetErrorString(hipError_t e) { return hipGetErrorString(e); }

EXPORT hiprtcResult hetero_hiprtcCreateProgram(hiprtcProgram* prog, const char* src, const char* name, int headers,
                                               const char** sources, const char** names) {
    return hiprtcCreateProgram(prog, src, name, headers, sources, names);
}
EXPORT hiprtcResult hetero_hiprtcCompileProgram(hiprtcProgram prog, int count, const char** options) {
    return hiprtcCompileProgram(prog, count, options);
}
EXPORT hiprtcResult hetero_hiprtcGetProgramLogSize(hiprtcProgram prog, size_t* size) { return hiprtcGetProgramLogSize(prog, size); }
EXPORT hiprtcResult hetero_hiprtcGetProgramLog(hiprtcProgram prog, char* log) { return hiprtcGetProgramLog(prog, log); }
EXPORT hiprtcResult hetero_hiprtcGetCodeSize(hiprtcProgram prog, size_t* size) { return hiprtcGetCodeSize(prog, size); }
EXPORT hiprtcResult hetero_hiprtcGetCode(hiprtcProgram prog, char* code) { return hiprtcGetCode(prog, code); }
EXPORT hiprtcResult hetero_hiprtcDestroyProgram(hiprtcProgram* prog) { return hiprtcDestroyProgram(prog); }
EXPORT const char* hetero_hiprtcGetErrorString(hiprtcResult result) { return hiprtcGetErrorString(result); }

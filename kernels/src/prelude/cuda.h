/* hetero portable kernel dialect -> CUDA C++ (NVRTC) and HIP (hiprtc) */
typedef unsigned int uint;
/* OpenCL's names of unsigned types; `long` and `ulong` are 64-bit on LP64 Linux, as in OpenCL. */
typedef unsigned long ulong;
typedef unsigned short ushort;
typedef unsigned char uchar;
#define KERNEL extern "C" __global__
#define DEVICE_FN static __device__ __forceinline__
#define GLOBAL
#define SHARED
#define SHARED_PARAM(T, name)
#define SHARED_DECL(T, name) extern __shared__ __align__(16) unsigned char hetero_shared_bytes[]; T* name = (T*)hetero_shared_bytes
#define THREAD_X threadIdx.x
#define THREAD_Y threadIdx.y
#define THREAD_Z threadIdx.z
#define BLOCK_X blockIdx.x
#define BLOCK_Y blockIdx.y
#define BLOCK_Z blockIdx.z
#define BLOCK_DIM_X blockDim.x
#define BLOCK_DIM_Y blockDim.y
#define BLOCK_DIM_Z blockDim.z
#define GRID_DIM_X gridDim.x
#define GRID_DIM_Y gridDim.y
#define GRID_DIM_Z gridDim.z
#define BARRIER __syncthreads()
#define HETERO_PI 3.14159265358979323846f

static __device__ __forceinline__ void atomic_add_f32(float* p, float v) { atomicAdd(p, v); }
/* 32-bit integer atomics; each returns the old value. */
static __device__ __forceinline__ uint atomic_add_u32(uint* p, uint v) { return atomicAdd(p, v); }
static __device__ __forceinline__ int atomic_add_i32(int* p, int v) { return atomicAdd(p, v); }
static __device__ __forceinline__ uint atomic_max_u32(uint* p, uint v) { return atomicMax(p, v); }
static __device__ __forceinline__ uint atomic_min_u32(uint* p, uint v) { return atomicMin(p, v); }
/* Words between blocks: a store that other blocks see whole, and a load
 * that reads memory, not a cached copy. */
static __device__ __forceinline__ void atomic_store_u32(uint* p, uint v) { atomicExch(p, v); }
static __device__ __forceinline__ uint atomic_load_u32(uint* p) { return *(volatile uint*)p; }
/* A block-shared array declared inside a kernel. */
#define SHARED_ARRAY(T, name, count) __shared__ T name[count]

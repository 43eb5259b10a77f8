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
/* Atomic addition on block-shared memory, returning the old value. */
static __device__ __forceinline__ uint atomic_add_shared_u32(uint* p, uint v) { return atomicAdd(p, v); }
/* Bits set in a 64-bit word. */
static __device__ __forceinline__ uint hetero_popc64(ulong v) { return (uint)__popcll((unsigned long long)v); }
/* A block-shared array declared inside a kernel. */
#define SHARED_ARRAY(T, name, count) __shared__ T name[count]

/* 64-bit floats are always there; infinities for the identities of min and max. */
#define HETERO_FP64 1
#define HETERO_INF_F32 __int_as_float(0x7f800000)
#define HETERO_INF_F64 __longlong_as_double(0x7ff0000000000000LL)

/* An explicit fused multiply-add (deterministic builds contract nothing
 * else: hetero::BuildOptions::deterministic). */
static __device__ __forceinline__ float hetero_fma_f32(float a, float b, float c) { return fmaf(a, b, c); }
static __device__ __forceinline__ double hetero_fma_f64(double a, double b, double c) { return fma(a, b, c); }

/* The thread's index in its block, all dimensions together (x fastest),
 * and the block's thread count. */
#define THREAD_LINEAR (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))
#define BLOCK_THREADS (blockDim.x * blockDim.y * blockDim.z)

/* Subgroups are warps (NVIDIA, 32 lanes) or wavefronts (AMD: 64 on CDNA,
 * 32 on RDNA), formed from consecutive THREAD_LINEAR; the last of a block
 * whose size is not a multiple has fewer lanes (SUBGROUP_LANES). */
#define HETERO_SUBGROUPS 1
/* A constant where the compiler knows it (NVIDIA: 32 on every GPU; AMD:
 * the target's wavefront), so that loops over lanes unroll. */
#if !defined(__HIP__)
#define SUBGROUP_SIZE 32u
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
#define SUBGROUP_SIZE ((uint)__AMDGCN_WAVEFRONT_SIZE)
#else
#define SUBGROUP_SIZE ((uint)warpSize)
#endif
#define SUBGROUP_LANE (THREAD_LINEAR % SUBGROUP_SIZE)
#define SUBGROUP_ID (THREAD_LINEAR / SUBGROUP_SIZE)
#define SUBGROUP_COUNT ((BLOCK_THREADS + SUBGROUP_SIZE - 1u) / SUBGROUP_SIZE)
#define SUBGROUP_LANES (BLOCK_THREADS - SUBGROUP_ID * SUBGROUP_SIZE < SUBGROUP_SIZE ? BLOCK_THREADS - SUBGROUP_ID * SUBGROUP_SIZE : SUBGROUP_SIZE)

#if defined(__HIP__)
/* AMD: the whole wavefront takes part; lanes past the block are never read
 * by the collectives below. */
#define HETERO_SHFL(T) \
    static __device__ __forceinline__ T hetero_shfl_idx_##T(T v, uint lane) { return __shfl(v, (int)lane); } \
    static __device__ __forceinline__ T hetero_shfl_up_##T(T v, uint d) { return __shfl_up(v, d); } \
    static __device__ __forceinline__ T hetero_shfl_down_##T(T v, uint d) { return __shfl_down(v, d); } \
    static __device__ __forceinline__ T hetero_shfl_xor_##T(T v, uint m) { return __shfl_xor(v, (int)m); }
static __device__ __forceinline__ ulong sg_ballot(int p) { return (ulong)__ballot(p); }
static __device__ __forceinline__ int sg_any(int p) { return __any(p); }
static __device__ __forceinline__ int sg_all(int p) { return __all(p); }
#else
/* NVIDIA: the mask names the lanes the warp has (all 32 but in a block's
 * partial last warp). */
static __device__ __forceinline__ uint hetero_sg_mask() {
    uint lanes = SUBGROUP_LANES;
    return lanes >= 32u ? 0xffffffffu : (1u << lanes) - 1u;
}
#define HETERO_SHFL(T) \
    static __device__ __forceinline__ T hetero_shfl_idx_##T(T v, uint lane) { return __shfl_sync(hetero_sg_mask(), v, (int)lane); } \
    static __device__ __forceinline__ T hetero_shfl_up_##T(T v, uint d) { return __shfl_up_sync(hetero_sg_mask(), v, d); } \
    static __device__ __forceinline__ T hetero_shfl_down_##T(T v, uint d) { return __shfl_down_sync(hetero_sg_mask(), v, d); } \
    static __device__ __forceinline__ T hetero_shfl_xor_##T(T v, uint m) { return __shfl_xor_sync(hetero_sg_mask(), v, (int)m); }
static __device__ __forceinline__ ulong sg_ballot(int p) { return (ulong)__ballot_sync(hetero_sg_mask(), p); }
static __device__ __forceinline__ int sg_any(int p) { return __any_sync(hetero_sg_mask(), p); }
static __device__ __forceinline__ int sg_all(int p) { return __all_sync(hetero_sg_mask(), p); }
#endif
HETERO_SHFL(uint)
HETERO_SHFL(int)
HETERO_SHFL(ulong)
HETERO_SHFL(long)
HETERO_SHFL(float)
HETERO_SHFL(double)

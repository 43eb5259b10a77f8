/* hetero portable kernel dialect -> OpenCL C 1.2 */
/* `double` where the device supports it (DeviceInfo::fp64); OpenCL 1.2 needs the extension enabled. */
#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#define KERNEL __kernel
#define DEVICE_FN static inline
#define GLOBAL __global
#define SHARED __local
#define SHARED_PARAM(T, name) , __local T* name
#define SHARED_DECL(T, name)
#define THREAD_X ((uint)get_local_id(0))
#define THREAD_Y ((uint)get_local_id(1))
#define THREAD_Z ((uint)get_local_id(2))
#define BLOCK_X ((uint)get_group_id(0))
#define BLOCK_Y ((uint)get_group_id(1))
#define BLOCK_Z ((uint)get_group_id(2))
#define BLOCK_DIM_X ((uint)get_local_size(0))
#define BLOCK_DIM_Y ((uint)get_local_size(1))
#define BLOCK_DIM_Z ((uint)get_local_size(2))
#define GRID_DIM_X ((uint)get_num_groups(0))
#define GRID_DIM_Y ((uint)get_num_groups(1))
#define GRID_DIM_Z ((uint)get_num_groups(2))
#define BARRIER barrier(CLK_LOCAL_MEM_FENCE)
#define HETERO_PI 3.14159265358979323846f

/* 32-bit integer atomics (OpenCL 1.2 core); each returns the old value. */
static inline uint atomic_add_u32(__global uint* p, uint v) { return atomic_add(p, v); }
static inline int atomic_add_i32(__global int* p, int v) { return atomic_add(p, v); }
static inline uint atomic_max_u32(__global uint* p, uint v) { return atomic_max(p, v); }
static inline uint atomic_min_u32(__global uint* p, uint v) { return atomic_min(p, v); }
/* Words between work-groups (see the CUDA prelude). */
static inline void atomic_store_u32(__global uint* p, uint v) { atomic_xchg(p, v); }
static inline uint atomic_load_u32(__global uint* p) { return *(volatile __global uint*)p; }
/* Atomic addition on block-shared memory, returning the old value. */
static inline uint atomic_add_shared_u32(__local uint* p, uint v) { return atomic_add(p, v); }
/* Bits set in a 64-bit word. */
static inline uint hetero_popc64(ulong v) { return (uint)popcount(v); }
#define SHARED_ARRAY(T, name, count) __local T name[count]

/* OpenCL 1.2 has no float atomics: compare-and-swap on the bit pattern. */
static inline void atomic_add_f32(__global float* p, float v) {
    volatile __global uint* bits = (volatile __global uint*)p;
    uint old = *bits;
    uint assumed;
    do {
        assumed = old;
        old = atomic_cmpxchg(bits, assumed, as_uint(as_float(assumed) + v));
    } while (old != assumed);
}

/* 64-bit floats where the device has them; infinities for the identities of min and max. */
#if defined(cl_khr_fp64)
#define HETERO_FP64 1
#define HETERO_INF_F64 as_double(0x7ff0000000000000UL)
#endif
#define HETERO_INF_F32 as_float(0x7f800000u)

/* Deterministic builds (hetero::BuildOptions::deterministic): no contraction
 * of a * b + c into a fused multiply-add (the build options add correctly
 * rounded division and square root). An explicit fused multiply-add: */
#if defined(HETERO_DETERMINISTIC)
#pragma OPENCL FP_CONTRACT OFF
#endif
static inline float hetero_fma_f32(float a, float b, float c) { return fma(a, b, c); }
#if defined(HETERO_FP64)
static inline double hetero_fma_f64(double a, double b, double c) { return fma(a, b, c); }
#endif

/* The thread's index in its block, all dimensions together (x fastest),
 * and the block's thread count. */
#define THREAD_LINEAR ((uint)(get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2))))
#define BLOCK_THREADS ((uint)(get_local_size(0) * get_local_size(1) * get_local_size(2)))

#if defined(HETERO_SUBGROUP_PTX)
/* NVIDIA's OpenCL reports no subgroup extension, but its compiler takes
 * PTX: warps of 32 lanes formed from consecutive THREAD_LINEAR, as in CUDA
 * (the backend defines HETERO_SUBGROUP_PTX for NVIDIA devices only). */
#define HETERO_SUBGROUPS 1
#define SUBGROUP_SIZE 32u
#define SUBGROUP_LANE (THREAD_LINEAR % 32u)
#define SUBGROUP_ID (THREAD_LINEAR / 32u)
#define SUBGROUP_COUNT ((BLOCK_THREADS + 31u) / 32u)
#define SUBGROUP_LANES (BLOCK_THREADS - SUBGROUP_ID * 32u < 32u ? BLOCK_THREADS - SUBGROUP_ID * 32u : 32u)
static inline uint hetero_sg_mask() {
    uint lanes = SUBGROUP_LANES;
    return lanes >= 32u ? 0xffffffffu : (1u << lanes) - 1u;
}
static inline uint hetero_shfl_idx_uint(uint v, uint lane) {
    uint r;
    asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, %3;" : "=r"(r) : "r"(v), "r"(lane), "r"(hetero_sg_mask()));
    return r;
}
static inline uint hetero_shfl_up_uint(uint v, uint d) {
    uint r;
    asm volatile("shfl.sync.up.b32 %0, %1, %2, 0x0, %3;" : "=r"(r) : "r"(v), "r"(d), "r"(hetero_sg_mask()));
    return r;
}
static inline uint hetero_shfl_down_uint(uint v, uint d) {
    uint r;
    asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, %3;" : "=r"(r) : "r"(v), "r"(d), "r"(hetero_sg_mask()));
    return r;
}
static inline uint hetero_shfl_xor_uint(uint v, uint m) {
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, %3;" : "=r"(r) : "r"(v), "r"(m), "r"(hetero_sg_mask()));
    return r;
}
/* Other types move as 32-bit words. */
#define HETERO_SHFL_AS(T, MODE, TO, FROM) \
    static inline T hetero_shfl_##MODE##_##T(T v, uint x) { return FROM(hetero_shfl_##MODE##_uint(TO(v), x)); }
#define HETERO_SHFL_WIDE(T, MODE) \
    static inline T hetero_shfl_##MODE##_##T(T v, uint x) { \
        ulong b = as_ulong(v); \
        uint lo = hetero_shfl_##MODE##_uint((uint)b, x), hi = hetero_shfl_##MODE##_uint((uint)(b >> 32), x); \
        return as_##T(((ulong)hi << 32) | (ulong)lo); \
    }
#define HETERO_SHFL_MODES(M) \
    HETERO_SHFL_AS(int, M, as_uint, as_int) \
    HETERO_SHFL_AS(float, M, as_uint, as_float) \
    HETERO_SHFL_WIDE(ulong, M) \
    HETERO_SHFL_WIDE(long, M)
HETERO_SHFL_MODES(idx)
HETERO_SHFL_MODES(up)
HETERO_SHFL_MODES(down)
HETERO_SHFL_MODES(xor)
#if defined(HETERO_FP64)
HETERO_SHFL_WIDE(double, idx)
HETERO_SHFL_WIDE(double, up)
HETERO_SHFL_WIDE(double, down)
HETERO_SHFL_WIDE(double, xor)
#endif
static inline ulong sg_ballot(int p) {
    uint r;
    asm volatile("{ .reg .pred q; setp.ne.s32 q, %1, 0; vote.sync.ballot.b32 %0, q, %2; }"
                 : "=r"(r) : "r"(p), "r"(hetero_sg_mask()));
    return (ulong)r;
}
static inline int sg_any(int p) { return sg_ballot(p) != 0ul; }
static inline int sg_all(int p) { return sg_ballot(p) == (ulong)hetero_sg_mask(); }
#endif

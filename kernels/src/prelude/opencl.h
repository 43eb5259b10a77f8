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

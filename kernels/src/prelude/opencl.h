/* hetero portable kernel dialect -> OpenCL C 1.2 */
#define KERNEL __kernel
#define DEVICE_FN static inline
#define GLOBAL __global
#define SHARED __local
#define SHARED_PARAM(T, name) , __local T* name
#define SHARED_DECL(T, name)
#define THREAD_X ((uint)get_local_id(0))
#define THREAD_Y ((uint)get_local_id(1))
#define BLOCK_X ((uint)get_group_id(0))
#define BLOCK_Y ((uint)get_group_id(1))
#define BLOCK_DIM_X ((uint)get_local_size(0))
#define BLOCK_DIM_Y ((uint)get_local_size(1))
#define GRID_DIM_X ((uint)get_num_groups(0))
#define BARRIER barrier(CLK_LOCAL_MEM_FENCE)
#define HETERO_PI 3.14159265358979323846f

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

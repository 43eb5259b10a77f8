/* A minimal NVTX injection library, as Nsight tools provide one: NVTX
 * calls InitializeInjectionNvtx2 with its export-table getter; the probe
 * asks for the core module's table and writes its own RangePushA,
 * RangePop and MarkA into the slots, which append lines to the file
 * named by HETERO_PROBE_LOG. The ids and table layout are NVTX 3's
 * (nvtxDetail/nvtxTypes.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*fn_ptr)(void);
typedef struct {
    size_t struct_size;
    int (*get_module_function_table)(int module, fn_ptr ***out_table, unsigned int *out_size);
} callbacks_t;
typedef struct {
    size_t struct_size;
    uint32_t version;
    uint32_t reserved0;
    void (*set_injection_nvtx_version)(uint32_t);
} version_info_t;
typedef const void *(*get_export_table_t)(uint32_t);

static FILE *out;

static void line(const char *what, const char *name) {
    if (out) {
        fprintf(out, "%s %s\n", what, name ? name : "");
        fflush(out);
    }
}
static int push_a(const char *name) { line("push", name); return 0; }
static int pop(void) { line("pop", 0); return 0; }
static void mark_a(const char *name) { line("mark", name); }

int InitializeInjectionNvtx2(get_export_table_t get) {
    const char *path = getenv("HETERO_PROBE_LOG");
    out = path ? fopen(path, "a") : 0;
    const version_info_t *version = (const version_info_t *)get(3);
    const callbacks_t *callbacks = (const callbacks_t *)get(1);
    if (!version || version->struct_size < sizeof(version_info_t) || !callbacks
        || callbacks->struct_size < sizeof(callbacks_t)) {
        return 0;
    }
    version->set_injection_nvtx_version(3);
    fn_ptr **core = 0;
    unsigned int size = 0;
    if (!callbacks->get_module_function_table(1, &core, &size) || size < 16 || core[size] != 0) {
        return 0;
    }
    if (out) {
        fprintf(out, "attached version %u\n", version->version);
    }
    *core[2] = (fn_ptr)mark_a;
    *core[9] = (fn_ptr)push_a;
    *core[11] = (fn_ptr)pop;
    return 1;
}

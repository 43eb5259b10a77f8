//! Named ranges in a profiler's timeline: NVTX for Nsight Systems and
//! Nsight Compute, rocTX for rocprof.
//!
//! Nothing is linked: like the drivers, a profiler's marker library is
//! found at run time, and only when a profiler is attached. The typed layer
//! wraps its operations in ranges (`hetero copy`, `hetero launch <kernel>`,
//! `hetero replay`, `hetero synchronize`, ...), and the suite its phases.
//! Downstream code adds its own with [`range`] and [`range_named`].
//!
//! Which profiler, read once per process ([`MARKERS_ENV`]):
//! - `auto` (the default): NVTX when `NVTX_INJECTION64_PATH` is set (nsys
//!   and ncu set it for the programs they start), else rocTX when a ROCm
//!   profiler's variable is (`ROCP_TOOL_LIBRARIES` for rocprofv3,
//!   `HSA_TOOLS_LIB` for rocprof), else none;
//! - `off`: none; `nvtx` or `roctx`: that one, an error if it cannot load.
//!
//! NVTX is attached as NVIDIA's header-only NVTX 3 attaches it: the
//! library that `NVTX_INJECTION64_PATH` names is opened, and its
//! `InitializeInjectionNvtx2` is given an export table through which it
//! fills in the calls it implements (the tables' layout is NVTX's
//! `nvtxDetail/nvtxTypes.h`). rocTX is a plain library (rocprofiler-sdk's
//! `librocprofiler-sdk-roctx`, or roctracer's `libroctx64`, or the one
//! [`ROCTX_LIBRARY_ENV`] names) whose `roctxRangePushA`, `roctxRangePop`
//! and `roctxMarkA` are called.
//!
//! With no profiler attached a range costs one load of a initialised
//! static and a branch (the bench's `markers` row measures it against an
//! operation). Ranges nest per thread: a [`Range`] cannot leave its thread.

use std::ffi::{CStr, CString, OsString, c_char, c_int, c_uint, c_void};
use std::marker::PhantomData;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

use libloading::Library;

/// Chooses the profiler that receives hetero's markers: `auto` (the
/// default), `off`, `nvtx` or `roctx` (see the [module](self) docs).
pub const MARKERS_ENV: &str = "HETERO_MARKERS";

/// The rocTX library to load, instead of the names searched by default.
pub const ROCTX_LIBRARY_ENV: &str = "HETERO_ROCTX_LIBRARY";

/// The variable through which Nsight tools name their NVTX injection library.
const NVTX_INJECTION_ENV: &str = "NVTX_INJECTION64_PATH";

/// Variables that ROCm's profilers set in the programs they start.
const ROCM_PROFILER_ENVS: [&str; 2] = ["ROCP_TOOL_LIBRARIES", "HSA_TOOLS_LIB"];

/// rocTX libraries, by preference: rocprofiler-sdk's (rocprofv3), then roctracer's.
const ROCTX_LIBRARIES: [&str; 4] =
    ["librocprofiler-sdk-roctx.so.1", "librocprofiler-sdk-roctx.so", "libroctx64.so.4", "libroctx64.so"];

/// The profiler that receives markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Profiler {
    /// None: ranges cost a branch.
    None,
    /// NVIDIA's NVTX, through the injection library of Nsight Systems or Nsight Compute.
    Nvtx,
    /// AMD's rocTX.
    Roctx,
}

impl std::fmt::Display for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Profiler::None => "none",
            Profiler::Nvtx => "NVTX",
            Profiler::Roctx => "rocTX",
        })
    }
}

/// Why markers reach no profiler although one was asked for, or
/// [`MARKERS_ENV`] has a value that is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MarkersError {
    /// What went wrong and what to do, naming the variable or library.
    pub message: String,
    /// `true` when [`MARKERS_ENV`] itself is not understood (streams then
    /// refuse to be created, as a bad allocator setting refuses allocations).
    pub config: bool,
}

/// The profiler markers reach, or why none does although one was asked
/// for (its library could not be loaded, or [`MARKERS_ENV`] is not
/// understood). Read once per process.
pub fn profiler() -> Result<Profiler, MarkersError> {
    let s = state();
    match &s.problem {
        Some(problem) => Err(problem.clone()),
        None => Ok(s.profiler),
    }
}

/// [`MARKERS_ENV`]'s value when it is not understood: the typed layer
/// refuses to create streams then.
pub(crate) fn config_error() -> Option<&'static MarkersError> {
    state().problem.as_ref().filter(|p| p.config)
}

/// A range open on this thread until dropped; ranges nest.
#[must_use = "a range ends when dropped"]
pub struct Range {
    open: bool,
    /// Pushed and popped on one thread: not `Send`.
    _thread: PhantomData<*const ()>,
}

impl Drop for Range {
    fn drop(&mut self) {
        if self.open
            && let Some(calls) = &state().calls
        {
            // SAFETY: a function the profiler's library provides for this
            // signature; it pops the range this guard pushed on this thread.
            unsafe { (calls.pop)() };
        }
    }
}

/// Opens a range named `name` on this thread until the guard is dropped
/// (the profiler copies the name).
#[inline]
pub fn range(name: &CStr) -> Range {
    open(|| name)
}

/// Opens a range whose name is built only when a profiler is attached (a
/// name with a NUL byte is cut there).
#[inline]
pub fn range_named(name: impl FnOnce() -> String) -> Range {
    match &state().calls {
        None => Range { open: false, _thread: PhantomData },
        Some(_) => {
            let name = c_string(name());
            open(|| &name)
        }
    }
}

/// An instantaneous marker named `name`.
#[inline]
pub fn mark(name: &CStr) {
    if let Some(Calls { mark: Some(mark), .. }) = &state().calls {
        // SAFETY: a function the profiler's library provides for this
        // signature; `name` is a NUL-terminated string that outlives the call.
        unsafe { mark(name.as_ptr()) };
    }
}

fn open<'a>(name: impl FnOnce() -> &'a CStr) -> Range {
    let Some(calls) = &state().calls else {
        return Range { open: false, _thread: PhantomData };
    };
    // SAFETY: as in `mark`; the library copies the name.
    unsafe { (calls.push)(name().as_ptr()) };
    Range { open: true, _thread: PhantomData }
}

fn c_string(mut name: String) -> CString {
    if let Some(nul) = name.find('\0') {
        name.truncate(nul);
    }
    CString::new(name).unwrap_or_default()
}

type PushFn = unsafe extern "C" fn(*const c_char) -> c_int;
type PopFn = unsafe extern "C" fn() -> c_int;
type MarkFn = unsafe extern "C" fn(*const c_char);

/// The calls of the attached profiler.
struct Calls {
    push: PushFn,
    pop: PopFn,
    mark: Option<MarkFn>,
}

struct State {
    profiler: Profiler,
    /// `Some` exactly when `profiler` is not `None`.
    calls: Option<Calls>,
    problem: Option<MarkersError>,
}

static STATE: OnceLock<State> = OnceLock::new();

#[inline]
fn state() -> &'static State {
    STATE.get_or_init(attach)
}

/// Reads [`MARKERS_ENV`] and attaches the profiler it chooses.
#[cold]
fn attach() -> State {
    let none = |problem| State { profiler: Profiler::None, calls: None, problem };
    let setting = std::env::var(MARKERS_ENV).unwrap_or_default();
    let wanted = match setting.trim() {
        "" | "auto" => {
            if std::env::var_os(NVTX_INJECTION_ENV).is_some() {
                Profiler::Nvtx
            } else if ROCM_PROFILER_ENVS.iter().any(|v| std::env::var_os(v).is_some()) {
                Profiler::Roctx
            } else {
                return none(None);
            }
        }
        "off" => return none(None),
        "nvtx" => Profiler::Nvtx,
        "roctx" => Profiler::Roctx,
        other => {
            return none(Some(MarkersError {
                message: format!("{MARKERS_ENV}={other:?} is not understood; use auto, off, nvtx or roctx"),
                config: true,
            }));
        }
    };
    let attached = match wanted {
        Profiler::Nvtx => attach_nvtx(),
        _ => attach_roctx(),
    };
    match attached {
        Ok(calls) => State { profiler: wanted, calls: Some(calls), problem: None },
        Err(message) => none(Some(MarkersError { message, config: false })),
    }
}

fn attach_roctx() -> Result<Calls, String> {
    let names: Vec<OsString> = match std::env::var_os(ROCTX_LIBRARY_ENV) {
        Some(path) => vec![path],
        None => ROCTX_LIBRARIES.iter().map(OsString::from).collect(),
    };
    let mut tried = Vec::new();
    for name in &names {
        // SAFETY: loading a rocTX library runs its initialisers, which is
        // what any program linked to it does.
        match unsafe { Library::new(name) } {
            Ok(lib) => {
                // SAFETY: rocTX declares these with exactly these signatures.
                let calls = unsafe {
                    let push = lib.get::<PushFn>(b"roctxRangePushA\0").map(|s| *s);
                    let pop = lib.get::<PopFn>(b"roctxRangePop\0").map(|s| *s);
                    let mark = lib.get::<MarkFn>(b"roctxMarkA\0").map(|s| *s).ok();
                    match (push, pop) {
                        (Ok(push), Ok(pop)) => Calls { push, pop, mark },
                        _ => {
                            return Err(format!(
                                "{} has no roctxRangePushA and roctxRangePop: not a rocTX library",
                                name.to_string_lossy()
                            ));
                        }
                    }
                };
                // The calls are used for the rest of the process.
                std::mem::forget(lib);
                return Ok(calls);
            }
            Err(e) => tried.push(format!("{}: {e}", name.to_string_lossy())),
        }
    }
    Err(format!(
        "no rocTX library could be loaded ({}); set {ROCTX_LIBRARY_ENV} to its path, or {MARKERS_ENV}=off",
        tried.join("; ")
    ))
}

fn attach_nvtx() -> Result<Calls, String> {
    let Some(path) = std::env::var_os(NVTX_INJECTION_ENV) else {
        return Err(format!(
            "{MARKERS_ENV}=nvtx, but {NVTX_INJECTION_ENV} is not set: start the program under nsys or ncu, \
             which set it"
        ));
    };
    let shown = path.to_string_lossy().into_owned();
    // SAFETY: the injection library is the profiler's, named for this
    // purpose; loading it runs its initialisers as NVTX itself would.
    let lib =
        unsafe { Library::new(&path) }.map_err(|e| format!("{NVTX_INJECTION_ENV}={shown} cannot be loaded: {e}"))?;
    // SAFETY: NVTX declares the entry point with exactly this signature.
    let init = unsafe { lib.get::<InitializeFn>(b"InitializeInjectionNvtx2\0") }
        .map(|s| *s)
        .map_err(|e| format!("{shown} is not an NVTX injection library: {e}"))?;
    // SAFETY: the tool calls back into `get_export_table` and writes its
    // functions through the tables' slot pointers, all of them static.
    if unsafe { init(get_export_table) } == 0 {
        return Err(format!(
            "the NVTX injection library {shown} refused to attach (InitializeInjectionNvtx2 returned 0)"
        ));
    }
    // The tool's functions are used for the rest of the process.
    std::mem::forget(lib);
    let slot = |id: usize| SLOTS[CORE][id].load(Ordering::Acquire);
    let (push, pop, mark) = (slot(CORE_RANGE_PUSH_A), slot(CORE_RANGE_POP), slot(CORE_MARK_A));
    if push.is_null() || pop.is_null() {
        return Err(format!("the NVTX injection library {shown} attached no range calls"));
    }
    // SAFETY: the tool stored in these slots functions of the signatures
    // that NVTX gives their ids (nvtxRangePushA, nvtxRangePop, nvtxMarkA).
    Ok(unsafe {
        Calls {
            push: std::mem::transmute::<*mut c_void, PushFn>(push),
            pop: std::mem::transmute::<*mut c_void, PopFn>(pop),
            mark: (!mark.is_null()).then(|| std::mem::transmute::<*mut c_void, MarkFn>(mark)),
        }
    })
}

// NVTX's export tables, for `InitializeInjectionNvtx2`.

type InitializeFn = unsafe extern "C" fn(GetExportTableFn) -> c_int;
type GetExportTableFn = unsafe extern "C" fn(u32) -> *const c_void;

/// NVTX_ETID_CALLBACKS and NVTX_ETID_VERSIONINFO.
const EXPORT_CALLBACKS: u32 = 1;
const EXPORT_VERSION_INFO: u32 = 3;
/// The NVTX API version this implements.
const NVTX_VERSION: u32 = 3;

/// NVTX_CB_MODULE_CORE, and its calls' ids.
const CORE: usize = 1;
const CORE_MARK_A: usize = 2;
const CORE_RANGE_PUSH_A: usize = 9;
const CORE_RANGE_POP: usize = 11;

/// Each module's NVTX_CBID_*_SIZE, by module id (CORE, CUDA, OPENCL,
/// CUDART, CORE2, SYNC); a table has a slot per id below it and a null
/// after the last, so a tool reading past the end stops there.
const MODULE_SIZES: [usize; 7] = [0, 16, 9, 15, 7, 16, 7];
const MAX_SLOTS: usize = 17;

#[repr(C)]
struct ExportCallbacks {
    struct_size: usize,
    get_module_function_table: unsafe extern "C" fn(c_int, *mut *const *mut c_void, *mut c_uint) -> c_int,
}

#[repr(C)]
struct ExportVersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: unsafe extern "C" fn(u32),
}

static CALLBACKS: ExportCallbacks =
    ExportCallbacks { struct_size: std::mem::size_of::<ExportCallbacks>(), get_module_function_table };

static VERSION_INFO: ExportVersionInfo = ExportVersionInfo {
    struct_size: std::mem::size_of::<ExportVersionInfo>(),
    version: NVTX_VERSION,
    reserved0: 0,
    set_injection_nvtx_version,
};

/// The function pointer slots a tool fills in, by module and call id; only
/// the core module's push, pop and mark are ever called.
static SLOTS: [[AtomicPtr<c_void>; MAX_SLOTS]; 7] =
    [const { [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_SLOTS] }; 7];

/// Per module, the addresses of its slots: what a tool's table points at.
struct Tables([[*mut c_void; MAX_SLOTS]; 7]);
// SAFETY: the tables are written once, in `tables`, and only read after;
// the pointers they hold are to `SLOTS`, atomics that any thread may write.
unsafe impl Sync for Tables {}
// SAFETY: as for Sync.
unsafe impl Send for Tables {}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut t = [[std::ptr::null_mut(); MAX_SLOTS]; 7];
        for (module, size) in MODULE_SIZES.iter().enumerate() {
            // Id 0 is invalid and id `size` the terminating null.
            for id in 1..*size {
                t[module][id] = SLOTS[module][id].as_ptr().cast();
            }
        }
        Tables(t)
    })
}

unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
    match id {
        EXPORT_CALLBACKS => std::ptr::from_ref(&CALLBACKS).cast(),
        EXPORT_VERSION_INFO => std::ptr::from_ref(&VERSION_INFO).cast(),
        _ => std::ptr::null(),
    }
}

unsafe extern "C" fn get_module_function_table(
    module: c_int,
    out_table: *mut *const *mut c_void,
    out_size: *mut c_uint,
) -> c_int {
    let Some(module) = usize::try_from(module).ok().filter(|m| (1..MODULE_SIZES.len()).contains(m)) else {
        return 0;
    };
    let size = MODULE_SIZES[module];
    if !out_size.is_null() {
        // SAFETY: the tool passes a pointer to an unsigned int, or null.
        unsafe { *out_size = size as c_uint };
    }
    if !out_table.is_null() {
        // SAFETY: the tool passes a pointer to a table pointer, or null;
        // the table is static.
        unsafe { *out_table = tables().0[module].as_ptr() };
    }
    1
}

unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool reads each module's size and writes through its slots: the
    /// core table has a slot per call id and a null after the last.
    #[test]
    fn module_tables_have_a_slot_per_id_and_a_terminating_null() {
        let mut table: *const *mut c_void = std::ptr::null();
        let mut size: c_uint = 0;
        // SAFETY: valid out-pointers.
        assert_eq!(unsafe { get_module_function_table(CORE as c_int, &mut table, &mut size) }, 1);
        assert_eq!(size, 16);
        // SAFETY: the table has size + 1 entries.
        let entries = unsafe { std::slice::from_raw_parts(table, size as usize + 1) };
        assert!(entries[0].is_null() && entries[16].is_null());
        assert!(entries[1..16].iter().all(|p| !p.is_null()));
        assert_eq!(entries[CORE_RANGE_POP], SLOTS[CORE][CORE_RANGE_POP].as_ptr().cast());
        for bad in [0, 7, -1] {
            // SAFETY: as above.
            assert_eq!(unsafe { get_module_function_table(bad, &mut table, &mut size) }, 0, "module {bad}");
        }
        // SAFETY: any id may be asked for.
        unsafe {
            assert!(get_export_table(2).is_null());
            let v = get_export_table(EXPORT_VERSION_INFO).cast::<ExportVersionInfo>();
            assert_eq!((*v).version, 3);
            assert_eq!((*v).struct_size, 24);
        }
    }
}

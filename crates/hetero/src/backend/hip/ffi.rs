//! The HIP and hiprtc functions hetero calls, loaded by hetero itself.
//!
//! `cubecl-hip-sys` gives the types and constants (every item of it is
//! re-exported here), but its loader looks only for `libamdhip64.so`,
//! `.so.1` and `.so.0` and a separate `libhiprtc.so`, and panics at the
//! first call when they are absent. A runtime-only ROCm install has
//! `libamdhip64.so.5`, `.so.6` or `.so.7` (Debian's `libamdhip64-5`), and
//! ROCm 5 keeps hiprtc inside `libamdhip64`. So every function the
//! backend calls is declared here and resolved once, from the library
//! [`load`] finds, then called through the pointer, as a program linked
//! against `libamdhip64` calls it (the bindings look each symbol up at
//! every call besides). A function declared here shadows the binding of
//! the same name; `Table::bindings` checks at compile time that each
//! signature is the binding's.
//!
//! Code that calls HIP next to hetero can use this module in place of
//! `cubecl_hip_sys` (the bench's raw HIP path does).

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::backend::gpu::loader;
pub use cubecl_hip_sys::*;
use libloading::Library;

/// Declares the functions: each with its C signature (the binding's) and
/// the value it returns when no library could be loaded, which discovery
/// reports before anything calls them.
macro_rules! functions {
    ($($name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty, else $missing:expr;)*) => {
        /// Pointers to the resolved functions.
        #[allow(non_snake_case)]
        struct Table {
            $($name: unsafe extern "C" fn($($ty),*) -> $ret,)*
        }

        impl Table {
            /// The bindings' functions: never called, it is the check that
            /// each signature here is the binding's (a function item
            /// coerces to the field's pointer type only when they agree).
            #[allow(dead_code)]
            fn bindings() -> Self {
                Self { $($name: cubecl_hip_sys::$name,)* }
            }

            /// Every function, hiprtc's from `rtc` and the others from
            /// `hip`, or the name of one that is missing.
            fn resolve(hip: &Library, rtc: &Library) -> Result<Self, String> {
                Ok(Self {
                    $($name: {
                        let name = stringify!($name);
                        let library = if name.starts_with("hiprtc") { rtc } else { hip };
                        // SAFETY: the symbol is the HIP runtime's function of
                        // that name, whose C signature is the field's type
                        // (checked against the bindings by `bindings`).
                        *unsafe { library.get::<unsafe extern "C" fn($($ty),*) -> $ret>(name.as_bytes()) }
                            .map_err(|e| format!("{name} is missing: {e}"))?
                    },)*
                })
            }
        }

        /// The name of every function declared here.
        pub const SYMBOLS: &[&str] = &[$(stringify!($name)),*];

        $(
            /// As the HIP function of the same name, through the pointer
            /// resolved once.
            ///
            /// # Safety
            /// As the HIP function of that name.
            #[inline]
            #[allow(non_snake_case, clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                match load() {
                    // SAFETY: the caller's contract is the HIP function's.
                    Ok(loaded) => unsafe { (loaded.table.$name)($($arg),*) },
                    Err(_) => $missing,
                }
            }
        )*
    };
}

const NO_HIP: hipError_t = hipError_t_hipErrorNotInitialized;
const NO_RTC: hiprtcResult = hiprtcResult_HIPRTC_ERROR_INTERNAL_ERROR;

functions! {
    hipInit(flags: c_uint) -> hipError_t, else NO_HIP;
    hipDriverGetVersion(version: *mut c_int) -> hipError_t, else NO_HIP;
    hipRuntimeGetVersion(version: *mut c_int) -> hipError_t, else NO_HIP;
    hipGetDeviceCount(count: *mut c_int) -> hipError_t, else NO_HIP;
    hipGetDevice(device: *mut c_int) -> hipError_t, else NO_HIP;
    hipSetDevice(device: c_int) -> hipError_t, else NO_HIP;
    hipGetErrorName(code: hipError_t) -> *const c_char, else std::ptr::null();
    hipGetErrorString(code: hipError_t) -> *const c_char, else std::ptr::null();
    hipDeviceGetAttribute(value: *mut c_int, attribute: hipDeviceAttribute_t, device: c_int) -> hipError_t, else NO_HIP;
    hipDeviceGetName(name: *mut c_char, len: c_int, device: hipDevice_t) -> hipError_t, else NO_HIP;
    hipDeviceGetPCIBusId(id: *mut c_char, len: c_int, device: c_int) -> hipError_t, else NO_HIP;
    hipDeviceTotalMem(bytes: *mut usize, device: hipDevice_t) -> hipError_t, else NO_HIP;
    hipDeviceGetMemPool(pool: *mut hipMemPool_t, device: c_int) -> hipError_t, else NO_HIP;
    hipMemPoolSetAccess(pool: hipMemPool_t, access: *const hipMemAccessDesc, count: usize) -> hipError_t, else NO_HIP;
    hipDeviceCanAccessPeer(can: *mut c_int, device: c_int, peer: c_int) -> hipError_t, else NO_HIP;
    hipDeviceEnablePeerAccess(peer: c_int, flags: c_uint) -> hipError_t, else NO_HIP;
    hipStreamCreateWithPriority(stream: *mut hipStream_t, flags: c_uint, priority: c_int) -> hipError_t, else NO_HIP;
    hipStreamDestroy(stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipStreamSynchronize(stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipStreamQuery(stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipStreamWaitEvent(stream: hipStream_t, event: hipEvent_t, flags: c_uint) -> hipError_t, else NO_HIP;
    hipStreamWaitValue32(stream: hipStream_t, ptr: *mut c_void, value: u32, flags: c_uint, mask: u32) -> hipError_t, else NO_HIP;
    hipEventCreateWithFlags(event: *mut hipEvent_t, flags: c_uint) -> hipError_t, else NO_HIP;
    hipEventDestroy(event: hipEvent_t) -> hipError_t, else NO_HIP;
    hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipEventQuery(event: hipEvent_t) -> hipError_t, else NO_HIP;
    hipEventSynchronize(event: hipEvent_t) -> hipError_t, else NO_HIP;
    hipEventElapsedTime(ms: *mut f32, start: hipEvent_t, stop: hipEvent_t) -> hipError_t, else NO_HIP;
    hipMalloc(ptr: *mut *mut c_void, size: usize) -> hipError_t, else NO_HIP;
    hipFree(ptr: *mut c_void) -> hipError_t, else NO_HIP;
    hipMallocAsync(ptr: *mut *mut c_void, size: usize, stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipFreeAsync(ptr: *mut c_void, stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipHostMalloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> hipError_t, else NO_HIP;
    hipHostFree(ptr: *mut c_void) -> hipError_t, else NO_HIP;
    hipHostGetDevicePointer(device: *mut *mut c_void, host: *mut c_void, flags: c_uint) -> hipError_t, else NO_HIP;
    hipMemcpyHtoDAsync(dst: hipDeviceptr_t, src: *const c_void, bytes: usize, stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipMemcpyDtoHAsync(dst: *mut c_void, src: hipDeviceptr_t, bytes: usize, stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipMemcpyDtoDAsync(dst: hipDeviceptr_t, src: hipDeviceptr_t, bytes: usize, stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipMemcpyPeerAsync(
        dst: *mut c_void,
        dst_device: c_int,
        src: *const c_void,
        src_device: c_int,
        bytes: usize,
        stream: hipStream_t,
    ) -> hipError_t, else NO_HIP;
    hipMemsetD32Async(dst: hipDeviceptr_t, value: c_int, count: usize, stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipStreamBeginCapture(stream: hipStream_t, mode: hipStreamCaptureMode) -> hipError_t, else NO_HIP;
    hipStreamEndCapture(stream: hipStream_t, graph: *mut hipGraph_t) -> hipError_t, else NO_HIP;
    hipGraphInstantiateWithFlags(exec: *mut hipGraphExec_t, graph: hipGraph_t, flags: u64) -> hipError_t, else NO_HIP;
    hipGraphExecUpdate(
        exec: hipGraphExec_t,
        graph: hipGraph_t,
        error_node: *mut hipGraphNode_t,
        result: *mut hipGraphExecUpdateResult,
    ) -> hipError_t, else NO_HIP;
    hipStreamGetCaptureInfo_v2(
        stream: hipStream_t,
        status: *mut hipStreamCaptureStatus,
        id: *mut u64,
        graph: *mut hipGraph_t,
        dependencies: *mut *const hipGraphNode_t,
        count: *mut usize,
    ) -> hipError_t, else NO_HIP;
    hipGraphExecKernelNodeSetParams(
        exec: hipGraphExec_t,
        node: hipGraphNode_t,
        params: *const hipKernelNodeParams,
    ) -> hipError_t, else NO_HIP;
    hipGraphLaunch(exec: hipGraphExec_t, stream: hipStream_t) -> hipError_t, else NO_HIP;
    hipGraphDestroy(graph: hipGraph_t) -> hipError_t, else NO_HIP;
    hipGraphExecDestroy(exec: hipGraphExec_t) -> hipError_t, else NO_HIP;
    hipModuleLoadData(module: *mut hipModule_t, image: *const c_void) -> hipError_t, else NO_HIP;
    hipModuleGetFunction(function: *mut hipFunction_t, module: hipModule_t, name: *const c_char) -> hipError_t, else NO_HIP;
    hipFuncGetAttribute(value: *mut c_int, attribute: hipFunction_attribute, function: hipFunction_t) -> hipError_t, else NO_HIP;
    hipModuleLaunchKernel(
        function: hipFunction_t,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_bytes: c_uint,
        stream: hipStream_t,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> hipError_t, else NO_HIP;
    hiprtcCreateProgram(
        program: *mut hiprtcProgram,
        source: *const c_char,
        name: *const c_char,
        headers: c_int,
        header_sources: *const *const c_char,
        header_names: *const *const c_char,
    ) -> hiprtcResult, else NO_RTC;
    hiprtcCompileProgram(program: hiprtcProgram, options: c_int, option_values: *const *const c_char) -> hiprtcResult, else NO_RTC;
    hiprtcDestroyProgram(program: *mut hiprtcProgram) -> hiprtcResult, else NO_RTC;
    hiprtcGetCodeSize(program: hiprtcProgram, size: *mut usize) -> hiprtcResult, else NO_RTC;
    hiprtcGetCode(program: hiprtcProgram, code: *mut c_char) -> hiprtcResult, else NO_RTC;
    hiprtcGetProgramLogSize(program: hiprtcProgram, size: *mut usize) -> hiprtcResult, else NO_RTC;
    hiprtcGetProgramLog(program: hiprtcProgram, log: *mut c_char) -> hiprtcResult, else NO_RTC;
    hiprtcGetErrorString(result: hiprtcResult) -> *const c_char, else std::ptr::null();
}

/// The libraries loaded for the process (never closed: the pointers in
/// `table` must outlive every call) and what was resolved from them.
pub struct Loaded {
    table: Table,
    /// `hipGetDevicePropertiesR0600`, which runtimes from ROCm 6 on export
    /// (ROCm 5's `hipGetDeviceProperties` has another struct layout, which
    /// the bindings do not describe).
    properties: Option<unsafe extern "C" fn(*mut hipDeviceProp_tR0600, c_int) -> hipError_t>,
    /// The HIP runtime's file.
    pub hip: PathBuf,
    /// hiprtc's file (the runtime's own, where it holds hiprtc).
    pub hiprtc: PathBuf,
    _libraries: (Library, Library),
}

/// Sonames of the HIP runtime and of hiprtc, newest first after the
/// development name: ROCm 7, 6 and 5 runtime-only installs have only theirs.
const VERSIONS: [&str; 4] = ["", ".7", ".6", ".5"];

/// Where a library is looked for: `$ROCM_PATH/lib`, `$ROCM_PATH`,
/// `$HIP_PATH/lib`, `$HIP_PATH`, `/opt/rocm/lib`, then the system's
/// library path (`None`). An empty variable is unset; a relative one is an
/// error, never searched (`loader::env_path`).
fn folders() -> Result<Vec<Option<PathBuf>>, String> {
    let mut roots = Vec::new();
    for name in ["ROCM_PATH", "HIP_PATH"] {
        roots.extend(loader::env_path(name)?);
    }
    Ok(roots
        .into_iter()
        .flat_map(|root| [root.join("lib"), root])
        .chain([PathBuf::from("/opt/rocm/lib")])
        .map(Some)
        .chain([None])
        .collect())
}

/// Why no `lib<stem>.so*` could be opened.
enum NotOpened {
    /// No such file anywhere searched; the first attempt's reason.
    Missing(String),
    /// A file that the loader refused (not a library, wrong architecture,
    /// a missing dependency): its path and the loader's reason.
    Refused(String),
}

impl NotOpened {
    /// The reason, after `what` and where it was searched.
    fn describe(&self, what: &str) -> String {
        match self {
            NotOpened::Missing(first) => format!("{what} was not found ({first})"),
            NotOpened::Refused(why) => format!("{what} was found but could not be loaded: {why}"),
        }
    }
}

/// The first of `lib<stem>.so{,.7,.6,.5}` that opens, in [`folders`]
/// order, or why none did. A file the loader refuses ends the search: a
/// broken install is reported, not passed over for another one.
fn open_first(stem: &str) -> Result<(Library, PathBuf), NotOpened> {
    let mut missing = None;
    for folder in folders().map_err(NotOpened::Refused)? {
        for version in VERSIONS {
            let name = format!("lib{stem}.so{version}");
            let path = folder.as_ref().map_or_else(|| PathBuf::from(&name), |f| f.join(&name));
            // SAFETY: loading the HIP runtime runs its initialisers, which
            // make no demands on the caller.
            match unsafe { Library::new(&path) } {
                Ok(library) => return Ok((library, path)),
                // No such file here (or a bare name the system's search did
                // not find): the next place may have it. Asked of the file
                // system, not read from the loader's (localised) message.
                Err(e) if folder.is_none() || !path.exists() => {
                    missing.get_or_insert_with(|| loader::load_error(&e));
                }
                Err(e) => {
                    return Err(NotOpened::Refused(format!("{}: {}", path.display(), loader::load_error(&e))));
                }
            }
        }
    }
    Err(NotOpened::Missing(missing.unwrap_or_else(|| "nothing searched".into())))
}

fn open() -> Result<Loaded, String> {
    let (hip, hip_path) = open_first("amdhip64").map_err(|why| {
        format!(
            "{}: install ROCm or its runtime package, or set ROCM_PATH",
            why.describe(
                "ROCm's HIP runtime (libamdhip64.so, .so.7, .so.6 or .so.5 in $ROCM_PATH/lib, $HIP_PATH/lib, /opt/rocm/lib or the library path)"
            )
        )
    })?;
    let (rtc, rtc_path) = match open_first("hiprtc") {
        Ok(found) => found,
        // ROCm 5 keeps hiprtc inside the runtime.
        // SAFETY: the symbol is only looked up, not called.
        Err(_) if unsafe { hip.get::<unsafe extern "C" fn()>(b"hiprtcCreateProgram") }.is_ok() => {
            // SAFETY: as in `open_first`; the library is loaded already.
            let again = unsafe { Library::new(&hip_path) }.map_err(|e| loader::load_error(&e))?;
            (again, hip_path.clone())
        }
        Err(why) => {
            return Err(format!(
                "{}: install ROCm's hiprtc package",
                why.describe(&format!(
                    "hiprtc (libhiprtc.so, .so.7, .so.6 or .so.5 beside libamdhip64, or inside {})",
                    hip_path.display()
                ))
            ));
        }
    };
    let table = Table::resolve(&hip, &rtc)
        .map_err(|missing| format!("the HIP runtime at {} is too old or partial: {missing}", hip_path.display()))?;
    // SAFETY: the symbol, where present, is the function of that name,
    // whose C signature is the field's (the bindings' declaration).
    let properties = unsafe { hip.get(b"hipGetDevicePropertiesR0600") }.ok().map(|f| *f);
    Ok(Loaded { table, properties, hip: hip_path, hiprtc: rtc_path, _libraries: (hip, rtc) })
}

/// The runtime, loaded and resolved at the first call, or why it cannot be.
pub fn load() -> Result<&'static Loaded, &'static str> {
    static LOADED: OnceLock<Result<Loaded, String>> = OnceLock::new();
    LOADED.get_or_init(open).as_ref().map_err(String::as_str)
}

/// Device `ordinal`'s GPU target as the runtime names it (`gcnArchName`,
/// e.g. `gfx90a:sramecc+:xnack-`), where the runtime has
/// `hipGetDevicePropertiesR0600` (ROCm 6 and later) and names one.
pub fn gcn_arch_name(ordinal: c_int) -> Option<String> {
    let properties = load().ok()?.properties?;
    let mut props = Box::new(std::mem::MaybeUninit::<hipDeviceProp_tR0600>::zeroed());
    // SAFETY: props is a zeroed struct of the function's type (all-zero
    // bytes are a valid value of the plain C struct), written by the call.
    let status = unsafe { properties(props.as_mut_ptr(), ordinal) };
    if status != hipError_t_hipSuccess {
        return None;
    }
    // SAFETY: zeroed, then filled by the runtime: initialised either way.
    let props = unsafe { props.assume_init() };
    let bytes: Vec<u8> = props.gcnArchName.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    let name = String::from_utf8_lossy(&bytes).into_owned();
    name.starts_with("gfx").then_some(name)
}

/// Whether the functions were resolved ([`load`] succeeded).
pub fn resolved() -> bool {
    load().is_ok()
}

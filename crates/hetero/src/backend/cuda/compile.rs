//! NVRTC: the portable kernels (assembled with the CUDA prelude) compiled
//! for the device's own architecture (`--gpu-architecture=sm_XY` from its
//! compute capability).
//!
//! The library is the one `HETERO_NVRTC` names (an absolute path, e.g. a CUDA 12
//! toolkit's `libnvrtc.so.12` for a 12.x driver, where a newer NVRTC
//! first on the library path would emit PTX the driver cannot load), or
//! else the one cudarc finds by its names. Its functions are resolved
//! once, from that library, with cudarc's declarations of their types.

use crate::backend::gpu::module::STRICT_NVRTC;
use std::ffi::{CStr, c_char, c_int};
use std::path::PathBuf;
use std::sync::OnceLock;

use cudarc::nvrtc::sys::{nvrtcProgram, nvrtcResult};
use libloading::Library;

use crate::backend::gpu::loader;

use super::error::error;
use crate::error::{ErrorKind, Result};

/// The environment variable naming the NVRTC library to use.
pub const NVRTC_ENV: &str = "HETERO_NVRTC";

/// NVRTC's functions the backend calls.
struct Nvrtc {
    create: unsafe extern "C" fn(
        *mut nvrtcProgram,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> nvrtcResult,
    compile: unsafe extern "C" fn(nvrtcProgram, c_int, *const *const c_char) -> nvrtcResult,
    log_size: unsafe extern "C" fn(nvrtcProgram, *mut usize) -> nvrtcResult,
    log: unsafe extern "C" fn(nvrtcProgram, *mut c_char) -> nvrtcResult,
    ptx_size: unsafe extern "C" fn(nvrtcProgram, *mut usize) -> nvrtcResult,
    ptx: unsafe extern "C" fn(nvrtcProgram, *mut c_char) -> nvrtcResult,
    destroy: unsafe extern "C" fn(*mut nvrtcProgram) -> nvrtcResult,
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> nvrtcResult,
}

/// Each function from `library`, or the one that is missing.
fn resolve(library: &Library) -> std::result::Result<Nvrtc, String> {
    fn get<T: Copy>(library: &Library, name: &str) -> std::result::Result<T, String> {
        // SAFETY: each symbol is NVRTC's function of that name; `T` is
        // the field's type, cudarc's declaration of it.
        unsafe { library.get::<T>(name.as_bytes()) }.map(|f| *f).map_err(|e| format!("{name} is missing: {e}"))
    }
    Ok(Nvrtc {
        create: get(library, "nvrtcCreateProgram")?,
        compile: get(library, "nvrtcCompileProgram")?,
        log_size: get(library, "nvrtcGetProgramLogSize")?,
        log: get(library, "nvrtcGetProgramLog")?,
        ptx_size: get(library, "nvrtcGetPTXSize")?,
        ptx: get(library, "nvrtcGetPTX")?,
        destroy: get(library, "nvrtcDestroyProgram")?,
        version: get(library, "nvrtcVersion")?,
    })
}

/// The NVRTC library `HETERO_NVRTC` names, loaded once (kept for the
/// process: the resolved pointers must outlive every call).
fn named(path: PathBuf) -> &'static std::result::Result<(Library, Nvrtc), String> {
    static NAMED: OnceLock<std::result::Result<(Library, Nvrtc), String>> = OnceLock::new();
    NAMED.get_or_init(|| {
        let shown = path.display().to_string();
        // SAFETY: loading NVRTC runs its initialisers, which make no
        // demands on the caller.
        let library = unsafe { Library::new(&path) }
            .map_err(|e| format!("{NVRTC_ENV}={shown} cannot be loaded: {}", loader::load_error(&e)))?;
        let nvrtc = resolve(&library).map_err(|e| format!("{NVRTC_ENV}={shown} is not NVRTC: {e}"))?;
        Ok((library, nvrtc))
    })
}

/// NVRTC, from the library `HETERO_NVRTC` names (an absolute path; empty
/// is unset) or cudarc's, or why not.
fn nvrtc() -> std::result::Result<&'static Nvrtc, String> {
    if let Some(path) = loader::env_path(NVRTC_ENV)? {
        return named(path).as_ref().map(|(_, nvrtc)| nvrtc).map_err(Clone::clone);
    }
    static FOUND: OnceLock<std::result::Result<Nvrtc, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            // SAFETY: only tries to open the library.
            if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                return Err(format!(
                    "NVRTC (the CUDA run-time compiler, from the CUDA toolkit or the nvidia-cuda-nvrtc wheel) is not on the library path (searched: {}); or name it with {NVRTC_ENV}=/path/to/libnvrtc.so.12",
                    super::searched("nvrtc")
                ));
            }
            // SAFETY: present (checked above), so cudarc loads it without
            // panicking; it keeps the library for the process.
            resolve(unsafe { cudarc::nvrtc::sys::culib() })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Why NVRTC cannot be used, if it cannot (discovery reports it).
pub(super) fn unavailable() -> Option<String> {
    nvrtc().err()
}

fn text(chars: &[c_char]) -> String {
    // SAFETY: NVRTC returns NUL-terminated strings; CStr stops at the first NUL.
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map_or_else(|_| String::from_utf8_lossy(&bytes).into_owned(), |s| s.to_string_lossy().into_owned())
}

/// Compiles assembled `source` to PTX for `arch` (e.g. `sm_90`), strictly
/// ([`STRICT_NVRTC`]) when `strict`; the error carries the NVRTC log.
pub(super) fn compile(source: &CStr, arch: &str, strict: bool) -> Result<Vec<c_char>> {
    let nvrtc = nvrtc().map_err(|why| error("nvrtcCreateProgram", ErrorKind::Unavailable, why))?;
    let failed = |call, code: nvrtcResult| error(call, ErrorKind::Build, format!("{code:?}"));
    let mut program: nvrtcProgram = std::ptr::null_mut();
    // SAFETY: source outlives the call; no headers.
    let created = unsafe {
        (nvrtc.create)(&mut program, source.as_ptr(), c"hetero.cu".as_ptr(), 0, std::ptr::null(), std::ptr::null())
    };
    if created != nvrtcResult::NVRTC_SUCCESS {
        return Err(failed("nvrtcCreateProgram", created));
    }
    let mut options = vec![format!("--gpu-architecture={arch}\0"), "--std=c++17\0".to_string()];
    if strict {
        options.extend(STRICT_NVRTC.iter().map(|o| format!("{o}\0")));
    }
    let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr().cast()).collect();
    // SAFETY: program is live until destroyed below; the options are
    // NUL-terminated strings that outlive the call.
    let compiled = unsafe { (nvrtc.compile)(program, pointers.len() as c_int, pointers.as_ptr()) };
    // SAFETY: program is live.
    let log = unsafe { read(program, nvrtc.log_size, nvrtc.log) }.map(|l| text(&l)).unwrap_or_default();
    let ptx = if compiled == nvrtcResult::NVRTC_SUCCESS {
        // SAFETY: compilation succeeded; program is live.
        unsafe { read(program, nvrtc.ptx_size, nvrtc.ptx) }.map_err(|code| failed("nvrtcGetPTX", code))
    } else {
        Err(error(
            "nvrtcCompileProgram",
            ErrorKind::Build,
            if log.trim().is_empty() { format!("{compiled:?} (NVRTC gave no log)") } else { log },
        ))
    };
    // SAFETY: destroyed once.
    let _ = unsafe { (nvrtc.destroy)(&mut program) };
    ptx
}

/// One of the program's outputs (its log, its PTX): the size, then the
/// bytes, NUL-terminated.
///
/// # Safety
/// `program` is a live program; `size` and `get` are NVRTC's pair for one output.
unsafe fn read(
    program: nvrtcProgram,
    size: unsafe extern "C" fn(nvrtcProgram, *mut usize) -> nvrtcResult,
    get: unsafe extern "C" fn(nvrtcProgram, *mut c_char) -> nvrtcResult,
) -> std::result::Result<Vec<c_char>, nvrtcResult> {
    let mut len = 0usize;
    // SAFETY: the caller's contract; len is a valid out-pointer.
    let sized = unsafe { size(program, &mut len) };
    if sized != nvrtcResult::NVRTC_SUCCESS {
        return Err(sized);
    }
    let mut bytes = vec![0 as c_char; len.max(1)];
    // SAFETY: bytes holds the size NVRTC asked for (at least one byte).
    let got = unsafe { get(program, bytes.as_mut_ptr()) };
    if got != nvrtcResult::NVRTC_SUCCESS {
        return Err(got);
    }
    Ok(bytes)
}

/// NVRTC's version, `(major, minor)`, when it answers.
pub(super) fn nvrtc_version() -> Option<(i32, i32)> {
    let nvrtc = nvrtc().ok()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: both are valid out-pointers.
    let code = unsafe { (nvrtc.version)(&mut major, &mut minor) };
    (code == nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::{Library, compile, nvrtc, nvrtc_version, resolve};

    /// NVRTC, where one can be loaded (`HETERO_NVRTC`, or on the library
    /// path; no GPU needed), compiles a built-in kernel to PTX for sm_90,
    /// and a broken one into an error carrying its log.
    #[test]
    fn nvrtc_compiles_to_ptx_where_present() {
        if let Err(why) = nvrtc() {
            assert!(
                std::env::var_os(super::NVRTC_ENV).is_none_or(|v| v.is_empty()),
                "the NVRTC named is not usable: {why}"
            );
            println!("skipped: {why}");
            return;
        }
        let options = crate::device::BuildOptions::default();
        let source =
            crate::backend::gpu::module::assembled(crate::device::Backend::Cuda, hetero_kernels::WAVE, &options);
        let Ok(source) = source else { panic!("a NUL in the wave kernel") };
        let ptx = compile(&source, "sm_90", false).map_err(|e| e.to_string());
        let ptx: Vec<u8> = ptx.as_deref().map_or_else(|e| panic!("{e}"), |p| p.iter().map(|&c| c as u8).collect());
        let text = String::from_utf8_lossy(&ptx);
        assert!(text.contains(".entry wave_step") && text.contains(".target sm_90"), "{text}");
        assert_eq!(ptx.last(), Some(&0), "NUL-terminated, as cuModuleLoadData takes it");
        assert!(nvrtc_version().is_some_and(|(major, _)| major >= 11));
        let broken = std::ffi::CString::new("extern \"C\" __global__ void k() { undeclared(); }").unwrap_or_default();
        let err = compile(&broken, "sm_90", true).err().map(|e| e.message).unwrap_or_default();
        assert!(err.contains("undeclared"), "the log names the error: {err}");
    }

    /// Guards the library `HETERO_NVRTC` names: one that is not NVRTC is
    /// refused naming the first function it lacks, not called.
    #[test]
    fn a_library_that_is_not_nvrtc_is_refused_naming_what_it_lacks() {
        // SAFETY: the C library, loaded in every process already.
        let Ok(libc) = (unsafe { Library::new("libc.so.6") }) else {
            println!("skipped: no libc.so.6 to load");
            return;
        };
        match resolve(&libc) {
            Ok(_) => panic!("the C library taken for NVRTC"),
            Err(why) => assert!(why.contains("nvrtcCreateProgram is missing"), "{why}"),
        }
    }
}

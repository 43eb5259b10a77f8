//! The plain data the [`crate::Device`] trait speaks, at the ground of the
//! library: which backend, the handles of its objects and kernel
//! arguments. Everything else imports these; they import nothing of the
//! crate.

use std::fmt;
use std::str::FromStr;

/// The backends hetero knows, compiled in or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// The embedded CPU backend.
    Host,
    /// OpenCL through an ICD loader (PoCL on CPUs, vendor drivers on GPUs).
    OpenCl,
    /// NVIDIA CUDA through the driver API and NVRTC.
    Cuda,
    /// AMD HIP through libamdhip64 and hiprtc.
    Hip,
}

impl Backend {
    /// Every backend, in display order.
    pub const ALL: [Backend; 4] = [Backend::Host, Backend::OpenCl, Backend::Cuda, Backend::Hip];

    /// The lowercase name used on command lines, in reports and as the cargo feature.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Host => "host",
            Backend::OpenCl => "opencl",
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for a backend name that is not one of [`Backend::ALL`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown backend `{0}`; expected one of: host, opencl, cuda, hip")]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Backend::ALL.into_iter().find(|b| b.name().eq_ignore_ascii_case(s)).ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u64);
    };
}

handle!(
    /// An in-order queue of work on one device.
    StreamId
);
handle!(
    /// A marker in a stream that can be waited on and timed.
    EventId
);
handle!(
    /// A device or pinned host allocation.
    AllocId
);
handle!(
    /// A built program holding kernels.
    ModuleId
);
handle!(
    /// One kernel entry point of a module.
    KernelId
);
handle!(
    /// A graph a backend built from recorded operations ([`crate::Device::create_graph`]).
    GraphId
);

/// One kernel argument, in the order of the kernel's parameter list.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelArg {
    /// A pointer to element 0 of `offset` bytes into a device allocation.
    Buffer {
        /// The allocation.
        alloc: AllocId,
        /// Byte offset of the pointer the kernel receives.
        offset: usize,
    },
    /// A 32-bit unsigned scalar.
    U32(u32),
    /// A 32-bit signed scalar.
    I32(i32),
    /// A 32-bit float scalar.
    F32(f32),
    /// A 64-bit unsigned scalar.
    U64(u64),
    /// A 64-bit signed scalar.
    I64(i64),
    /// A 64-bit float scalar (devices with [`crate::DeviceInfo::fp64`] only).
    F64(f64),
    /// A plain-data struct passed by value, as its bytes.
    Bytes(ArgBytes),
}

impl KernelArg {
    /// The C type of a scalar in the kernel dialect (`uint`, `int`,
    /// `float`, `ulong`, `long`, `double`); `None` for a buffer or a struct.
    pub fn c_type(&self) -> Option<&'static str> {
        match self {
            Self::Buffer { .. } | Self::Bytes(_) => None,
            Self::U32(_) => Some("uint"),
            Self::I32(_) => Some("int"),
            Self::F32(_) => Some("float"),
            Self::U64(_) => Some("ulong"),
            Self::I64(_) => Some("long"),
            Self::F64(_) => Some("double"),
        }
    }

    /// The value's bytes as the kernel receives them (native byte order);
    /// `None` for a buffer, whose pointer each backend makes.
    pub fn value_bytes(&self) -> Option<&[u8]> {
        Some(match self {
            Self::Buffer { .. } => return None,
            Self::U32(v) => bytemuck::bytes_of(v),
            Self::I32(v) => bytemuck::bytes_of(v),
            Self::F32(v) => bytemuck::bytes_of(v),
            Self::U64(v) => bytemuck::bytes_of(v),
            Self::I64(v) => bytemuck::bytes_of(v),
            Self::F64(v) => bytemuck::bytes_of(v),
            Self::Bytes(b) => b.as_bytes(),
        })
    }
}

/// The bytes of a struct argument, 8-byte aligned, shared rather than
/// copied (a launch's argument list stays small): at most
/// [`ArgBytes::MAX`] bytes, of a type aligned to at most 8. The storage is
/// always [`ArgBytes::MAX`] bytes, zero after the value, so a runtime that
/// reads a parameter of the kernel's declared size never reads past it,
/// even when a caller of the raw trait passes a struct smaller than the
/// parameter.
#[derive(Clone, PartialEq)]
pub struct ArgBytes {
    words: std::sync::Arc<[u64]>,
    len: usize,
}

impl ArgBytes {
    /// The largest struct passed by value, in bytes (OpenCL devices accept
    /// at least 1024 bytes of parameters in all, CUDA and HIP 4 KiB).
    pub const MAX: usize = 256;

    /// The bytes of `value`; `None` when `T` is larger than [`Self::MAX`]
    /// bytes or aligned to more than 8.
    pub fn of<T: bytemuck::Pod>(value: &T) -> Option<Self> {
        let bytes = bytemuck::bytes_of(value);
        if bytes.len() > Self::MAX || std::mem::align_of::<T>() > 8 {
            return None;
        }
        let mut words = vec![0u64; Self::MAX / 8];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Some(Self { words: words.into(), len: bytes.len() })
    }

    /// The stored bytes, starting at an 8-byte aligned address.
    pub fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }
}

impl std::fmt::Debug for ArgBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ArgBytes({} bytes)", self.len)
    }
}

/// Kernel arguments a launch gathers and packs without a heap allocation
/// (the typed layer and the GPU backends keep them in `SmallVec`s of this size).
pub(crate) const INLINE_ARGS: usize = 16;

/// How a copy between two devices runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerRoute {
    /// In one step, by the devices themselves: one device (or two device
    /// objects of one device), peer access between two GPUs, or the host
    /// backend's workers copying between their memories.
    Direct,
    /// Through host memory: read into a staging buffer on the source's
    /// side, written from it on the destination's side.
    Staged,
}

impl PeerRoute {
    /// `"direct"` or `"staged"`, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            PeerRoute::Direct => "direct",
            PeerRoute::Staged => "staged",
        }
    }
}

impl fmt::Display for PeerRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

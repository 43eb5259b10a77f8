//! What a recording checks of each step: buffers of the recording, the
//! ranges copies use, a launch's arguments against its kernel.

use super::*;

/// The error for a handle of another recording.
#[cold]
pub(super) fn foreign(backend: crate::Backend, what: &str) -> Error {
    Error::new(
        backend,
        "record",
        ErrorKind::InvalidHandle,
        format!("a {what} of another recording was used; use the handles this recording gave"),
    )
}

/// Checks a use of a bound buffer: of the recording tagged `tag`, and
/// written only where bound writable.
pub(super) fn check_use<D: Device>(
    backend: crate::Backend,
    tag: u64,
    slots: &[Slot<D>],
    u: Use,
    what: &str,
) -> Result<()> {
    let slot = match slots.get(u.slot) {
        Some(slot) if u.tag == tag => slot,
        _ => return Err(foreign(backend, "buffer")),
    };
    if u.write && !slot.writable {
        return Err(Error::new(
            backend,
            "record",
            ErrorKind::InvalidLaunch,
            format!("{what} writes a buffer bound read-only; bind it with `bind_mut`"),
        ));
    }
    Ok(())
}

/// Checks a copy's two sides: bound buffers of the recording, equal
/// lengths, no overlap; returns them as read and written.
pub(super) fn copy_uses<D: Device>(
    backend: crate::Backend,
    tag: u64,
    slots: &[Slot<D>],
    mut src: Use,
    mut dst: Use,
) -> Result<(Use, Use)> {
    (src.write, dst.write) = (false, true);
    check_use(backend, tag, slots, src, "a copy")?;
    check_use(backend, tag, slots, dst, "a copy")?;
    if src.len != dst.len {
        return Err(Error::new(
            backend,
            "copy",
            ErrorKind::OutOfBounds,
            format!("source has {} bytes but destination has {}", src.len, dst.len),
        ));
    }
    if src.slot == dst.slot && src.offset < dst.offset + dst.len && dst.offset < src.offset + src.len {
        return Err(Error::new(backend, "copy", ErrorKind::OutOfBounds, "a copy's source and destination overlap"));
    }
    Ok((src, dst))
}

/// Checks a launch's arguments against the kernel's source, through the
/// same check as [`Stream::launch`].
pub(super) fn check_launch<D: Device>(slots: &[Slot<D>], kernel: &Kernel<D>, args: &[ArgKind]) -> Result<()> {
    let mut checked: SmallVec<[Arg<'_, D>; crate::device::INLINE_ARGS]> = SmallVec::new();
    for a in args {
        checked.push(match a {
            ArgKind::Buffer(u) => {
                let access = if u.write { Access::Write } else { Access::Read };
                Arg::Buffer(slots[u.slot].view(u.offset, u.len, access))
            }
            ArgKind::Scalar(s) => Arg::Scalar(s.clone()),
            ArgKind::Struct(s) => Arg::Struct(s.clone()),
        });
    }
    kernel.check_args(&checked)
}

//! Which clock a run's times come from.
//!
//! Device events give each workload's time on the device, without the
//! host's latencies. Some devices' timers cannot (Mesa's rusticl on
//! llvmpipe stamps every command with one time): [`probe`] finds out before
//! the workloads run, and such a device is timed with the host's clock,
//! around work that starts on an idle stream and ends when it completes.
//! Reports say so, and give no overlap figures, which need device
//! intervals.

use std::time::Instant;

use hetero::{Context, Event, Stream};

/// Where a device's times come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clock {
    /// Device events: the default.
    Device,
    /// The host's clock, because the device's timer failed [`probe`]; the
    /// reason says how.
    Host(String),
}

impl Clock {
    /// The reason device timing is unavailable, if it is.
    pub fn unavailable(&self) -> Option<&str> {
        match self {
            Clock::Device => None,
            Clock::Host(reason) => Some(reason),
        }
    }

    /// Milliseconds from `start` to `stop` (completed events of the timed
    /// work) on the device's timer, or on the host's from `since`, taken
    /// when the work's streams were idle, to now.
    pub fn elapsed_ms(&self, start: &Event, stop: &Event, since: Instant) -> hetero::Result<f64> {
        match self {
            Clock::Device => start.elapsed_ms(stop),
            Clock::Host(_) => Ok(since.elapsed().as_secs_f64() * 1e3),
        }
    }
}

/// Floats copied by each probe copy (16 MiB): long enough on every device
/// for a working timer to see it, short enough for CI.
const PROBE_FLOATS: usize = 1 << 22;
/// Copies between two probe events.
const PROBE_COPIES: usize = 2;

/// Device timing is usable when events around work that took time on the
/// host clock give finite, positive, additive intervals no longer than the
/// host saw: recorded `a`, copies, `b`, copies, `c`, the intervals `a..b`
/// and `b..c` must be above zero and add up to `a..c`, which must not
/// exceed the host's time for all of it. Anything else (zero, equal or
/// out-of-order stamps, a timer error) gives [`Clock::Host`] with the
/// reason.
pub fn probe(ctx: &Context) -> Clock {
    match measure(ctx) {
        Ok(None) => Clock::Device,
        Ok(Some(reason)) => Clock::Host(reason),
        Err(e) => Clock::Host(format!("the device timer failed: {e}")),
    }
}

fn measure(ctx: &Context) -> Result<Option<String>, hetero::Error> {
    let stream = ctx.stream()?;
    let mut src = ctx.alloc::<f32>(PROBE_FLOATS)?;
    let mut dst = ctx.alloc::<f32>(PROBE_FLOATS)?;
    stream.fill(&mut src, 1.0f32)?;
    stream.copy(&src, &mut dst)?; // warm-up
    stream.synchronize()?;
    let [a, b, c] = [ctx.event()?, ctx.event()?, ctx.event()?];
    let host = Instant::now();
    stream.record(&a)?;
    for _ in 0..PROBE_COPIES {
        stream.copy(&src, &mut dst)?;
    }
    stream.record(&b)?;
    for _ in 0..PROBE_COPIES {
        stream.copy(&src, &mut dst)?;
    }
    stream.record(&c)?;
    c.synchronize()?;
    let host_ms = host.elapsed().as_secs_f64() * 1e3;
    let (first, second, whole) = (a.elapsed_ms(&b)?, b.elapsed_ms(&c)?, a.elapsed_ms(&c)?);
    Ok(judge(first, second, whole, host_ms))
}

/// The probe's verdict on intervals `first` (a..b), `second` (b..c) and
/// `whole` (a..c) of work the host clock saw take `host_ms`: `None` when
/// they are usable, or why not.
pub fn judge(first: f64, second: f64, whole: f64, host_ms: f64) -> Option<String> {
    let stamps = format!("{first} ms and {second} ms for copies that took {host_ms:.3} ms on the host clock");
    if ![first, second, whole].iter().all(|t| t.is_finite()) {
        return Some(format!("the device timer gave non-finite intervals: {stamps}"));
    }
    if first <= 0.0 || second <= 0.0 {
        return Some(format!("the device timer gave zero or negative intervals: {stamps}"));
    }
    // Stamps from one monotonic counter add up (to rounding).
    if (first + second - whole).abs() > 1e-3 * whole.abs() + 1e-6 {
        return Some(format!("the device timer's intervals do not add up: {stamps}, {whole} ms in all"));
    }
    // The device cannot have been busy longer than the host waited.
    if whole > host_ms * 1.5 + 1.0 {
        return Some(format!("the device timer runs ahead of the host's: {stamps}, {whole} ms in all"));
    }
    None
}

/// Times the work `body` enqueues on `stream` with `clock`: device events
/// recorded before and after, or the host's clock from an idle stream to
/// the end of the work. Milliseconds.
pub fn timed<T, E: From<hetero::Error>>(
    clock: &Clock,
    ctx: &Context,
    stream: &Stream,
    body: impl FnOnce() -> Result<T, E>,
) -> Result<(T, f64), E> {
    if clock.unavailable().is_some() {
        stream.synchronize()?;
    }
    let (start, stop) = (ctx.event()?, ctx.event()?);
    let since = Instant::now();
    stream.record(&start)?;
    let value = body()?;
    stream.record(&stop)?;
    stop.synchronize()?;
    Ok((value, clock.elapsed_ms(&start, &stop, since)?))
}

#[cfg(test)]
mod tests {
    use super::judge;

    /// The timers the issue names: zero, equal or out-of-order stamps, and
    /// non-finite values, are refused with a reason; a consistent one is kept.
    #[test]
    fn poor_timers_are_recognised() {
        assert_eq!(judge(1.0, 2.0, 3.0, 3.5), None);
        assert!(judge(0.0, 0.0, 0.0, 3.0).is_some_and(|r| r.contains("zero")));
        assert!(judge(1.0, -1.0, 0.0, 3.0).is_some_and(|r| r.contains("zero or negative")));
        assert!(judge(1.0, 2.0, 5.0, 6.0).is_some_and(|r| r.contains("add up")));
        assert!(judge(f64::NAN, 1.0, 1.0, 3.0).is_some_and(|r| r.contains("non-finite")));
        assert!(judge(f64::INFINITY, 1.0, f64::INFINITY, 3.0).is_some());
        assert!(judge(100.0, 100.0, 200.0, 3.0).is_some_and(|r| r.contains("ahead")));
    }
}

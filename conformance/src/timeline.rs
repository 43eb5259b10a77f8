//! Per-operation device timelines: events recorded around each kernel and
//! copy, read back as intervals on one timeline per device (milliseconds
//! from an origin event that every stream of the run waits on). They give
//! the overlap of copies with compute from the intervals themselves (and
//! the `--trace` file, [`crate::trace`]).

use hetero::{Context, Event, Stream};
use serde::{Deserialize, Serialize};

/// What an interval is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A kernel launch.
    Kernel,
    /// A copy between host and device.
    Copy,
}

/// One operation's start and end on the device timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Operation name, e.g. `wave_step` or `snapshot D2H`.
    pub name: String,
    /// Kernel or copy.
    pub kind: Kind,
    /// The stream's track name, e.g. `compute`.
    pub track: String,
    /// Start in ms from the origin.
    pub start_ms: f64,
    /// End in ms from the origin.
    pub end_ms: f64,
}

struct Span {
    name: String,
    kind: Kind,
    track: String,
    start: Event,
    end: Event,
}

/// Records spans; [`Timeline::finish`] turns them into intervals.
pub struct Timeline<'a> {
    ctx: &'a Context,
    origin: Event,
    spans: Vec<Span>,
    /// `false`: spans only run their enqueue (a run measured without
    /// per-operation events, whose streams may not even be timed).
    enabled: bool,
}

impl<'a> Timeline<'a> {
    /// Records the origin on `first` and makes `others` wait for it, so
    /// every later operation of these streams lies after the origin.
    pub fn new(ctx: &'a Context, first: &Stream, others: &[&Stream]) -> Result<Self, hetero::Error> {
        let origin = ctx.event()?;
        first.record(&origin)?;
        for s in others {
            s.wait(&origin)?;
        }
        Ok(Self { ctx, origin, spans: Vec::new(), enabled: true })
    }

    /// A timeline that records nothing: its spans only enqueue, and
    /// [`Timeline::finish`] gives no intervals.
    pub fn off(ctx: &'a Context) -> Result<Self, hetero::Error> {
        Ok(Self { ctx, origin: ctx.event()?, spans: Vec::new(), enabled: false })
    }

    /// Runs `enqueue` between two events on `stream`.
    pub fn span<T, E: From<hetero::Error>>(
        &mut self,
        stream: &Stream,
        track: &str,
        name: &str,
        kind: Kind,
        enqueue: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        if !self.enabled {
            return enqueue();
        }
        let (start, end) = (self.ctx.event()?, self.ctx.event()?);
        stream.record(&start)?;
        let value = enqueue()?;
        stream.record(&end)?;
        self.spans.push(Span { name: name.to_string(), kind, track: track.to_string(), start, end });
        Ok(value)
    }

    /// The intervals, once every span has completed (waits for them).
    pub fn finish(self) -> Result<Vec<Interval>, hetero::Error> {
        self.spans
            .into_iter()
            .map(|s| {
                s.end.synchronize()?;
                Ok(Interval {
                    start_ms: self.origin.elapsed_ms(&s.start)?,
                    end_ms: self.origin.elapsed_ms(&s.end)?,
                    name: s.name,
                    kind: s.kind,
                    track: s.track,
                })
            })
            .collect()
    }
}

/// Total duration of the intervals of one kind, in ms.
pub fn total_ms(intervals: &[Interval], kind: Kind) -> f64 {
    intervals.iter().filter(|i| i.kind == kind).map(|i| (i.end_ms - i.start_ms).max(0.0)).sum()
}

/// Fraction of copy time that overlaps kernel time, from the intervals
/// (`None` without copies).
pub fn hidden_copy_fraction(intervals: &[Interval]) -> Option<f64> {
    let mut kernels: Vec<(f64, f64)> =
        intervals.iter().filter(|i| i.kind == Kind::Kernel).map(|i| (i.start_ms, i.end_ms)).collect();
    kernels.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Union of kernel intervals.
    let mut busy: Vec<(f64, f64)> = Vec::new();
    for (s, e) in kernels {
        match busy.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => busy.push((s, e)),
        }
    }
    let (mut copy, mut hidden) = (0.0, 0.0);
    for c in intervals.iter().filter(|i| i.kind == Kind::Copy) {
        copy += (c.end_ms - c.start_ms).max(0.0);
        hidden += busy.iter().map(|&(s, e)| (c.end_ms.min(e) - c.start_ms.max(s)).max(0.0)).sum::<f64>();
    }
    (copy > 0.0).then(|| (hidden / copy).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(kind: Kind, s: f64, e: f64) -> Interval {
        Interval { name: String::new(), kind, track: String::new(), start_ms: s, end_ms: e }
    }

    #[test]
    fn hidden_fraction_counts_overlap_with_the_union_of_kernels() {
        let check = |intervals: &[Interval], expect: Option<f64>| assert_eq!(hidden_copy_fraction(intervals), expect);
        check(&[iv(Kind::Kernel, 0.0, 10.0)], None);
        check(&[iv(Kind::Kernel, 0.0, 10.0), iv(Kind::Copy, 2.0, 4.0)], Some(1.0));
        check(&[iv(Kind::Kernel, 0.0, 1.0), iv(Kind::Copy, 2.0, 4.0)], Some(0.0));
        // Two overlapping kernels count once; half the copy is under them.
        check(&[iv(Kind::Kernel, 0.0, 3.0), iv(Kind::Kernel, 1.0, 4.0), iv(Kind::Copy, 2.0, 6.0)], Some(0.5));
    }
}

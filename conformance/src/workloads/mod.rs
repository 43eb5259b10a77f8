//! The six workloads. Each module holds its inputs, device run, float64
//! reference and comparison; kernels live in `hetero-kernels`.

pub mod bandwidth;
pub mod grid;
pub mod pull;
pub mod reduce;
pub mod scan;
pub mod sort;
pub mod split;
pub mod wave;

use std::collections::BTreeMap;

use hetero::Context;

use crate::check::Verdict;
use crate::clock::Clock;
pub use crate::clock::timed;
use crate::dump::Dump;

/// Problem size class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// Seconds on a CPU: what CI runs.
    Small,
    /// A workstation GPU's worth.
    Medium,
    /// Several GiB of device memory; meant for datacenter GPUs.
    Large,
}

impl Size {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }
}

/// One of the six workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Float32 sum.
    Reduce,
    /// Exclusive prefix sum of u32 counts.
    Scan,
    /// Jet pull vectors over many events on several streams.
    Pull,
    /// 2D wave equation with snapshots copied under compute.
    Wave,
    /// Memory bandwidth: BabelStream's kernels, pinned and peer copies.
    Bandwidth,
    /// Hits sorted, counted, selected and grouped by module.
    Sort,
}

impl Workload {
    /// Every workload, in run order.
    pub const ALL: [Workload; 6] =
        [Workload::Reduce, Workload::Scan, Workload::Pull, Workload::Wave, Workload::Bandwidth, Workload::Sort];

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Reduce => "reduce",
            Workload::Scan => "scan",
            Workload::Pull => "pull",
            Workload::Wave => "wave",
            Workload::Bandwidth => "bandwidth",
            Workload::Sort => "sort",
        }
    }
}

/// What a workload needs to run on one device.
pub struct Env<'a> {
    /// The device.
    pub ctx: &'a Context,
    /// Problem size.
    pub size: Size,
    /// Seed of the inputs.
    pub seed: u64,
    /// Where to write arrays, if anywhere.
    pub dump: Option<&'a Dump>,
    /// Workload parameters beyond the size class.
    pub tuning: &'a Tuning,
    /// Where times come from on this device.
    pub clock: &'a Clock,
    /// The other selected devices of this backend, for the workloads that
    /// split across devices (wave's `split-*`): given to the first device
    /// of a backend only, empty otherwise.
    pub peers: &'a [Context],
}

/// Workload parameters beyond the size class, to balance copies and compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuning {
    /// Stream counts of the pull variants (one variant each).
    pub pull_streams: Vec<usize>,
    /// Host-thread counts of the threaded pull variants: each thread
    /// enqueues its share of the batches on a stream and buffers of its own.
    pub pull_threads: Vec<usize>,
    /// Host-thread counts of the framework-style pull variants: a pool of
    /// threads whose tasks allocate per batch and await its completion.
    pub pull_framework: Vec<usize>,
    /// Lane counts of the graph pull variants: each lane replays one graph
    /// per batch, its copies and arguments set for the batch.
    pub pull_graphs: Vec<usize>,
    /// Also stage pull's inputs from pageable memory (blocking copies), as
    /// extra variants to compare with pinned staging.
    pub pull_pageable: bool,
    /// Wave grid side (cells), instead of the size class's.
    pub wave_grid: Option<usize>,
    /// Wave steps between snapshots, instead of the size class's.
    pub wave_snapshot_every: Option<usize>,
    /// The deterministic mode (`conform --deterministic`): kernels built
    /// with `hetero::BuildOptions::deterministic`, float sums in the fixed
    /// order, and only the variants whose outputs are the same bits on
    /// every backend and device.
    pub deterministic: bool,
    /// The wave variants to run; empty runs every one ([`Tuning::runs_wave`]).
    pub wave_variants: Vec<WaveVariant>,
}

/// A wave variant, or a group of them, that `conform --wave-variants` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaveVariant {
    /// One stream (always run: the baseline of the others).
    Sync,
    /// Two streams ordered by host synchronisation.
    StreamSync,
    /// Two streams ordered by device events.
    EventSync,
    /// Intervals recorded as a graph.
    Graph,
    /// The split across devices, halos exchanged between rounds.
    SplitSync,
    /// The split across devices, halos exchanged under the interior.
    SplitOverlap,
    /// The four variants again at a snapshot interval balanced per device.
    Balanced,
}

impl Tuning {
    /// Whether `variant` runs: every one when none is named, `sync` always.
    pub fn runs_wave(&self, variant: WaveVariant) -> bool {
        self.wave_variants.is_empty() || variant == WaveVariant::Sync || self.wave_variants.contains(&variant)
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            pull_streams: vec![1, 4],
            pull_threads: vec![4],
            pull_framework: vec![4],
            pull_graphs: vec![1, 4],
            pull_pageable: false,
            wave_grid: None,
            wave_snapshot_every: None,
            deterministic: false,
            wave_variants: Vec::new(),
        }
    }
}

/// Builds a portable source on `ctx` as the run asks: deterministically
/// in the deterministic mode.
pub fn build(ctx: &Context, tuning: &Tuning, source: &str) -> Result<hetero::Module, hetero::Error> {
    let options = hetero::BuildOptions { deterministic: tuning.deterministic };
    ctx.build_module_with_options(source, &options, &[])
}

/// The library's algorithms on `ctx` as the run asks: float sums in the
/// fixed order in the deterministic mode.
pub fn algorithms(ctx: &Context, tuning: &Tuning) -> hetero::algorithms::Algorithms {
    let algorithms = hetero::algorithms::Algorithms::new(ctx);
    if tuning.deterministic { algorithms.deterministic() } else { algorithms }
}

impl Env<'_> {
    /// [`build`] on this run's device.
    pub fn build(&self, source: &str) -> Result<hetero::Module, hetero::Error> {
        build(self.ctx, self.tuning, source)
    }

    /// Writes an array to the dump directory, if one was given.
    pub fn dump<T: npyz::AutoSerialize + Copy>(
        &self,
        workload: Workload,
        name: &str,
        shape: &[u64],
        data: &[T],
    ) -> Result<(), Failure> {
        match self.dump {
            Some(dump) => dump
                .write(self.ctx.info().backend.name(), workload.name(), name, shape, data)
                .map_err(|e| Failure::Dump(e.to_string())),
            None => Ok(()),
        }
    }
}

/// Why a workload could not produce a result.
#[derive(Debug)]
pub enum Failure {
    /// The device or backend reported an error.
    Device(hetero::Error),
    /// A dump file could not be written.
    Dump(String),
    /// A bug in the suite itself.
    Internal(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Device(e) => write!(f, "{e}"),
            Failure::Dump(e) => write!(f, "{e}"),
            Failure::Internal(e) => write!(f, "internal error: {e}"),
        }
    }
}

impl From<hetero::Error> for Failure {
    fn from(e: hetero::Error) -> Self {
        Failure::Device(e)
    }
}

/// A variant's main output, kept to compare backends with each other.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Float results (sums, pull vectors, wavefields).
    F32(Vec<f32>),
    /// Integer results (scan offsets).
    U32(Vec<u32>),
}

impl Output {
    /// The elements' little-endian bytes, as a digest covers them.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Output::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Output::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// Hex SHA-256 of [`Output::bytes`].
    pub fn digest(&self) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(self.bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The first element whose bits differ from `other`'s, said in words;
    /// `None` when the two are the same bits.
    pub fn first_difference(&self, other: &Output) -> Option<String> {
        /// The first index where `same` fails, said with both elements.
        fn first<T: std::fmt::Debug>(a: &[T], b: &[T], same: impl Fn(&T, &T) -> bool) -> Option<String> {
            if let Some(i) = a.iter().zip(b).position(|(x, y)| !same(x, y)) {
                return Some(format!("element {i} is {:?} here, {:?} there", a[i], b[i]));
            }
            (a.len() != b.len()).then(|| format!("{} elements here, {} there", a.len(), b.len()))
        }
        match (self, other) {
            (Output::F32(a), Output::F32(b)) => first(a, b, |x, y| x.to_bits() == y.to_bits()),
            (Output::U32(a), Output::U32(b)) => first(a, b, |x, y| x == y),
            _ => Some("one output is float, the other integer".into()),
        }
    }

    /// Largest absolute element difference to `other`, and that difference
    /// relative to the largest magnitude in either output (0 when both are
    /// all zero); `None` when the outputs differ in type or length.
    pub fn difference(&self, other: &Output) -> Option<(f64, f64)> {
        let pairs: Vec<(f64, f64)> = match (self, other) {
            (Output::F32(a), Output::F32(b)) if a.len() == b.len() => {
                a.iter().zip(b).map(|(&x, &y)| (f64::from(x), f64::from(y))).collect()
            }
            (Output::U32(a), Output::U32(b)) if a.len() == b.len() => {
                a.iter().zip(b).map(|(&x, &y)| (f64::from(x), f64::from(y))).collect()
            }
            _ => return None,
        };
        let (abs, scale) = pairs.into_iter().fold((0.0f64, 0.0f64), |(abs, scale), (x, y)| {
            let d = (x - y).abs();
            (abs.max(if d.is_nan() { f64::INFINITY } else { d }), scale.max(x.abs()).max(y.abs()))
        });
        let rel = if scale > 0.0 {
            abs / scale
        } else if abs > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        Some((abs, rel))
    }
}

#[cfg(test)]
mod tests {
    use super::Output;

    #[test]
    fn difference_is_absolute_and_scaled_by_the_largest_magnitude() {
        let a = Output::F32(vec![0.0, 2.0, -4.0]);
        let b = Output::F32(vec![0.5, 2.0, -4.0]);
        assert_eq!(a.difference(&b), Some((0.5, 0.125)));
        assert_eq!(Output::U32(vec![1, 2]).difference(&Output::U32(vec![1, 2])), Some((0.0, 0.0)));
        assert_eq!(a.difference(&Output::U32(vec![0, 2, 4])), None);
        assert_eq!(a.difference(&Output::F32(vec![0.0])), None);
        let nan = Output::F32(vec![f32::NAN]);
        assert_eq!(nan.difference(&Output::F32(vec![1.0])).map(|d| d.0), Some(f64::INFINITY));
    }
}

/// The checked result of one workload variant.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Variant name, e.g. `two-pass-192`.
    pub variant: String,
    /// Worst comparison of the variant.
    pub verdict: Verdict,
    /// Device time of the timed part, from events, in milliseconds.
    pub device_ms: Option<f64>,
    /// Further figures (bandwidth, overlap), by name.
    pub metrics: BTreeMap<String, f64>,
    /// Why the variant failed, beyond the numbers.
    pub note: Option<String>,
    /// The main output, for comparing backends (not written to reports).
    pub output: Option<Output>,
    /// Per-operation device intervals, where the workload records them.
    pub intervals: Vec<crate::timeline::Interval>,
    /// Pictures of the output (wave snapshots) for the HTML page.
    pub images: Vec<crate::image::Image>,
    /// How far the outputs of two correct runs on one device model may
    /// differ, element by element: 0 where the output is the same bit for
    /// bit on every run, otherwise (the order of floating-point atomics
    /// decides) twice the tolerance of the output compared.
    pub spread: f64,
}

impl Outcome {
    /// An outcome with no metrics or note.
    pub fn new(variant: impl Into<String>, verdict: Verdict, device_ms: Option<f64>) -> Self {
        Self {
            variant: variant.into(),
            verdict,
            device_ms,
            metrics: BTreeMap::new(),
            note: None,
            output: None,
            intervals: Vec::new(),
            images: Vec::new(),
            spread: 0.0,
        }
    }

    /// Keeps the main output for the cross-backend comparison.
    #[must_use]
    pub fn with_output(mut self, output: Output) -> Self {
        self.output = Some(output);
        self
    }

    /// Adds a named figure.
    #[must_use]
    pub fn metric(mut self, name: &str, value: f64) -> Self {
        self.metrics.insert(name.to_string(), value);
        self
    }

    /// `true` when the comparison held and nothing else went wrong.
    pub fn passed(&self) -> bool {
        self.verdict.passed() && self.note.is_none()
    }
}

/// The median of a non-empty sample (NaN for an empty one).
pub fn median(mut sample: Vec<f64>) -> f64 {
    if sample.is_empty() {
        return f64::NAN;
    }
    sample.sort_by(f64::total_cmp);
    let mid = sample.len() / 2;
    if sample.len() % 2 == 1 { sample[mid] } else { (sample[mid - 1] + sample[mid]) / 2.0 }
}

/// Device-to-device copy bandwidth in GB/s, counting bytes read plus
/// written: the median of five copies of a buffer sized for `size`.
pub fn copy_bandwidth(ctx: &Context, clock: &Clock, size: Size) -> Result<f64, Failure> {
    let floats = match size {
        Size::Small => 1 << 22,
        Size::Medium => 1 << 24,
        Size::Large => 1 << 27,
    };
    let stream = ctx.stream()?;
    let mut src = ctx.alloc::<f32>(floats)?;
    let mut dst = ctx.alloc::<f32>(floats)?;
    stream.fill(&mut src, 1.0f32)?;
    stream.copy(&src, &mut dst)?; // warm-up
    let mut times = Vec::new();
    for _ in 0..5 {
        let ((), ms) = timed(clock, ctx, &stream, || stream.copy(&src, &mut dst))?;
        times.push(ms);
    }
    Ok(2.0 * floats as f64 * 4.0 / (median(times) * 1e6))
}

/// Elements of the one-dimensional workloads (reduce, scan) at each size.
pub fn elements(size: Size) -> usize {
    match size {
        Size::Small => 1 << 20,
        Size::Medium => 1 << 24,
        Size::Large => 1 << 28,
    }
}

/// Blocks of `threads` covering `n` items, at least one.
pub fn blocks_for(n: usize, threads: u32) -> u32 {
    u32::try_from(n.div_ceil(threads as usize)).unwrap_or(u32::MAX).max(1)
}

//! hetero's conformance suite.
//!
//! Four workloads — [`workloads::reduce`], [`workloads::scan`],
//! [`workloads::pull`] and [`workloads::wave`] — run on any device through
//! the typed layer, from inputs drawn with a fixed seed, and are checked
//! against simple sequential float64 references with tolerances derived in
//! [`check`]. Device times come from events, or from the host's clock on
//! a device whose timer cannot give them ([`clock`]). The `conform` binary drives
//! them and prints a table; [`report`] is the JSON it writes.

pub mod check;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod digests;
pub mod document;
pub mod dump;
pub mod html;
pub mod image;
pub mod inputs;
pub mod junit;
pub mod library;
pub mod markdown;
pub mod output;
pub mod report;
pub mod run;
pub mod session;
pub mod stress;
pub mod table;
pub mod timeline;
pub mod trace;
pub mod workloads;

pub use run::{Baseline, Selection, run_device};
pub use workloads::{Size, Tuning, WaveVariant, Workload};

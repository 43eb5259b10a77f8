//! Peer copies between devices of one backend, the shape of CUDA's
//! `p2pBandwidthLatencyTest`: for every ordered pair of devices (on a
//! backend with one device, that device to a second object of itself
//! through the peer path), each size, one direction and both at once,
//! through hetero ([`hetero::Stream::copy_peer`] on the destination's
//! stream) and through the vendor's own call in the same process (CUDA
//! `cuMemcpyPeerAsync`, HIP `hipMemcpyPeerAsync`, OpenCL a read into host
//! memory and a write from it, as OpenCL has no copy across contexts).
//!
//! Each figure is the median over rounds of the host time from enqueueing
//! the copy (both copies) to its completion, after one untimed round:
//! latency for small sizes, bandwidth (bytes moved over that time, both
//! directions counted) for large ones.

use hetero::{Backend, Context};

use crate::measure::{Fail, median_us};

/// One figure.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PeerCost {
    /// Backend name.
    pub backend: String,
    /// Source device index (within the backend).
    pub from: usize,
    /// Destination device index.
    pub to: usize,
    /// `hetero` or `raw`.
    pub path: &'static str,
    /// The route hetero's copies took (`direct`, `staged`).
    pub route: String,
    /// Bytes per copy.
    pub bytes: usize,
    /// Both directions at once.
    pub both: bool,
    /// Median microseconds per round.
    pub median_us: f64,
    /// Bytes moved per second over that time, GB/s.
    pub gbps: f64,
}

/// Every device of `backend`, or the first one twice (two objects): the
/// contexts, and whether the backend has a single device.
fn devices(backend: Backend) -> Result<(Vec<Context>, bool), Fail> {
    let mut found: Vec<Context> = hetero::backend_devices(backend)?.into_iter().map(Context::new).collect();
    let single = found.len() == 1;
    if single {
        found.extend(hetero::backend_devices(backend)?.into_iter().take(1).map(Context::new));
    }
    Ok((found, single))
}

/// hetero's round: a copy of `bytes` from `a` to `b` on `b`'s stream, and
/// with `both` one from `b` to `a` on `a`'s, waited for.
fn hetero_round(a: &Context, b: &Context, bytes: usize, both: bool, rounds: usize) -> Result<(f64, String), Fail> {
    let words = bytes / 4;
    let (sa, sb) = (a.stream()?, b.stream()?);
    let (src_a, mut dst_b) = (sa.alloc_zeros::<u32>(words)?, sb.alloc::<u32>(words)?);
    let (src_b, mut dst_a) = (sb.alloc_zeros::<u32>(words)?, sa.alloc::<u32>(words)?);
    let mut route = hetero::PeerRoute::Direct;
    let us = median_us(rounds, &mut || {
        route = sb.copy_peer(&src_a, &mut dst_b)?;
        if both {
            sa.copy_peer(&src_b, &mut dst_a)?;
            sa.synchronize()?;
        }
        sb.synchronize()?;
        Ok(())
    })?;
    Ok((us, route.to_string()))
}

/// The vendor's round for the same pair, where the backend has one.
///
/// `nth` says which device of its name each is (OpenCL finds its devices
/// by name).
fn raw_round(
    backend: Backend,
    (a, b): (&Context, &Context),
    nth: (usize, usize),
    bytes: usize,
    both: bool,
    rounds: usize,
) -> Option<Result<f64, Fail>> {
    let (from, to) = (a.info(), b.info());
    let _ = (from, to, nth, bytes, both, rounds);
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => Some(crate::raw_cuda::peer_us(from.ordinal, to.ordinal, bytes, both, rounds)),
        #[cfg(feature = "hip")]
        Backend::Hip => Some(crate::raw_hip::peer_us(from.ordinal, to.ordinal, bytes, both, rounds)),
        #[cfg(feature = "opencl")]
        Backend::OpenCl => {
            Some(crate::raw_opencl::peer_us((&from.name, nth.0), (&to.name, nth.1), bytes, both, rounds))
        }
        _ => None,
    }
}

/// Every figure of `backend`'s device pairs at each of `sizes`.
pub fn measure(backend: Backend, sizes: &[usize], rounds: usize) -> Result<Vec<PeerCost>, Fail> {
    let (contexts, single) = devices(backend)?;
    let mut out = Vec::new();
    for (i, a) in contexts.iter().enumerate() {
        for (j, b) in contexts.iter().enumerate() {
            if i == j || (single && i > j) {
                continue;
            }
            // Indices of devices; one device paired with itself is 0 -> 0.
            let (from, to) = if single { (0, 0) } else { (i, j) };
            for &bytes in sizes {
                for both in [false, true] {
                    let moved = if both { 2.0 } else { 1.0 } * bytes as f64;
                    let (us, route) = hetero_round(a, b, bytes, both, rounds)?;
                    let figure = |path, us: f64, route: &str| PeerCost {
                        backend: backend.name().to_string(),
                        from,
                        to,
                        path,
                        route: route.to_string(),
                        bytes,
                        both,
                        median_us: us,
                        gbps: moved / (us * 1e3),
                    };
                    out.push(figure("hetero", us, &route));
                    let nth = |k: usize, c: &Context| {
                        if single { 0 } else { contexts[..k].iter().filter(|o| o.info().name == c.info().name).count() }
                    };
                    match raw_round(backend, (a, b), (nth(i, a), nth(j, b)), bytes, both, rounds) {
                        Some(Ok(raw)) => out.push(figure("raw", raw, &route)),
                        Some(Err(e)) => return Err(format!("raw peer copy: {e}").into()),
                        None => {}
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Prints the figures, hetero beside the vendor's.
pub fn print(costs: &[PeerCost]) {
    if costs.is_empty() {
        return;
    }
    println!("\npeer copies: host time from enqueue to completion (median), and bytes moved per second");
    println!(
        "{:<8} {:>6} {:>8} {:>12} {:>5} {:>14} {:>10} {:>14} {:>10} {:>10}",
        "backend", "pair", "route", "bytes", "both", "hetero us", "GB/s", "raw us", "GB/s", "hetero/raw"
    );
    for c in costs.iter().filter(|c| c.path == "hetero") {
        let raw = costs.iter().find(|r| {
            r.path == "raw"
                && (&r.backend, r.from, r.to, r.bytes, r.both) == (&c.backend, c.from, c.to, c.bytes, c.both)
        });
        let (raw_us, raw_gbps, ratio) = match raw {
            Some(r) => {
                (format!("{:.1}", r.median_us), format!("{:.2}", r.gbps), format!("{:.2}x", c.median_us / r.median_us))
            }
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:<8} {:>6} {:>8} {:>12} {:>5} {:>14.1} {:>10.2} {:>14} {:>10} {:>10}",
            c.backend,
            format!("{}->{}", c.from, c.to),
            c.route,
            c.bytes,
            if c.both { "yes" } else { "no" },
            c.median_us,
            c.gbps,
            raw_us,
            raw_gbps,
            ratio
        );
    }
}

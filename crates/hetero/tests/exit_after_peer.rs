//! A device whose streams waited on another device's work (a peer copy)
//! used to be released on a thread of its own at its drop, always: a
//! process that ended right after dropping its contexts then tore its GPU
//! runtime down while that thread was still releasing the device through
//! it. `conform --device all` on two H200s passed every check and then died
//! of a segmentation fault on HIP (through the CUDA runtime) and on
//! NVIDIA's OpenCL with one context for both GPUs (reports in
//! `docs/results/multi-device-h200x2/`). The thread is needed only while a
//! gate is closed (its release could wait for a gate the dropping thread
//! opens later); otherwise the device is released before its drop returns.
//!
//! Its own test binary: the rule looks at every gate of the process, and no
//! test here holds one.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::Arc;

use hetero::backend::host::HostDevice;
use hetero::faults::{FaultPlan, Faulty};
use hetero::{Backend, Context, Device};

/// Names the backend a child process runs (`child_process`).
const CHILD_ENV: &str = "HETERO_EXIT_CHILD";

/// How many child processes a backend gets (default 3).
const RUNS_ENV: &str = "HETERO_EXIT_RUNS";

/// Peer copies back and forth between `a` and `b`, on two streams of each,
/// left queued when everything is dropped: the far devices' trackers hold
/// marks of the near ones, and the buffers retire with uses pending.
fn copy_both_ways<D: Device>(a: &Context<D>, b: &Context<D>) {
    const LEN: usize = 1 << 20;
    for _ in 0..2 {
        let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
        let (mut xa, mut xb) = (sa.upload(&vec![1u32; LEN]).unwrap(), sb.upload(&vec![2u32; LEN]).unwrap());
        let (mut ya, mut yb) = (sa.alloc::<u32>(LEN).unwrap(), sb.alloc::<u32>(LEN).unwrap());
        for _ in 0..8 {
            sb.copy_peer(&xa, &mut yb).unwrap();
            sa.copy_peer(&xb, &mut ya).unwrap();
            sa.copy_peer(&yb, &mut xa).unwrap();
            sb.copy_peer(&ya, &mut xb).unwrap();
        }
    }
}

/// Two devices that copied both ways, dropped with the copies queued and
/// no gate closed, have released every handle they made when the drops
/// return: nothing is left to a thread the process could exit under.
#[test]
fn devices_that_copied_are_released_before_their_drop_returns() {
    let near = Faulty::new(HostDevice::new(), FaultPlan::none());
    let log = near.log();
    let far = Faulty::with_log(HostDevice::new(), FaultPlan::none(), Arc::clone(&log));
    let (a, b) = (Context::new(near), Context::new(far));
    copy_both_ways(&a, &b);
    drop((a, b));
    let live = log.live();
    assert_eq!(live.total(), 0, "handles not yet released when the drops returned: {live:?}");
}

/// Each compiled-in backend's pair of devices (two devices, or a device
/// and a second object of it), in child processes that copy both ways,
/// drop their contexts and exit at once: every process exits with 0.
#[test]
fn a_process_exits_cleanly_after_dropping_devices_that_copied() {
    let runs = std::env::var(RUNS_ENV).ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(3);
    let exe = std::env::current_exe().unwrap();
    for backend in hetero::compiled_backends() {
        let mut clean = 0;
        for run in 1..=runs {
            let out = Command::new(&exe)
                .args(["--exact", "child_process", "--ignored", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, backend.name())
                .output()
                .unwrap();
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            // The harness prints the test's name on the line its output starts.
            if let Some(at) = text.find("skipped:") {
                println!("{backend}: {}", text[at..].lines().next().unwrap_or_default());
                break;
            }
            assert!(
                out.status.success(),
                "{backend}, process {run} of {runs}: ended with exit code {:?}, signal {:?}, after dropping its devices:\n{text}",
                out.status.code(),
                out.status.signal()
            );
            clean += 1;
        }
        if clean > 0 {
            println!("{backend}: {clean} processes exited cleanly");
        }
    }
}

/// The child, run by the test above (ignored otherwise): exits the
/// process right after dropping its contexts.
#[test]
#[ignore = "a child process of a_process_exits_cleanly_after_dropping_devices_that_copied"]
fn child_process() {
    let Ok(name) = std::env::var(CHILD_ENV) else { return };
    let backend: Backend = name.parse().unwrap();
    let Some((a, b)) = hetero::testing::context_pair_or_skip(backend).unwrap_or_else(|e| panic!("{e}")) else {
        std::process::exit(0);
    };
    // Modules too, so that releasing a device takes a while.
    let kernels = [&a, &b].map(|ctx| ctx.build_module(hetero::kernels::UTIL).unwrap());
    copy_both_ways(&a, &b);
    drop(kernels);
    drop((a, b));
    std::process::exit(0);
}

//! Every workload and variant at `small` size on every usable backend.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use conformance::report::ResultRecord;
use conformance::{Selection, Size, Workload, inputs, run_device};
use hetero::{AnyDevice, Backend, Context};
use rstest::rstest;

/// The first device of `backend`, or `None` (printing why) when this
/// machine cannot run it and `HETERO_REQUIRE` does not demand it.
fn context(backend: Backend) -> Option<Context<AnyDevice>> {
    hetero::testing::context_or_skip(backend).unwrap_or_else(|e| panic!("{e}"))
}

fn results(backend: Backend, workload: Workload) -> Option<Vec<ResultRecord>> {
    let ctx = context(backend)?;
    let selection = Selection {
        workloads: vec![workload],
        size: Size::Small,
        seed: inputs::DEFAULT_SEED,
        dump: None,
        tuning: Default::default(),
    };
    Some(run_device(&ctx, &[], &selection, &mut conformance::Baseline::default(), |_| {}).results)
}

#[rstest]
#[case::reduce(Workload::Reduce, &["two-pass-256", "two-pass-192", "atomic-256", "library"])]
#[case::scan(Workload::Scan, &["block-256", "block-192", "single-pass"])]
#[case::pull(Workload::Pull, &["streams-1", "streams-4", "threads-4", "graph-1", "graph-4", "framework-4", "library"])]
#[case::wave(
    Workload::Wave,
    &["sync", "stream-sync", "event-sync", "graph", "balanced-sync", "balanced-stream-sync", "balanced-event-sync", "balanced-graph"]
)]
fn every_variant_passes(
    #[values(Backend::Host, Backend::OpenCl, Backend::Cuda, Backend::Hip)] backend: Backend,
    #[case] workload: Workload,
    #[case] variants: &[&str],
) {
    let Some(results) = results(backend, workload) else { return };
    let names: Vec<&str> = results.iter().map(|r| r.variant.as_str()).collect();
    assert_eq!(names, variants);
    for r in &results {
        assert!(
            r.passed,
            "{backend} {workload:?} {}: error {:?} tolerance {:?} note {:?}",
            r.variant, r.error, r.tolerance, r.note
        );
        assert!(r.device_ms.is_some_and(|ms| ms >= 0.0), "{} has no device time", r.variant);
    }
}

#[test]
fn wave_reports_overlap_figures() {
    let Some(results) = results(Backend::Host, Workload::Wave) else { return };
    assert!(results[0].metrics.contains_key("copy_ms"));
    // The balanced runs keep the interval they chose, and why.
    let balanced: Vec<_> = results.iter().filter(|r| r.variant.starts_with("balanced-")).collect();
    assert_eq!(balanced.len(), 4);
    for r in &balanced {
        assert!(r.metrics["snapshot_every"] >= 1.0, "{:?}", r.metrics);
        assert!(r.metrics["step_ms"] > 0.0 && r.metrics["snapshot_copy_ms"] > 0.0, "{:?}", r.metrics);
    }
    for r in results.iter().filter(|r| r.variant.ends_with("graph")) {
        assert!(r.metrics["vs_event_sync"] > 0.0, "{:?}", r.metrics);
    }
    for r in results.iter().filter(|r| ["stream-sync", "event-sync", "graph"].iter().any(|v| r.variant.ends_with(v))) {
        for key in ["speedup_vs_sync", "hidden_copy_fraction", "sync_ms", "ideal_ms", "of_ideal"] {
            assert!(r.metrics.contains_key(key), "{} lacks {key}", r.variant);
        }
        let hidden = r.metrics["hidden_copy_fraction"];
        assert!((0.0..=1.0).contains(&hidden), "{hidden}");
        // Perfect overlap takes the longer of compute and copy: never more
        // than running them one after the other, never nothing.
        let (ideal, sync) = (r.metrics["ideal_ms"], r.metrics["sync_ms"]);
        assert!(ideal > 0.0 && ideal <= sync, "ideal {ideal} ms against sync {sync} ms");
        let achieved = r.device_ms.unwrap();
        assert!((r.metrics["of_ideal"] - achieved / ideal).abs() < 1e-9, "{:?}", r.metrics);
    }
}

#[test]
fn another_seed_gives_other_inputs_and_still_passes() {
    let ctx = context(Backend::Host).unwrap();
    let mut a = inputs::rng(1, "scan");
    let mut b = inputs::rng(2, "scan");
    assert_ne!(rand::Rng::random::<u64>(&mut a), rand::Rng::random::<u64>(&mut b));
    let selection = Selection {
        workloads: vec![Workload::Reduce],
        size: Size::Small,
        seed: 99,
        dump: None,
        tuning: Default::default(),
    };
    assert!(
        run_device(&ctx, &[], &selection, &mut conformance::Baseline::default(), |_| {})
            .results
            .iter()
            .all(|r| r.passed)
    );
}

/// The scan wraps modulo 2^32 like the reference, across tile and level
/// boundaries: counts near `u32::MAX` overflow on almost every element.
#[rstest]
fn scan_wraps_around_across_tiles(
    #[values(Backend::Host, Backend::OpenCl, Backend::Cuda, Backend::Hip)] backend: Backend,
) {
    use conformance::workloads::scan::{ITEMS, ScanPlan, reference};
    let Some(ctx) = context(backend) else { return };
    let stream = ctx.stream().unwrap();
    let tile = (192 * ITEMS) as usize;
    let n = 2 * tile * tile + 3;
    let counts: Vec<u32> = (0..n as u32).map(|i| u32::MAX - (i % 7)).collect();
    let input = {
        let mut d = ctx.alloc::<u32>(n).unwrap();
        stream.copy_from_host(&counts, &mut d).unwrap();
        d
    };
    let mut output = ctx.alloc::<u32>(n).unwrap();
    let mut plan = ScanPlan::new(&ctx, 192, n).unwrap();
    plan.enqueue(&stream, &input.slice(..).unwrap(), &mut output.slice_mut(..).unwrap()).unwrap();
    let mut got = vec![0u32; n];
    stream.copy_to_host(output.slice(..).unwrap(), &mut got).unwrap();
    let expect = reference(&counts);
    let wrong = got.iter().zip(&expect).position(|(g, e)| g != e);
    assert_eq!(wrong, None, "{backend}: first wrong offset");
}

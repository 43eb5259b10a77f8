#!/usr/bin/env python3
"""The deterministic mode's cost: each variant's device time in the
default mode over its time in the deterministic mode (its throughput as a
fraction of the default's), from the reports of `ci/gpu/deterministic.sh
cost` in one or more folders (`<backend>-default.json` beside
`<backend>-deterministic.json`: each pair made in one device call).

    python3 ci/gpu/deterministic_cost.py DIR... [--markdown OUT]

Reduce's deterministic variants (fixed-256, fixed-64) are set against the
default mode's `library` sum (the same library call without the mode) and
its fastest variant; the other workloads' variants against themselves.
"""
import argparse
import json
import pathlib
import statistics


def times(path):
    report = json.loads(path.read_text())
    out = {}
    for run in report["runs"]:
        for r in run["results"]:
            if r.get("device_ms"):
                out[(r["workload"], r["variant"])] = r["device_ms"]
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dirs", type=pathlib.Path, nargs="+")
    parser.add_argument("--markdown", type=pathlib.Path)
    args = parser.parse_args()
    lines = ["| backend | workload | deterministic variant | against | default ms | deterministic ms | throughput ratio |",
             "|---|---|---|---|---|---|---|"]
    summary = []
    pairs_by_backend = {}
    for folder in args.dirs:
        for det_path in sorted(folder.glob("*-deterministic.json")):
            backend = det_path.name[:-len("-deterministic.json")]
            default_path = folder / f"{backend}-default.json"
            if default_path.exists():
                pairs_by_backend.setdefault(backend, []).append((default_path, det_path))
    for backend, paths in sorted(pairs_by_backend.items()):
        base, det = {}, {}
        for default_path, det_path in paths:
            base.update(times(default_path))
            det.update(times(det_path))
        ratios = {}
        for (workload, variant), ms in sorted(det.items()):
            if workload == "reduce":
                pairs = [("library", base.get(("reduce", "library")))]
                fastest = min((v, k[1]) for k, v in base.items() if k[0] == "reduce")
                pairs.append((f"fastest ({fastest[1]})", fastest[0]))
            else:
                pairs = [(variant, base.get((workload, variant)))]
            for against, base_ms in pairs:
                if base_ms is None:
                    continue
                ratio = base_ms / ms
                ratios.setdefault(workload, []).append(ratio)
                lines.append(f"| {backend} | {workload} | {variant} | {against} | {base_ms:.3f} | {ms:.3f} | {ratio:.2f} |")
        for workload, values in ratios.items():
            summary.append(f"- {backend} {workload}: median throughput ratio {statistics.median(values):.2f} "
                           f"(lowest {min(values):.2f}, {len(values)} pairs)")
    text = "\n".join(lines + [""] + summary) + "\n"
    if args.markdown:
        args.markdown.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()

"""The scoring table of docs/changepoints.md: polyperf's change detection beside binary segmentation, PELT (at the
defaults the Turing change-point benchmark runs them with) and the no-change detector, on public annotated collections
fetched apart (their data is not kept here: see docs/changepoints.md for where each comes from and its licences).
Needs the fetched data, so it is a script, not part of the test run:

    python tests/changepoint_benchmark.py --tcpd TCPD_CHECKOUT [--tssb TSSB_CHECKOUT] [--families 60] [--json OUT]

- TCPD_CHECKOUT: alan-turing-institute/TCPD (datasets/<name>/<name>.json and annotations.json), read with the same
  reader as `polyperf history evaluate`; its five quality-control series (made to check the annotators) are left out,
  as are series whose data only a download script brings (their JSON is absent from a checkout).
- TSSB_CHECKOUT: ermshaua/time-series-segmentation-benchmark (tssb/datasets/desc.txt: name, window, change points;
  <name>.txt: one value a line).
- the synthetic performance families of tests/changepoint_families.py, on which the defaults were chosen.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from changepoint_families import FAMILIES, score_family

from polyperf.analyse.reference_detectors import REFERENCES
from polyperf.report.tcpd_eval import AnnotatedSeries, Collection, detect, evaluate_collection, read_tcpd

DETECTORS = {"polyperf": detect, **REFERENCES}


def tcpd(checkout: Path) -> Collection:
    found = read_tcpd(checkout / "datasets", checkout / "annotations.json")
    kept = [s for s in found.series if not s.name.startswith("quality_control")]
    return Collection(kept, found.multivariate, found.unannotated)


def tssb(checkout: Path) -> Collection:
    folder = checkout / "tssb" / "datasets"
    series = []
    for line in (folder / "desc.txt").read_text().splitlines():
        if not line.strip():
            continue
        name, _window, *points = line.split(",")
        values = np.loadtxt(folder / f"{name}.txt", dtype=float)
        series.append(AnnotatedSeries(name, values, [sorted(int(p) for p in points)]))
    return Collection(series)


def _table(title: str, result: dict) -> list[str]:
    lines = [f"{title}", "", "| detector | F1 | Cover |", "|---|---|---|"]
    lines += [f"| {name} | {figures['f1']:.3f} | {figures['cover']:.3f} |" for name, figures in result.items()]
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tcpd", type=Path)
    parser.add_argument("--tssb", type=Path)
    parser.add_argument("--families", type=int, default=60, help="series per synthetic family (0: none)")
    parser.add_argument("--json", type=Path, help="write every series' detections and scores here")
    args = parser.parse_args()
    out: dict[str, dict] = {}
    for label, load, path in (("TCPD", tcpd, args.tcpd), ("TSSB", tssb, args.tssb)):
        if path is None:
            continue
        collection = load(path)
        start = time.perf_counter()
        result = evaluate_collection(collection, 5, DETECTORS)
        out[label] = result
        title = f"{label}: {len(collection.series)} series ({time.perf_counter() - start:.0f} s)"
        print("\n".join(_table(title, result)), flush=True)
        losses = [
            s["series"]
            for s, b in zip(result["polyperf"]["series"], result["binseg"]["series"], strict=True)
            if s["f1"] < b["f1"] or s["cover"] < b["cover"]
        ]
        print(f"polyperf below binary segmentation (F1 or Cover) on: {', '.join(losses)}\n", flush=True)
    for name in FAMILIES[: 4 if args.families else 0]:
        scores = score_family(name, DETECTORS, args.families)
        print(f"family {name}: " + "; ".join(f"{d} F1 {f:.2f} Cover {c:.2f}" for d, (f, c, _) in scores.items()))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""Performance-history families with known answers, the set polyperf's change-detection defaults were chosen on
(never the annotated collections it is reported on): steps, a regression and its fix a few commits apart, a slope
(memory that grows commit after commit) between two flat stretches, and noise alone. Each series' truth is one
annotator's list of change points (a slope: its two ends), scored with the literature's F1 (margin 5) and Cover.

Run: python tests/changepoint_families.py [--series 60]   (prints F1 and Cover per family and detector)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from polyperf.analyse.change_scores import cover, f1_margin

FAMILIES = ("steps", "close", "slope", "noise")


def family(rng: np.random.Generator, name: str) -> tuple[np.ndarray, list[int]]:
    """One series of the family and its change points."""
    n = int(rng.integers(150, 400))
    sd = float(rng.uniform(0.01, 0.03))
    level = np.zeros(n)
    truth: list[int] = []
    if name == "steps":
        truth = sorted(
            int(t) for t in rng.choice(np.arange(20, n - 20, 15), size=int(rng.integers(1, 4)), replace=False)
        )
        for t in truth:
            level[t:] += rng.choice([-1, 1]) * rng.uniform(4, 10) * sd
    elif name == "close":
        t = int(rng.integers(30, n - 60))
        width = int(rng.integers(5, 16))
        level[t : t + width] += rng.uniform(0.10, 0.30)
        truth = [t, t + width]
    elif name == "slope":
        t = int(rng.integers(20, n // 2))
        width = int(rng.integers(30, min(150, n - t - 10)))
        total = rng.choice([-1, 1]) * rng.uniform(0.10, 0.40)
        level[t : t + width] = np.linspace(0, total, width, endpoint=False)
        level[t + width :] = total
        truth = [t, t + width]
    elif name != "noise":
        raise ValueError(name)
    values = np.exp(level + rng.normal(0, sd, n)) * 100
    return values, truth


def score_family(name: str, detectors: dict[str, Callable], series: int, seed: int = 0) -> dict[str, tuple]:
    rng = np.random.default_rng(seed + FAMILIES.index(name))
    made = [family(rng, name) for _ in range(series)]
    out = {}
    for label, find in detectors.items():
        found = [find(values) for values, _ in made]
        f1 = np.mean([f1_margin([truth], d) for (_, truth), d in zip(made, found, strict=True)])
        cov = np.mean([cover([truth], d, v.size) for (v, truth), d in zip(made, found, strict=True)])
        out[label] = (float(f1), float(cov), float(np.mean([len(d) for d in found])))
    return out


def main() -> None:
    from polyperf.analyse.reference_detectors import REFERENCES
    from polyperf.report.tcpd_eval import detect

    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=60)
    args = parser.parse_args()
    detectors = {"polyperf": detect, **REFERENCES}
    for name in FAMILIES:
        for label, (f1, cov, count) in score_family(name, detectors, args.series).items():
            print(f"{name:<6} {label:<9} F1 {f1:.2f}  Cover {cov:.2f}  detections {count:.1f}")


if __name__ == "__main__":
    main()

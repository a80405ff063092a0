"""Writes tests/data/annotated_history/perfherder_like.csv: a synthetic annotated history with the traits of
Perfherder's triaged series, for `polyperf history evaluate` (run: python tests/make_annotated_history.py).

Synthetic because the public Mozilla dataset (mozilla/REALISE-Performance) carries no licence file that allows a
copy here. Its traits, from its documentation and some of its series: one value per revision, noise of a few percent
with spikes, two-mode series, timings in whole milliseconds, steps people confirmed (valid alerts) and alerts they
dismissed as noise (invalid). Every level, step and spike below is drawn from a seeded generator, none from Mozilla's
data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).parent / "data" / "annotated_history" / "perfherder_like.csv"
POINTS = 300


def _noise(rng: np.random.Generator, kind: str, sd: float, n: int) -> np.ndarray:
    base = rng.lognormal(0, sd, n)
    if kind == "bimodal":
        base = np.where(rng.random(n) < 0.3, 1 + 2.5 * sd, 1.0) * rng.lognormal(0, sd / 2, n)
    spikes = rng.random(n) < rng.uniform(0.005, 0.03)
    return np.where(spikes, base * rng.uniform(1.2, 2.0, n), base)


def series(rng: np.random.Generator, name: str, role: str) -> pd.DataFrame:
    kind = rng.choice(["lognormal", "bimodal", "integer"], p=[0.5, 0.25, 0.25])
    sd = float(rng.uniform(0.01, 0.05))
    level = float(rng.uniform(20, 400))
    shape = np.ones(POINTS)
    alert = np.full(POINTS, "", dtype=object)
    if role in ("valid", "both"):
        at = np.sort(rng.choice(np.arange(30, POINTS - 30, 20), size=int(rng.integers(1, 4)), replace=False))
        for i in at:
            size = float(rng.uniform(4, 10)) * sd * rng.choice([-1, 1])
            shape[i:] *= np.exp(size)
            alert[i] = "valid"
    values = level * shape * _noise(rng, str(kind), sd, POINTS)
    if role in ("invalid", "both"):
        # an alert people dismissed: a short excursion of two or three points, back to the level after it
        free = [i for i in range(20, POINTS - 20) if not (alert[max(0, i - 8) : i + 8] != "").any()]
        i = int(rng.choice(free))
        width = int(rng.integers(2, 4))
        values[i : i + width] *= float(rng.uniform(1.15, 1.4))
        alert[i] = "invalid"
    if role == "switching":
        # two levels taken in turn for 15-40 points each (seen on beta and on some autoland series); an alert now
        # and then, still under investigation, and no confirmed change
        gap = float(rng.uniform(6, 15)) * sd
        at, high = 0, False
        while at < POINTS:
            length = int(rng.integers(15, 41))
            if high:
                values[at : at + length] *= np.exp(gap)
            if at and rng.random() < 0.3:
                alert[at] = "untriaged"
            at, high = at + length, not high
    if role == "by_hand":
        # alerting off for the series: two steps, and only one of them recorded by a person
        first, second = sorted(rng.choice(np.arange(40, POINTS - 40, 40), size=2, replace=False))
        for i in (first, second):
            values[i:] *= np.exp(float(rng.uniform(5, 10)) * sd * rng.choice([-1, 1]))
        alert[first] = "missed"
    if kind == "integer":
        values = np.round(values)
    return pd.DataFrame({"series": name, "value": np.round(values, 4), "alert": alert})


def main(out: Path = OUT) -> None:
    rng = np.random.default_rng(20240501)
    roles = ["valid"] * 36 + ["both"] * 6 + ["invalid"] * 8 + ["none"] * 10 + ["switching"] * 6 + ["by_hand"] * 4
    frames = [series(rng, f"s{n:02d}-{role}", role) for n, role in enumerate(roles)]
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.concat(frames).to_csv(out, index=False)
    print(f"{out}: {len(frames)} series")


if __name__ == "__main__":
    main()

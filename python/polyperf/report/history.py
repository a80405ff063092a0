"""A history read from the store and judged: every series' points and every claim's measured value over commits on
one machine fingerprint, with their change points (`analyse.changepoints`). The CLI, the history page and
`polyperf.load_history` all start here."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from polyperf.analyse.changepoints import MAX_PVALUE, series_changes
from polyperf.analyse.creep import series_creep
from polyperf.store import Store, StoreError, open_store

__all__ = [
    "History",
    "all_changes",
    "build_history",
    "gate",
    "group_changes",
    "load_history",
    "metric_catalogue",
    "pending_at",
    "series_name",
]


def metric_catalogue() -> Callable[[str], Any] | None:
    """The metric catalogue's `metric_info` (direction, exactness), or None where this polyperf has none."""
    try:
        from polyperf.record.catalogue import metric_info  # type: ignore[import-not-found]
    except ImportError:
        return None
    return metric_info


@dataclass(frozen=True)
class History:
    machine: str
    points: pd.DataFrame  # one row per run and series (`Store.points`)
    verdicts: pd.DataFrame  # one row per run and claim (`Store.verdicts`)
    changes: pd.DataFrame  # series_changes over `points`, with the series' key
    claim_changes: pd.DataFrame  # series_changes over the claims' measured values
    commits: list[str]  # every commit of the history, oldest first
    creep: pd.DataFrame = field(default_factory=pd.DataFrame)  # series_creep: slow drift at the newest commits

    def newest(self, count: int) -> set[str]:
        return set(self.commits[-count:]) if count > 0 else set()


def _machine(store: Store, machine: str | None) -> str:
    machines = store.machines()
    if machines.empty:
        raise StoreError(f"{store.url}: the history store holds no runs yet")
    if machine is None:
        return str(machines.sort_values("newest").iloc[-1]["machine"])
    if machine not in set(machines["machine"]):
        known = ", ".join(machines["machine"])
        raise StoreError(f"machine {machine!r} has no runs in {store.url} (stored: {known})")
    return machine


def _claim_metrics() -> dict[str, str]:
    """Each registered claim's metric, so its exactness comes from the catalogue (a claim not registered any more
    has none: its values are treated as sampled)."""
    from polyperf.analyse.claims import load_claims

    try:
        return {c.id: c.metric for c in load_claims()}
    except ValueError:  # a registry being edited into a bad state costs the history its claims' exactness only
        return {}


def _claim_points(verdicts: pd.DataFrame, catalogue: Callable[[str], Any] | None) -> pd.DataFrame:
    """Each claim's measured value per run; `exact` where the catalogue declares the claim's metric an exact count
    (whole numbers are no evidence of that: integer milliseconds carry noise). The claims carry no direction here:
    a ratio's better side is the claim's, not its metric's."""
    measured = verdicts.dropna(subset=["measured"]).rename(columns={"measured": "value"})
    if measured.empty:
        return measured.assign(exact=pd.Series(dtype=bool), metric=pd.Series(dtype=str))
    metrics = _claim_metrics()
    exact = {
        claim: bool(getattr(catalogue(metric), "exact", False)) if catalogue else False
        for claim, metric in metrics.items()
    }
    return measured.assign(exact=measured["claim"].map(exact).fillna(False).astype(bool), metric="")


def build_history(
    store: Store,
    *,
    machine: str | None = None,
    suite: str | None = None,
    since: str | None = None,
    profile: str | None = None,
    max_pvalue: float = MAX_PVALUE,
) -> History:
    """The history of one machine fingerprint (by default the one of the newest run) with its changes."""
    with store.batch(write=False):  # one open of the store for its four reads
        machine = _machine(store, machine)
        points = store.points(machine=machine, suite=suite, since=since, profile=profile)
        verdicts = store.verdicts(machine=machine, suite=suite, since=since, profile=profile)
        runs = store.runs(machine=machine, since=since)
    catalogue = metric_catalogue()
    changes = series_changes(points, metric_info=catalogue, max_pvalue=max_pvalue)
    if not changes.empty:
        keys = points.drop_duplicates("series_id").set_index("series_id")
        for column in ("suite", "case", "implementation", "variant", "driver", "unit", "params"):
            changes[column] = changes["series_id"].map(keys[column])
    claim_changes = series_changes(
        _claim_points(verdicts, catalogue), key=("claim",), exact_column="exact", max_pvalue=max_pvalue
    )
    if profile is not None:
        runs = runs[runs["profile"] == profile]
    commits = list(dict.fromkeys(c for c in runs["git_commit"] if c))
    creep = series_creep(points, changes, metric_info=catalogue)
    if not creep.empty:
        keys = points.drop_duplicates("series_id").set_index("series_id")
        for column in ("suite", "case", "implementation", "variant", "driver", "unit", "params"):
            creep[column] = creep["series_id"].map(keys[column])
    return History(machine, points, verdicts, changes, claim_changes, commits, creep)


def series_name(row: pd.Series) -> str:
    """`claim ID`, or suite/case/implementation/variant/driver/metric and the params."""
    if "claim" in row and isinstance(row.get("claim"), str):
        return f"claim {row['claim']}"
    parts = [row.get(c) for c in ("suite", "case", "implementation", "variant", "driver", "metric")]
    params = "" if row.get("params") in (None, "{}") else f" {row['params']}"
    return "/".join(str(p) for p in parts if isinstance(p, str) and p) + params


def all_changes(history: History) -> pd.DataFrame:
    """The series' and the claims' changes in one frame (series ids kept whole: as floats beside a claim's NaN, a
    64-bit id would lose its last digits)."""
    frames = [
        f.astype({"series_id": object}) if "series_id" in f else f
        for f in (history.changes, history.claim_changes)
        if not f.empty
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python one JSON writes."""
    return value.item() if hasattr(value, "item") else value


def group_changes(changes: pd.DataFrame, name: Callable[[pd.Series], str]) -> list[dict[str, Any]]:
    """Changes at one commit across series, as one entry each (Perfherder's alert summary): the commits, how many
    regressed, improved or changed, whether any is still pending, and every series by `name`; the largest first."""
    if changes.empty:
        return []
    groups = []
    for (before, after), rows in changes.groupby(["commit_before", "commit_after"], sort=False):
        labels = rows["label"].value_counts()
        states = set(rows["state"]) if "state" in rows else {"confirmed"}
        groups.append(
            {
                "commit_before": before,
                "commit_after": after,
                "count": len(rows),
                "regressions": int(labels.get("regression", 0)),
                "improvements": int(labels.get("improvement", 0)),
                "state": "pending" if "pending" in states else "confirmed",
                "series": [
                    {
                        "name": name(row),
                        **({"claim": row["claim"]} if isinstance(row.get("claim"), str) else {}),
                        **({"series_id": _plain(row["series_id"])} if pd.notna(row.get("series_id")) else {}),
                        "label": row["label"],
                        "change": float(row["change"]) if math.isfinite(row["change"]) else None,
                    }
                    for _, row in rows.iterrows()
                ],
            }
        )
    return sorted(groups, key=lambda g: (-g["count"], str(g["commit_after"])))


def gate(history: History, newest: int, *, include_pending: bool = False) -> pd.DataFrame:
    """The regressions (of series and claims) whose first commit after the change is among the newest `newest`
    commits, on metrics the catalogue lets a gate fail on: what `--fail-on-regression` fails on. Pending changes
    (too few points after them to be confirmed) only when asked."""
    both = all_changes(history)
    if both.empty:
        return both
    gated = both["gated"].fillna(True).astype(bool) if "gated" in both else True
    confirmed = both["state"] == "confirmed" if "state" in both and not include_pending else True
    recent = history.newest(newest)
    return both[(both["label"] == "regression") & both["commit_after"].isin(recent) & gated & confirmed]


def pending_at(history: History, newest: int) -> pd.DataFrame:
    """Changes at the newest `newest` commits not yet confirmed."""
    both = all_changes(history)
    if both.empty or "state" not in both:
        return both.iloc[0:0]
    return both[(both["state"] == "pending") & both["commit_after"].isin(history.newest(newest))]


def load_history(
    store: Store | str | os.PathLike[str] | None = None,
    *,
    suite: str | None = None,
    since: str | None = None,
    machine: str | None = None,
) -> pd.DataFrame:
    """The tidy history: one row per run and series (its commit, branch, machine, profile, the series' key, n,
    the median of its repeats and its 95% interval, whether the catalogue declares its metric exact), in commit
    order, from `store` (a Store, a DuckDB path or a
    postgresql:// URL; by default `POLYPERF_STORE` or `reports/history.duckdb`)."""
    opened = store if store is not None and not isinstance(store, str | os.PathLike) else open_store(store)
    frame = opened.points(machine=machine, suite=suite, since=since)
    frame["commit_time"] = pd.to_datetime(frame["commit_time"], unit="s", utc=True)
    # exact as the catalogue says today: stores written before it decided kept "every repeat a whole number"
    catalogue = metric_catalogue()
    declared = {
        m: bool(getattr(catalogue(m), "exact", False)) if catalogue else False for m in frame["metric"].unique()
    }
    frame["exact"] = frame["metric"].map(declared).astype(bool)
    return frame.reset_index(drop=True)

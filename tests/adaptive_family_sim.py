"""A run of polyperf's main job with known truths, for tests/test_adaptive_family.py: 40 entries shaped like
claims.toml's, their repeats, the adaptive top-up loop of `polyperf.topups` (first batch, then batches chosen by
`analyse.allocate` until it chooses none), judged by the real `anytime` / `judge` / `family` code, and scored against
the truths. Also the negative control: each part judged by the fixed-n sign-test interval (`stats.paired_ratio`)
looked at after every repeat, stopping when it decides, with no family.

How the repeats are made, so that every truth is exact:
- Entry i's repeat j is G = sqrt(rho) * loading_i * S[suite, j] + sqrt(1 - rho) * eps[i, j] (standard normal), and
  its log-ratio (or plain value) is center_i + sd_i * T(G), T a Tukey g-and-h transform (monotone, T(0) = 0). So
  the median is exactly center_i, whatever the shape: T makes it skewed (g, occasional slow repeats) or
  heavy-tailed (h).
- S[suite, j] is the suite's shared state in its j-th repeat (a noisy machine slowing the numerator's side, say): it
  moves the log-ratio itself, so it does not cancel in the ratio (an effect multiplying both sides of a pair would),
  and ties every entry of the suite in that repeat; a loading of -1 (an entry whose numerator is another's
  denominator) makes the dependence negative, which Benjamini-Hochberg is not proven for and e-BH is.
- Entries that share `series` are measured from the same rows (a band and a direction on one ratio), and a top-up
  runs a test, so every entry that test writes gains the batch's repeats.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np
from scipy.stats import binom

from polyperf.analyse import allocate, anytime
from polyperf.analyse.claims import Claim, Verdict
from polyperf.analyse.family import Family, control
from polyperf.analyse.judge import Part, band_of, direction_of, judge_parts, size_band, tested_part
from polyperf.analyse.stats import Summary
from polyperf.topups import FIRST_OVERHEAD_S, MAX_BATCHES, RATE

BUDGET_S = 120.0  # seconds of top-ups after the first batch
OVERHEAD_S = 4.0  # a batch's true fixed cost (pytest start, fixtures, servers)
N_PEEK = 100  # the peeking control looks after every repeat up to this many (what 120 s buys a 1 s test)
SHAPES = {"normal": (0.0, 0.0), "skewed": (0.8, 0.0), "heavy": (0.0, 0.25), "skewed-heavy": (0.5, 0.15)}
SUITE_OF = {"io": "io", "http": "http", "bs": "bson_server", "bson": "bson", "sched": "scheduler", "build": "build"}
SUITE_OF["pg"] = "pg"
RHO = {"io": 0.3, "http": 0.5, "bson_server": 0.4, "bson": 0.5, "scheduler": 0.5, "build": 0.3, "pg": 0.5}
# test: (seconds per repeat, first batch)
TESTS = {
    "io_parse": (1.0, 10), "io_write": (0.5, 10),
    "http_ceiling": (8.0, 8), "http_ramp": (10.0, 8), "http_driver": (6.0, 8), "http_counts": (2.0, 8),
    "bs_ceiling": (6.0, 8), "bs_counts": (2.0, 8), "bson_deser": (1.5, 10), "bson_decode": (1.0, 10),
    "sched_rounds": (3.0, 12), "build_release": (5.0, 8), "build_native": (4.0, 8), "build_alloc": (3.0, 8),
    "build_multiply": (0.5, 10), "build_counts": (2.0, 8), "pg_ceiling": (10.0, 8), "pg_spikes": (6.0, 8),
}  # fmt: skip


@dataclass(frozen=True)
class Entry:
    """One registry entry with its truth: `truth` is the true median (a ratio, or a plain value)."""

    id: str
    test: str
    rule: dict
    truth: float
    sd: float  # of the log-ratio (of the value for a plain value), before the shape
    shape: str = "normal"
    published: float | None = None
    margin: float | None = None
    min_effect: float = 0.01
    measure: str = "ratio"
    loading: float = 1.0
    series: str | None = None  # entries with one series share their rows

    @property
    def suite(self) -> str:
        return SUITE_OF[self.test.split("_")[0]]

    @property
    def log(self) -> bool:
        return self.measure == "ratio"

    @property
    def center(self) -> float | None:
        c = self.rule.get("center", self.published)
        return None if c is None else float(c)

    @property
    def size(self) -> tuple[float, float] | None:
        return size_band(self.published, self.margin, None, self.rule)


def _gt(t: float) -> dict:
    return {"kind": "greater_than", "threshold": t}


def _lt(t: float) -> dict:
    return {"kind": "less_than", "threshold": t}


def _abs(center: float, tol: float) -> dict:
    return {"kind": "within_abs", "center": center, "tolerance": tol}


def _factor(center: float, factor: float) -> dict:
    return {"kind": "within_factor", "center": center, "factor": factor}


E = Entry
ENTRIES = [
    E("io.unbuffered_parse_slowdown", "io_parse", _gt(1), 11.43, 0.1, published=11.43, margin=2.0),
    E("io.parse_rate", "io_parse", _abs(100, 5), 100.0, 3.0, measure="value"),
    E("io.write_rate", "io_write", _gt(50), 50.0, 5.0, "heavy", measure="value"),  # null
    E("io.read_ms", "io_write", _gt(5), 8.0, 1.0, measure="value"),
    E("http.gnet_ahead_of_axum", "http_ceiling", _gt(1), 1.0, 0.15, "heavy", min_effect=0.05),  # null
    E("http.nethttp_behind_gnet", "http_ceiling", _lt(1), 0.8, 0.15, "skewed", min_effect=0.05, loading=-1),
    E("http.hyper_multi_vs_current", "http_ceiling", _factor(1, 1.25), 1.25, 0.1),  # at the band's edge
    E("http.go_less_memory", "http_ceiling", _lt(1), 0.5, 0.05, min_effect=0.05),
    E("http.gnet_peak_ahead", "http_ramp", _gt(1), 1.0, 0.2, "skewed", min_effect=0.05, series="ramp"),  # null
    E("http.ramp_peaks_alike", "http_ramp", _factor(1, 1.1), 1.0, 0.2, "skewed", series="ramp"),
    E("http.oha_matches_bombardier", "http_driver", _abs(1, 0.1), 1.0, 0.05),
    E("http.oha_matches_wrk", "http_driver", _abs(1, 0.1), 1.1, 0.08, "heavy", loading=-1),  # edge
    E("http.generators_same_cpu", "http_driver", _abs(1, 0.1), 1.03, 0.05),
    E("http.generators_same_syscalls", "http_driver", _abs(1, 0.1), 0.9, 0.05),  # edge
    E("http.gnet_fewer_writes", "http_counts", _lt(0.5), 1 / 16, 0.05),
    E("bson.raw_vs_clone_rps", "bs_ceiling", _gt(1), 1.97, 0.15, published=1.97, margin=1.5),
    # size at the margin's edge: "as published" and "smaller" are both false
    E("bson.clone_vs_raw_cpu", "bs_ceiling", _gt(1), 1.81 / 1.5, 0.1, published=1.81, margin=1.5, loading=-1),
    E("bson.clone_allocates_more", "bs_counts", _gt(1), 3.0, 0.02),
    E("bson.clone_removal", "bson_deser", _lt(1), 0.852, 0.1, published=0.852, margin=1.25),
    E("bson.raw_deserializer", "bson_deser", _lt(1), 0.642, 0.1, "skewed", published=0.642, margin=1.25),
    E("bson.decoder_find", "bson_decode", _gt(1), 1.0, 0.1),  # null
    E("bson.decoder_flat", "bson_decode", _gt(1), 1.15, 0.1, "heavy"),
    E("bson.decoder_nested", "bson_decode", _gt(1), 1.0, 0.2, "skewed", loading=-1),  # null
    E("bson.decoder_types", "bson_decode", _gt(1), 0.9, 0.1),  # the claim is false: "opposite" is right
    E("sched.chained_spawn", "sched_rounds", _gt(1), 11.96, 0.3, published=11.96, margin=1.25),
    E("sched.ping_pong", "sched_rounds", _gt(1), 2.27, 0.6, "heavy", published=2.27, margin=1.25),
    E("sched.spawn_many", "sched_rounds", _gt(1), 1.40, 0.3, "skewed", published=1.40, margin=1.25),
    E("sched.yield_many", "sched_rounds", _gt(1), 1.47, 0.6, "skewed-heavy", published=1.47, margin=1.25),
    E("build.release_vs_dev", "build_release", _gt(1), 2.64, 0.2, published=2.64, margin=2.0),
    E("build.release_vs_dev_n120", "build_release", _gt(1), 6.0, 0.2),
    E("build.native_gain", "build_native", _gt(1), 1.047, 0.05, published=1.047, margin=1.05),
    E("build.mimalloc_no_gain", "build_alloc", _abs(1, 0.05), 1.0, 0.05, series="alloc"),
    E("build.mimalloc_gains", "build_alloc", _gt(1), 1.0, 0.05, series="alloc"),  # null, same rows
    E("build.dev_multiply_debug", "build_multiply", _gt(10), 10.0, 0.3, "heavy"),  # null
    E("build.mimalloc_same_allocations", "build_counts", _abs(1, 0.02), 1.0, 0.005),
    E("pg.gnet_higher_insert_ceiling", "pg_ceiling", _gt(1), 1.0, 0.3, "heavy", min_effect=0.05),  # null
    E("pg.gnet_ahead_per_cpu", "pg_ceiling", _gt(1), 1.3, 0.2, min_effect=0.05, loading=-1),
    E("pg.postgres_not_the_bottleneck", "pg_ceiling", _lt(0.5), 0.5, 0.1, "skewed", measure="value"),  # null
    E("pg.gnet_p99_spikes", "pg_spikes", _gt(1), 2.0, 0.6, "skewed", min_effect=0.05),
    E("pg.p99_ms", "pg_spikes", _abs(20, 2), 22.0, 3.0, "heavy", measure="value"),  # edge
]


def transform(g: np.ndarray, shape: str) -> np.ndarray:
    """Tukey's g-and-h: monotone in g, 0 at 0, so a standard normal's median 0 maps to 0."""
    skew, tail = SHAPES[shape]
    core = g if skew == 0 else np.expm1(skew * g) / skew
    return core * np.exp(tail * g * g / 2) if tail else core


def repeats(rng: np.random.Generator, n: int, entries: list[Entry] = ENTRIES) -> np.ndarray:
    """(entries, n): each entry's first n repeats (log-ratios, or values) of one run."""
    suites = sorted({e.suite for e in entries})
    shared = {s: rng.standard_normal(n) for s in suites}
    own: dict[str, np.ndarray] = {}
    out = np.empty((len(entries), n))
    for i, e in enumerate(entries):
        key = e.series or e.id
        if key not in own:
            rho = RHO[e.suite]
            own[key] = math.sqrt(rho) * e.loading * shared[e.suite] + math.sqrt(1 - rho) * rng.standard_normal(n)
        center = math.log(e.truth) if e.log else e.truth
        out[i] = center + e.sd * transform(own[key], e.shape)
    return out


# --- the truth of each outcome ---------------------------------------------------------------------------------


def false_outcome(e: Entry, part: str, outcome: str) -> bool:
    """Whether a declared outcome is wrong given the true median (a null at a bound makes both sides wrong)."""
    m = e.truth
    if part == "direction":
        t, side = direction_of(e.rule)
        above = side == "above"
        return (m <= t if above else m >= t) if outcome == "reproduced" else (m >= t if above else m <= t)
    lo, hi = band_of(e.rule, e.center) if part == "band" else e.size
    words = {"as published": "inside", "larger": "above", "smaller": "below"}
    outcome = words.get(outcome, outcome)
    return {"inside": not lo < m < hi, "above": m <= hi, "below": m >= lo}[outcome]


# --- judging, as `claims.evaluate` does ------------------------------------------------------------------------


def summary_of(claim: Claim, sample: np.ndarray) -> Summary:
    """`claims._measure`'s estimate: the paired ratio of exp(log-ratios) over ones, or the plain values' median."""
    if claim.measure == "ratio":
        return anytime.paired_ratio(np.exp(sample), np.ones(sample.size))
    return anytime.summarize(sample)


def judged_entry(claim: Claim, sample: np.ndarray) -> tuple[Summary, dict[str, Part]]:
    """One entry's estimate and its parts before the family, as `claims.evaluate` makes them."""
    m = summary_of(claim, sample)
    return m, judge_parts(m, claim.rule, claim.center, claim.size_band, claim.min_effect)[0]


def claim_of(e: Entry) -> Claim:
    """The registry entry the simulated one stands for: a paired ratio of variants "num" / "den" of case `e.id`, or
    a plain value of that case."""
    sides = {"numerator": {"variant": "num"}, "denominator": {"variant": "den"}, "paired": True} if e.log else {}
    return Claim(
        id=e.id, suite=e.suite, source="simulated", statement=e.id, unit="x" if e.log else "s",
        measure=e.measure, metric="seconds", select={"case": e.id}, rule=e.rule, published=e.published,
        min_effect=e.min_effect, margin=e.margin, **sides,
    )  # fmt: skip


def family(parts: list[dict[str, Part]]) -> tuple[list[dict[str, Part]], list[dict[str, float]], Family]:
    """Every tested part in one e-BH family, as `claims._family` and `evaluate` do: (the parts after it, each entry's
    adjusted values, the family)."""
    keys = [(i, name) for i, ps in enumerate(parts) for name in ps]
    flat = [parts[i][name] for i, name in keys]
    adjusted = control([p.family_p for p in flat], [p.decided_by_interval for p in flat], "ebh")
    out: list[dict[str, Part]] = [{} for _ in parts]
    adj: list[dict[str, float]] = [{} for _ in parts]
    for (i, name), part, value in zip(keys, flat, adjusted, strict=True):
        out[i][name] = tested_part(part, value, "e-BH", RATE)
        if not math.isnan(value):
            adj[i][name] = value
    tests = sum(not math.isnan(p.p_value) for p in flat)
    return out, adj, Family(tests, "ebh", RATE, sum(p.decided_by_interval for p in flat))


def main_part(parts: dict[str, Part]) -> Part:
    return parts.get("direction") or parts["band"]


_WORD = {"reproduced": "reproduced", "inside": "reproduced", "inconclusive": "inconclusive"}


def verdicts(
    claims: list[Claim], samples: list[tuple[float, ...]], judged: list[tuple[Summary, dict]]
) -> list[Verdict]:
    """The verdicts `polyperf.topups` reads (through `allocate.open_of` and `allocate.declared`)."""
    final, adjusted, fam = family([parts for _, parts in judged])
    out = []
    for claim, sample, (m, _), ps, adj in zip(claims, samples, judged, final, adjusted, strict=True):
        word = _WORD.get(main_part(ps).outcome, "not reproduced")
        kw = {name: ps[name].outcome for name in ("direction", "size") if name in ps}
        out.append(Verdict(claim, word, m, "", parts=ps, adjusted=adj, family=fam, sample=sample, **kw))
    return out


@dataclass
class Run:
    """One simulated run's end: each entry's final parts and n, the batches the loop added and their seconds."""

    parts: list[dict[str, Part]]
    first: list[dict[str, Part]]  # after the first batch alone, for the power the top-ups add
    n: list[int]
    batches: int
    spent_s: float


def adaptive_run(data: np.ndarray, entries: list[Entry] = ENTRIES) -> Run:
    """The first batch, then `polyperf.topups.add_repeats`'s loop: judge, `allocate.needs` at e-BH's next target,
    `allocate.choose`, one batch of the chosen entries' tests (every entry a test writes gains its repeats), until
    none is chosen."""
    claims = [claim_of(e) for e in entries]
    have = {e.test: TESTS[e.test][1] for e in entries}
    cost = {e.id: TESTS[e.test][0] for e in entries}
    test_of = {e.id: e.test for e in entries}
    cache: dict[int, tuple[int, tuple[float, ...], tuple[Summary, dict[str, Part]]]] = {}
    remaining, overhead, batches = BUDGET_S, FIRST_OVERHEAD_S, 0

    def judged() -> list[Verdict]:
        samples, each = [], []
        for i, e in enumerate(entries):
            n = have[e.test]
            if i not in cache or cache[i][0] != n:  # an entry's parts change only with its sample
                cache[i] = (n, tuple(data[i, :n].tolist()), judged_entry(claims[i], data[i, :n]))
            samples.append(cache[i][1])
            each.append(cache[i][2])
        return verdicts(claims, samples, each)

    first: list[dict[str, Part]] = []
    for _ in range(MAX_BATCHES):
        now = judged()
        first = first or [dict(v.parts) for v in now]
        tests, declared = allocate.declared(now)
        opens = [entry for v in now for entry in allocate.open_of(v)]
        needs = allocate.needs(opens, allocate.family_target(tests, declared, RATE))
        chosen, _ = allocate.choose(needs, cost, remaining, overhead)
        if not chosen:
            break
        plan: dict[str, int] = {}  # one batch runs each chosen entry's test, as many repeats as its entries ask
        for claim, count in chosen:
            plan[test_of[claim]] = max(plan.get(test_of[claim], 0), count)
        for test, count in plan.items():
            if have[test] + count > data.shape[1]:
                raise RuntimeError(f"the simulation made too few repeats for {test}: raise its n")
            have[test] += count
        took = sum(count * TESTS[test][0] for test, count in plan.items()) + OVERHEAD_S
        remaining -= took
        overhead = max(3.0, took - sum(count * cost[claim] for claim, count in chosen))
        batches += 1
    return Run([dict(v.parts) for v in judged()], first, [have[e.test] for e in entries], batches, BUDGET_S - remaining)


def max_repeats() -> int:
    """Enough repeats for any test whatever the loop chooses: the budget spent on the cheapest test."""
    return max(n for _, n in TESTS.values()) + int(BUDGET_S / min(c for c, _ in TESTS.values())) + 2


@contextmanager
def cached_evidence() -> Iterator[None]:
    """The e-process depends only on (k, n), and the projection on (k, n, target): cached while simulating."""
    saved = anytime.evidence, allocate.repeats_to_reach
    anytime.evidence = lru_cache(maxsize=None)(saved[0])
    allocate.repeats_to_reach = lru_cache(maxsize=None)(saved[1])
    try:
        yield
    finally:
        anytime.evidence, allocate.repeats_to_reach = saved


# --- the negative control: a fixed-n interval looked at after every repeat -------------------------------------


@cache
def sign_rank(n: int) -> int:
    """k of the fixed-n 95% sign-test interval [z_(k), z_(n+1-k)] (0: none at this n), as `stats.paired_ratio`."""
    return int(np.searchsorted(binom.cdf(np.arange(n + 1), n, 0.5), 0.025, side="right"))


def peeking(data: np.ndarray, entries: list[Entry] = ENTRIES, n_max: int = N_PEEK) -> list[list[dict[str, str]]]:
    """Each part's first decided outcome when its fixed-n interval is looked at after every repeat (from the first
    n with an interval to `n_max`), with `judge`'s noise floor (`min_effect`), and no family. data: (runs, entries,
    >= n_max). Returns each run's outcomes per entry and part."""
    out: list[list[dict[str, str]]] = [[{} for _ in entries] for _ in range(data.shape[0])]
    ns = np.array([n for n in range(1, n_max + 1) if sign_rank(n) >= 1])
    ks = np.array([sign_rank(int(n)) for n in ns])
    for i, e in enumerate(entries):
        questions = {"direction": direction_of(e.rule)} if direction_of(e.rule) else {"band": band_of(e.rule, e.center)}
        if e.size is not None:
            questions["size"] = e.size
        for name, spec in questions.items():
            for r, outcome in enumerate(_first_decision(data[:, i, :n_max], ns, ks, name, spec, e)):
                if outcome is not None:
                    out[r][i][name] = outcome
    return out


def _clears(z: np.ndarray, t: float, ns: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether the interval of the first n repeats lies wholly above t, and wholly below: fewer than k of them at or
    below (at or above) t, for each n in ns: (runs, len(ns))."""
    at_or_below = np.cumsum(z <= t, axis=1)[:, ns - 1]
    at_or_above = np.cumsum(z >= t, axis=1)[:, ns - 1]
    return at_or_below <= ks - 1, at_or_above <= ks - 1


def _near(e: Entry, medians: np.ndarray, bounds: list[float]) -> np.ndarray:
    """`judge._near` once the interval has cleared the bounds: the estimate within `min_effect` of one of them."""
    floor = math.log1p(e.min_effect)
    near = np.zeros(medians.shape, bool)
    for t in bounds:
        if t <= 0:
            continue
        if e.log:
            near |= np.abs(medians - math.log(t)) <= floor
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                near |= np.abs(np.log(medians / t)) <= floor
    return near


def _first_decision(z: np.ndarray, ns: np.ndarray, ks: np.ndarray, name: str, spec, e: Entry) -> list[str | None]:
    scale = math.log if e.log else float
    if name == "direction":
        t, side = spec
        bounds = [t]
        above, below = _clears(z, scale(t), ns, ks)
        hits = {"reproduced": above, "opposite": below} if side == "above" else {"reproduced": below, "opposite": above}
    else:
        lo, hi = spec
        bounds = [lo, hi]
        lo_above, lo_below = _clears(z, scale(lo), ns, ks)
        hi_above, hi_below = _clears(z, scale(hi), ns, ks)
        words = ("inside", "above", "below") if name == "band" else ("as published", "larger", "smaller")
        hits = dict(zip(words, (lo_above & hi_below, hi_above, lo_below), strict=True))
    first: list[str | None] = [None] * z.shape[0]
    open_ = np.ones(z.shape[0], bool)
    any_hit = np.logical_or.reduce(list(hits.values()))
    for j, n in enumerate(ns):  # in order, so that a part stops at its first decision
        rows = np.flatnonzero(open_ & any_hit[:, j])
        if rows.size == 0:
            continue
        far = ~_near(e, np.median(z[rows, :n], axis=1), bounds)  # the median only where an interval cleared
        for outcome, hit in hits.items():
            for r in rows[hit[rows, j] & far]:
                first[r], open_[r] = outcome, False
    return first

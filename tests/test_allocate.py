"""Where a run's extra repeats go (`analyse.allocate`): what an open entry needs, which entries the next batch
measures within the budget, the e-value e-BH needs for one more declared part, and what allocation reads of real
verdicts from `claims.evaluate`."""

from __future__ import annotations

import numpy as np
import pytest
from toy_claims import ratio_claim

from polyperf.analyse.allocate import (
    LIMIT,
    MIN_BATCH,
    Need,
    Open,
    choose,
    declared,
    family_target,
    need_of,
    needs,
    open_of,
)
from polyperf.analyse.anytime import evidence, repeats_to_reach, summarize
from polyperf.analyse.claims import evaluate
from polyperf.analyse.family import ebh
from polyperf.record.schema import as_frame


def _open(sample, bounds=(1.0,), *, log=False, min_effect=0.0, decided=False, sequential=True, priority=0):
    return Open("e", decided, tuple(sample), log, list(bounds), min_effect, sequential, priority)


# --- need_of --------------------------------------------------------------------------------------------------------


def test_an_entry_more_repeats_cannot_change_needs_nothing():
    clear = [1.5] * 12
    assert need_of(_open(clear, decided=True), 20.0) is None  # decided: it keeps its answer
    assert need_of(_open(clear, sequential=False), 20.0) is None  # exact counts: judged on every repeat
    assert need_of(_open([], (1.0,)), 20.0) is None and need_of(_open(clear, ()), 20.0) is None


def test_a_coin_flip_is_within_the_noise_and_gets_no_projection():
    rng = np.random.default_rng(1)
    coin = 1.0 + np.where(rng.random(40) < 0.5, -1, 1) * rng.uniform(0.01, 0.1, 40)
    coin[:2] = (1.05, 0.95)
    even = [1.0 + d for d in (0.05, -0.05) * 10]  # exactly half on each side
    for sample in (coin, even):
        need = need_of(_open(sample), 20.0)
        assert need is not None and need.more is None
        assert need.why.startswith("within the noise of 1 (") and f"more than {LIMIT} more repeats" in need.why


def test_a_clear_effect_needs_a_few_repeats_that_do_decide_it():
    """7 of 8 repeats above 1: a handful more at that share reach e-BH's target for a family of 10 with none
    declared (two-sided e >= 10 / 0.05); the same repeats, all above 1, do give a summary with that e-value."""
    sample = [1.2, 1.3, 1.25, 0.9, 1.4, 1.22, 1.35, 1.28]
    target = family_target(10, 0, 0.05)
    need = need_of(_open(sample), target)
    assert need is not None and 0 < need.more <= 20
    assert need.more == repeats_to_reach(7, 8, 2 * target)
    assert need.why == f"7 of 8 repeats lie above 1: about {need.more} more repeats would decide it"
    after = summarize(sample + [1.3] * need.more)
    assert after.evidence(1.0)[0] >= target > summarize(sample).evidence(1.0)[0]
    # a weaker share needs more; a share that falls short of the mixture's alternatives is within the noise
    weaker = need_of(_open([1.2, 1.3, 0.8, 0.9, 1.4, 1.22, 1.35, 1.28]), target)
    assert weaker.more is not None and weaker.more > need.more


def test_a_log_ratio_entry_reads_its_bound_on_the_ratio_scale():
    ratios = [2.0, 2.1, 1.9, 2.05, 0.9, 1.95, 2.2, 2.02]
    need = need_of(_open(np.log(ratios), (1.0,), log=True), 20.0)
    assert need.why.startswith("7 of 8 repeats lie above 1:")
    below = need_of(_open(np.log([0.5, 0.45, 0.55, 1.2, 0.5, 0.52]), (1.0,), log=True), 20.0)
    assert below.why.startswith("5 of 6 repeats lie below 1:")


def test_min_effect_moves_the_bound_out():
    sample = [1.02, 1.04, 1.06, 1.08, 1.12, 1.14, 1.16, 1.18, 1.22, 1.24]
    plain = need_of(_open(sample), 20.0)
    assert plain.why.startswith("10 of 10 repeats lie above 1:")
    moved = need_of(_open(sample, min_effect=0.1), 20.0)  # the bound becomes 1.1: 6 of 10 lie above it
    assert "6 of 10 repeats lie above 1.1" in moved.why
    assert moved.more is None or moved.more > plain.more
    logs = need_of(_open(np.log(sample), log=True, min_effect=0.1), 20.0)  # on a ratio: x (1 + min_effect)
    assert "6 of 10 repeats lie above 1.1" in logs.why
    below = need_of(_open([0.8, 0.85, 0.93, 0.95, 0.97], min_effect=0.1), 20.0)  # below: moved down to 0.9
    assert "2 of 5 repeats lie below 0.9" in below.why


def test_a_band_is_judged_at_both_edges_from_inside_and_at_the_nearer_one_from_outside():
    # inside: "inside" needs the interval clear of both edges; the edge that needs more repeats is the projection
    near_top = [1.9, 1.95, 1.85, 1.92, 1.97, 1.88, 2.05, 1.9]  # all above 1, 7 of 8 below 2
    need = need_of(_open(near_top, (1.0, 2.0)), 20.0)
    assert need.why.startswith("7 of 8 repeats lie below 2") and need.more > 0
    both_clear = need_of(_open([1.5] * 8, (1.0, 2.0)), 20.0)
    assert both_clear.more == max(
        repeats_to_reach(8, 8, 40.0), repeats_to_reach(8, 8, 40.0)
    )  # symmetric: either edge, the same count
    over = need_of(_open([2.5, 2.6, 2.4, 2.55], (1.0, 2.0)), 20.0)
    assert over.why.startswith("4 of 4 repeats lie above 2")
    coin = need_of(_open([1.9, 2.1, 1.95, 2.05, 1.9, 2.1], (1.0, 2.0)), 20.0)
    assert coin.more is None and "within the noise of 2" in coin.why


def test_needs_takes_the_verdict_before_the_size():
    verdict, size = _open([1.2] * 7 + [0.9]), _open([3.5] * 6 + [2.5] * 2, (2.0, 3.0), priority=1)
    [need] = needs([size, verdict], 20.0)
    assert need.priority == 0 and need.why.startswith("7 of 8 repeats lie above 1")
    [then] = needs([size, _open([1.2] * 8, decided=True)], 20.0)
    assert then.priority == 1 and then.why.startswith("6 of 8 repeats lie above 3")


# --- choose ---------------------------------------------------------------------------------------------------------


def test_the_cheapest_projected_seconds_go_first():
    open_needs = [Need("slow", 3, "s"), Need("cheap", 10, "c"), Need("dear", 40, "d")]
    cost = {"slow": 5.0, "cheap": 1.0, "dear": 1.0}  # 15 s, 10 s, 40 s
    chosen, reasons = choose(open_needs, cost, remaining_s=1000.0, overhead_s=5.0)
    assert chosen == [("cheap", 10), ("slow", 3), ("dear", 40)] and reasons == {}
    chosen, reasons = choose(open_needs, cost, remaining_s=31.0, overhead_s=5.0)  # 5 + 10 + 15 fit, 40 more do not
    assert chosen == [("cheap", 10), ("slow", 3)]
    assert reasons == {"dear": "the budget: d (≈ 45 s; 31 s were left)"}


def test_a_batch_is_at_least_min_batch_repeats():
    chosen, _ = choose([Need("a", 1, "w"), Need("b", 0, "w")], {"a": 1.0, "b": 1.0}, 100.0, 0.0)
    assert chosen == [("a", MIN_BATCH), ("b", MIN_BATCH)] and MIN_BATCH >= 2


def test_every_entry_left_out_says_why():
    open_needs = [
        Need("noise", None, "within the noise of 1 (4 of 8 repeats lie above 1): would need more than 400"),
        Need("gone", 5, "7 of 8 repeats lie above 1: about 5 more repeats would decide it"),
        Need("big", 300, "1 of 2 ...: about 300 more repeats would decide it"),
    ]
    chosen, reasons = choose(open_needs, {"noise": 1.0, "big": 2.0}, remaining_s=100.0, overhead_s=10.0)
    assert chosen == []
    assert reasons["noise"] == open_needs[0].why
    assert reasons["gone"] == f"{open_needs[1].why}; its tests cannot be run again in this run"
    assert reasons["big"] == f"the budget: {open_needs[2].why} (≈ 610 s; 100 s were left)"
    _, spent = choose([Need("big", 300, "w")], {"big": 2.0}, remaining_s=-5.0, overhead_s=0.0)
    assert spent["big"].endswith("(≈ 600 s; 0 s were left)")


def test_a_size_waits_for_every_verdict_that_fits():
    open_needs = [Need("size", 2, "s", priority=1), Need("verdict", 30, "v")]
    chosen, _ = choose(open_needs, {"size": 1.0, "verdict": 1.0}, remaining_s=31.0, overhead_s=0.0)
    assert chosen == [("verdict", 30)]  # the cheaper size does not fit after it
    chosen, _ = choose(open_needs, {"size": 1.0, "verdict": 1.0}, remaining_s=100.0, overhead_s=0.0)
    assert chosen == [("verdict", 30), ("size", 2)]


# --- family_target --------------------------------------------------------------------------------------------------


def test_family_target_is_what_e_bh_needs_for_one_more_part():
    assert family_target(40, 0, 0.05) == pytest.approx(800.0)
    assert family_target(40, 9, 0.05) == pytest.approx(80.0)
    assert family_target(1, 0, 0.05) == pytest.approx(20.0) and family_target(0, 0, 0.05) == 1.0
    for m, r in ((40, 0), (40, 9), (12, 3), (5, 4)):
        target = family_target(m, r, 0.05)
        for e, declared_too in ((target * 1.001, True), (target * 0.999, False)):
            # r parts already declared (huge e), the rest at e = 1, and one more at e
            inverse = [1e-9] * r + [1.0] * (m - r - 1) + [1 / e]
            assert (ebh(inverse)[-1] <= 0.05) == declared_too, (m, r, e)


# --- open_of, declared: real verdicts -------------------------------------------------------------------------------


def _frame(cases: dict[str, tuple[float, ...]]):
    """case -> the per-repeat ratios of `slow` over `fast` (fast drifts by repeat; the ratio does not see it)."""
    rows = []
    for case, ratios in cases.items():
        for i, ratio in enumerate(ratios):
            drift = 1.0 + 0.1 * (i % 3)
            for variant, value in (("slow", ratio * drift), ("fast", drift)):
                rows.append(
                    {"run_id": "r", "suite": "io", "case": case, "implementation": "x", "variant": variant}
                    | {"metric": "seconds", "unit": "s", "value": value, "repeat": i, "params": {}}
                )
    return as_frame(rows)


def test_open_of_reads_real_verdicts():
    clear = (2.0, 2.1, 1.9, 2.05, 1.95, 2.2, 2.02, 1.98, 2.1, 2.0, 1.9, 2.05)
    unsure = (1.2, 1.3, 0.9, 1.25, 1.4, 1.1, 0.95, 1.3)
    cases = {"clear": clear, "unsure": unsure, "sized": clear}
    claims = [ratio_claim("clear"), ratio_claim("unsure"), ratio_claim("sized", published=3.0, margin=1.1)]
    verdicts = {v.claim.id: v for v in evaluate(_frame(cases), claims)}
    assert (verdicts["clear"].verdict, verdicts["unsure"].verdict) == ("reproduced", "inconclusive")
    [done] = open_of(verdicts["clear"])
    assert done.decided and done.sequential and done.log and list(done.bounds) == [1.0]
    assert done.sample == pytest.approx(np.log(clear)) and need_of(done, 20.0) is None
    [still] = open_of(verdicts["unsure"])
    assert not still.decided and still.sequential and still.min_effect == verdicts["unsure"].claim.min_effect
    need = need_of(still, family_target(*declared(verdicts.values()), 0.05))
    assert need is not None and need.why.startswith("6 of 8 repeats lie above")
    direction, size = open_of(verdicts["sized"])  # the size against the published figure, second in line
    assert verdicts["sized"].size == "smaller" and (direction.decided, size.decided) == (True, True)
    assert size.priority == 1 and list(size.bounds) == pytest.approx([3.0 / 1.1, 3.0 * 1.1])


def test_an_exact_count_is_never_topped_up():
    rows = as_frame(
        [
            {"run_id": "r", "suite": "io", "case": "count", "implementation": "x", "variant": v, "params": {}}
            | {"metric": "read_syscalls", "unit": "count", "value": value, "repeat": 0}
            for v, value in (("slow", 10.0), ("fast", 12.0))
        ]
    )
    [v] = evaluate(rows, [ratio_claim("count", metric="read_syscalls", select={"case": "count"})])
    assert v.verdict == "not reproduced"
    [entry] = open_of(v)
    assert not entry.sequential and need_of(entry, 20.0) is None


def test_declared_counts_the_family_and_its_declared_parts():
    clear = (2.0, 2.1, 1.9, 2.05, 1.95, 2.2, 2.02, 1.98, 2.1, 2.0, 1.9, 2.05)
    unsure = (1.2, 1.3, 0.9, 1.25, 1.4, 1.1, 0.95, 1.3)
    cases = {"a": clear, "b": clear, "c": unsure}
    verdicts = evaluate(_frame(cases), [ratio_claim(c) for c in cases])
    assert [v.verdict for v in verdicts] == ["reproduced", "reproduced", "inconclusive"]
    assert declared(verdicts) == (3, 2) and declared([]) == (0, 0)
    # the target for the open one: e-BH over 3 with 2 declared needs e >= 3 / (0.05 x 3) = 20
    assert family_target(*declared(verdicts), 0.05) == pytest.approx(20.0)
    e = verdicts[2].parts["direction"].e_value
    assert e < 20.0 and e == pytest.approx(evidence(6, 8) / 2)


def test_the_first_batch_floor_documented_in_docs_answers():
    """docs/answers.md's table: the fewest of n first-batch repeats beyond a bound that decide a part in a family of
    55 tests, by how many other parts the family declares; None where only top-ups can decide it."""
    from polyperf.analyse.allocate import first_batch_floor

    table = {5: [None, None, 12, 15], 15: [None, 10, 12, 15], 25: [8, 10, 12, 15], 45: [8, 10, 11, 14]}
    for declared_parts, floors in table.items():
        assert [first_batch_floor(n, 55, declared_parts) for n in (8, 10, 12, 16)] == floors
    from polyperf.analyse.allocate import family_target
    from polyperf.analyse.anytime import evidence

    target = family_target(55, 25, 0.05)
    for n in range(8, 40):  # the floor is the least k whose two-sided e-value reaches e-BH's bar
        k = first_batch_floor(n, 55, 25)
        assert k is not None and evidence(k, n) / 2 >= target > evidence(k - 1, n) / 2

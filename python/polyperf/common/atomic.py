"""Files the harness writes (env.json, build stamps, the tidy table, figures, pages, logs). Whole files are replaced:
written to a temporary file in the same directory, then renamed over the old one, so a crash or a signal mid-write
leaves the old file or the new one, never half of either. Appended files are opened with O_NOFOLLOW.

A run folder may come from someone else (a CI artefact, a shared disk), so a link planted where polyperf writes is
refused in one line (`PlantedLink`): polyperf never writes through a link it did not make."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from polyperf.errors import PolyperfError

__all__ = [
    "PlantedLink",
    "atomic_path",
    "file_mode",
    "open_append",
    "refuse_link",
    "safe_dir",
    "write_bytes_atomic",
    "write_text_atomic",
]


class PlantedLink(PolyperfError):
    """A file or folder polyperf was about to write is a symbolic link it did not make."""


def refuse_link(path: Path) -> None:
    """PlantedLink when `path` itself (not its parents) is a symbolic link."""
    if Path(path).is_symlink():
        raise PlantedLink(f"{path}: is a symbolic link; polyperf does not write through links it did not make")


def safe_dir(path: Path) -> Path:
    """Creates `path` (and its parents) as a folder, refusing one that is a link; returns it."""
    path = Path(path)
    refuse_link(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _umask() -> int:
    """The process's umask, read without changing it (/proc, Linux 4.7+), else set and put back at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """What a plain open() would give a new file under the umask."""
    return 0o666 & ~_umask()


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yields a temporary path beside `path`; once the block ends without error it replaces `path`
    (for writers that want a file name, such as pyarrow or pandas). On error the temporary file is removed.
    `path` being a link is refused (the rename would replace the link, not write through it, but a link there
    was planted)."""
    path = Path(path)
    refuse_link(path)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    # mkstemp makes the file 0600: keep the old file's mode, else what a plain open() would give under the umask
    os.fchmod(fd, path.lstat().st_mode & 0o777 if path.exists() else file_mode())
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with tmp.open("rb+") as fh:  # on disk before the rename, so a power cut cannot leave an empty file
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str, encoding: str = "utf-8") -> None:
    write_bytes_atomic(path, text.encode(encoding))


def open_append(path: Path, mode: str = "a", encoding: str | None = "utf-8") -> IO:
    """`path` opened for appending (created under the umask; "a+" also reads), never through a link: PlantedLink
    instead."""
    flags = (os.O_RDWR if "+" in mode else os.O_WRONLY) | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PlantedLink(
                f"{path}: is a symbolic link; polyperf does not write through links it did not make"
            ) from None
        raise
    text = "b" not in mode
    return os.fdopen(fd, mode, encoding=encoding if text else None, errors="replace" if text else None)

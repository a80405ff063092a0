"""Files the harness rewrites (env.json, build stamps, the tidy table) are replaced whole: written to a temporary
file in the same directory, then renamed over the old one, so a crash or a signal mid-write leaves the old file
or the new one, never half of either."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "write_bytes_atomic", "write_text_atomic"]


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yields a temporary path beside `path`; once the block ends without error it replaces `path`
    (for writers that want a file name, such as pyarrow or pandas). On error the temporary file is removed."""
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    # mkstemp makes the file 0600: keep the old file's mode, else what a plain open() would give under umask 022
    os.fchmod(fd, path.stat().st_mode & 0o777 if path.exists() else 0o644)
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

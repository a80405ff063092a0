"""The extension and the servers measure the same code: rust_ext and rust_apps resolve the same bson crate."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _versions(lock: Path, crate: str) -> set[str]:
    packages = tomllib.loads(lock.read_text())["package"]
    return {p["version"] for p in packages if p["name"] == crate}


def test_extension_and_bson_server_use_one_bson_version():
    ext, apps = (
        _versions(ROOT / "rust_ext" / "Cargo.lock", "bson"),
        _versions(ROOT / "rust_apps" / "Cargo.lock", "bson"),
    )
    assert len(ext) == 1 and ext == apps, f"rust_ext resolves bson {ext}, rust_apps {apps}"

"""The build cache never hands out a binary built with other settings: every environment variable and flag that
changes the binary (RUSTFLAGS, CARGO_*, the C compiler's flags, cargo's config files, the profile and features
on the command line) is part of the fingerprint, and a binary replaced since its build is rebuilt. cargo itself is
stood in for by a fake that writes the binary and counts the builds, so the tests run in a temp dir in
milliseconds and no real target directory is touched."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from polyperf.build import App, BuildSpec, builder
from polyperf.build.builder import binary_env, build_app
from polyperf.common import steps

# Variables a CI runner or a user may well have set that say nothing about the binary.
_CLEAN = ("RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_PROFILE_RELEASE_LTO", "CFLAGS", "CC", "CARGO_TERM_COLOR")


@dataclass(frozen=True)
class TmpApp(App):
    """A Rust app whose sources and target directories live under `root`."""

    root: Path = Path()

    @property
    def source_dir(self) -> Path:
        return self.root / "src"

    def target_dir(self, variant: str) -> Path:
        return self.root / "target" / variant


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TmpApp:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Cargo.toml").write_text('[package]\nname = "tmp_app"\n')
    (tmp_path / "src" / "main.rs").write_text("fn main() {}\n")
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "cargo_home"))
    for name in _CLEAN:
        monkeypatch.delenv(name, raising=False)
    variants = {
        "release": BuildSpec("release", own_target_dir=True),
        "native": BuildSpec("native", rustflags="-C target-cpu=native", own_target_dir=True),
    }
    return TmpApp("tmp_app", "rust", "test app", "none", variants, root=tmp_path)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """The environment of every build that really ran; each writes a binary that names its RUSTFLAGS."""
    runs: list[dict[str, str]] = []

    def fake_cargo(cmd: list[str], *, log_path: Path, cwd: Path, env: dict[str, str]) -> int:
        runs.append(env)
        profile = cmd[cmd.index("--profile") + 1]
        binary = Path(env["CARGO_TARGET_DIR"]) / profile / "tmp_app"
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_text(f"built with RUSTFLAGS={env.get('RUSTFLAGS', '')}")
        return 0

    monkeypatch.setattr(builder.procs, "run", fake_cargo)
    return runs


def test_unchanged_settings_reuse_the_binary(app: TmpApp, builds: list, tmp_path: Path) -> None:
    first = build_app(app, "release", log_dir=tmp_path)
    again = build_app(app, "release", log_dir=tmp_path)
    assert (first.cached, again.cached, len(builds)) == (False, True, 1)
    assert (again.seconds, again.cpu_seconds) == (first.seconds, first.cpu_seconds)  # of the build that made it


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RUSTFLAGS", "-C target-cpu=native"),
        ("CARGO_ENCODED_RUSTFLAGS", "-Copt-level=1"),
        ("CARGO_PROFILE_RELEASE_LTO", "fat"),
        ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1"),
        ("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS", "-C target-feature=+avx2"),
        ("CFLAGS", "-O0"),  # mimalloc is C, compiled by its build script
        ("CC_x86_64_unknown_linux_gnu", "clang"),
        ("RUSTC_WRAPPER", "sccache"),
    ],
)
def test_a_setting_that_changes_the_binary_forces_a_build(
    app: TmpApp, builds: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    build_app(app, "release", log_dir=tmp_path)
    monkeypatch.setenv(name, value)
    rebuilt = build_app(app, "release", log_dir=tmp_path)
    assert not rebuilt.cached and len(builds) == 2
    assert builds[-1][name] == value
    monkeypatch.delenv(name)
    assert not build_app(app, "release", log_dir=tmp_path).cached  # and back again: the cache held the other one


def test_settings_that_do_not_change_the_binary_keep_the_cache(
    app: TmpApp, builds: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_app(app, "release", log_dir=tmp_path)
    monkeypatch.setenv("CARGO_TERM_COLOR", "always")
    monkeypatch.setenv("CARGO_BUILD_JOBS", "1")
    monkeypatch.setenv("POLYPERF_UNRELATED", "1")
    assert build_app(app, "release", log_dir=tmp_path).cached and len(builds) == 1


def test_the_variants_own_flags_add_to_the_users(
    app: TmpApp, builds: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUSTFLAGS", "-C link-arg=-fuse-ld=lld")
    build_app(app, "native", log_dir=tmp_path)
    assert builds[-1]["RUSTFLAGS"] == "-C link-arg=-fuse-ld=lld -C target-cpu=native"


def test_a_cargo_config_file_is_part_of_the_fingerprint(app: TmpApp, builds: list, tmp_path: Path) -> None:
    config = tmp_path / "cargo_home" / "config.toml"
    config.parent.mkdir()
    config.write_text('[build]\nrustflags = ["-C", "target-cpu=native"]\n')
    build_app(app, "release", log_dir=tmp_path)
    config.write_text('[build]\nrustflags = ["-C", "opt-level=1"]\n')
    assert not build_app(app, "release", log_dir=tmp_path).cached and len(builds) == 2


def test_a_binary_replaced_since_its_build_is_rebuilt(app: TmpApp, builds: list, tmp_path: Path) -> None:
    first = build_app(app, "release", log_dir=tmp_path)
    first.binary.write_text("built by hand with other flags, a different length")
    assert not build_app(app, "release", log_dir=tmp_path).cached and len(builds) == 2


def test_a_source_change_forces_a_build(app: TmpApp, builds: list, tmp_path: Path) -> None:
    build_app(app, "release", log_dir=tmp_path)
    (app.source_dir / "main.rs").write_text("fn main() { println!(); }\n")
    assert not build_app(app, "release", log_dir=tmp_path).cached


def test_binary_env_keeps_what_changes_a_binary_and_nothing_else() -> None:
    environ = {
        "RUSTFLAGS": "-C target-cpu=native",
        "CARGO_PROFILE_RELEASE_PANIC": "abort",
        "CARGO_INCREMENTAL": "1",
        "CFLAGS": "-O3",
        "TARGET_CC": "clang",
        "GOAMD64": "v3",
        "CARGO_TERM_COLOR": "always",
        "CARGO_REGISTRIES_CRATES_IO_TOKEN": "secret",
        "CARGO_TARGET_DIR": "/tmp/t",
        "CCACHE_DIR": "/tmp/c",
        "HOME": "/root",
        "PATH": "/usr/bin",
    }
    assert list(binary_env(environ)) == [
        "CARGO_INCREMENTAL",
        "CARGO_PROFILE_RELEASE_PANIC",
        "CFLAGS",
        "GOAMD64",
        "RUSTFLAGS",
        "TARGET_CC",
    ]


def test_a_second_build_in_one_target_folder_waits_and_reuses_the_first(
    app: TmpApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two processes on one checkout: the clean build's removal of its target folder never happens under the other
    build, which waits (saying so in one line) and then reuses the binary."""
    import threading
    import time

    runs: list[str] = []
    cut_short: list[str] = []

    def slow_cargo(cmd: list[str], *, log_path: Path, cwd: Path, env: dict[str, str]) -> int:
        runs.append(threading.current_thread().name)
        target = Path(env["CARGO_TARGET_DIR"])
        (target / "deps").mkdir(parents=True, exist_ok=True)
        (target / "deps" / "libserde_json.rlib").write_text(threading.current_thread().name)
        time.sleep(0.4)
        if not (target / "deps" / "libserde_json.rlib").exists():
            cut_short.append("the target folder was removed under this build")
        (target / "release").mkdir(exist_ok=True)
        (target / "release" / "tmp_app").write_text("built")
        return 0

    monkeypatch.setattr(builder.procs, "run", slow_cargo)
    results: dict[str, object] = {}

    def one(name: str) -> None:
        results[name] = build_app(app, "release", log_dir=tmp_path)

    announced: list[str] = []  # the wait is announced like every long step (past pytest's capture in a suite)
    steps.set_sink(announced.append)
    try:
        threads = [threading.Thread(target=one, args=(f"p{i}",), name=f"p{i}") for i in range(2)]
        threads[0].start()
        time.sleep(0.1)
        threads[1].start()
        for thread in threads:
            thread.join(timeout=10)
    finally:
        steps.set_sink(None)
    assert len(runs) == 1 and not cut_short
    assert sorted(r.cached for r in results.values()) == [False, True]
    waiting = [line for line in announced if "waiting for" in line]
    assert len(waiting) == 1 and "tmp_app:release" in waiting[0] and str(app.target_dir("release")) in waiting[0]

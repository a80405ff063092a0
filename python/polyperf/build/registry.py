"""The app registry: every server polyperf builds and measures, its language, how each variant is
built, where the binary lands, how it is started and which verification checks apply.

`polyperf list` prints it; `build`, `server` and `verify` read it. Nothing here runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from polyperf.common.paths import GO_APPS, RUST_APPS

__all__ = ["APPS", "MATRIX_LADDER", "App", "BuildSpec", "get_app", "parse_app_spec"]


@dataclass(frozen=True)
class BuildSpec:
    """How one variant is built: a cargo profile (+ features, + RUSTFLAGS) or a plain `go build`."""

    cargo_profile: str | None = None
    features: tuple[str, ...] = ()
    rustflags: str | None = None
    description: str = ""
    # A target directory of its own, emptied before every real build, so the recorded build time is that of
    # a clean build with these settings (the cost the build-settings experiment reports).
    own_target_dir: bool = False
    # The cargo binary to build when not the app's own (a `counting` variant's `<app>_counting`).
    binary_name: str | None = None

    @property
    def profile_dir(self) -> str:
        # cargo puts the built-in `dev` profile in target/debug, every other profile in target/<name>
        return "debug" if self.cargo_profile == "dev" else str(self.cargo_profile)


@dataclass(frozen=True)
class App:
    name: str
    language: str  # "rust" | "go"
    summary: str
    checks: str  # which verification set applies (see verify.py)
    variants: dict[str, BuildSpec]
    default_variant: str = "release"
    uses_database: bool = False
    default_args: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ("GET /healthz",)

    @property
    def source_dir(self) -> Path:
        return RUST_APPS / self.name if self.language == "rust" else GO_APPS / "cmd" / self.name

    def target_dir(self, variant: str) -> Path:
        """cargo's target directory for a variant: the workspace's, or one of its own."""
        own = self.variants[variant].own_target_dir
        return RUST_APPS / "target" / (f"{self.name}-{variant}" if own else "")

    def binary(self, variant: str) -> Path:
        spec = self.variants[variant]
        if self.language == "rust":
            return self.target_dir(variant) / spec.profile_dir / (spec.binary_name or self.name)
        return GO_APPS / "bin" / self.name


_RUST_RELEASE = {"release": BuildSpec("release", description="cargo --release (the default profile)")}


def _counting(app: str, *features: str, description: str = "") -> BuildSpec:
    """Release with a counting global allocator (`count-allocs`), a binary of its own: allocations per
    request are read from it, never times (the timed binary does not contain the counter)."""
    return BuildSpec(
        "release",
        features=("count-allocs", *features),
        description=description or "release + counting global allocator (allocations per request only)",
        binary_name=f"{app}_counting",
    )


def _rust_release(app: str) -> dict[str, BuildSpec]:
    return {**_RUST_RELEASE, "counting": _counting(app)}


_GO = {"release": BuildSpec(description="go build (Go has no separate release mode)")}
_DEVICES_ENDPOINTS = ("GET /healthz", "GET /api/devices", "POST /api/devices")

# The build-settings ladder: Cargo's default release, then one setting at a time (the profiles in
# rust_apps/Cargo.toml), then the article's profile 'R' with all of them plus strip, then CPU and allocator.
# Each in a target directory of its own, so its recorded time is a clean build.
_MATRIX_VARIANTS = {
    name: BuildSpec(profile, features, rustflags, description, own_target_dir=True)
    for name, profile, features, rustflags, description in [
        ("dev", "dev", (), None, "debug build (the article's 'D')"),
        ("release", "release", (), None, "Cargo's default release: opt-level 3, 16 codegen units, unwinding"),
        ("release-fat-lto", "release-fat-lto", (), None, 'release + lto = "fat"'),
        ("release-cgu1", "release-cgu1", (), None, "release + codegen-units = 1"),
        ("release-abort", "release-abort", (), None, 'release + panic = "abort"'),
        ("release-lto", "release-lto", (), None, "the article's 'R': fat LTO, codegen-units=1, panic=abort, strip"),
        ("native", "native", (), "-C target-cpu=native", "release-lto + target-cpu=native ('ROpt')"),
        (
            "native-mimalloc",
            "native-mimalloc",
            ("mimalloc",),
            "-C target-cpu=native",
            "native + mimalloc global allocator ('ROptMimAlloc')",
        ),
    ]
}
# actix_matrix's build-settings variants in ladder order (the app may have others, e.g. for counting only)
MATRIX_LADDER = tuple(_MATRIX_VARIANTS)

APPS: dict[str, App] = {
    app.name: app
    for app in [
        App(
            "axum_devices",
            "rust",
            "axum on tokio; devices API with a deadpool-postgres pool",
            "devices",
            _rust_release("axum_devices"),
            uses_database=True,
            endpoints=_DEVICES_ENDPOINTS,
        ),
        App(
            "gnet_devices",
            "go",
            "gnet v2 event loop with its own HTTP/1.1 parser; pgx v5 pool",
            "devices",
            _GO,
            uses_database=True,
            endpoints=_DEVICES_ENDPOINTS,
        ),
        App(
            "nethttp_devices",
            "go",
            "Go standard library net/http baseline; pgx v5 pool",
            "devices",
            _GO,
            uses_database=True,
            endpoints=_DEVICES_ENDPOINTS,
        ),
        App(
            "hyper_hello",
            "rust",
            "hyper 1.x hello world; tokio multi-thread or current-thread runtime",
            "hello",
            _rust_release("hyper_hello"),
            endpoints=("GET /healthz", "GET /"),
        ),
        App(
            "actix_matrix",
            "rust",
            "actix-web naive N×N matrix multiplication (build-settings matrix)",
            "matrix",
            {
                **_MATRIX_VARIANTS,
                "counting": _counting("actix_matrix"),
                # mimalloc under the counter (release profile: allocations do not depend on LTO or target-cpu)
                "counting-native-mimalloc": BuildSpec(
                    "release",
                    features=("count-allocs", "mimalloc"),
                    description="release + mimalloc under the counting allocator (allocations per request only)",
                    binary_name="actix_matrix_counting_mimalloc",
                ),
            },
            endpoints=("GET /healthz", "POST /matrix-multiplication"),
        ),
        App(
            "bson_server",
            "rust",
            "deserializes a pre-encoded find reply per request by the chosen path",
            "bson",
            _rust_release("bson_server"),
            endpoints=("GET /healthz", "GET /find?path=clone|document|raw"),
        ),
    ]
}


def parse_app_spec(spec: str) -> tuple[str, str | None]:
    name, _, variant = spec.partition(":")
    return name, variant or None


def get_app(spec: str) -> tuple[App, str]:
    """`name[:variant]` → (app, variant); unknown names and variants raise ValueError listing the choices."""
    name, variant = parse_app_spec(spec)
    app = APPS.get(name)
    if app is None:
        raise ValueError(f"unknown app {name!r}; known apps: {', '.join(APPS)}")
    variant = variant or app.default_variant
    if variant not in app.variants:
        raise ValueError(f"{name} has no variant {variant!r}; variants: {', '.join(app.variants)}")
    return app, variant

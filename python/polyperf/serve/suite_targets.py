"""The servers a load suite measures, named once: its pytest suite and `polyperf ab` (which measures the same
servers built at two revisions) read them from here."""

from __future__ import annotations

from polyperf.serve.fleet import Target

__all__ = ["HTTP_FRAMEWORKS"]

# Anton Putra's devices API (`GET /api/devices`) on gnet, axum and net/http, and the hyper hello world of "Making the
# Tokio scheduler 10x faster" on each tokio runtime
HTTP_FRAMEWORKS = (
    Target("gnet_devices", "/api/devices"),
    Target("axum_devices", "/api/devices"),
    Target("nethttp_devices", "/api/devices"),
    Target("hyper_hello", "/", "multi", ("--runtime", "multi"), {"runtime": "multi"}),
    Target("hyper_hello", "/", "current", ("--runtime", "current"), {"runtime": "current"}),
)

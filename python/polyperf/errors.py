"""Harness exceptions: each names the app, command, port or file, and reads well as one line."""

from __future__ import annotations


class PolyperfError(Exception):
    """Base class; `str(exc)` is the one-line message shown to users."""


class ToolchainMissing(PolyperfError):
    pass


class BuildFailed(PolyperfError):
    pass


class ServerFailed(PolyperfError):
    """A server did not become ready, or died while in use (message carries exit code and log tail)."""


class VerificationFailed(PolyperfError):
    pass


class PostgresFailed(PolyperfError):
    """A throwaway PostgreSQL could not be created, started or restarted (message carries its log tail)."""

"""Fast tests of the harness, the extension and the apps (run by `nox -s tests`, i.e. CI)."""

import signal

# A test session started as a background job inherits SIGINT ignored, and so would every process a test
# starts: the tests that deliver Ctrl-C to a harness would then test nothing. Give SIGINT back its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
    # Builds and tool installs that tests trigger announce themselves past pytest's capture, so a first
    # `nox -s tests` says what it builds while it builds it.
    from polyperf.common import steps
    from polyperf.record.pytest_plugin import live_line_sink

    steps.set_sink(live_line_sink(config))


def pytest_unconfigure(config):
    from polyperf.common import steps

    steps.set_sink(None)

"""Fast tests of the harness, the extension and the apps (run by `nox -s tests`, i.e. CI)."""

import signal

# A test session started as a background job inherits SIGINT ignored, and so would every process a test
# starts: the tests that deliver Ctrl-C to a harness would then test nothing. Give SIGINT back its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

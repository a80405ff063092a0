"""Stage "gate": `polyperf ab`, two revisions measured in one session until the A/B gate decides.

The entry point is `gate.session.run_ab`. The gate owns: `options` (what a session is asked and answers),
`micro` and `worker` (the microbenchmarks' sides: a fresh worker process per side and repeat), `servers` (the
servers' duet), `sequences` (the stored pairs a rerun continues), `bank` (real A/A pairs recorded) and `calibrate`
(sessions replayed on them). Its pure analysis lives in `analyse.ab` and `analyse.ab_replay`; its command line in
`cli.ab`. Nothing is imported here: the worker process (`python -m polyperf.gate.worker`) must start without pandas.
"""

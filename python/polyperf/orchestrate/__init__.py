"""Stage "orchestrate": one experiment's moves, between measuring and recording. It starts the fleet's servers
(serve), drives them with a load generator (load), reads their counters (measure) and hands the finished rows to
the recorder it was given (record): `LoadEnv` for timed load, `count_runs` for the untimed count runs,
`db_runs` for the PostgreSQL inserts."""

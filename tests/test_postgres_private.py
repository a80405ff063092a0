"""The throwaway PostgreSQL takes no connection it did not expect: its own role with its password works, and
no password, a wrong one, another role, another database or the unix socket is refused. Apps get the DSN
through their environment, never their argv."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from polyperf.build.registry import APPS
from polyperf.serve import server as server_module
from polyperf.serve.postgres import ThrowawayPostgres
from polyperf.serve.server import Server


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory):
    with ThrowawayPostgres(tmp_path_factory.mktemp("pg")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _no_stored_passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq would fill in a missing password from these; the refusals must come from the server."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", os.devnull)


def _refused(conninfo: str) -> str:
    with pytest.raises(psycopg.OperationalError) as info:
        psycopg.connect(conninfo, connect_timeout=5).close()
    return str(info.value)


@pytest.mark.slow
def test_the_suites_own_connection_works(pg: ThrowawayPostgres) -> None:
    assert pg.query("SELECT current_user, 6 * 7") == [("polyperf", 42)]
    assert pg.query("SHOW password_encryption") == [("scram-sha-256",)]


@pytest.mark.slow
def test_no_password_or_a_wrong_one_is_refused(pg: ThrowawayPostgres) -> None:
    parts = urlsplit(pg.dsn)
    assert parts.password == pg.password and len(pg.password) >= 32
    without = pg.dsn.replace(f":{pg.password}@", "@", 1)
    assert re.search(r"password", _refused(without))
    wrong = pg.dsn.replace(pg.password, "x" + pg.password[1:], 1)
    assert re.search(r"password authentication failed", _refused(wrong))


@pytest.mark.slow
def test_other_roles_databases_and_the_socket_are_refused(pg: ThrowawayPostgres) -> None:
    """The right password does not open another database; the bootstrap name `postgres` is not a role; the
    unix socket (in the cluster's 0700 folder) has no pg_hba.conf line at all."""
    as_postgres = pg.dsn.replace(f"{pg.user}:", "postgres:", 1)
    assert "no pg_hba.conf entry" in _refused(as_postgres)
    other_db = pg.dsn.replace("/postgres?", "/template1?", 1)
    assert "no pg_hba.conf entry" in _refused(other_db)
    assert pg.base is not None
    socket = f"host={pg.base} port={pg.port} user={pg.user} password={pg.password} dbname=postgres"
    assert "no pg_hba.conf entry" in _refused(socket)
    hba = (pg.base / "data" / "pg_hba.conf").read_text()
    assert "trust" not in hba and "local" not in hba.split("\n", 1)[1]


@pytest.mark.slow
def test_an_added_role_gets_a_password_of_its_own(pg: ThrowawayPostgres) -> None:
    dsn = pg.add_role("pp_private_test")
    password = urlsplit(dsn).password
    assert password and password != pg.password
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("pp_private_test",)
    assert "password" in _refused(dsn.replace(f":{password}@", "@", 1))


def test_apps_get_the_database_url_in_their_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not on the command line: /proc/PID/cmdline is readable by every local user."""
    name = next(app for app, spec in APPS.items() if spec.uses_database)
    binary = tmp_path / "app"
    binary.write_text("")
    monkeypatch.setattr(type(APPS[name]), "binary", lambda _self, _variant: binary)
    seen: dict = {}

    def spawn(cmd: list[str], **kwargs: object) -> subprocess.Popen:
        seen.update(cmd=cmd, env=kwargs["env"])
        raise OSError("not started")

    monkeypatch.setattr(server_module.procs, "spawn", spawn)
    url = "postgresql://polyperf:s3cret@127.0.0.1:5/postgres"
    with pytest.raises(OSError, match="not started"):
        Server(name, log_dir=tmp_path, database_url=url, env={"A": "1"}).start()
    assert not any("s3cret" in arg for arg in seen["cmd"])
    assert seen["env"]["DATABASE_URL"] == url and seen["env"]["A"] == "1"


def test_apps_get_a_role_that_owns_only_its_own_tables(pg: ThrowawayPostgres) -> None:
    pg.query("CREATE TABLE IF NOT EXISTS harness_only (x int)")
    app = pg.app_dsn()
    assert app == pg.app_dsn() and urlsplit(app).username != pg.user
    with psycopg.connect(app, autocommit=True) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)
        conn.execute("CREATE TABLE app_devices (id int)")
        conn.execute("INSERT INTO app_devices VALUES (1)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM harness_only")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE ROLE intruder SUPERUSER")
    owner = pg.query("SELECT tableowner FROM pg_tables WHERE tablename = 'app_devices'")
    assert owner == [(urlsplit(app).username,)]


def test_the_clusters_passwords_never_show_in_a_repr(pg: ThrowawayPostgres) -> None:
    from polyperf.common.redact import redact
    from polyperf.orchestrate.db_runs import Database

    for text in (repr(pg), repr(pg.dsn), repr(pg.app_dsn()), repr(Database(pg.dsn, None, [], True, pg))):
        assert pg.password not in text and urlsplit(pg.app_dsn()).password not in text
    assert pg.password not in redact(f"connection failed: {pg.dsn!s}")

"""One owner per run folder (tests/run_owner_check.py, also run by `nox -s lint`): the package holds no breach, and
each kind of breach planted in a copy is found."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("run_owner_check", Path(__file__).with_name("run_owner_check.py"))
assert _SPEC is not None and _SPEC.loader is not None
check_mod = importlib.util.module_from_spec(_SPEC)
sys.modules["run_owner_check"] = check_mod
_SPEC.loader.exec_module(check_mod)


def test_nothing_outside_record_makes_writes_finalizes_or_points_a_run_folder():
    assert check_mod.check() == []
    assert check_mod.main([]) == 0


@pytest.mark.parametrize(
    "code, says",
    [
        ("from polyperf.record.run_dir import new_run_dir\n", "imports new_run_dir"),
        ("from polyperf.record.env import write_env as w\n", "imports write_env"),
        ("from polyperf.record import run_dir\nrun_dir.finalize_run(x)\n", "calls .finalize_run"),
        ("import polyperf.record.run_dir as r\nr.point_latest(x)\n", "calls .point_latest"),
        ("(run_dir / 'env.json').write_text('{}')\n", "writes a run folder's env.json"),
        ("from polyperf.record.run_dir import ENV\nwrite_text_atomic(run_dir / ENV, '{}')\n", "run folder's ENV"),
        ("import os\nos.replace(tmp, out / 'latest')\n", "run folder's latest"),
        ("(out / 'latest').symlink_to(run_dir)\n", "run folder's latest"),
        ("open(run_dir / 'env.json', 'w')\n", "run folder's env.json"),
    ],
)
def test_each_kind_of_breach_is_found(tmp_path, code, says, capsys):
    package = tmp_path / "polyperf"
    (package / "record").mkdir(parents=True)
    (package / "record" / "run_dir.py").write_text("def new_run_dir(): ...\n")  # the owner may
    (package / "report").mkdir()
    (package / "report" / "x.py").write_text(code)
    (package / "report" / "fine.py").write_text("env = json.loads((run_dir / 'env.json').read_text())\n")
    found = check_mod.check(package)
    assert len(found) == 1 and says in found[0] and "report/x.py:" in found[0], found
    assert check_mod.main([str(package)]) == 1
    assert says in capsys.readouterr().err

"""`interlock runs`, `interlock show` and `--resume` with a damaged record in the work
directory: a receipt.json of the wrong shape, a params.json with ``"withheld": 5``. The other
runs are still listed, the bad file is named, nothing ends in a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from core_pipelines import cli_demo

from interlock.core.cli.main import EXIT_FAILED, main

GREET = f"{Path(cli_demo.__file__).resolve()}:greet"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def workdir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    for run_id in ("good-1", "bad-shape", "good-2"):
        rc, _, err = _cli(capsys, "run", GREET, "-p", "name=ada", "--workdir", str(tmp_path), "--run-id", run_id)
        assert rc == 0, err
    return tmp_path


@pytest.mark.parametrize("receipt", [
    {"pipeline": ["x"], "steps": 5},
    {"pipeline": "greet", "started": "yesterday", "ended": {}, "totals": 3, "status": 7},
    {"pipeline": "greet", "steps": [{"node": "repeat", "attempts": [1]}]},
    ["not", "an", "object"],
], ids=["pipeline-list", "wrong-types", "bad-attempt", "list"])
def test_a_receipt_of_the_wrong_shape_is_named_and_the_other_runs_are_listed(
    workdir: Path, capsys: pytest.CaptureFixture[str], receipt: object,
) -> None:
    bad = workdir / "runs" / "bad-shape" / "state" / "receipt.json"
    bad.write_text(json.dumps(receipt))
    rc, out, err = _cli(capsys, "runs", "--workdir", str(workdir))
    assert rc == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip() and ":" not in line.split()[0]}
    assert set(rows) == {"good-1", "bad-shape", "good-2"}
    assert "succeeded" in rows["good-1"] and "succeeded" in rows["good-2"] and "unreadable" in rows["bad-shape"]
    assert f"bad-shape: {bad} is not a receipt interlock wrote" in out

    rc, out, err = _cli(capsys, "show", "good-1", "--workdir", str(workdir))
    assert rc == 0 and out.strip().endswith("report.html"), err
    rc, out, err = _cli(capsys, "show", "bad-shape", "--workdir", str(workdir))
    assert rc == EXIT_FAILED
    assert f"interlock: error [RECORD]: {bad} is not a receipt interlock wrote" in err
    assert "Traceback" not in err


def test_a_corrupt_params_file_is_named_when_a_resume_needs_it(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = workdir / "runs" / "good-1" / "state" / "params.json"
    data = json.loads(params.read_text())
    params.write_text(json.dumps({**data, "withheld": 5}))
    rc, out, err = _cli(capsys, "runs", "--workdir", str(workdir))
    assert rc == 0 and "good-1" in out, err
    (workdir / "runs" / "good-1" / "state" / "receipt.json").unlink()  # show draws from fragments and params
    rc, out, err = _cli(capsys, "show", "good-1", "--workdir", str(workdir))
    assert rc == 0, err
    rc, out, err = _cli(capsys, "run", GREET, "--workdir", str(workdir), "--resume", "good-1")
    assert rc == EXIT_FAILED
    assert f"interlock: error [RECORD]: {params} is not the parameters interlock recorded for run good-1" in err
    assert "Traceback" not in err
    # Every parameter given again: nothing is needed from the record.
    rc, out, err = _cli(capsys, "run", GREET, "-p", "name=ada", "-p", "times=2", "-p", "loud=false",
                        "--workdir", str(workdir), "--resume", "good-1")
    assert rc == 0, err

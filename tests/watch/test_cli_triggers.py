"""``interlock watch --once``, ``interlock triggers check`` (the why, starting nothing) and
``interlock triggers apply`` on a backend with nothing to apply; a damaged state file."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from interlock.core.base.errors import WatchError
from interlock.core.cli.main import EXIT_FAILED, EXIT_USAGE, main
from interlock.core.dsl.loader import load_pipeline
from interlock.core.watch.watcher import Watcher

PIPELINE = '''
import interlock as il
from watch_pipelines import note

@il.pipeline(name="cli-watch", triggers=[
    il.OnData({inbox!r}, pattern="*.parquet", uri_input="snapshot", name="landed"),
    il.Cron("0 3 * * *", tz="Europe/Berlin", time_input="at", name="nightly"),
])
def cli_watch(at: str = "", snapshot: str = "none", tag: str = "cli"):
    return note(at=at, snapshot=snapshot)
'''


@pytest.fixture
def setup(tmp_path: Path) -> tuple[str, Path, Path]:
    inbox, work = tmp_path / "inbox", tmp_path / "work"
    inbox.mkdir()
    (inbox / "first.parquet").write_bytes(b"1")
    file = tmp_path / "cli_watch.py"
    file.write_text(PIPELINE.format(inbox=str(inbox)))
    return str(file), inbox, work


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _runs(work: Path) -> list[str]:
    return sorted(p.name for p in (work / "runs").iterdir()) if (work / "runs").is_dir() else []


def test_triggers_check_says_what_would_start_and_why_without_starting(setup, capsys) -> None:  # type: ignore[no-untyped-def]
    file, inbox, work = setup
    rc, out, err = _cli(capsys, "watch", file, "--once", "--workdir", str(work), "-p", "tag=nightly")
    assert rc == 0, err
    assert "0 run(s) started" in err and _runs(work) == []  # the first look: what is there counts as seen
    (inbox / "second.parquet").write_bytes(b"2")
    state = (work / "watch" / "cli-watch.json").read_text()

    at = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    rc, out, err = _cli(capsys, "triggers", "check", file, "--workdir", str(work), "--at", at)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == f"landed (data): would start 1 run(s): new object {(inbox / 'second.parquet').resolve()}"
    assert lines[1].startswith("nightly (cron): would start 1 run(s): due at ") and lines[1].endswith("T03:00:00+01:00")
    assert f"  landed: data trigger landed: {(inbox / 'second.parquet').resolve()}; parameters snapshot=" in out
    assert _runs(work) == [] and (work / "watch" / "cli-watch.json").read_text() == state  # nothing started or written

    rc, out, err = _cli(capsys, "watch", file, "--once", "--workdir", str(work))
    assert rc == 0, err
    assert "interlock watch: starting run " in out and "data trigger landed: " in out and len(_runs(work)) == 1
    rc, out, _ = _cli(capsys, "triggers", "check", file, "--workdir", str(work))
    assert out.splitlines()[0] == "landed (data): would not start: nothing new under " + str(inbox) + " (2 object(s) seen)"
    assert out.splitlines()[1].startswith("nightly (cron): would not start: not due; next at ")


def test_a_damaged_state_file_is_an_error_naming_it(setup, capsys) -> None:  # type: ignore[no-untyped-def]
    file, _, work = setup
    path = work / "watch" / "cli-watch.json"
    path.parent.mkdir(parents=True)
    for damaged in ('{"state_version": 1, "pipeline": "cli-watch", "trig', json.dumps({"state_version": 1,
                    "pipeline": "cli-watch", "triggers": {"landed": {"seen": ["not", "a", "map"]}}, "runs": []})):
        path.write_text(damaged)
        with pytest.raises(WatchError, match=rf"the watch state {path} is (not JSON|damaged: seen is not a map)") as exc:
            Watcher(load_pipeline(file), workdir=work).evaluate()
        assert "move it away to start afresh" in str(exc.value)
        rc, _, err = _cli(capsys, "triggers", "check", file, "--workdir", str(work))
        assert rc == EXIT_FAILED and f"error [WATCH]: the watch state {path}" in err
    assert _runs(work) == []


def test_triggers_apply_refuses_a_backend_whose_files_carry_the_triggers(setup, capsys) -> None:  # type: ignore[no-untyped-def]
    file, _, _ = setup
    rc, _, err = _cli(capsys, "triggers", "apply", file, "--backend", "argo")
    assert rc == EXIT_USAGE
    assert "backend 'argo' keeps no triggers on the platform to apply" in err
    assert f"interlock compile {file} --backend argo" in err


def test_watching_a_pipeline_without_triggers_is_refused(capsys) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = _cli(capsys, "watch", "watch_pipelines:measure_only", "--once")
    assert rc == EXIT_FAILED and "has no triggers to watch" in err


class _RecordingKfp:
    """KFP's compiler with the TriggerApplier seam, registered in-process: what ``triggers
    apply`` hands a backend whose triggers live on the platform (the render work gives KFP its
    own, against a server speaking KFP's REST API)."""

    name = "kfp-apply"

    def __init__(self) -> None:
        from interlock.adapters.kfp.backend import KfpBackend

        self._kfp = KfpBackend()

    def capabilities(self):  # type: ignore[no-untyped-def]
        return self._kfp.capabilities()

    def compile(self, spec, out, options):  # type: ignore[no-untyped-def]
        return self._kfp.compile(spec, out, options)

    def apply_triggers(self, spec, compiled, options):  # type: ignore[no-untyped-def]
        files = sorted(p.name for p in Path(compiled).iterdir())
        return [f"{t.label(i)}: would create a recurring run from {files} (image {options.image})"
                for i, t in enumerate(spec.triggers)]


def test_triggers_apply_compiles_then_hands_the_backend_the_compiled_folder(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from interlock.core.backend.protocol import register_backend
    from interlock.core.base import plugins

    register_backend("kfp-apply", _RecordingKfp)
    try:
        out = tmp_path / "compiled"
        # KFP's recurring runs read their cron in UTC: the Berlin nightly is refused by the compile.
        rc, printed, err = _cli(capsys, "triggers", "apply", "watch_pipelines:nightly", "--backend", "kfp-apply",
                                "--out", str(out), "--option", "image=ghcr.io/acme/train:v7")
        assert rc != 0 and "has no time zone for tz='Europe/Berlin'" in err and not printed
        rc, printed, err = _cli(capsys, "triggers", "apply", "watch_pipelines:sixhourly", "--backend", "kfp-apply",
                                "--out", str(out), "--option", "image=ghcr.io/acme/train:v7")
        assert rc == 0, err
        compiled = sorted(p.name for p in out.iterdir())
        assert compiled and printed.splitlines() == [
            f"every-0: would create a recurring run from {compiled} (image ghcr.io/acme/train:v7)"]
        rc, again, err = _cli(capsys, "triggers", "apply", "watch_pipelines:sixhourly", "--backend", "kfp-apply",
                              "--compiled", str(out), "--option", "image=ghcr.io/acme/train:v7")
        assert rc == 0 and again == printed  # an existing compile output, read as it is
    finally:
        plugins.registry(plugins.BACKENDS).pop("kfp-apply", None)

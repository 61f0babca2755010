"""Promotion is compare-and-set, and a SQLite store survives concurrent first use.

Real MLflow 3 on SQLite under tmp_path; the races are between real processes
(mlflow_race_worker.py), released together by a file barrier once each has imported MLflow.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from interlock.core.base.status import FailureKind
from interlock.core.failure.rules import classify
from interlock.plugins.mlflow import (
    CHAMPION,
    PREVIOUS_CHAMPION,
    ChampionMoved,
    MlflowRegistry,
    RegistryError,
)

WORKER = Path(__file__).with_name("mlflow_race_worker.py")


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.delenv("MLFLOW_REGISTRY_URI", raising=False)
        yield dict(os.environ)


@pytest.fixture(scope="module")
def store(env, tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def reg(store) -> MlflowRegistry:
    return MlflowRegistry(tracking_dir=store)


def _versions(reg: MlflowRegistry, tmp_path: Path, name: str, n: int) -> list[str]:
    run_id = reg.log_run("promotion")
    out = []
    for i in range(n):
        d = tmp_path / f"{name}-{i}"
        d.mkdir()
        (d / "weights.json").write_text(json.dumps({"i": i}))
        out.append(reg.register(name, d, run_id=run_id))
    return out


def _race(env: dict[str, str], tmp_path: Path, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Start one worker per spec, release them together, return their JSON answers."""
    go = tmp_path / "go"
    procs = []
    for i, spec in enumerate(specs):
        spec = {**spec, "ready": str(tmp_path / f"ready-{i}"), "go": str(go)}
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), json.dumps(spec)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.monotonic() + 180
    while not all((tmp_path / f"ready-{i}").exists() for i in range(len(specs))):
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        assert time.monotonic() < deadline, "workers never got ready"
        time.sleep(0.05)
    go.touch()
    answers = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        lines = [x for x in out.splitlines() if x.startswith("{")]
        assert lines, f"worker said nothing (rc {p.returncode}):\n{err[-3000:]}"
        answers.append(json.loads(lines[-1]))
    return answers


# -- compare-and-set, in one process ---------------------------------------------------------------
def test_promote_refuses_when_the_champion_moved_since_the_gate(reg, tmp_path):
    name = "cas-model"
    v1, v2, v3 = _versions(reg, tmp_path, name, 3)
    assert reg.promote(name, v1, expected_champion=None) is None  # first ever: no champion
    # The gate of another run compared v2 against "no champion" (it evaluated before v1 won).
    with pytest.raises(ChampionMoved) as info:
        reg.promote(name, v2, expected_champion="none")
    err = info.value
    assert isinstance(err, RegistryError)
    assert (err.model_name, err.version, err.expected, err.found) == (name, v2, None, v1)
    text = str(err)
    assert f"not promoting 'cas-model' version {v2}" in text
    assert "compared it against no champion, but the champion is now version 1" in text
    assert "re-run the evaluation" in text
    assert reg.aliases(name) == {CHAMPION: v1}  # nothing moved
    assert "champion is now version 1" in reg.describe(name, v2).tags["interlock.promotion_refused"]
    # Not retried by the shim: a retry of the promotion fails the same way.
    assert classify(err).kind is FailureKind.FATAL
    # It survives the trip from a step's process back to the runner.
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), str(copy), copy.found, copy.hint) == (ChampionMoved, text, v1, err.hint)

    # Compared against the champion that still holds: promoted, as before.
    assert reg.promote(name, v3, expected_champion=v1) == v1
    assert reg.aliases(name) == {CHAMPION: v3, PREVIOUS_CHAMPION: v1}
    with pytest.raises(ChampionMoved, match=f"compared it against version {v1}, but the champion is now version {v3}"):
        reg.promote(name, v2, expected_champion=int(v1))
    # Re-promoting the champion is a no-op whatever the gate saw (a retried register step).
    assert reg.promote(name, v3, expected_champion=v1) == v3
    # Without expected_champion: a manual, unconditional move (the old behaviour).
    assert reg.promote(name, v2) == v3


def test_register_refuses_before_creating_a_version(reg, tmp_path):
    name = "cas-register"
    (v1,) = _versions(reg, tmp_path, name, 1)
    reg.promote(name, v1)
    model = tmp_path / "late"
    model.mkdir()
    (model / "w").write_text("x")
    with pytest.raises(ChampionMoved, match="not registering a new version of 'cas-register'") as info:
        reg.register(name, model, run_id=reg.log_run("promotion"), expected_champion=None)
    assert "nothing was registered" in str(info.value)
    assert [mv.version for mv in reg.client.search_model_versions(f"name='{name}'")] == [1]
    assert reg.register(name, model, run_id=reg.log_run("promotion"), expected_champion=v1) == "2"


# -- real processes ----------------------------------------------------------------------------------
def test_two_processes_racing_to_promote_one_wins_one_is_refused(env, reg, tmp_path):
    """Both gates compared against v1; without the lock both would pass the check (each
    read is stretched to 0.5 s) and the second move would replace the first silently."""
    name = "race-model"
    v1, v2, v3 = _versions(reg, tmp_path, name, 3)
    reg.promote(name, v1)
    spec = {"uri": reg.tracking_uri, "action": "promote", "model": name, "expected": v1, "slow_s": 0.5}
    answers = _race(env, tmp_path, [{**spec, "version": v2}, {**spec, "version": v3}])

    won = [v for v, a in zip((v2, v3), answers, strict=True) if a["ok"]]
    lost = [(v, a) for v, a in zip((v2, v3), answers, strict=True) if not a["ok"]]
    assert len(won) == 1 and len(lost) == 1, answers
    (loser, answer), winner = lost[0], won[0]
    assert answer["error"] == "ChampionMoved"
    assert f"not promoting 'race-model' version {loser}" in answer["message"]
    assert f"compared it against version {v1}, but the champion is now version {winner}" in answer["message"]
    assert reg.aliases(name) == {CHAMPION: winner, PREVIOUS_CHAMPION: v1}
    assert "interlock.promotion_refused" in reg.describe(name, loser).tags


def test_without_a_lock_the_recheck_reports_a_lost_race(reg, tmp_path, monkeypatch):
    """A tracking server has no lock: both checks pass, both move the alias, and the
    re-read after the move tells the one that was overtaken (never both 'won').

    The worst interleaving, forced step by step with two threads (two processes on one
    SQLite file without the lock would also trip over SQLite's own write lock, which a
    tracking server does not have): both read champion v1, "a" moves it, "b" moves it,
    then "a" re-reads."""
    import dataclasses
    import threading

    from mlflow import MlflowClient

    name = "race-unlocked"
    v1, v2, v3 = _versions(reg, tmp_path, name, 3)
    reg.promote(name, v1)
    both_read, a_moved, b_moved = threading.Barrier(2, timeout=30), threading.Event(), threading.Event()
    reads: dict[str, int] = {"a": 0, "b": 0}
    # Our own alias reads (MLflow's client calls get_registered_model internally too).
    read, move = MlflowRegistry.aliases, MlflowClient.set_registered_model_alias

    def scripted_read(self, *args, **kwargs):
        who = threading.current_thread().name
        reads[who] += 1
        if who == "a" and reads[who] == 2:  # a's re-check: only after b moved the alias
            assert b_moved.wait(30)
        out = read(self, *args, **kwargs)
        if reads[who] == 1:
            both_read.wait()
        return out

    def scripted_move(self, model, alias, version):
        who = threading.current_thread().name
        if who == "b":
            assert a_moved.wait(30)
        move(self, model, alias, version)
        if alias == CHAMPION:
            (a_moved if who == "a" else b_moved).set()

    monkeypatch.setattr(MlflowRegistry, "aliases", scripted_read)
    monkeypatch.setattr(MlflowClient, "set_registered_model_alias", scripted_move)
    answers: dict[str, Any] = {}

    def promote(who: str, version: str) -> None:
        mine = MlflowRegistry(tracking_uri=reg.tracking_uri)
        mine.store = dataclasses.replace(mine.store, lock_path=None)  # as on a tracking server
        assert not mine.lock.real
        try:
            answers[who] = mine.promote(name, version, expected_champion=v1)
        except Exception as exc:
            answers[who] = exc

    threads = [threading.Thread(target=promote, args=(w, v), name=w) for w, v in (("a", v2), ("b", v3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert answers["b"] == v1, answers  # b moved last: it replaced v1 as far as it can tell
    err = answers["a"]
    assert isinstance(err, ChampionMoved) and err.overtaken, answers
    assert f"'race-unlocked' version {v2} was made champion (it was compared against version {v1})" in str(err)
    assert f"a concurrent promotion replaced it at once: the champion is now version {v3}" in str(err)
    monkeypatch.undo()
    assert reg.champion(name) == v3


def test_two_first_runs_on_a_fresh_store_both_succeed(env, tmp_path):
    """MLflow migrates a fresh SQLite store on first use with no lock of its own; two
    processes doing it at once crashed one ("duplicate column name")."""
    for trial in range(2):
        base = tmp_path / f"t{trial}"
        base.mkdir()
        uri = f"sqlite:///{base / 'store' / 'mlflow.db'}"
        (base / "store").mkdir()
        spec = {"uri": uri, "action": "open", "model": "fresh"}
        answers = _race(env, base, [spec, spec])
        assert all(a["ok"] for a in answers), answers
        assert [a["champion"] for a in answers] == [None, None]
        reg = MlflowRegistry(tracking_uri=uri)
        assert len(reg.client.search_runs([reg.experiment_id("race-open")])) == 2
        assert (base / "store" / "mlflow.db.lock").exists()


def test_a_held_store_lock_times_out_naming_the_lock_file(tmp_path):
    import fcntl

    from interlock.plugins.mlflow import MlflowError
    from interlock.plugins.mlflow.lock import StoreLock

    path = tmp_path / "mlflow.db.lock"
    lock = StoreLock.at(path)
    with lock.hold("outer"), lock.hold("nested in the same thread"):  # re-entrant
        pass
    with open(path, "a") as other:  # another open file: as another process would hold it
        fcntl.flock(other, fcntl.LOCK_EX)
        with pytest.raises(MlflowError, match="another process held the store's lock") as info:
            with lock.hold("promoting 'm' version 2", timeout=0.2):
                pass
        assert str(path) in str(info.value) and "promoting 'm' version 2" in str(info.value)
        assert info.value.retryable
        fcntl.flock(other, fcntl.LOCK_UN)
    with lock.hold("after release", timeout=1):
        pass

"""The spec a run records (spec.json): masked with this run's secrets, even when the same spec
object was recorded before in this process (the encoded text is kept between runs)."""

from __future__ import annotations

import json
from pathlib import Path

import interlock as il
from interlock.core.dsl.pipeline import spec as spec_of
from interlock.core.record.run_data import SPEC_FILE, load_spec, record_spec


@il.step
def greet(note: str, api_token: str) -> str:
    return note + api_token


@il.pipeline(name="recorded-spec")
def noted(note: str = "open-sesame-42", api_token: str = "x"):
    return greet(note=note, api_token=api_token)


def test_a_rerun_with_another_secret_masks_it_in_the_recorded_spec(tmp_path: Path) -> None:
    spec = spec_of(noted)
    first = record_spec(tmp_path / "a", spec, {"api_token": "not-in-the-spec"})
    assert "open-sesame-42" in first.read_text()  # not a secret in this run
    # The same spec object, recorded again: this run's token is text the spec holds.
    second = record_spec(tmp_path / "b", spec, {"api_token": "open-sesame-42"})
    assert "open-sesame-42" not in second.read_text()
    third = record_spec(tmp_path / "c", spec, {"api_token": "not-in-the-spec"})
    assert third.read_text() == first.read_text()
    assert third.name == SPEC_FILE


def test_the_recorded_spec_reads_back_as_the_spec(tmp_path: Path) -> None:
    spec = spec_of(noted)
    for run in ("a", "b"):  # the second from the text kept in this process
        path = record_spec(tmp_path / run, spec)
        assert json.loads(path.read_text()) == json.loads(json.dumps(spec.to_json(), default=str))
        assert load_spec(tmp_path / run) == spec

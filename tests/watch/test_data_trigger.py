"""Data triggers: a new object under a watched prefix (a local folder; an S3 prefix on moto in
server mode) starts one run with its URI as the parameter; a restarted watcher starts no second
run; a rewritten object starts one more; a run still in progress is not started twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import watch_pipelines as wp

import interlock as il
from interlock.core.run.env import run_dir_under
from interlock.core.run.state import lock_run
from interlock.core.watch.listing import Listed
from interlock.core.watch.watcher import Watcher


def _watcher(pipeline, workdir: Path, clock, lines: list[str] | None = None) -> Watcher:  # type: ignore[no-untyped-def]
    return Watcher(pipeline, "local", workdir=workdir, clock=clock, sleep=clock.sleep,
                   out=(lines.append if lines is not None else lambda _: None))


def _land(folder: Path, name: str, content: bytes = b"rows") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(content)
    return path


def test_a_new_object_starts_one_run_with_its_uri_and_a_restart_starts_no_second(tmp_path, clock) -> None:
    inbox, work = tmp_path / "inbox", tmp_path / "work"
    _land(inbox, "2026-11-01.parquet")  # already there when watching starts: counted as seen
    pipeline = wp.on_data(str(inbox))
    first = _watcher(pipeline, work, clock).evaluate()
    assert first.started == [] and "1 object(s) already there count as seen" in first.decision.verdicts[0].why

    new = _land(inbox, "2026-12-01.parquet")
    _land(inbox, ".2026-12-02.parquet.tmp")  # a writer's temporary: never a run
    _land(inbox, "notes.txt")  # not the pattern
    clock.advance(minutes=1)
    lines: list[str] = []
    started = _watcher(pipeline, work, clock, lines).evaluate().started
    assert [s.start.params for s in started] == [{"snapshot": str(new.resolve())}]
    assert started[0].status == "succeeded"
    receipt = json.loads((work / "runs" / started[0].run_id / "state" / "receipt.json").read_text())
    assert receipt["parameters"]["snapshot"] == str(new.resolve())
    assert receipt["triggered_by"]["kind"] == "data" and receipt["triggered_by"]["uri"] == str(new.resolve())
    assert f"data trigger landed: {new.resolve()}" in lines[0]

    clock.advance(minutes=5)
    restarted = _watcher(pipeline, work, clock)  # a new watcher on the same state file
    assert restarted.evaluate().started == []
    assert "nothing new" in restarted.check().verdicts[0].why

    clock.advance(minutes=5)
    new.write_bytes(b"rows, rewritten")  # a new version of the same object
    again = restarted.evaluate().started
    assert [s.start.params["snapshot"] for s in again] == [str(new.resolve())]
    state = json.loads((work / "watch" / "landed.json").read_text())
    assert [r["run_id"] for r in state["runs"]] == [started[0].run_id, again[0].run_id]


def test_a_run_in_progress_is_not_started_twice(tmp_path, clock) -> None:
    inbox, work = tmp_path / "inbox", tmp_path / "work"
    pipeline = wp.on_data(str(inbox))
    watcher = _watcher(pipeline, work, clock)
    watcher.evaluate()
    _land(inbox, "a.parquet")
    clock.advance(minutes=1)
    [run] = watcher.evaluate().started
    _land(inbox, "b.parquet")
    clock.advance(minutes=1)
    # The first run's lock is held (as while it runs, by another watcher): max_concurrent=1 waits.
    with lock_run(run_dir_under(work, run.run_id), run.run_id):
        held = watcher.evaluate()
    assert held.started == []
    assert f"1 of its runs still in progress ({run.run_id}" in held.decision.verdicts[0].why
    clock.advance(minutes=1)
    assert [Path(s.start.params["snapshot"]).name for s in watcher.evaluate().started] == ["b.parquet"]


# --- the same on S3, through the object lister plugin, against moto in server mode ----------


@pytest.fixture
def bucket(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    import boto3

    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("INTERLOCK_S3_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "watch-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "watch-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = boto3.session.Session().client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    name = f"watch-{tmp_path.name[-12:].lower().replace('_', '-')}"
    client.create_bucket(Bucket=name)
    return client, name


def test_a_new_s3_object_starts_one_run_and_a_new_etag_one_more(tmp_path, clock, bucket) -> None:
    client, name = bucket
    client.put_object(Bucket=name, Key="snapshots/old.parquet", Body=b"old")
    client.put_object(Bucket=name, Key="elsewhere/x.parquet", Body=b"not watched")
    pipeline = wp.on_data(f"s3://{name}/snapshots/")
    work = tmp_path / "work"
    assert _watcher(pipeline, work, clock).evaluate().started == []

    client.put_object(Bucket=name, Key="snapshots/new.parquet", Body=b"new")
    clock.advance(minutes=1)
    started = _watcher(pipeline, work, clock).evaluate().started
    assert [s.start.params["snapshot"] for s in started] == [f"s3://{name}/snapshots/new.parquet"]
    clock.advance(minutes=1)
    assert _watcher(pipeline, work, clock).evaluate().started == []  # restarted: nothing new
    client.put_object(Bucket=name, Key="snapshots/new.parquet", Body=b"new, corrected")
    clock.advance(minutes=1)
    assert len(_watcher(pipeline, work, clock).evaluate().started) == 1


def test_an_s3_prefix_that_cannot_be_listed_names_the_location(tmp_path, clock, bucket) -> None:
    from interlock.core.base.errors import WatchError

    watcher = _watcher(wp.on_data("s3://no-such-bucket-here/snapshots/"), tmp_path / "work", clock)
    with pytest.raises(WatchError, match=r"s3://no-such-bucket-here/snapshots/.*NoSuchBucket"):
        watcher.evaluate()


def test_a_location_that_fails_is_reported_and_tried_again_at_each_poll(tmp_path, clock) -> None:
    lines: list[str] = []
    watcher = _watcher(wp.on_data("nosuch://bucket/snapshots/"), tmp_path / "work", clock, lines)
    assert watcher.watch(until=clock.now.replace(minute=3)) == []
    assert len(lines) == 4  # 12:00, 12:01, 12:02, 12:03: once a poll ("1m"), never in a busy loop
    assert all("no object lister for nosuch:// URIs" in line and "trying again at the next poll" in line for line in lines)


class _HttpsLister:
    """An object lister for https:// registered in-process, as a plugin would be by entry point."""

    def list(self, uri: str, pattern: str) -> list[Listed]:
        return [Listed("https://reader:hunter2-pass@data.example/snapshots/s1.parquet", "v1")]


def test_a_password_in_a_data_uri_stays_out_of_the_console_and_the_state(tmp_path, clock) -> None:
    from interlock.core.base import plugins

    plugins.register(plugins.OBJECT_LISTERS, "https", _HttpsLister)
    try:
        lines: list[str] = []
        trig = il.OnData("https://data.example/snapshots/", uri_input="snapshot", catch_up=True, name="landed")
        pipeline = il.pipeline(name="https-landed", triggers=[trig])(wp.landed_body)
        [run] = _watcher(pipeline, tmp_path / "work", clock, lines).evaluate().started
    finally:
        plugins.registry(plugins.OBJECT_LISTERS).pop("https", None)
    assert run.start.params["snapshot"].startswith("https://reader:hunter2-pass@")  # the run itself gets the real URI
    for text in (*lines, (tmp_path / "work" / "watch" / "https-landed.json").read_text(),
                 (tmp_path / "work" / "runs" / run.run_id / "state" / "receipt.json").read_text()):
        assert "hunter2-pass" not in text


def test_watching_on_a_backend_that_cannot_run_is_refused_at_once(tmp_path, clock) -> None:
    from interlock.core.base.errors import CapabilityError

    with pytest.raises(CapabilityError, match="argo"):
        _watcher_on(wp.nightly, "argo", tmp_path)


def _watcher_on(pipeline, backend: str, workdir: Path) -> Watcher:  # type: ignore[no-untyped-def]
    return Watcher(pipeline, backend, workdir=workdir)

"""The run report: written next to the receipt at the end of a run, and by `interlock show
RUN_ID`; the graph by outcome, the timeline of attempts (retries, backoff waits, cache hits),
training curves, cost and the receipt's facts."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from core_pipelines import reported

import interlock as il
from interlock.core.cli.main import EXIT_USAGE, main
from interlock.core.record.run_data import SPEC_FILE
from interlock.core.report import report_html

FILE = str(Path(reported.__file__).resolve())


def _rows(html: str) -> dict[str, str]:
    """Timeline rows: node -> status."""
    return dict(re.findall(r'class="row" data-node="([^"]+)" data-status="([^"]+)"', html))


def _row(html: str, node: str) -> str:
    return html.split(f'class="row" data-node="{node}"', 1)[1].split("</g>", 1)[0]


def _graph_status(html: str) -> dict[str, str]:
    return dict(re.findall(r'class="node" data-node="([^"]+)" data-kind="\w+" data-status="([^"]+)"', html))


def test_a_run_writes_its_report_next_to_the_receipt(tmp_path: Path) -> None:
    r = il.run(reported.reported, workdir=tmp_path, run_id="first")
    report = Path(r.receipt_path).with_name("report.html")
    html = report.read_text()
    assert (report.parent / SPEC_FILE).is_file()  # recorded when the run started
    assert _graph_status(html) == {"ingest": "succeeded", "flaky": "succeeded", "train": "succeeded",
                                   "promote": "skipped", "gate:gate-1": "not-taken"}
    assert _rows(html) == {"ingest": "succeeded", "flaky": "succeeded", "train": "succeeded", "promote": "skipped"}
    flaky = _row(html, "flaky")  # a TRANSIENT failure, retried at once
    assert flaky.count('class="attempt attempt-failed"') == 1 and flaky.count('class="attempt attempt-succeeded"') == 1
    assert "flaky attempt 1: failed in" in flaky and "TRANSIENT: network connection dropped" in flaky
    train = _row(html, "train")  # a CONTENTION failure, then a backoff wait, then the attempt that ran
    assert 'class="wait"' in train and "backoff 300ms (CONTENTION)" in train
    assert "skipped: its gate was false" in _row(html, "promote")
    # curves: one line per metric, one point per epoch; a single figure is listed
    loss = html.split('data-metric="train/loss"', 1)[1].split("</svg>", 1)[0]
    path = re.search(r'<path d="([^"]+)"[^>]*class="series" data-series="attempt 2"', loss)
    assert path and path.group(1).count("L") == 4, loss[:400]
    assert 'data-metric="train/lr"' in html and "train \u00b7 final_loss" in html
    assert "2 attempts" in html and "epoch 5/5" in html
    # the receipt's facts and cost
    for fact in ("<code>2026-11-01</code> rows 10 (declared by ingest)", "snapshot</code> = <code>2026-11-01", "mlp-v2", "total"):
        assert fact in html, fact
    assert ">succeeded</span></h1>" in html


def test_a_cache_hit_is_marked_on_the_timeline(tmp_path: Path) -> None:
    il.run(reported.reported, workdir=tmp_path, run_id="first")
    r = il.run(reported.reported, workdir=tmp_path, run_id="second")
    html = Path(r.receipt_path).with_name("report.html").read_text()
    assert _rows(html)["ingest"] == "cached"
    assert 'class="cache-hit"' in _row(html, "ingest") and "cache hit (run first)" in html


def test_a_failed_run_shows_the_failure_and_what_did_not_run(tmp_path: Path) -> None:
    r = il.run(reported.reported, workdir=tmp_path, run_id="bad", explode=True, raise_on_failure=False)
    html = Path(r.receipt_path).with_name("report.html").read_text()
    assert ">failed</span></h1>" in html
    box = html.split('<div class="failure">', 1)[1].split("</div>", 1)[0]
    assert "<b>train</b> failed" in box and "FATAL" in box and "loss is NaN" in box and "lower the learning rate" in box
    assert _graph_status(html)["train"] == "failed" and _rows(html)["promote"] == "not-run"
    assert "not run: an earlier failure stopped the run" in _row(html, "promote")


def test_interlock_show_finds_the_run_and_rewrites_its_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", FILE, "--workdir", str(tmp_path), "--run-id", "cli-run"]) == 0
    out = capsys.readouterr().out
    report = tmp_path / "runs" / "cli-run" / "state" / "report.html"
    assert f"report:  {report}" in out
    report.unlink()
    assert main(["show", "cli-run", "--workdir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(report) and report.is_file()
    elsewhere = tmp_path / "pages" / "r.html"
    assert main(["show", "cli-run", "--workdir", str(tmp_path), "--out", str(elsewhere)]) == 0
    assert _rows(elsewhere.read_text())["train"] == "succeeded"
    assert main(["show", "nope", "--workdir", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "no run nope in" in err and "runs there: cli-run" in err


def test_a_run_without_a_receipt_is_drawn_from_its_fragments(tmp_path: Path) -> None:
    r = il.run(reported.reported, workdir=tmp_path, run_id="live")
    Path(r.receipt_path).unlink()  # as while the run is still going, or after a SIGKILL
    html = report_html.show("live", tmp_path).read_text()
    assert "No receipt yet" in html and ">running</span></h1>" in html
    assert _rows(html)["train"] == "succeeded" and _rows(html)["promote"] == "not-run"


def test_a_run_without_a_recorded_spec_still_gets_a_report(tmp_path: Path) -> None:
    r = il.run(reported.reported, workdir=tmp_path, run_id="old")
    (Path(r.receipt_path).parent / SPEC_FILE).unlink()  # a run from before spec.json
    html = report_html.show("old", tmp_path).read_text()
    assert "No pipeline spec was recorded" in html and _rows(html)["train"] == "succeeded"


def test_a_report_that_cannot_be_written_never_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: object, **kw: object) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(report_html, "report_html", broken)
    with caplog.at_level(logging.WARNING, logger="interlock.report"):
        r = il.run(reported.reported, workdir=tmp_path, run_id="nopic")
    assert r.succeeded and not Path(r.receipt_path).with_name("report.html").exists()
    assert "could not write the run report" in caplog.text and "disk full" in caplog.text


def test_the_docs_demo_runs_and_its_report_shows_the_backoff(tmp_path: Path) -> None:
    import report_demo  # docs/examples/report_demo.py, the pipeline docs/reports.md pictures

    r = il.run(report_demo.report_demo, workdir=tmp_path, epochs=3, busy_gpu=True)
    html = Path(r.receipt_path).with_name("report.html").read_text()
    assert "backoff 1s (CONTENTION)" in _row(html, "train")
    # 3 epochs: the worst shard's AUC stays under 0.9, so nothing is registered
    assert _graph_status(html)["gate:gate-1"] == "not-taken" and _rows(html)["register"] == "skipped"
    assert _rows(html)["notify"] == "succeeded"
    assert 'data-metric="train/valid_auc"' in html


def test_neither_the_report_nor_the_recorded_spec_carries_a_secret(tmp_path: Path) -> None:
    from core_pipelines import integrity  # defaults: a password and a URL with one

    r = il.run(integrity.leaky_login, workdir=tmp_path, raise_on_failure=False)
    state = Path(r.receipt_path).parent
    for page in (state / "report.html", state / SPEC_FILE):
        text = page.read_text()
        for secret in ("s3cr3t@pass-word", "s3cr3t", "r3dis-pw"):
            assert secret not in text, (page.name, secret)
    assert "login" in _graph_status((state / "report.html").read_text())


def test_an_attempt_with_no_recorded_end_is_drawn_to_the_end_of_the_timeline() -> None:
    from interlock.core.report.svg_timeline import LABEL_W, NOTE_W, Row, timeline

    svg = timeline([Row("train", "killed", [{"number": 1, "started": 10.0, "ended": 0.0, "status": "killed"}])],
                   0.0, 20.0, width=900)
    bar = re.search(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*class="attempt attempt-killed"', svg)
    plot_w = 900 - LABEL_W - NOTE_W - 20
    assert bar and float(bar.group(1)) == pytest.approx(LABEL_W + plot_w / 2, abs=0.2)
    assert float(bar.group(2)) == pytest.approx(plot_w / 2, abs=0.2)

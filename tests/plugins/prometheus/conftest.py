"""A real Pushgateway and a real Prometheus server scraping it, on loopback, per test session
(Debian's ``prometheus-pushgateway`` and ``prometheus``; tests/run.sh installs them where apt
can). Without them the tests that need them skip, saying so."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SCRAPE_S = 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], what: str, log: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer at {url} within {timeout_s}s: {log.read_text()[-2000:]}")


@dataclass
class Prometheus:
    gateway: str  # host:port of the Pushgateway
    url: str  # Prometheus's HTTP API

    def query(self, promql: str) -> list[dict[str, Any]]:
        q = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def wait_for(self, promql: str, count: int = 1, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """The query's result once it has ``count`` series (Prometheus scrapes every second)."""
        deadline = time.monotonic() + timeout_s
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found = self.query(promql)
            if len(found) >= count:
                return found
            time.sleep(0.25)
        raise AssertionError(f"Prometheus returned {len(found)} series for {promql} within {timeout_s}s: {found}")

    def gateway_text(self) -> str:
        with urllib.request.urlopen(f"http://{self.gateway}/metrics", timeout=5) as r:
            return str(r.read().decode())


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    gateway_bin, prom_bin = shutil.which("prometheus-pushgateway"), shutil.which("prometheus")
    if not gateway_bin or not prom_bin:
        pytest.skip("Debian's prometheus and prometheus-pushgateway are not installed "
                    "(apt-get install prometheus prometheus-pushgateway; tests/run.sh does it as root)")
    root = tmp_path_factory.mktemp("prometheus")
    gw_port, prom_port = _free_port(), _free_port()
    gw_log, prom_log = root / "pushgateway.log", root / "prometheus.log"
    gateway = subprocess.Popen([gateway_bin, f"--web.listen-address=127.0.0.1:{gw_port}"],
                               stdout=gw_log.open("wb"), stderr=subprocess.STDOUT)
    config = root / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n"
        "scrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{gw_port}']\n"
    )
    server = subprocess.Popen(
        [prom_bin, f"--config.file={config}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=prom_log.open("wb"), stderr=subprocess.STDOUT,
    )
    try:
        _wait_http(f"http://127.0.0.1:{gw_port}/-/ready", gateway, "the Pushgateway", gw_log)
        _wait_http(f"http://127.0.0.1:{prom_port}/-/ready", server, "Prometheus", prom_log)
        yield Prometheus(f"127.0.0.1:{gw_port}", f"http://127.0.0.1:{prom_port}")
    finally:
        for proc in (server, gateway):
            proc.terminate()
        for proc in (server, gateway):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

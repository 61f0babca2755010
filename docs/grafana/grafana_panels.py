"""The dashboard's panels, drawn from a real Prometheus without Grafana: each panel's queries
run over a time range through Prometheus's HTTP API and plotted with matplotlib, the way
Grafana would draw them (docs/metrics.md shows the picture this makes).

    python docs/grafana/grafana_panels.py            # local Pushgateway + Prometheus, demo runs,
                                                      # writes docs/images/metrics-dashboard.png

``serve()`` starts Debian's ``prometheus-pushgateway`` and ``prometheus`` on loopback ports
(the metrics tests use it too).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DASHBOARD = HERE / "interlock.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prometheus:
    gateway: str  # host:port of the Pushgateway
    url: str  # Prometheus's HTTP API

    def _get(self, path: str, **params: Any) -> Any:
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{q}", timeout=10) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus refused {params}: {body}")
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/query", query=promql)["result"])

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/query_range", query=promql, start=start, end=end, step=step)["result"])

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


def binaries() -> tuple[str, str] | None:
    gateway, prom = shutil.which("prometheus-pushgateway"), shutil.which("prometheus")
    return (gateway, prom) if gateway and prom else None


def _wait_ready(url: str, proc: subprocess.Popen[bytes], what: str, log: Path, timeout_s: float = 30.0) -> None:
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


@contextmanager
def serve(root: Path, scrape_s: int = 1) -> Iterator[Prometheus]:
    """A Pushgateway and a Prometheus server scraping it (``honor_labels``: the pushed
    labels win), on loopback, their files under ``root``; stopped on exit."""
    found = binaries()
    if found is None:
        raise RuntimeError("apt-get install prometheus prometheus-pushgateway")
    gateway_bin, prom_bin = found
    gw_port, prom_port = _free_port(), _free_port()
    gw_log, prom_log = root / "pushgateway.log", root / "prometheus.log"
    # Debian's build persists to /var/lib/prometheus by default: keep every group under root.
    gateway = subprocess.Popen([gateway_bin, f"--web.listen-address=127.0.0.1:{gw_port}",
                                f"--persistence.file={root / 'pushgateway.data'}"],
                               stdout=gw_log.open("wb"), stderr=subprocess.STDOUT)
    config = root / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {scrape_s}s\n  evaluation_interval: {scrape_s}s\n"
        "scrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{gw_port}']\n"
    )
    server = subprocess.Popen(
        [prom_bin, f"--config.file={config}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=prom_log.open("wb"), stderr=subprocess.STDOUT,
    )
    try:
        _wait_ready(f"http://127.0.0.1:{gw_port}/-/ready", gateway, "the Pushgateway", gw_log)
        _wait_ready(f"http://127.0.0.1:{prom_port}/-/ready", server, "Prometheus", prom_log)
        yield Prometheus(f"127.0.0.1:{gw_port}", f"http://127.0.0.1:{prom_port}")
    finally:
        for proc in (server, gateway):
            proc.terminate()
        for proc in (server, gateway):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def panel_queries(dashboard: dict[str, Any], **variables: str) -> list[tuple[dict[str, Any], list[str]]]:
    """Each panel with its queries, the dashboard's variables substituted (default: all)."""
    out = []
    for panel in dashboard["panels"]:
        exprs = []
        for target in panel["targets"]:
            expr = target["expr"]
            for var in dashboard["templating"]["list"]:
                expr = expr.replace(f"${var['name']}", variables.get(var["name"], ".*"))
            exprs.append(expr)
        out.append((panel, exprs))
    return out


def _legend(fmt: str, labels: dict[str, str]) -> str:
    for key, value in labels.items():
        fmt = fmt.replace("{{" + key + "}}", value)
    return fmt.replace("{{", "").replace("}}", "")


def render(prom: Prometheus, out: Path, start: float, end: float, dashboard: dict[str, Any] | None = None) -> Path:
    """Draw every panel of the dashboard from ``prom`` over [start, end] into one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dashboard = dashboard or json.loads(DASHBOARD.read_text())
    panels = panel_queries(dashboard)
    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(14, 3.2 * rows))
    step = max(1.0, (end - start) / 200)
    for ax, (panel, exprs) in zip(axes.flat, panels, strict=False):
        ax.set_title(panel["title"], fontsize=10, loc="left")
        unit = panel["fieldConfig"]["defaults"].get("unit")
        drew = False
        for target, expr in zip(panel["targets"], exprs, strict=True):
            series = prom.query_range(expr, start, end, step)
            if panel["type"] == "barchart":
                names = [_legend(target["legendFormat"], s["metric"]) for s in series]
                values = [float(s["values"][-1][1]) for s in series]
                ax.bar(names, values, color="#5470c6")
                drew = drew or bool(series)
                continue
            for s in series:
                xs = [float(t) - start for t, _ in s["values"]]
                ys = [float(v) for _, v in s["values"]]
                ax.plot(xs, ys, label=_legend(target["legendFormat"], s["metric"])[:40])
                drew = True
        if "efficiency" in panel["title"].lower():
            ax.axhline(0.85, color="green", linestyle="--", linewidth=0.8)
            ax.axhline(0.70, color="orange", linestyle="--", linewidth=0.8)
            ax.set_ylim(0, 1.05)
        if not drew:
            ax.text(0.5, 0.5, "no data (no step ran on a GPU with NVML)" if "utilization" in panel["title"].lower()
                    else "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        elif panel["type"] != "barchart":
            ax.legend(fontsize=7, loc="upper left")
            ax.set_xlabel("seconds", fontsize=8)
        ax.set_ylabel({"percentunit": "ratio", "s": "seconds", "currencyUSD": "USD"}.get(unit, ""), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(dashboard["title"], fontsize=12)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def main() -> None:
    """Demo runs of docs/examples/metrics_demo.py pushed to a local Pushgateway, drawn."""
    import sys

    sys.path.insert(0, str(HERE.parent / "examples"))
    from metrics_demo import metered

    import interlock as il

    out = HERE.parent / "images" / "metrics-dashboard.png"
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp)) as prom:
        start = time.time()
        # A data loader made faster run after run: the efficiency ratio climbs past 85%.
        for fetch_s in (0.1, 0.05, 0.02, 0.01, 0.005, 0.002):
            il.run(metered, "local", workdir=Path(tmp) / "runs", progress=False, pushgateway=prom.gateway,
                   epochs=6, fetch_s=fetch_s)
            time.sleep(3)
        prom.wait_for("interlock_run_gpu_efficiency_ratio", count=6)
        time.sleep(2)
        render(prom, out, start, time.time())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

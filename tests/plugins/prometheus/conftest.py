"""A real Pushgateway and a real Prometheus server scraping it, on loopback, per test session
(Debian's ``prometheus-pushgateway`` and ``prometheus``, started by docs/grafana/grafana_panels.py's
``serve``; tests/run.sh installs them where apt can). Without them those tests skip, saying so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from grafana_panels import Prometheus, binaries, serve


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    if binaries() is None:
        pytest.skip("Debian's prometheus and prometheus-pushgateway are not installed "
                    "(apt-get install prometheus prometheus-pushgateway; tests/run.sh does it as root)")
    with serve(tmp_path_factory.mktemp("prometheus")) as prom:
        yield prom

"""Suite-wide test setup.

The tests' own importable modules (test pipelines, helpers) are found through pytest's
``pythonpath`` setting in pyproject.toml, never by editing sys.path here. Subprocesses that
import a test pipeline by module name (kfp-local's tasks, ``pyflyte-execute``, the Airflow
driver), the way a container imports a team's pipeline package, get the same list through
PYTHONPATH, except the repository root: on a child's PYTHONPATH the root's
``interlock.egg-info`` would pass for an installed interlock (pip then skips installing
one), and kfp-local hands its tasks this process's sys.path anyway.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# No phoning home from the libraries under test (MLflow 3 telemetry writes under ~/.config too).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")


def pytest_configure(config: pytest.Config) -> None:
    ours = [str(p) for p in config.getini("pythonpath") if p != config.rootpath]
    theirs = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in ours]
    os.environ["PYTHONPATH"] = os.pathsep.join([*ours, *theirs])
    # airflow-local migrates its template metadata database once per session (and the CLI
    # runs' processes reuse it), not once per test's work directory.
    if "INTERLOCK_AIRFLOW_DB_CACHE" not in os.environ:
        os.environ["INTERLOCK_AIRFLOW_DB_CACHE"] = _AIRFLOW_DB_CACHE[0] = tempfile.mkdtemp(prefix="airflow-db-")
    # Hypothesis keeps its example database and caches in ./.hypothesis (the checkout) unless told.
    if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = _HYPOTHESIS_DIR[0] = tempfile.mkdtemp(prefix="hypothesis-")


_AIRFLOW_DB_CACHE = [""]
_HYPOTHESIS_DIR = [""]


def pytest_unconfigure(config: pytest.Config) -> None:
    for made in (_AIRFLOW_DB_CACHE[0], _HYPOTHESIS_DIR[0]):
        if made:
            shutil.rmtree(made, ignore_errors=True)


# The core-only environment (tox -e core) has none of the extras. A test that needs one
# is skipped there, naming it; where the extra is installed the same error still fails.
OPTIONAL_EXTRAS = frozenset({
    "pandas", "pyarrow", "numpy", "flytekit", "flyte", "kfp", "torch", "botocore", "boto3", "mlflow", "pandera",
    "airflow", "requests", "urllib3", "kubernetes", "jsonschema", "sklearn",
})


def _missing_extra(exc: BaseException | None) -> str | None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ImportError):
            top = (exc.name or "").split(".")[0]
            if top in OPTIONAL_EXTRAS and importlib.util.find_spec(top) is None:
                return top
        exc = exc.__cause__ or exc.__context__
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    missing = _missing_extra(call.excinfo.value) if call.excinfo is not None else None
    if missing and report.failed:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"needs {missing}, which is not installed (an extra)")


# A run without a workdir writes ./.interlock: from a test, that is the checkout. Every test
# is checked: its own runs, caches and stores belong under tmp_path.
_CHECKOUT_STATE = Path(__file__).resolve().parents[1] / ".interlock"


def _stamp() -> tuple[int, ...]:
    stamps = []
    for path in (_CHECKOUT_STATE, *(_CHECKOUT_STATE / sub for sub in ("runs", "cache", "mlflow", "lineage"))):
        try:
            stamps.append(path.stat().st_mtime_ns)
        except OSError:
            stamps.append(-1)
    return tuple(stamps)


@pytest.fixture(autouse=True)
def _nothing_written_into_the_checkout(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    before = _stamp()
    yield
    if _stamp() != before:
        pytest.fail(f"{request.node.nodeid} wrote into the checkout's {_CHECKOUT_STATE}: give it a workdir "
                    "under tmp_path (or monkeypatch.chdir(tmp_path))", pytrace=False)


@pytest.fixture(scope="session")
def moto_endpoint():  # type: ignore[no-untyped-def]
    """One moto S3 server on loopback for the session (each test makes its own bucket and
    dummy credentials): the real S3 protocol, no network."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a log line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()

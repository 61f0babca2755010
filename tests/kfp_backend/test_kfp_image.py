"""The image files ``emit_image`` writes build as written (issue 25, item 15): interlock is
installed from where it came from, every COPY source is in the build context and not ignored,
and virtualenvs and caches stay out of the context."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kfp_test_pipelines import typed

import interlock as il
from interlock.adapters.kfp.image import IGNORED, interlock_source, write_image_files

CHECKOUT = Path(__file__).resolve().parents[2]
SPEC = il.spec(typed.typed)


def ignored(rel: str) -> bool:
    """Docker's reading of the ignore file, for the patterns interlock writes."""
    parts = rel.split("/")
    for pattern in IGNORED:
        bare = pattern.removeprefix("**/")
        if fnmatch.fnmatch(rel, pattern) or any(fnmatch.fnmatch(p, bare) for p in parts):
            return True
    return False


def copies(dockerfile: Path) -> list[str]:
    return [line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("COPY ")]


def pip_target(dockerfile: Path) -> str | None:
    found = re.search(r'RUN pip install --no-cache-dir "([^"]+)\[kfp\]"', dockerfile.read_text())
    return found.group(1) if found else None


def dry_run(target: Path) -> None:
    """pip takes the target offline, as the image build would (dependencies aside)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", "--no-build-isolation",
         "-q", f"{target}[kfp]"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_from_an_index_the_requirements_pin_interlock(tmp_path: Path) -> None:
    files = write_image_files(SPEC, tmp_path / "img", context=tmp_path, source=None)
    assert any(line.startswith("interlock[kfp]==") for line in files.requirements.read_text().split())
    assert pip_target(files.dockerfile) is None


def test_a_source_inside_the_context_is_installed_from_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    vendored = repo / "third_party" / "interlock"
    shutil.copytree(CHECKOUT, vendored, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "*.egg-info", "__pycache__"))
    (repo / ".venv" / "lib").mkdir(parents=True)  # what the ignore file must keep out
    files = write_image_files(SPEC, repo / "build" / "img", context=repo, source=vendored)
    assert not any("interlock" in line for line in files.requirements.read_text().split())
    assert pip_target(files.dockerfile) == "./third_party/interlock"
    for source in copies(files.dockerfile):
        assert source == "." or ((repo / source).exists() and not ignored(source)), source
    assert ignored(".venv/lib") and ignored("src/pkg/__pycache__") and not ignored("third_party/interlock/core")
    dry_run(vendored)


def test_a_source_outside_the_context_ships_as_a_wheel(tmp_path: Path) -> None:
    repo = tmp_path / "team"
    repo.mkdir()
    files = write_image_files(SPEC, repo / "build" / "img", context=repo, source=CHECKOUT)
    assert files.wheel is not None and files.wheel.parent == repo / "build" / "img" / "wheels"
    assert "COPY build/img/wheels /tmp/wheels" in files.dockerfile.read_text()
    assert pip_target(files.dockerfile) == f"/tmp/wheels/{files.wheel.name}"
    assert not any("interlock" in line for line in files.requirements.read_text().split())
    dry_run(files.wheel)


def test_this_install_is_found() -> None:
    source = interlock_source()
    if source is None:
        pytest.skip("interlock is installed from an index here")
    assert source.exists()

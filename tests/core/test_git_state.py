"""The receipt's git facts (``receipt.git_info``) agree with git's own answer in every state a
checkout can be in, and say "unknown" when there is no answer: no repository, no commit, no
git."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from interlock.core.record.receipt import git_info

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false",
       "-c", "init.defaultBranch=main"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def settle() -> None:
    time.sleep(0.05)  # the index is written after the files, not in the same clock tick (racy git)


def truth(cwd: Path, files: list[Path]) -> dict[str, object]:
    """git's own answer, the way receipts asked it before: rev-parse, then status."""
    sha = git(cwd, "rev-parse", "HEAD")
    dirty = bool(git(cwd, "status", "--porcelain", "--untracked-files=no"))
    if not dirty and files:
        dirty = bool(git(cwd, "status", "--porcelain", "--untracked-files=all", "--", *map(str, files)))
    return {"sha": sha, "dirty": dirty}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    (path / "pkg").mkdir(parents=True)
    git(path, "init", "-q")
    (path / "README").write_text("r\n")
    (path / "pkg" / "pipe.py").write_text("x = 1\n")
    os.symlink("README", path / "link")
    (path / "run.sh").write_text("#!/bin/sh\n")
    (path / "run.sh").chmod(0o755)
    settle()
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    return path


def test_a_clean_checkout(repo: Path) -> None:
    source = repo / "pkg" / "pipe.py"
    assert git_info(files=[source]) == truth(repo, [source]) == {"sha": git(repo, "rev-parse", "HEAD"), "dirty": False}


@pytest.mark.parametrize("change", [
    "edit", "same-size-edit-with-the-old-mtime", "delete", "staged", "staged-then-restored", "chmod",
    "untracked-source", "retarget-link", "new-commit-on-branch", "detached", "unmerged",
    "rm-cached", "reset-soft", "intent-to-add", "assume-unchanged", "skip-worktree", "file-became-directory",
])
def test_every_change_is_seen(repo: Path, change: str) -> None:
    source = repo / "pkg" / "pipe.py"
    files = [source]
    if change == "edit":
        source.write_text("x = 22\n")
    elif change == "same-size-edit-with-the-old-mtime":
        st = source.stat()
        source.write_text("x = 2\n")  # same size, mtime put back: only ctime (and git's hash) can tell
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif change == "delete":
        (repo / "README").unlink()
    elif change == "staged":
        source.write_text("x = 22\n")
        git(repo, "add", "pkg/pipe.py")
    elif change == "staged-then-restored":  # index differs from HEAD, the file from the index too
        source.write_text("x = 22\n")
        git(repo, "add", "pkg/pipe.py")
        source.write_text("x = 1\n")
    elif change == "chmod":
        (repo / "README").chmod(0o755)
    elif change == "untracked-source":
        files = [repo / "pkg" / "new.py"]
        files[0].write_text("y = 1\n")
    elif change == "retarget-link":
        (repo / "link").unlink()
        os.symlink("run.sh", repo / "link")
    elif change == "new-commit-on-branch":
        source.write_text("x = 22\n")
        settle()
        git(repo, "commit", "-q", "-am", "two")
    elif change == "detached":
        source.write_text("x = 22\n")
        settle()
        git(repo, "commit", "-q", "-am", "two")
        git(repo, "checkout", "-q", "--detach", "HEAD~1")
    elif change == "unmerged":
        git(repo, "checkout", "-q", "-b", "other")
        source.write_text("x = 'other'\n")
        git(repo, "commit", "-q", "-am", "other")
        git(repo, "checkout", "-q", "main")
        source.write_text("x = 'main'\n")
        git(repo, "commit", "-q", "-am", "main")
        subprocess.run([*GIT, "merge", "-q", "other"], cwd=repo, capture_output=True)  # a conflict
    elif change == "rm-cached":  # out of the index, still on disk: a staged deletion
        git(repo, "rm", "-q", "--cached", "README")
    elif change == "reset-soft":  # HEAD moves back, the index keeps the later tree
        source.write_text("x = 22\n")
        settle()
        git(repo, "commit", "-q", "-am", "two")
        settle()
        git(repo, "reset", "-q", "--soft", "HEAD~1")
    elif change == "intent-to-add":
        (repo / "later.py").write_text("z = 1\n")
        git(repo, "add", "-N", "later.py")
    elif change == "assume-unchanged":  # git itself calls this clean: the receipt says what git says
        git(repo, "update-index", "--assume-unchanged", "README")
        (repo / "README").write_text("changed\n")
    elif change == "skip-worktree":
        git(repo, "update-index", "--skip-worktree", "README")
        (repo / "README").write_text("changed\n")
    elif change == "file-became-directory":
        (repo / "README").unlink()
        (repo / "README").mkdir()
    expected = truth(repo, files)
    assert git_info(repo, files) == expected
    assert git_info(repo, files) == expected  # and again: nothing remembered goes stale


def test_an_edit_between_two_runs_is_seen(repo: Path) -> None:
    source = repo / "pkg" / "pipe.py"
    assert git_info(repo, [source])["dirty"] is False
    source.write_text("x = 3\n")
    assert git_info(repo, [source]) == {"sha": git(repo, "rev-parse", "HEAD"), "dirty": True}
    source.write_text("x = 1\n")  # back to the committed text: git hashes it and says clean
    assert git_info(repo, [source]) == {"sha": git(repo, "rev-parse", "HEAD"), "dirty": False}


def test_packed_objects_and_refs(repo: Path) -> None:
    git(repo, "gc", "-q")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()  # in packed-refs now
    assert git_info(repo) == truth(repo, [])


def test_a_linked_worktree(repo: Path, tmp_path: Path) -> None:
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    side = tmp_path / "side"
    (side / "pkg" / "pipe.py").write_text("x = 5\n")
    settle()
    git(side, "commit", "-q", "-am", "side")
    settle()
    assert git_info(side, [side / "pkg" / "pipe.py"]) == truth(side, [side / "pkg" / "pipe.py"])
    assert git_info(side)["sha"] != git(repo, "rev-parse", "HEAD")


def test_no_commit_yet_and_no_repository(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "plain").mkdir()
    git(tmp_path / "new", "init", "-q")
    assert git_info(tmp_path / "new") == {"sha": None, "dirty": None}
    assert git_info(tmp_path / "plain") == {"sha": None, "dirty": None}


def test_git_absent_means_unknown(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no git on the PATH
    assert git_info(repo, [repo / "pkg" / "pipe.py"]) == {"sha": None, "dirty": None}


def test_the_environment_speaks_for_a_container_without_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("INTERLOCK_GIT_SHA", "c" * 40)
    assert git_info(tmp_path) == {"sha": "c" * 40, "dirty": False}
    monkeypatch.setenv("INTERLOCK_GIT_DIRTY", "1")
    assert git_info(tmp_path) == {"sha": "c" * 40, "dirty": True}


def test_git_environment_is_followed(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    assert git_info(tmp_path) == {"sha": git(repo, "rev-parse", "HEAD"), "dirty": False}


def add_submodule(repo: Path, tmp_path: Path) -> Path:
    """``repo`` with a committed submodule ``sub``, cloned from a one-file repository (returned)."""
    inner = tmp_path / "inner"
    inner.mkdir()
    git(inner, "init", "-q")
    (inner / "lib.py").write_text("v = 1\n")
    git(inner, "add", ".")
    git(inner, "commit", "-q", "-m", "inner")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    settle()
    git(repo, "commit", "-q", "-m", "with a submodule")
    settle()
    return inner


def test_a_change_inside_a_submodule_is_seen(repo: Path, tmp_path: Path) -> None:
    add_submodule(repo, tmp_path)
    assert git_info(repo) == truth(repo, []) == {"sha": git(repo, "rev-parse", "HEAD"), "dirty": False}
    (repo / "sub" / "lib.py").write_text("v = 2\n")
    assert git_info(repo) == truth(repo, []) == {"sha": git(repo, "rev-parse", "HEAD"), "dirty": True}


def test_an_untracked_source_inside_a_submodule_is_seen(repo: Path, tmp_path: Path) -> None:
    # The work tree holding the source is the submodule's (its .git is a file): the source is
    # looked up there, as git itself finds it.
    inner = add_submodule(repo, tmp_path)
    source = repo / "sub" / "new_pipe.py"
    source.write_text("x = 2\n")
    assert (repo / "sub" / ".git").is_file()
    assert git_info(files=[source]) == truth(repo / "sub", [source]) == {"sha": git(inner, "rev-parse", "HEAD"),
                                                                          "dirty": True}


def test_a_clean_checkout_takes_two_git_processes(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The work tree's top is found without git: at every run's start, one process less
    # running beside the first steps.
    real = subprocess.run(["sh", "-c", "command -v git"], check=True, capture_output=True, text=True).stdout.strip()
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {real} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    source, head = repo / "pkg" / "pipe.py", git(repo, "rev-parse", "HEAD")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert git_info(files=[source]) == {"sha": head, "dirty": False}
    assert calls.read_text().split() == ["status", "status"]

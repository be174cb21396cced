"""git_state names a commit only for a checkout of its own: a project copied without its .git
into another repository's folder, or installed into a .venv inside one, is "not a checkout"
(git would answer with the enclosing repository's commit, as on the H200 lease of
2026-12-04), and the installed version stands in. A certificate's code state
(harness/certify/bind.py) and a baseline's checkout (baselines/common.py) ask the same
question."""

import importlib.metadata
import shutil
import subprocess
from pathlib import Path

import pytest

from baselines.common import checkout_info
from harness.certify.bind import code_state
from runrecord.provenance import DISTRIBUTION, git_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c",
                           "user.email=t@t", *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def repository(path: Path) -> str:
    """A git repository at `path` with one commit; its sha."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "file.txt").write_text("one\n")
    git(path, "add", "file.txt")
    git(path, "commit", "-q", "-m", "one")
    return git(path, "rev-parse", "HEAD")


def installed_version() -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_a_checkout_of_its_own_names_its_commit_and_dirty_flag(tmp_path):
    sha = repository(tmp_path / "project")
    assert git_state(tmp_path / "project") == {"sha": sha, "dirty": False}
    (tmp_path / "project" / "file.txt").write_text("two\n")
    assert git_state(tmp_path / "project") == {"sha": sha, "dirty": True}


@pytest.mark.parametrize("inner", ["cleanba-bench", ".venv/lib/python3.12/site-packages"])
def test_a_folder_inside_another_repository_is_not_a_checkout(tmp_path, inner):
    outer = tmp_path / "outer"
    repository(outer)
    project = outer / inner  # a copy without its .git, or an install into a .venv there
    (project / "runrecord").mkdir(parents=True)
    state = git_state(project)
    assert state == {"sha": None, "dirty": None, "checkout": "not a checkout",
                     "inside": str(outer.resolve()), "version": installed_version()}
    # a certificate's code state asks the same question (harness/certify/bind.py)
    assert code_state(project) == {"git_sha": None, "dirty": None, "diff_sha256": None}


def test_no_repository_at_all_is_not_a_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above
    state = git_state(tmp_path)
    assert state["sha"] is None and state["checkout"] == "not a checkout"
    assert state["inside"] is None and state["version"] == installed_version()


def test_a_baseline_checkout_copied_into_another_repository_names_no_commit(tmp_path):
    outer = tmp_path / "outer"
    repository(outer)
    torchbeast = outer / "third_party" / "torchbeast"  # a copy without its .git
    (torchbeast / "torchbeast").mkdir(parents=True)
    (torchbeast / "torchbeast" / "monobeast.py").write_text("# monobeast\n")
    info = checkout_info(torchbeast, "torchbeast/monobeast.py")
    assert info["commit"] is None and info["dirty"] is None
    assert info["inside"] == str(outer.resolve())
    assert info["file_sha256"] is not None  # the key file's hash still says which code ran
    sha = repository(tmp_path / "own")
    assert checkout_info(tmp_path / "own", "file.txt")["commit"] == sha

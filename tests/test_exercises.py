"""The exercises (exercises/, `make exercise N`) cannot rot.

Every exercise's patch must still apply to the tree (`git apply --check`),
its metadata must name a real chapter, gate and test files, the index
(exercises/README.md) must list every exercise, and each chapter's
"Exercises:" line must link exercises that exist.  Whether each checker
really fails with its patch applied is too slow for `make test` (each one
builds ember in a scratch copy): run `make exercise N` for that.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import exercise  # noqa: E402  (tools/exercise.py, the `make exercise` runner)

sys.path.remove(str(REPO / "tools"))

EXERCISES = exercise.all_exercises()
WALKTHROUGH = REPO / "docs" / "walkthrough"


def exercise_id(e):
    return e.directory.name


def test_there_are_exercises():
    assert len(EXERCISES) >= 8
    numbers = [e.number for e in EXERCISES]
    assert numbers == list(range(1, len(EXERCISES) + 1)), numbers


@pytest.mark.parametrize("e", EXERCISES, ids=exercise_id)
def test_patch_applies(e):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(["git", "apply", "--check", str(e.patch)], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, (
        f"{e.patch.relative_to(REPO)} no longer applies to the tree: regenerate "
        f"it (apply it by hand, fix the rejects, git diff > patch.diff)\n{result.stderr}")


@pytest.mark.parametrize("e", EXERCISES, ids=exercise_id)
def test_metadata(e):
    chapters = {int(p.name[:2]) for p in WALKTHROUGH.glob("[0-9][0-9]-*.md")
                if p.name != "00-index.md"}
    assert e.chapter in chapters
    readme = e.readme.read_text(encoding="utf-8")
    assert readme.startswith(f"# Exercise {e.number}: {e.title}\n"), readme[:80]
    for test in e.tests:
        path = test.split("::")[0]
        assert (REPO / path).is_file(), f"{e.directory.name}: no test file {path}"
    touched = re.findall(r"^\+\+\+ b/(\S+)", e.patch.read_text(encoding="utf-8"), re.M)
    assert touched, f"{e.patch}: not a git diff"


def test_index_lists_every_exercise():
    index = (REPO / "exercises" / "README.md").read_text(encoding="utf-8")
    for e in EXERCISES:
        assert f"]({e.directory.name}/README.md)" in index, e.directory.name


def test_chapters_link_their_exercises():
    by_chapter = {}
    for e in EXERCISES:
        by_chapter.setdefault(e.chapter, []).append(e)
    for chapter in sorted(WALKTHROUGH.glob("[0-9][0-9]-*.md")):
        text = chapter.read_text(encoding="utf-8")
        linked = set(re.findall(r"\.\./\.\./exercises/(\d\d-[\w-]+)/README\.md", text))
        assert linked <= {e.directory.name for e in EXERCISES}, chapter.name
        expected = {e.directory.name for e in by_chapter.get(int(chapter.name[:2]), [])}
        if chapter.name != "00-index.md":
            assert linked == expected, (chapter.name, sorted(linked), sorted(expected))

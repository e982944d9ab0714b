"""`make exercise N`: one exercise of exercises/ in a scratch copy of the tree.

    python tools/exercise.py            list the exercises
    python tools/exercise.py N          set up build/exercise-N and run its checker
    python tools/exercise.py N --fresh  start exercise N over (drops your edits)

The first run of exercise N copies the repository's tracked files (as they
are in the working tree, times kept) to build/exercise-N, applies the
exercise's patch there and commits the result in a git repository of its
own, so that `git -C build/exercise-N diff` shows exactly your fix.  Build
objects of the tree's own build are copied along, so only the files the
patch touches recompile.  Later runs keep your edits: they rebuild the copy
and run the checker again.  The user's tree is never written to, except for
build/exercise-N itself.

The checker is an exercise's `tests` (test files or node ids; `select`, if
given, is pytest's -k expression) run on one of two builds, its `gate`:

    pytest   the release build, in place (setup.py build_ext --inplace)
    asan     the ASan gate of chapter 9 (make leak-asan LEAK_ASAN_TESTS=...)

The exit status is the checker's: not 0 while the exercise is unsolved.
"""

import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
GATES = ("pytest", "asan")
KINDS = ("seeded bug", "build it")
FIELDS = {"title": str, "chapter": int, "kind": str, "gate": str, "tests": list}
OPTIONAL = {"select": str}


class Exercise:
    def __init__(self, directory):
        self.directory = directory
        self.number = int(directory.name.split("-", 1)[0])
        self.patch = directory / "patch.diff"
        self.readme = directory / "README.md"
        with open(directory / "exercise.toml", "rb") as f:
            meta = tomllib.load(f)
        for field, kind in FIELDS.items():
            if not isinstance(meta.get(field), kind):
                raise ValueError(f"{directory}/exercise.toml: {field!r} must be a {kind.__name__}")
        for field, kind in OPTIONAL.items():
            if field in meta and not isinstance(meta[field], kind):
                raise ValueError(f"{directory}/exercise.toml: {field!r} must be a {kind.__name__}")
        if set(meta) - set(FIELDS) - set(OPTIONAL):
            raise ValueError(f"{directory}/exercise.toml: unknown fields "
                             f"{sorted(set(meta) - set(FIELDS) - set(OPTIONAL))}")
        if meta["kind"] not in KINDS or meta["gate"] not in GATES:
            raise ValueError(f"{directory}/exercise.toml: kind must be one of {KINDS}, "
                             f"gate one of {GATES}")
        self.title, self.chapter = meta["title"], meta["chapter"]
        self.kind, self.gate, self.tests = meta["kind"], meta["gate"], meta["tests"]
        self.select = meta.get("select")

    def pytest_args(self):
        return self.tests + (["-k", self.select] if self.select else [])


def all_exercises():
    found = [Exercise(d) for d in sorted(EXERCISES.glob("[0-9][0-9]-*")) if d.is_dir()]
    return sorted(found, key=lambda e: e.number)


def run(argv, cwd, env=None, check=True):
    result = subprocess.run(argv, cwd=cwd, env=env)
    if check and result.returncode != 0:
        raise SystemExit(f"exercise: {' '.join(map(str, argv))} failed ({result.returncode})")
    return result.returncode


def git(*args, cwd):
    # The scratch copy lies inside the user's repository (build/ is ignored
    # there): give it its own repository, never the user's.
    return run(["git", "-c", "user.name=exercise", "-c", "user.email=exercise@localhost",
                "-c", "init.defaultBranch=main", *args], cwd=cwd)


def copy_tree(scratch, gate):
    """The tracked files of the working tree, then the build objects."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = REPO / name, scratch / name
        if not os.path.lexists(source):
            continue            # deleted in the working tree, not committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)    # keeps the time: make stays incremental
    # Objects of the user's own builds, times kept, so only what the patch
    # touches recompiles (setup.py compares object and source times).
    temps = [Path(p) for p in glob.glob(str(REPO / "build" / "temp.*"))]
    if gate == "asan":
        temps.append(REPO / "build" / "asan" / "temp")
    for temp in temps:
        if temp.is_dir():
            shutil.copytree(temp, scratch / temp.relative_to(REPO), copy_function=shutil.copy2)
    for so in glob.glob(str(REPO / "python" / "ember" / "_C*.so")):
        shutil.copy2(so, scratch / "python" / "ember")
    # The virtual environment is shared, never copied (the gate's Makefile
    # rules look for .venv; nothing here installs into it).
    venv = Path(sys.prefix)
    (scratch / ".venv").symlink_to(venv)


def set_up(exercise, scratch):
    print(f"exercise {exercise.number}: copying the tree to {scratch.relative_to(REPO)}")
    scratch.mkdir(parents=True)
    copy_tree(scratch, exercise.gate)
    git("init", "-q", cwd=scratch)
    with open(scratch / ".git" / "info" / "exclude", "a") as f:
        f.write(".venv\n")
    print(f"exercise {exercise.number}: applying {exercise.patch.relative_to(REPO)}")
    git("apply", "--whitespace=nowarn", str(exercise.patch), cwd=scratch)
    git("add", "-A", cwd=scratch)
    git("commit", "-q", "-m", f"exercise {exercise.number}: {exercise.title}", cwd=scratch)


def checker(exercise, scratch):
    """Builds the scratch copy for the gate and runs the checker; its status."""
    python = sys.executable
    if exercise.gate == "pytest":
        run([python, "setup.py", "-q", "build_ext", "--inplace"], cwd=scratch)
        env = dict(os.environ, PYTHONPATH="python")
        argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                *exercise.pytest_args()]
        print("exercise: running PYTHONPATH=python pytest", shlex.join(exercise.pytest_args()),
              flush=True)
        return run(argv, cwd=scratch, env=env, check=False)
    # The ASan gate as chapter 9 runs it, on the exercise's tests.  VPY is
    # this interpreter's path (not the copy's .venv link), so the build flags
    # match the tree's and its ASan objects are reused.
    argv = ["make", "--no-print-directory", "-o", ".venv/.ember-installed", "leak-asan",
            "VPY=" + python, "LEAK_ASAN_TESTS=" + " ".join(exercise.tests),
            "PYTEST_ARGS=" + (shlex.join(["-k", exercise.select]) if exercise.select else "")]
    print("exercise: running", shlex.join(argv[3:]), flush=True)
    return run(argv, cwd=scratch, check=False)


def show_list():
    print("Exercises (exercises/README.md); run one with `make exercise N`:\n")
    for e in all_exercises():
        print(f"  {e.number:2d}  ch. {e.chapter:2d}  {e.kind:<10}  {e.title}")
        print(f"      checker: {e.gate} gate, pytest {shlex.join(e.pytest_args())}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("number", nargs="?", type=int)
    parser.add_argument("--fresh", action="store_true",
                        help="drop build/exercise-N and start over")
    args = parser.parse_args()
    if args.number is None:
        show_list()
        return 0
    chosen = [e for e in all_exercises() if e.number == args.number]
    if not chosen:
        print(f"exercise: no exercise {args.number}", file=sys.stderr)
        show_list()
        return 2
    exercise = chosen[0]
    scratch = REPO / "build" / f"exercise-{exercise.number}"
    if args.fresh and scratch.exists():
        shutil.rmtree(scratch)
    if not scratch.exists():
        try:
            set_up(exercise, scratch)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
    else:
        print(f"exercise {exercise.number}: reusing {scratch.relative_to(REPO)} with your "
              f"edits (FRESH=1 starts over)")
    status = checker(exercise, scratch)
    where = scratch.relative_to(REPO)
    print()
    print(f"== exercise {exercise.number} (chapter {exercise.chapter}, {exercise.kind}): "
          f"{exercise.title}")
    if status == 0:
        print(f"== the checker PASSES: solved.  `git -C {where} diff` is your fix;")
        print("   compare it with the original in the repository.")
    else:
        print(f"== the checker FAILS (status {status}), as it should until the exercise "
              f"is solved.")
        print(f"== work in {where}/, then run `make exercise {exercise.number}` again.\n")
        print(exercise.readme.read_text(encoding="utf-8"))
    return status


if __name__ == "__main__":
    sys.exit(main())

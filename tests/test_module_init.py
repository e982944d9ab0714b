"""ember._C's module initialization (c/python/Module.c, Note [Module init]):
multi-phase, once per process, and the deprecated error API gone."""

import os
import pathlib
import subprocess
import sys

import pytest

import ember

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_python(code):
    """Runs `code` in a fresh interpreter with the ember under test (and the
    environment the gates set: LD_PRELOAD of libasan, PYTHONMALLOC, ...)."""
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(ember.__file__).parents[1]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.noleakcheck
def test_second_initialization_is_an_import_error_not_a_second_init():
    # The process-wide state (static types, the allocator registry, the
    # kernel threads) is initialized once: importing the module again after
    # dropping it from sys.modules is refused cleanly, and the first module
    # keeps working.
    result = run_python(
        "import sys, importlib, ember\n"
        "first = sys.modules.pop('ember._C')\n"
        "try:\n"
        "    importlib.import_module('ember._C')\n"
        "except ImportError as exc:\n"
        "    print('ImportError:', exc)\n"
        "print((ember.ones(3) + 1).tolist())\n")
    assert result.returncode == 0, result.stderr
    assert "ImportError: ember._C keeps process-wide state" in result.stdout
    assert "[2.0, 2.0, 2.0]" in result.stdout


def test_module_is_multi_phase():
    # A multi-phase module has a spec-driven def with slots; its name and
    # public functions are as before.
    assert ember._C.__name__ == "ember._C"
    assert ember._C.__spec__.name == "ember._C"
    assert "add" in ember._C._public_functions


def test_no_deprecated_error_api_in_the_c_sources():
    # PyErr_Fetch/PyErr_Restore/PyErr_NormalizeException are deprecated since
    # 3.12 (Note [One exception object] in THP.h); only THP.h's 3.11 shim
    # may name them.
    deprecated = ("PyErr_Fetch", "PyErr_Restore", "PyErr_NormalizeException")
    for path in sorted((ROOT / "c").rglob("*.[ch]")):
        if path.name == "THP.h":
            continue
        text = path.read_text()
        for name in deprecated:
            assert name not in text, f"{path.relative_to(ROOT)} uses {name}"

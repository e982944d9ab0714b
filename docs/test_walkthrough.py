"""Executes the C-API walkthrough (docs/walkthrough/*.md) so it cannot go stale.

For every chapter:

1. test_examples: the ```pycon blocks are doctests.  All blocks of one
   chapter run in order in one shared namespace that starts with `ember` and
   `np` imported, from the repository root, with ELLIPSIS on.  A mismatch
   fails with the chapter, the line and the example.
2. test_references: every `path:identifier` in backticks names an existing
   file that contains the identifier, and every other backticked repository
   path exists.  Every bare backticked identifier is checked too (see
   check_identifiers): one of ours (`THPVariable_Wrap`, `call_pinned`) must
   still be in the source, so renaming a function fails the chapter that
   names it.  Every fenced block after a `<!-- source: path:identifier -->`
   marker is a quote: its non-blank lines must appear in that file as
   consecutive lines, whitespace-normalised; a quoted line that is only `...`
   marks an elision (a gap), and the pieces must come in order.  A
   ```c block without a marker fails: C quotes are always checked.
3. test_no_unexecuted_python: Python examples are written as ```pycon, so
   that every one of them runs; a ```python block is allowed only as a quote
   (after a source marker), which test_references checks.

test_index_links checks that the index's relative links resolve and that
every page of the folder (the chapters and the glossary) is linked from it.
The glossary's references are checked as a chapter's (2 and 3); it has no
examples.

Chapter 0 compiles the small extensions of docs/scratch/ with the
interpreter's C compiler; without one (or without Python.h) its examples are
skipped (PREREQUISITES).  Its C names count as the repository's own words.
"""

import doctest
import gc
import os
import re
import shlex
import shutil
import sysconfig
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
WALKTHROUGH = DOCS / "walkthrough"
CHAPTERS = sorted(WALKTHROUGH.glob("[0-9][0-9]-*.md"))
# Every page of the folder: the chapters and the pages beside them (the
# glossary).  All must be linked from the index, and their references and
# quotes are checked like a chapter's.
PAGES = sorted(WALKTHROUGH.glob("*.md"))

FENCE_OPEN = re.compile(r"^```([\w+-]*)\s*$")
FENCE_CLOSE = re.compile(r"^```\s*$")
SOURCE_MARKER = re.compile(r"^<!--\s*source:\s*(\S+?):(.+?)\s*-->\s*$")
# `c/python/Variable.c:THPVariable_Wrap`, `Makefile:leak-asan`,
# `c/th/THAllocator.h:Note [Allocator lifetime]`
REPO_PATH = r"(?:(?:c|python|tools|docs|tests|bench)/[\w./*-]*|Makefile|setup\.py|pyproject\.toml|README\.md)"
REFERENCE = re.compile(r"`(" + REPO_PATH + r"):([^`]+)`")
BARE_PATH = re.compile(r"`(" + REPO_PATH + r")`")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
# `THTensor_free`, `THTensor_free()`, `call_pinned`: one identifier in backticks.
BARE_IDENTIFIER = re.compile(r"([A-Za-z_]\w*)(?:\(\))?")
# ember's C names start with TH (the core: THTensor_newView, TH_ERR_EXTERNAL)
# or THP (the extension: THPVariable_Wrap, THP_RUN_WITHOUT_GIL_IF); these must
# be defined or used in c/ itself.
OUR_C_NAME = re.compile(r"THP?(?:[A-Z_]\w*)?")
# Names that are someone else's: CPython's C-API (PyType_Ready, Py_INCREF,
# PY_VECTORCALL_ARGUMENTS_OFFSET, METH_FASTCALL, the tp_/nb_/sq_/mp_/ob_/bf_
# slot and field names) and NumPy's (PyArray_New).  They are not checked.
FOREIGN_PREFIX = re.compile(r"(?:_?Py|PY_|METH_|(?:tp|nb|sq|mp|ob|bf|am)_)\w*")
# Other foreign names that look like code, written in the chapters: CPython's
# internals, libc, DLPack, the environment, and PyTorch's C++ that ember does
# not have.  A name here is never checked; keep the list short.
FOREIGN_NAMES = frozenset({
    "subtype_dealloc", "subtype_traverse",        # CPython's Objects/typeobject.c
    "subtype_clear", "__release_buffer__",        # ... and PEP 688's protocol
    "malloc", "posix_memalign", "free",           # libc
    "DLManagedTensor", "DLTensor",                # dlpack.h
    "LD_PRELOAD",                                 # the dynamic loader
    "AutogradMeta", "VariableType", "TensorImpl", "StorageImpl",  # PyTorch C++
    "HANDLE_TH_ERRORS", "END_HANDLE_TH_ERRORS", "TORCH_CHECK",    # ... its macros
    "THPVariable_subclass_traverse",              # ... and its THP, not ours
})


class Block:
    def __init__(self, lang, start, lines, marker):
        self.lang = lang      # the fence's info string ("pycon", "c", ...)
        self.start = start    # 1-based line number of the first content line
        self.lines = lines    # the content lines
        self.marker = marker  # (path, identifier) of a source marker, or None


def parse_blocks(text):
    """The fenced blocks of a Markdown text, with their source markers."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        marker = None
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and (mm := SOURCE_MARKER.match(lines[j].strip())):
            marker = (mm.group(1), mm.group(2))
        k = i + 1
        while k < len(lines) and not FENCE_CLOSE.match(lines[k]):
            k += 1
        if k == len(lines):
            raise AssertionError(f"unclosed ``` fence opened at line {i + 1}")
        blocks.append(Block(m.group(1), i + 2, lines[i + 1:k], marker))
        i = k + 1
    return blocks


def prose(text):
    """The text outside fenced blocks (where references are written)."""
    out, in_block = [], False
    for line in text.splitlines():
        if (FENCE_CLOSE if in_block else FENCE_OPEN).match(line):
            in_block = not in_block
            out.append("")
            continue
        out.append("" if in_block else line)
    return "\n".join(out)


def normalise(line):
    return " ".join(line.split())


def find_quote(quote_lines, source):
    """None if the quote is in source, else (index, line) of the first miss.

    Blank lines are ignored on both sides.  Consecutive quoted lines must be
    consecutive lines of the file; a quoted line that is only `...` allows a
    gap.  The runs between `...` lines must appear in order.
    """
    file_lines = [n for n in map(normalise, source.splitlines()) if n]
    runs, run = [], []
    for index, line in enumerate(quote_lines):
        want = normalise(line)
        if want == "...":
            runs.append(run)
            run = []
        elif want:
            run.append((index, line, want))
    runs.append(run)
    pos = 0
    for run in filter(None, runs):
        wants = [want for _, _, want in run]
        start = next((i for i in range(pos, len(file_lines) - len(wants) + 1)
                      if file_lines[i:i + len(wants)] == wants), None)
        if start is None:
            # Report the first line of the run that breaks the match.
            best = 0
            for i in range(pos, len(file_lines)):
                k = 0
                while (k < len(wants) and i + k < len(file_lines)
                       and file_lines[i + k] == wants[k]):
                    k += 1
                best = max(best, k)
            index, line, _ = run[min(best, len(run) - 1)]
            return index, line
        pos = start + len(wants)
    return None


def contains_identifier(source, identifier):
    """True when `identifier` (or each part of a dotted name) is in source."""
    if re.fullmatch(r"[A-Za-z_][\w.]*", identifier):
        return all(re.search(r"(?<![\w])" + re.escape(part) + r"(?![\w])", source)
                   for part in identifier.split("."))
    return identifier in source


_CODE_WORDS = {}


def code_words():
    """The identifiers of the repository's code: {"c": ..., "python": ...}.

    "c" holds every word of c/ (sources and headers) and of the scratch
    extension of chapter 0 (docs/scratch/); "python" every word of python/
    (ember's Python), tools/ and tests/.
    """
    if not _CODE_WORDS:
        for key, patterns in (("c", ["c/**/*.c", "c/**/*.h", "docs/scratch/*.c"]),
                              ("python", ["python/**/*.py", "tools/**/*.py",
                                          "tests/**/*.py"])):
            words = set()
            for pattern in patterns:
                for path in REPO.glob(pattern):
                    words.update(re.findall(r"[A-Za-z_]\w*",
                                            path.read_text(encoding="utf-8")))
            _CODE_WORDS[key] = frozenset(words)
    return _CODE_WORDS


def check_identifiers(body, words):
    """Problems with the bare backticked identifiers of a chapter's prose.

    An identifier with ember's C prefix (TH, THP) must be a word of c/.  Any
    other identifier that is clearly code (it has an underscore or an inner
    capital: `call_pinned`, `SavedOutput`, not `view`) must be a word of c/ or
    of ember's Python, unless it is CPython's (by prefix) or in
    FOREIGN_NAMES.  Plain words (`view`, `grad`) are not checked: too many of
    them are English.  A renamed function thus fails every chapter that still
    names it.
    """
    problems = []
    spans = (BARE_IDENTIFIER.fullmatch(m.group(1)) for m in INLINE_CODE.finditer(body))
    for name in sorted({span.group(1) for span in spans if span}):
        if name in FOREIGN_NAMES or FOREIGN_PREFIX.fullmatch(name):
            continue
        if OUR_C_NAME.fullmatch(name):
            if name not in words["c"]:
                problems.append(f"`{name}`: no such name in c/")
        elif re.search(r"_|[a-z][A-Z]", name.strip("_")):
            if name not in words["c"] and name not in words["python"]:
                problems.append(f"`{name}`: no such name in c/ or python/")
    return problems


def chapter_id(path):
    return path.name


def missing_c_toolchain():
    """Why chapter 0's examples cannot compile an extension here, or None."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(cc[0]) is None:
        return f"no C compiler ({cc[0]})"
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not header.is_file():
        return f"no {header} (the interpreter's development headers)"
    return None


def missing_kernel_compilers():
    """Why chapter 16 cannot compile its CUDA kernel here, or None: NVRTC
    (the nvidia-cuda-nvrtc wheel of the test extra) makes the cubin, g++
    runs the same source on the CPU (tests/cuda_emulation.py)."""
    from ember.cuda import _nvrtc
    if not _nvrtc.available():
        return "no NVRTC (pip install nvidia-cuda-nvrtc)"
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        return "no C++ compiler (g++)"
    return None


# Chapters whose examples need more than ember: {chapter: reason to skip or None}.
PREREQUISITES = {"00-from-scratch.md": missing_c_toolchain,
                 "16-devices.md": missing_kernel_compilers}


@pytest.fixture
def in_repo_root(monkeypatch):
    monkeypatch.chdir(REPO)


def test_there_are_chapters():
    assert (WALKTHROUGH / "00-index.md").exists()
    assert len(CHAPTERS) >= 9, [p.name for p in CHAPTERS]


# Chapter 0 loads two extension modules it has just built from a new
# temporary file each run.  CPython never unloads an extension (its module
# definition stays in the import machinery's cache), so every run keeps ~74
# references the refcount gate would count as leaked: it runs once there.
RUN_ONCE_UNDER_THE_REFCOUNT_GATE = {"00-from-scratch.md"}


def chapter_param(chapter):
    if chapter.name in RUN_ONCE_UNDER_THE_REFCOUNT_GATE:
        return pytest.param(chapter, marks=pytest.mark.noleakcheck)
    return chapter


# A file left open is a bug in the example (and, as a warning pytest keeps,
# a leak to the refcount gate).
@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("chapter", [chapter_param(c) for c in CHAPTERS], ids=chapter_id)
def test_examples(chapter, in_repo_root):
    import numpy as np

    import ember

    if chapter.name in PREREQUISITES and (reason := PREREQUISITES[chapter.name]()):
        pytest.skip(f"{chapter.name}: {reason}")
    text = chapter.read_text(encoding="utf-8")
    blocks = [b for b in parse_blocks(text) if b.lang == "pycon"]
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
    report = []
    globs = {"__name__": "__walkthrough__", "ember": ember, "np": np}
    default_dtype = ember.get_default_dtype()
    default_allocator = ember.memory.get_allocator("cpu")
    left_installed = None
    gc_was_enabled = gc.isenabled()
    # Examples compare counters (refcounts, ember.memory.stats()) before and
    # after; garbage left by earlier tests must not be freed in between.
    gc.collect()
    try:
        for block in blocks:
            source = "\n".join(block.lines) + "\n"
            assert ">>> " in source, (
                f"{chapter.name}:{block.start}: a pycon block without examples")
            # lineno: doctest reports test.lineno + example.lineno + 1.
            test = doctest.DocTest(parser.get_examples(source), {},
                                   chapter.name, str(chapter), block.start - 1,
                                   source)
            test.globs = globs  # DocTest copies its globs; share ours instead
            runner.run(test, out=report.append, clear_globs=False)
    finally:
        # A chapter must not leak state into the next one (or the suite).
        if gc_was_enabled:
            gc.enable()
        ember.set_default_dtype(default_dtype)
        installed = ember.memory.get_allocator("cpu")
        if not isinstance(installed, ember.memory.CAllocator):
            left_installed = repr(installed)
            ember.memory.set_allocator(default_allocator, "cpu")
        del installed
        globs.clear()
        gc.collect()
    if runner.failures:
        pytest.fail(f"{chapter.name}: {runner.failures} of {runner.tries} "
                    f"examples failed\n" + "".join(report), pytrace=False)
    assert left_installed is None, (
        f"{chapter.name} left {left_installed} installed as the CPU allocator")


@pytest.mark.parametrize("chapter", PAGES, ids=chapter_id)
def test_references(chapter):
    text = chapter.read_text(encoding="utf-8")
    problems = []
    cache = {}

    def read(path):
        if path not in cache:
            full = REPO / path
            cache[path] = full.read_text(encoding="utf-8") if full.is_file() else None
        return cache[path]

    body = prose(text)
    for m in REFERENCE.finditer(body):
        path, identifier = m.group(1), m.group(2)
        source = read(path)
        if source is None:
            problems.append(f"`{path}:{identifier}`: no file {path}")
        elif not contains_identifier(source, identifier):
            problems.append(f"`{path}:{identifier}`: {path} has no {identifier!r}")
    for m in BARE_PATH.finditer(body):
        path = m.group(1)
        if "*" in path:
            if not list(REPO.glob(path)):
                problems.append(f"`{path}`: matches no file")
        elif not (REPO / path).exists():
            problems.append(f"`{path}`: no such file or directory")

    problems += check_identifiers(body, code_words())

    for block in parse_blocks(text):
        where = f"{chapter.name}:{block.start}"
        if block.marker is None:
            if block.lang == "c":
                problems.append(f"{where}: a ```c quote without a "
                                f"<!-- source: path:identifier --> marker")
            continue
        path, identifier = block.marker
        source = read(path)
        if source is None:
            problems.append(f"{where}: source marker names a missing file {path}")
            continue
        if not contains_identifier(source, identifier):
            problems.append(f"{where}: {path} has no {identifier!r}")
        problem = find_quote(block.lines, source)
        if problem is not None:
            offset, line = problem
            problems.append(f"{chapter.name}:{block.start + offset}: quoted line "
                            f"not found in {path} at this place: {line.strip()!r}")
    assert not problems, "stale references or quotes:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("chapter", PAGES, ids=chapter_id)
def test_no_unexecuted_python(chapter):
    bad = [b.start for b in parse_blocks(chapter.read_text(encoding="utf-8"))
           if b.lang in ("python", "py", "python3") and b.marker is None]
    assert not bad, (f"{chapter.name}: write Python examples as ```pycon "
                     f"doctests so they run (blocks at lines {bad})")


def test_index_links():
    index = (WALKTHROUGH / "00-index.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", index)
    local = [link for link in links if "://" not in link]
    missing = [link for link in local if not (WALKTHROUGH / link).exists()]
    assert not missing, f"00-index.md links to missing files: {missing}"
    unlinked = [p.name for p in PAGES
                if p.name != "00-index.md" and p.name not in local]
    assert not unlinked, f"pages not linked from 00-index.md: {unlinked}"


def test_checker_catches_stale_quotes():
    # The guard itself: a quote must match consecutive lines, in order.
    source = "struct {\n    int a;\n\n    int b;\n    int c;\n};\nint a;\n"
    assert find_quote(["    int a;", "    int b;"], source) is None  # blank skipped
    assert find_quote(["int a;", "...", "int c;"], source) is None
    assert find_quote(["int a;", "int c;"], source) == (1, "int c;")
    assert find_quote(["int c;", "...", "int b;"], source) == (2, "int b;")
    assert find_quote(["int d;"], source) == (0, "int d;")
    blocks = parse_blocks("<!-- source: c/x.c:f -->\n```c\nint a;\n```\n\n```pycon\n>>> 1\n1\n```\n")
    assert [(b.lang, b.start, b.marker) for b in blocks] == [
        ("c", 3, ("c/x.c", "f")), ("pycon", 7, None)]
    assert contains_identifier("static int THTensor_newView(", "THTensor_newView")
    assert not contains_identifier("THTensor_newViewX", "THTensor_newView")
    assert REFERENCE.search("see `c/th/THAllocator.h:Note [Allocator lifetime]`")


def test_checker_catches_renamed_identifiers():
    words = {"c": frozenset({"THPVariable_Wrap", "call_pinned", "PyType_Ready"}),
             "python": frozenset({"SavedOutput", "_record_mul"})}
    ok = ("`THPVariable_Wrap` `THPVariable_Wrap()` `call_pinned` `SavedOutput` "
          "`_record_mul` `PyType_Ready` `Py_INCREF` `tp_methods` `nb_add` "
          "`METH_O` `subtype_dealloc` `view` `grad` `__mul__` `a + b` "
          "`c/python/Variable.c:THPVariable_Wrap`")
    assert check_identifiers(ok, words) == []
    assert check_identifiers("`THPVariable_wrap` and `THTensor_free()`", words) == [
        "`THPVariable_wrap`: no such name in c/",
        "`THTensor_free`: no such name in c/"]
    # A TH name must be in c/: a Python name of the same spelling is not enough.
    assert check_identifiers("`THPFoo`", {"c": frozenset(), "python": {"THPFoo"}}) == [
        "`THPFoo`: no such name in c/"]
    assert check_identifiers("`call_pinned2` `SavedOutputs`", words) == [
        "`SavedOutputs`: no such name in c/ or python/",
        "`call_pinned2`: no such name in c/ or python/"]
    # The repository's own words include a real one of each kind.
    assert {"THPVariable_Wrap", "THTensor_newView"} <= code_words()["c"]


def test_chapter0_needs_a_compiler(monkeypatch):
    # Here the toolchain is present; a missing compiler skips, not fails.
    real = sysconfig.get_config_var
    assert missing_c_toolchain() is None or shutil.which("cc") is None
    monkeypatch.setattr(sysconfig, "get_config_var",
                        lambda name: "no-such-cc-here -pthread" if name == "CC" else real(name))
    assert missing_c_toolchain() == "no C compiler (no-such-cc-here)"


if __name__ == "__main__":  # python docs/test_walkthrough.py
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-q"]))

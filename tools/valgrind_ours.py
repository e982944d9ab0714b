"""Fail on valgrind memcheck records that are ember's, ignore everyone else's.

usage: python tools/valgrind_ours.py [--root REPO] REPORT.xml...

Reads valgrind --xml=yes reports of a Python run.  CPython and NumPy leave
plenty of records behind (module-init allocations, interpreter quirks); rather
than keep a suppression file for them, a record counts only when one of its
stacks has a frame in ember's own code (the ember/_C*.so object, or a source
file under REPO/c/) before, reading from the innermost frame out, an import
boundary (PyInit_*, PyModule_ExecDef, PyImport_*, _imp_*, ...).  The boundary
matters because _C's PyInit calls import_array(), which imports NumPy: without
it NumPy's one-time module-init allocations would all carry an ember frame.
Policy per record kind:

  Leak_DefinitelyLost, Leak_IndirectlyLost  fail if ours; allocations made by
                                            ember's own module init (PyInit__C)
                                            or by PyType_Ready on its types are
                                            one-time, like NumPy's: ignored
  Leak_PossiblyLost                         reported, never fails (interior
                                            pointers, e.g. aligned buffers
                                            still alive at exit)
  Uninit*                                   fail if the innermost frame outside
                                            libc/valgrind is ours (CPython 3.11
                                            has known uninitialised-value noise
                                            deeper down)
  anything else (Invalid read/write/free,   fail if ours (PyInit__C included)
  mismatched free, overlap, ...)

A pure leaked Python object (an extra Py_INCREF) is allocated by CPython and
carries no ember frame: that is what `make leak-refs` is for.
Exit status: 0 clean, 1 ember records found, 2 unreadable report.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

LEAK_FAIL = {"Leak_DefinitelyLost", "Leak_IndirectlyLost"}
OUR_SO = re.compile(r"(^|/)ember/_C\.[^/]*\.so$")
SYSTEM_OBJ = re.compile(r"(/vgpreload_|/libc\.so|/libc-|/ld-linux|/valgrind/)")
IMPORT_BOUNDARY = re.compile(
    r"^(PyInit_|PyModule_ExecDef$|PyImport_|_imp_|import_find_and_load|builtin___import__)")
# For leak records only: what PyType_Ready allocates (method and getset
# descriptors, the type's dict) lives as long as the type, i.e. forever.
LEAK_BOUNDARY = re.compile(IMPORT_BOUNDARY.pattern + r"|^(PyType_Ready|type_ready)$")


def parse(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        return ET.fromstring(data)
    except ET.ParseError:
        # A process that died (signal, os._exit) leaves the document
        # unterminated; what is there is still worth reading.
        text = data.decode("utf-8", "replace")
        cut = text.rfind("</error>")
        if cut < 0:
            cut = text.rfind("</status>")
        if cut < 0:
            raise
        end = text.index(">", cut) + 1
        return ET.fromstring(text[:end] + "\n</valgrindoutput>\n")


def frames(stack):
    for fr in stack.findall("frame"):
        yield {k: (fr.findtext(k) or "") for k in ("ip", "obj", "fn", "dir", "file", "line")}


def is_ours(fr, src_root):
    if OUR_SO.search(fr["obj"]):
        return True
    if fr["file"]:
        path = os.path.normpath(os.path.join(fr["dir"], fr["file"]))
        return path.startswith(src_root)
    return False


def describe(fr):
    where = f"{fr['file']}:{fr['line']}" if fr["file"] else os.path.basename(fr["obj"])
    return f"{fr['fn'] or fr['ip']} ({where})"


def what(err):
    return err.findtext("what") or err.findtext("xwhat/text") or ""


def ours_before_import(stack, src_root, init_counts, boundary=IMPORT_BOUNDARY):
    """Is there a frame of ours inside the innermost import boundary?"""
    for fr in stack:
        ours = is_ours(fr, src_root)
        if boundary.match(fr["fn"]):
            return ours and init_counts
        if ours:
            return True
    return False


def classify(err, src_root):
    """Return 'fail', 'warn' or None for one <error> record."""
    kind = err.findtext("kind") or ""
    stacks = [list(frames(s)) for s in err.findall("stack")]
    if kind.startswith("Leak_"):
        ours = any(ours_before_import(st, src_root, False, LEAK_BOUNDARY) for st in stacks)
        if kind in LEAK_FAIL:
            return "fail" if ours else None
        return "warn" if ours else None
    if kind.startswith("Uninit"):
        first = next((fr for fr in (stacks[0] if stacks else [])
                      if not SYSTEM_OBJ.search(fr["obj"])), None)
        return "fail" if first is not None and is_ours(first, src_root) else None
    return "fail" if any(ours_before_import(st, src_root, True) for st in stacks) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.getcwd(), help="repository root (sources under ROOT/c/)")
    ap.add_argument("reports", nargs="+")
    args = ap.parse_args()
    src_root = os.path.join(os.path.realpath(args.root), "c") + os.sep

    failures = warnings = ignored = 0
    for path in args.reports:
        if not os.path.exists(path):
            print(f"valgrind_ours: no report {path}", file=sys.stderr)
            return 2
        try:
            root = parse(path)
        except ET.ParseError as e:
            print(f"valgrind_ours: cannot read {path}: {e}", file=sys.stderr)
            return 2
        for err in root.iter("error"):
            verdict = classify(err, src_root)
            if verdict is None:
                ignored += 1
                continue
            if verdict == "fail":
                failures += 1
            else:
                warnings += 1
            label = "EMBER" if verdict == "fail" else "warning"
            print(f"{label}: {err.findtext('kind')}: {what(err)}  [{os.path.basename(path)}]")
            for st in err.findall("stack"):
                for fr in list(frames(st))[:12]:
                    mark = "*" if is_ours(fr, src_root) else " "
                    print(f"   {mark} {describe(fr)}")
                print("    --")
    print(f"valgrind_ours: {failures} record(s) in ember's code, {warnings} warning(s), "
          f"{ignored} record(s) elsewhere ignored, {len(args.reports)} report(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

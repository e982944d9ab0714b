"""Build the ember._C extension.  All metadata lives in pyproject.toml.

Build modes (environment variables, read at build time):

  default              -O3                                  (release)
  EMBER_DEBUG=1        -O0 -g                               (gdb-friendly)
  EMBER_SANITIZE=address
                       -O1 -g -fsanitize=address -fno-omit-frame-pointer
                       (compile and link; load with LD_PRELOAD=libasan.so,
                       see `make leak-asan`)

-Wall -Wextra -Werror are on in every mode, and so is -ffp-contract=off:
gcc would otherwise contract a * b + c into an FMA in the AVX2 copies of
a loop only, so results would depend on the CPU, and the fused kernels
could not match eager bit for bit (c/th/THFormulas.h: Note [No FMA
contraction]).

build_ext here is incremental per object file: a .c file is recompiled only
when it, any header under c/th or c/python, or the compile flags changed, and
the files that need it are compiled in parallel.  So `make build` after
touching one .c file recompiles one file and relinks.
"""

import glob
import hashlib
import os
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
TH_DIR = "c/th"
THP_DIR = "c/python"

WARNINGS = ["-Wall", "-Wextra", "-Werror"]
# Note [No FMA contraction] in c/th/THFormulas.h.
FLOAT_FLAGS = ["-ffp-contract=off"]
# Every loop starts on a 32-byte boundary, so a short inner loop never
# straddles a 64-byte line of the decoder and op cache.  gcc aligns only the
# loops it estimates hot next to the hottest block of their function (1%,
# --param=align-threshold=100), which left the inner loops of the pointwise
# kernels, one among several layouts each, where the link put them: any
# change elsewhere in the .so moved them.  Zen 4: the same SSE float32 mul
# loop, one thread, 1M elements in cache, 86 us when it sat inside a line,
# 145 us when it straddled two.
CODE_FLAGS = ["-falign-loops=32", "--param=align-threshold=10000"]
# Flags of single files.  THOptim.c: its loop vectorises only when sqrt may
# skip errno and both sides of a select may be computed (no trapping math);
# the values are the same bits either way (Note [One pass per parameter]).
# gcc ignores these two in `#pragma GCC optimize`.
FILE_FLAGS = {"c/th/THOptim.c": ["-fno-math-errno", "-fno-trapping-math"]}


def _mode_flags():
    sanitize = os.environ.get("EMBER_SANITIZE", "")
    if sanitize:
        if sanitize != "address":
            raise SystemExit(f"EMBER_SANITIZE={sanitize!r}: only 'address' is supported")
        flags = ["-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"]
        return flags, ["-fsanitize=address"]
    if os.environ.get("EMBER_DEBUG", "") not in ("", "0"):
        return ["-O0", "-g"], []
    return ["-O3"], []


def _sources():
    # Paths relative to setup.py (setuptools wants relative source paths).
    found = sorted(glob.glob(f"{TH_DIR}/*.c", root_dir=HERE)
                   + glob.glob(f"{THP_DIR}/*.c", root_dir=HERE))
    return found


def _headers():
    return sorted(glob.glob(f"{TH_DIR}/*.h", root_dir=HERE)
                  + glob.glob(f"{THP_DIR}/*.h", root_dir=HERE))


mode_cflags, mode_ldflags = _mode_flags()

ext = Extension(
    "ember._C",
    sources=_sources(),
    depends=_headers(),
    include_dirs=[TH_DIR, THP_DIR, numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    extra_compile_args=mode_cflags + WARNINGS + FLOAT_FLAGS + CODE_FLAGS
    + ["-std=gnu11", "-pthread"],
    extra_link_args=mode_ldflags + ["-pthread"],
    libraries=["m"],
)


class IncrementalBuildExt(build_ext):
    """build_ext that skips up-to-date objects and compiles the rest in parallel."""

    def build_extension(self, ext):
        if self.editable_mode:
            # `pip install -e` (make install) builds in a fresh temporary
            # directory; use the one `build_ext --inplace` (make build) uses,
            # so that the build after an install finds every object made.
            self.build_temp = os.path.join(
                HERE, "build", f"temp.{sysconfig.get_platform()}-{sys.implementation.cache_tag}")
        compiler = self.compiler
        # Everything besides the sources that changes the objects or the .so.
        key = repr((ext.extra_compile_args, FILE_FLAGS, ext.extra_link_args, ext.define_macros,
                    ext.include_dirs, ext.libraries, compiler.compiler_so,
                    compiler.linker_so, self.debug)).encode()
        fingerprint = hashlib.sha256(key).hexdigest()
        stamp = os.path.join(self.build_temp, "ember-flags.stamp")
        try:
            with open(stamp) as f:
                flags_same = f.read() == fingerprint
        except OSError:
            flags_same = False
        saved_force, original_compile = self.force, compiler.compile
        if not flags_same:
            self.force = True   # relink too, even if the .so looks newer

        def compile(sources, output_dir=None, macros=None, include_dirs=None,
                    debug=0, extra_preargs=None, extra_postargs=None, depends=None):
            objects = compiler.object_filenames(sources, strip_dir=0, output_dir=output_dir)
            newest_dep = max((os.path.getmtime(d) for d in (depends or [])), default=0)

            def stale(src, obj):
                if self.force or not os.path.exists(obj):
                    return True
                t = os.path.getmtime(obj)
                return os.path.getmtime(src) > t or newest_dep > t

            def one(src):
                original_compile([src], output_dir=output_dir, macros=macros,
                                 include_dirs=include_dirs, debug=debug,
                                 extra_preargs=extra_preargs,
                                 extra_postargs=(extra_postargs or []) + FILE_FLAGS.get(src, []),
                                 depends=depends)

            todo = [src for src, obj in zip(sources, objects) if stale(src, obj)]
            with ThreadPoolExecutor(max(1, min(len(todo), os.cpu_count() or 1))) as pool:
                list(pool.map(one, todo))   # re-raises the first CompileError
            return objects

        compiler.compile = compile
        try:
            super().build_extension(ext)
            os.makedirs(self.build_temp, exist_ok=True)
            with open(stamp, "w") as f:
                f.write(fingerprint)
        finally:
            compiler.compile, self.force = original_compile, saved_force


setup(
    ext_modules=[ext],
    cmdclass={"build_ext": IncrementalBuildExt},
)

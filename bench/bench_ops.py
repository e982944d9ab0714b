"""Operator speed, side by side in one process: ember vs NumPy vs PyTorch vs
numexpr (the last two only if importable).  `make bench` runs it.

Rows (goals from ember issues 3 and 15):
    small ops on 1 element: a + b, a * 2.0, a.sum()   us per call, <= 1.0x NumPy
    16M float32 a + b, allocating                      GB/s, >= 1.0x NumPy
    16M float32 a + b with out=                        GB/s, >= 1.1x NumPy
    16M float32 a.sum()                                GB/s, >= 1.1x PyTorch
    minor page faults per 64 MiB result (a + b)        faults, no goal
    GEMM 512/1024/2048 (bench/bench_gemm.py)           GFLOP/s, >= 0.8x OpenBLAS
GB/s count the bytes read and written once each (a + b: 3 x 64 MiB).

Everything runs on one thread (ember.set_num_threads(1),
torch.set_num_threads(1), numexpr.set_num_threads(1), OpenBLAS pinned to
one thread before NumPy is imported), then the large ops again on two.
NumPy's elementwise ops and sums are single-threaded whatever the setting.

Each time is the best of several rounds (the minimum is the least noisy
estimate of the cost itself on a shared machine), the libraries of a row
taking turns round by round.  --cpu-time times by the
calling thread's CPU time (steadier when other processes load the machine)
and so runs the one-thread table only.  Nothing is asserted: a
row whose ember operation raises prints "unavailable: <error>" (listed in
full under the table) and a wrong result prints "wrong result", so the
harness runs on any checkout and fills in as operators land.

bench/bench_gemm.py, when present, provides the GEMM rows:
    gemm_table(threads) -> list of rows, each a dict
        {"name": str, "ember": GFLOP/s, "numpy": GFLOP/s, "torch": GFLOP/s}
    (a value may be None, absent, or an error string); a tuple
    (name, ember, numpy, torch) is accepted too.  Without gemm_table the
    file is run as a script and its output shown as is.
"""

import os

# Before NumPy is imported: OpenBLAS sizes its thread pool at load time.
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:
    import numexpr
except ImportError:
    numexpr = None

LIBS = ("ember", "numpy", "torch", "numexpr")
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
LARGE = 16 * 1024 * 1024  # float32 elements: 64 MiB


class Unavailable(Exception):
    """The library has no such operation (yet)."""


# ---- one row -------------------------------------------------------------------


class Row:
    """One benchmark: a statement per library, a unit, and a goal.

    kind "time": us per call (lower is better); "rate": GB/s from
    `nbytes` per call (higher is better); "faults": minor page faults per
    call (lower is better).  goal = (peer, factor): met when ember is at
    least `factor` times as good as that peer.
    """

    def __init__(self, name, kind, stmts, namespaces, goal=None, nbytes=0,
                 check=None, unit=None):
        self.name = name
        self.kind = kind
        self.unit = unit or {"time": "us", "rate": "GB/s",
                             "faults": "faults"}[kind]
        self.stmts = stmts            # lib -> statement (str), or absent
        self.namespaces = namespaces  # lib -> dict of names it uses
        self.goal = goal
        self.nbytes = nbytes
        self.check = check            # lib -> expression checked vs numpy
        self.values = {}              # lib -> number, or an error string

    def better(self, x, y):
        """True if value x is better than value y."""
        return x > y if self.kind == "rate" else x < y

    def ratio(self, peer):
        """ember relative to peer, >1 meaning ember is better."""
        e, p = self.values.get("ember"), self.values.get(peer)
        if not isinstance(e, float) or not isinstance(p, float) or 0 in (e, p):
            return None
        return e / p if self.kind == "rate" else p / e


def time_calls(row, lib, number, clock):
    """Seconds per call over `number` calls of the row's statement for
    `lib`, or the error it raised, as a string."""
    try:
        return timeit.timeit(row.stmts[lib], globals=row.namespaces[lib], number=number,
                             timer=clock) / number
    except Exception as exc:  # any failure is reported, never raised
        return f"{type(exc).__name__}: {exc}"


def in_unit(row, lib, seconds):
    """A best time in the row's unit, once the result is checked."""
    if isinstance(seconds, str):
        return seconds
    if row.check is not None and lib != "numpy" and not same_result(row, lib):
        return "wrong result"
    if row.kind == "rate":
        return row.nbytes / seconds / 1e9
    return seconds * 1e6


def faults_per_call(stmt, ns, calls=4):
    code = compile(stmt, "<bench>", "exec")
    exec(code, ns)  # warm up: first-time costs are not the steady state
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        exec(code, ns)
    end = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    ns.pop("r", None)
    return (end - start) / calls


def as_numpy(value):
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    return np.asarray(value)


def same_result(row, lib):
    want = eval(row.check["numpy"], row.namespaces["numpy"])
    got = eval(row.check[lib], row.namespaces[lib])
    return np.allclose(as_numpy(got), want, rtol=1e-3, atol=1e-3)


# ---- the rows --------------------------------------------------------------------


def namespaces(np_arrays):
    """The same data, seen by each library (ember and torch share NumPy's
    memory; numexpr reads NumPy arrays)."""
    out = {"numpy": dict(np_arrays, np=np)}
    out["ember"] = {k: ember.from_numpy(v) for k, v in np_arrays.items()}
    out["ember"]["ember"] = ember
    if torch is not None:
        out["torch"] = {k: torch.from_numpy(v) for k, v in np_arrays.items()}
        out["torch"]["torch"] = torch
    if numexpr is not None:
        out["numexpr"] = dict(np_arrays, ne=numexpr)
    return out


def available(stmts, ns):
    return {lib: s for lib, s in stmts.items() if lib in ns}


def small_rows():
    data = {"a": np.full(1, 1.5, dtype=np.float32),
            "b": np.full(1, 2.5, dtype=np.float32)}
    ns = namespaces(data)
    add = {"ember": "a + b", "numpy": "a + b", "torch": "a + b",
           "numexpr": "ne.evaluate('a + b')"}
    mul = {"ember": "a * 2.0", "numpy": "a * 2.0", "torch": "a * 2.0",
           "numexpr": "ne.evaluate('a * 2.0')"}
    total = {"ember": "a.sum()", "numpy": "a.sum()", "torch": "a.sum()",
             "numexpr": "ne.evaluate('sum(a)')"}
    goal = ("numpy", 1.0)
    return [Row("1 elem  a + b", "time", available(add, ns), ns, goal,
                check=available(add, ns)),
            Row("1 elem  a * 2.0", "time", available(mul, ns), ns, goal,
                check=available(mul, ns)),
            Row("1 elem  a.sum()", "time", available(total, ns), ns, goal,
                check=available(total, ns))]


def large_data():
    rng = np.random.default_rng(0)
    return {"a": rng.random(LARGE, dtype=np.float32),
            "b": rng.random(LARGE, dtype=np.float32),
            "c": np.empty(LARGE, dtype=np.float32)}


def large_rows(ns, with_faults):
    add = {"ember": "a + b", "numpy": "a + b", "torch": "a + b",
           "numexpr": "ne.evaluate('a + b')"}
    add_out = {"ember": "ember.add(a, b, out=c)",
               "numpy": "np.add(a, b, out=c)",
               "torch": "torch.add(a, b, out=c)",
               "numexpr": "ne.evaluate('a + b', out=c)"}
    total = {"ember": "a.sum()", "numpy": "a.sum()", "torch": "a.sum()",
             "numexpr": "ne.evaluate('sum(a)')"}
    # c is checked after the out= run; sums of 16M floats differ in the
    # last digits between summation orders, within the rtol above.
    out_check = dict.fromkeys(available(add_out, ns), "c")
    rows = [
        Row("16M f32 a + b", "rate", available(add, ns), ns, ("numpy", 1.0),
            nbytes=3 * 4 * LARGE, check=available(add, ns)),
        Row("16M f32 a + b, out=", "rate", available(add_out, ns), ns,
            ("numpy", 1.1), nbytes=3 * 4 * LARGE, check=out_check),
        Row("16M f32 a.sum()", "rate", available(total, ns), ns,
            ("torch", 1.1), nbytes=4 * LARGE, check=available(total, ns)),
    ]
    if with_faults:
        faults = {lib: "r = " + s for lib, s in available(add, ns).items()}
        rows.append(Row("faults / 64 MiB a + b", "faults", faults, ns))
    return rows


# ---- threads ---------------------------------------------------------------------


def set_threads(n):
    """Sets every library's thread count; returns what could not be set."""
    problems = []
    try:
        ember.set_num_threads(n)
    except Exception as exc:
        problems.append(f"ember.set_num_threads: {exc}")
    if torch is not None:
        torch.set_num_threads(n)
    if numexpr is not None:
        numexpr.set_num_threads(n)
    return problems


# ---- GEMM (bench/bench_gemm.py, written separately) ----------------------------


def gemm_module():
    path = os.path.join(BENCH_DIR, "bench_gemm.py")
    if not os.path.exists(path):
        return None, path
    spec = importlib.util.spec_from_file_location("bench_gemm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def as_float(value):
    return float(value) if isinstance(value, (int, float)) else value


def gemm_rows(module, threads):
    rows = []
    for raw in module.gemm_table(threads):
        if isinstance(raw, dict):
            name = str(raw.get("name", raw.get("size", "?")))
            values = {lib: as_float(raw.get(lib)) for lib in LIBS}
            if values["numpy"] is None and "openblas" in raw:
                values["numpy"] = as_float(raw["openblas"])
        else:
            name, *rest = raw
            values = {lib: as_float(v) for lib, v in zip(LIBS, rest)}
        row = Row(f"GEMM {name}", "rate", {}, {}, ("numpy", 0.8),
                  unit="GFLOP/s")
        row.values = {k: v for k, v in values.items() if v is not None}
        rows.append(row)
    return rows


# ---- printing ----------------------------------------------------------------------


def cell(value):
    if value is None:
        return "-"
    if isinstance(value, str):
        return "unavailable" if value != "wrong result" else value
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def best_peer(row):
    peers = [(v, lib) for lib, v in row.values.items()
             if lib != "ember" and isinstance(v, float)]
    if not peers:
        return None
    best = peers[0]
    for v, lib in peers[1:]:
        if row.better(v, best[0]):
            best = (v, lib)
    return best[1]


def goal_text(row):
    if row.goal is None:
        return "-", ""
    peer, factor = row.goal
    label = (f"<= {1 / factor:.1f}x {peer} time" if row.kind == "time"
             else f">= {factor:.1f}x {peer}")
    if row.values.get("ember") == "wrong result":
        return label, "NO"
    r = row.ratio(peer)
    if r is None:
        return label, "?"
    return label, "yes" if r >= factor * (1 - 1e-9) else "NO"


def print_table(title, rows, errors):
    print(f"\n{title}")
    header = (f"{'benchmark':<22} {'unit':>7} {'ember':>11} {'numpy':>8} "
              f"{'torch':>8} {'numexpr':>8} {'e/best':>7}  "
              f"{'goal':<22} met?")
    print(header)
    print("-" * len(header))
    for row in rows:
        peer = best_peer(row)
        r = row.ratio(peer) if peer else None
        # printed as ember / best peer in the unit's own sense: for times
        # ember's time over the best time, for rates ember's rate over it
        shown = "-" if r is None else (f"{1 / r:.2f}" if row.kind != "rate"
                                       else f"{r:.2f}")
        label, met = goal_text(row)
        e = row.values.get("ember")
        for lib in LIBS:
            v = row.values.get(lib)
            if isinstance(v, str) and v != "wrong result":
                note = (f"{row.name} ({lib})" if lib != "ember" else row.name,
                        v)
                if note not in errors:
                    errors.append(note)
        print(f"{row.name:<22} {row.unit:>7} {cell(e):>11} "
              f"{cell(row.values.get('numpy')):>8} "
              f"{cell(row.values.get('torch')):>8} "
              f"{cell(row.values.get('numexpr')):>8} {shown:>7}  "
              f"{label:<22} {met}")


def run_rows(rows, number, repeat, clock):
    """Each row's libraries take turns (a different one first each round),
    `repeat` rounds of `number` calls each, and each keeps its best round
    (or its error): a spell of load on the host falls on all of them
    alike, not on whichever library was being timed then (timed one after
    the other, 16M sums of the same buffer ranged over 0.78-1.18x
    PyTorch's GB/s between runs)."""
    for row in rows:
        libs = [lib for lib in LIBS if row.stmts.get(lib) is not None]
        if row.kind == "faults":
            for lib in libs:
                try:
                    row.values[lib] = faults_per_call(row.stmts[lib], row.namespaces[lib])
                except Exception as exc:  # reported, never raised
                    row.values[lib] = f"{type(exc).__name__}: {exc}"
            continue
        best = {}
        for round_ in range(repeat):
            turn = round_ % len(libs)   # each library goes first in turn
            for lib in libs[turn:] + libs[:turn]:
                if isinstance(best.get(lib), str):
                    continue   # it raised: reported, not timed again
                seconds = time_calls(row, lib, number, clock)
                best[lib] = seconds if isinstance(seconds, str) \
                    else min(best.get(lib, float("inf")), seconds)
        for lib, seconds in best.items():
            row.values[lib] = in_unit(row, lib, seconds)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer repeats (noisier)")
    parser.add_argument("--no-gemm", action="store_true")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time by this thread's CPU clock (one thread "
                             "only; steadier on a loaded machine)")
    args = parser.parse_args(argv)
    clock = time.thread_time if args.cpu_time else timeit.default_timer
    small_n, small_r = (2000, 3) if args.quick else (20000, 7)
    large_n, large_r = (1, 3) if args.quick else (3, 40)

    print(f"ember {ember.__version__}, numpy {np.__version__}, torch "
          f"{torch.__version__ if torch else 'not installed'}, numexpr "
          f"{numexpr.__version__ if numexpr else 'not installed'}")
    print("ratio e/best: ember over the best peer, in the row's unit "
          "(time: < 1 is faster; GB/s: > 1 is faster)")
    errors = []
    print("times: " + ("thread CPU time" if args.cpu_time else "wall clock"))
    for threads in (1,) if args.cpu_time else (1, 2):
        problems = set_threads(threads)
        for p in problems:
            print(f"note: {p}")
        rows = small_rows() if threads == 1 else []
        run_rows(rows, small_n, small_r, clock)
        ns = namespaces(large_data())
        large = large_rows(ns, with_faults=threads == 1)
        run_rows(large, large_n, large_r, clock)
        rows += large
        print_table(f"{threads} thread(s)"
                    + ("" if threads == 1 else
                       "; NumPy elementwise/sum stay on one"), rows, errors)
        del ns
    if not args.no_gemm:
        run_gemm(errors)
    if errors:
        print("\nunavailable:")
        for name, error in errors:
            print(f"  {name}: {error}")


def run_gemm(errors):
    try:
        module, path = gemm_module()
    except Exception as exc:
        errors.append(("GEMM", f"importing bench_gemm.py: {exc}"))
        return
    if module is None:
        print(f"\nGEMM: {os.path.relpath(path)} not found, skipped")
        return
    if not hasattr(module, "gemm_table"):
        print(f"\nGEMM ({os.path.relpath(path)} run as a script):")
        subprocess.run([sys.executable, path], check=False)
        return
    for threads in (1, 2):
        set_threads(threads)
        try:
            rows = gemm_rows(module, threads)
        except Exception as exc:
            errors.append((f"GEMM, {threads} thread(s)",
                           f"{type(exc).__name__}: {exc}"))
            continue
        print_table(f"GEMM, {threads} thread(s); numpy = OpenBLAS", rows,
                    errors)


if __name__ == "__main__":
    main()

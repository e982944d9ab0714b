"""File mutation fuzzers for ember.load and ember.jit.load.

Valid files (ember.save of a nested structure of every dtype; ember.jit.save
of a few programs) are mutated -- bit flips, truncations, appended bytes,
JSON header edits, lying data_offsets, shapes and dtypes, and edits of the
program document inside the metadata -- and loaded.  Each load must raise a
clean error (SafetensorsError / ProgramFileError are ValueErrors; a
RuntimeError) or return a result that is right:

  * ember.load: the tensors equal what the safetensors reader (the
    reference implementation of the container) reads from the same bytes,
    when it reads them too;
  * ember.jit.load: the loaded program is called (with a time limit, for a
    mutated jump may loop forever; the VM checks signals on backward
    jumps) and must return or raise an ordinary exception -- never a
    SystemError, never a crash.

`make test` runs a fixed seed and a few hundred cases per target (a few
seconds); EMBER_FUZZ=1 (`make fuzz`) runs many more, and EMBER_FUZZ_SEED
picks the seed.  A failure names the seed and the case number, which
reproduce it.
"""

import contextlib
import copy
import io
import json
import os
import random
import signal
import struct
import warnings

import numpy as np
import pytest

import ember
from ember import jit
from ember import serialization as container
from ember.jit.serialization import METADATA_KEY, ProgramFileError

FUZZING = os.environ.get("EMBER_FUZZ") == "1"
SEED = int(os.environ.get("EMBER_FUZZ_SEED", "20261201"))
CASES = 20_000 if FUZZING else 300
# A loaded program runs only when its int constants are this small: a
# mutated size of 2**34 would allocate for real (test_jit_files.py tests
# absurd sizes one by one).
MAX_INT_TO_RUN = 4096
CALL_TIME_LIMIT = 2.0

JSON_POOL = [
    0, 1, -1, 2, 3, 7, 255, 256, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**62,
    2**63 - 1, 2**63, -2**63, 2**64, 10**30, 0.5, -0.0, 1e308, "", "x",
    "F32", "F64", "I64", "I32", "U8", "BOOL", "F16", "BF16", "I128",
    "LOAD_CONST", "CALL", "JUMP", "RETURN", "FUSED", "prim.format",
    "prim.print", "ember.zeros", "Tensor.expand", "operator.getitem",
    "{0.__class__}", "{}", "{0[0]}", None, True, False, [], {}, [0, 0],
    [0, 2**62], [1, 2, 3], [-1], {"int": 2**62}, {"int": -1}, {"str": "{}"},
    {"tensor": "constant.0"}, {"dtype": "float32"}, {"list": [{"int": 3}]},
]


# Stands for a JSON array nested too deeply for json.dumps: join() writes
# it as text (the header parser must refuse it cleanly).
DEEP = "<deeply nested>"


def pool_value(rng):
    if rng.random() < 0.03:
        return DEEP if rng.random() < 0.5 else json.loads("[" * 200 + "]" * 200)
    return copy.deepcopy(rng.choice(JSON_POOL))


# ---- valid seed files -----------------------------------------------------------------


def container_seed():
    buffer = io.BytesIO()
    ember.save({
        "f32": ember.arange(12.0).reshape(3, 4),
        "f64": ember.tensor([[1.5, -2.0]], dtype=ember.float64),
        "nested": [ember.tensor([1, 2, 3], dtype=ember.int64),
                   (ember.tensor([True, False]), 7, "s", None)],
        "ints": {"i32": ember.tensor([-5, 9], dtype=ember.int32),
                 "i16": ember.tensor([300], dtype=ember.int16),
                 "i8": ember.tensor([-3], dtype=ember.int8),
                 "u8": ember.tensor([200, 1], dtype=ember.uint8)},
        "empty": ember.zeros(0, 3),
        "scalar": ember.tensor(2.5),
    }, buffer)
    return buffer.getvalue()


def looped(x, n: int):
    for i in range(n):
        x = x * 2 + i
    return x.relu() - 1


def formatted(x, n: int):
    s = f"{n}:{x.sum()!r:>12}|{n + 1:04d}"
    return x * n, s


def fused(x, y):
    z = ember.exp(x) * y + 1.0
    return -(-z), z.sum(0), x[1:, ::2]


class Affine(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = ember.nn.Linear(3, 2)

    def forward(self, x):
        return self.linear(x).tanh()


def program_seeds():
    """(name, file bytes, arguments to call the program with)."""
    ember.manual_seed(0)
    x = ember.arange(12.0).reshape(4, 3)
    seeds = []
    for name, fn, args in [("looped", looped, (x, 3)),
                           ("formatted", formatted, (x, 2)),
                           ("fused", fused, (x, x + 1)),
                           ("module", Affine(), (x,))]:
        buffer = io.BytesIO()
        jit.save(jit.script(fn), buffer)
        seeds.append((name, buffer.getvalue(), args))
    return seeds


# ---- mutations --------------------------------------------------------------------------


def split(raw):
    """(header dict, data bytes) of a safetensors file."""
    length = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + length]), raw[8 + length:]


def join(header, data, rng, lie_about_length=False):
    deep = json.dumps("[" * 5000 + "]" * 5000)   # as a JSON string, and raw:
    blob = json.dumps(header).replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000) \
        .replace(json.dumps(json.dumps(DEEP))[1:-1], deep[1:-1]).encode()
    length = len(blob)
    if lie_about_length:
        length = rng.choice([0, 1, length - 1, length + 1, len(blob) + len(data),
                             2**63, 2**64 - 1, rng.randrange(2**64)])
    return struct.pack("<Q", length) + blob + data


def edit_json(node, rng, depth=0):
    """A copy of the JSON value `node` with one random edit somewhere."""
    if isinstance(node, dict) and node and (depth == 0 or rng.random() < 0.75):
        node = dict(node)
        key = rng.choice(sorted(node))
        action = rng.random()
        if action < 0.1:
            del node[key]
        elif action < 0.2:
            node[rng.choice(["x", "__metadata__", "data_offsets", key + "_"])] = \
                pool_value(rng)
        elif action < 0.5:
            node[key] = pool_value(rng)
        else:
            node[key] = edit_json(node[key], rng, depth + 1)
        return node
    if isinstance(node, list) and node and rng.random() < 0.8:
        node = list(node)
        i = rng.randrange(len(node))
        action = rng.random()
        if action < 0.1:
            del node[i]
        elif action < 0.2:
            node.insert(i, pool_value(rng))
        elif action < 0.5:
            node[i] = pool_value(rng)
        else:
            node[i] = edit_json(node[i], rng, depth + 1)
        return node
    if isinstance(node, str) and node[:1] in "{[" and rng.random() < 0.9:
        try:
            inner = json.loads(node)   # a JSON document inside a string
        except ValueError:
            return pool_value(rng)
        return json.dumps(edit_json(inner, rng, depth + 1))
    if isinstance(node, int) and not isinstance(node, bool) and rng.random() < 0.5:
        return node + rng.choice([-1, 1, -node, 2**31, 2**62, -2**63])
    return pool_value(rng)


def edit_entry(header, rng):
    """A lying tensor entry: data_offsets, shape or dtype."""
    names = [k for k in header if k != "__metadata__"]
    if not names:
        return header
    header = copy.deepcopy(header)
    entry = header[rng.choice(names)]
    field = rng.choice(["data_offsets", "shape", "dtype"])
    if field == "data_offsets":
        begin, end = entry["data_offsets"]
        entry["data_offsets"] = rng.choice([
            [end, begin], [begin + 1, end], [begin, end + 1], [begin - 1, end],
            [0, end], [begin, 2**63], [2**63 - 8, 2**63], [begin, begin]])
    elif field == "shape":
        shape = list(entry["shape"])
        if shape and rng.random() < 0.6:
            shape[rng.randrange(len(shape))] = rng.choice(
                [0, 1, -1, 2**31, 2**62, 2**63 - 1, 2**64])
        else:
            shape = rng.choice([[], [0], [2**32, 2**32], [1] * 70, shape + [1]])
        entry["shape"] = shape
    else:
        entry["dtype"] = rng.choice(["F32", "F64", "I64", "I32", "I16", "I8",
                                     "U8", "BOOL", "F16", "BF16", "U64", "x", 3])
    return header


def edit_program(header, rng):
    """An edit of the program document (JSON in the metadata)."""
    header = copy.deepcopy(header)
    doc = json.loads(header["__metadata__"][METADATA_KEY])
    field = rng.choice(["code", "code", "operands", "operands", "constants",
                        "constants", "callsites", "callsites", "fused", "fused",
                        "nregs", "nargs", "defaults", "arg_types", "state", "lines"])
    if field in doc:
        value = doc[field]
        entry = rng.choice(value) if isinstance(value, list) and value else None
        if field == "code" and isinstance(entry, list) and len(entry) == 4 \
                and rng.random() < 0.5:   # an operand word of an instruction
            entry = list(entry)
            entry[rng.randrange(1, 4)] = rng.choice([-1, 0, 1, 2, 3, 5, 9, 100, 2**31 - 1])
            value[rng.randrange(len(value))] = entry
        elif field == "callsites" and isinstance(entry, list) and entry \
                and rng.random() < 0.5:   # another allowlisted callee
            entry = list(entry)
            entry[0] = rng.choice(sorted(jit.ops.callee_table()))
            value[rng.randrange(len(value))] = entry
        else:
            value = edit_json(value, rng, 1) if isinstance(value, (list, dict)) \
                else value + rng.choice([-1, 1, 2, 100]) if type(value) is int \
                and rng.random() < 0.7 else pool_value(rng)
        doc[field] = value
    else:
        doc = edit_json(doc, rng)
    header["__metadata__"][METADATA_KEY] = json.dumps(doc)
    return header


def mutate(raw, rng, program):
    """One random mutation of a file's bytes."""
    header, data = split(raw)
    if program and rng.random() < 0.6:   # most edits inside the program
        for _ in range(rng.choice([1, 1, 2, 3])):
            header = edit_program(header, rng)
        return join(header, data, rng)
    kind = rng.randrange(7)
    if kind == 0:   # bit flips anywhere
        out = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            bit = rng.randrange(8 * len(out))
            out[bit // 8] ^= 1 << bit % 8
        return bytes(out)
    if kind == 1:   # bit flips in the length and header
        out = bytearray(raw)
        end = 8 + struct.unpack("<Q", raw[:8])[0]
        for _ in range(rng.randint(1, 4)):
            bit = rng.randrange(8 * end)
            out[bit // 8] ^= 1 << bit % 8
        return bytes(out)
    if kind == 2:   # truncation
        return raw[:rng.randrange(len(raw))]
    if kind == 3:   # bytes appended or inserted into the data
        extra = bytes(rng.randrange(256) for _ in range(rng.choice([1, 3, 8, 64])))
        if rng.random() < 0.5:
            return raw + extra
        cut = rng.randrange(len(data) + 1)
        return join(header, data[:cut] + extra + data[cut:], rng)
    if kind == 4:   # a JSON edit of the header
        return join(edit_json(header, rng), data, rng)
    if kind == 5:   # a header-length prefix that lies
        return join(header, data, rng, lie_about_length=True)
    return join(edit_entry(header, rng), data, rng)   # kind 6: an entry that lies


# ---- running a case --------------------------------------------------------------------


class CallTimedOut(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    """Raises CallTimedOut in the main thread after `seconds` (the VM
    checks signals on backward jumps)."""
    def expire(signum, frame):
        raise CallTimedOut()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def reference_tensors(raw):
    """name -> NumPy array as the safetensors reader reads `raw`, or None
    when it refuses the bytes."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    try:
        return safetensors_numpy.load(raw)
    except Exception:   # its errors: SafetensorsError, ValueError, ...
        return None


def check_container_case(raw, where):
    try:
        tensors, _ = container._read_tensors_and_metadata(io.BytesIO(raw), len(raw))
    except (ValueError, RuntimeError):
        tensors = None
    except Exception as exc:
        pytest.fail(f"{where}: the container reader raised {type(exc).__name__}: {exc}")
    try:
        loaded = ember.load(io.BytesIO(raw))
    except (ValueError, RuntimeError):
        loaded = None
    except Exception as exc:
        pytest.fail(f"{where}: ember.load raised {type(exc).__name__}: {exc}")
    if loaded is not None:
        repr(loaded)   # every tensor is readable
    if tensors is None:
        return
    reference = reference_tensors(raw)
    if reference is None:
        return
    assert sorted(tensors) == sorted(reference), where
    for name, tensor in tensors.items():
        want = reference[name]
        got = tensor.numpy()
        assert got.shape == want.shape, (where, name)
        if want.dtype == np.bool_:
            want = want.view(np.uint8) != 0   # any non-zero byte is True
        np.testing.assert_array_equal(got, want, err_msg=f"{where}: {name}")


def small_ints_only(raw):
    """Whether every int constant in the program document is small."""
    try:
        doc = json.loads(split(raw)[0]["__metadata__"][METADATA_KEY])
    except Exception:
        return False

    def ok(node):
        if isinstance(node, dict):
            return all(ok(v) for v in node.values())
        if isinstance(node, list):
            return all(ok(v) for v in node)
        return not isinstance(node, int) or abs(node) <= MAX_INT_TO_RUN
    return ok(doc.get("constants")) and ok(doc.get("defaults")) and ok(doc.get("fused"))


def check_program_case(raw, args, where):
    try:
        loaded = jit.load(io.BytesIO(raw))
    except (ProgramFileError, ValueError, RuntimeError):
        return
    except Exception as exc:
        pytest.fail(f"{where}: ember.jit.load raised {type(exc).__name__}: {exc}")
    if not small_ints_only(raw):
        return
    try:
        with time_limit(CALL_TIME_LIMIT), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # ops' warnings about odd arguments
            loaded(*args)
    except CallTimedOut:
        pass
    except SystemError as exc:
        pytest.fail(f"{where}: calling the program raised SystemError: {exc}")
    except Exception:
        pass   # a mutated program may call an op with the wrong arguments


def run_cases(seeds, check):
    rng = random.Random(SEED)
    print(f"file fuzz: EMBER_FUZZ_SEED={SEED}, {CASES} cases")
    for case in range(CASES):
        name, raw, args = seeds[case % len(seeds)]
        mutated = mutate(raw, rng, program=args is not None)
        check(mutated, args, f"seed {SEED}, case {case} ({name})")


def test_unmutated_files_load():
    raw = container_seed()
    check_container_case(raw, "unmutated")
    assert ember.load(io.BytesIO(raw))["ints"]["u8"].tolist() == [200, 1]
    for name, raw, args in program_seeds():
        loaded = jit.load(io.BytesIO(raw))
        assert small_ints_only(raw), name
        loaded(*args)


def test_fuzz_ember_load():
    seeds = [("container", container_seed(), None)]
    run_cases(seeds, lambda raw, args, where: check_container_case(raw, where))


def test_fuzz_jit_load():
    seeds = program_seeds()
    run_cases(seeds, check_program_case)

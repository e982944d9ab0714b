"""ember.save / ember.load: the safetensors format, round trips, interchange
with the safetensors package (the oracle), and hostile files."""

import io
import json
import math
import os
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember.serialization import SafetensorsError
from ember.serialization import SafetensorsError

DTYPES = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32,
          ember.int64, ember.float32, ember.float64]
NUMPY_OF = {ember.bool: np.bool_, ember.uint8: np.uint8, ember.int8: np.int8,
            ember.int16: np.int16, ember.int32: np.int32, ember.int64: np.int64,
            ember.float32: np.float32, ember.float64: np.float64}


def sample(shape, dtype, seed=0):
    """A tensor of `shape` and `dtype` holding varied values (negatives, big ones)."""
    rng = np.random.default_rng(seed)
    if dtype is ember.bool:
        values = rng.integers(0, 2, size=shape).astype(np.bool_)
    elif dtype in (ember.float32, ember.float64):
        values = (rng.standard_normal(size=shape) * 1e3).astype(NUMPY_OF[dtype])
    else:
        info = np.iinfo(NUMPY_OF[dtype])
        values = rng.integers(info.min, info.max, size=shape, dtype=NUMPY_OF[dtype],
                              endpoint=True)
    return ember.from_numpy(np.ascontiguousarray(values)).clone()


def roundtrip(obj):
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    return ember.load(io.BytesIO(buffer.getvalue()))


def assert_same_tensor(actual, expected):
    assert isinstance(actual, ember.Tensor)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual.numpy(), expected.detach().numpy())


def header_of(data):
    length = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + length]), length


# ------------------------------------------------------------- round trips

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip_every_dtype_and_shape(dtype):
    for shape in [(), (0,), (2, 0, 3), (5,), (2, 3, 4)]:
        t = sample(shape, dtype)
        assert_same_tensor(roundtrip(t), t)
        loaded = roundtrip({"t": t})
        assert list(loaded) == ["t"]
        assert_same_tensor(loaded["t"], t)


def test_float_specials_survive():
    t = ember.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45],
                     dtype=ember.float32)
    back = roundtrip(t).numpy()
    np.testing.assert_array_equal(back, t.numpy())
    assert math.copysign(1, back[3]) == -1


def test_non_contiguous_inputs_are_saved_by_value():
    base = sample((4, 6), ember.float64)
    views = {
        "transposed": base.t(),
        "stepped": base[::2, 1::3],
        "expanded": ember.arange(3, dtype=ember.int32).expand(4, 3),
        "permuted": sample((2, 3, 4), ember.int16).permute(2, 0, 1),
        "offset": base[1:, 2:],
    }
    assert not views["transposed"].is_contiguous()
    loaded = roundtrip(views)
    for name, view in views.items():
        assert_same_tensor(loaded[name], view)
        assert loaded[name].is_contiguous()


def test_shared_memory_is_saved_as_independent_copies():
    base = ember.zeros(4, dtype=ember.float32)
    loaded = roundtrip({"a": base, "b": base[1:3], "c": base})
    loaded["a"].fill_(1.0)
    assert loaded["c"].numpy().tolist() == [0.0] * 4
    assert loaded["b"].numpy().tolist() == [0.0] * 2


def test_requires_grad_is_not_saved():
    w = ember.ones(2, 3, dtype=ember.float32).requires_grad_(True)
    loaded = roundtrip({"w": w, "y": w * 2})   # a leaf and a non-leaf
    for name, expected in [("w", w), ("y", w * 2)]:
        assert loaded[name].requires_grad is False and loaded[name].grad_fn is None
        assert_same_tensor(loaded[name], expected)


def test_loaded_tensors_own_their_memory(tmp_dir):
    path = tmp_dir / "w.safetensors"
    ember.save({"w": ember.arange(4, dtype=ember.int64)}, path)
    loaded = ember.load(path)
    path.write_bytes(b"overwritten")   # the file is no longer needed
    os.remove(path)
    assert loaded["w"].numpy().tolist() == [0, 1, 2, 3]
    loaded["w"].add_(1)                # writable, ember-owned storage
    assert loaded["w"].numpy().tolist() == [1, 2, 3, 4]


def test_nested_optimizer_state_dict_roundtrips_exactly():
    state = {
        "state": {
            0: {"step": ember.tensor(3.0, dtype=ember.float32),
                "exp_avg": sample((2, 3), ember.float32, 1),
                "exp_avg_sq": sample((2, 3), ember.float32, 2)},
            1: {"step": ember.tensor(3.0, dtype=ember.float32),
                "momentum_buffer": None},
        },
        "param_groups": [
            {"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0,
             "amsgrad": False, "maximize": False, "foreach": None,
             "name": "decoder", "max_norm": float("inf"), "params": [0, 1]},
        ],
    }
    loaded = roundtrip(state)
    assert loaded.keys() == state.keys()
    assert list(loaded["state"]) == [0, 1]   # int keys stay ints
    assert_same_tensor(loaded["state"][0]["exp_avg"], state["state"][0]["exp_avg"])
    assert_same_tensor(loaded["state"][1]["step"], state["state"][1]["step"])
    assert loaded["state"][1]["momentum_buffer"] is None
    assert loaded["param_groups"] == state["param_groups"]
    group = loaded["param_groups"][0]
    assert type(group["betas"]) is tuple and type(group["params"]) is list
    assert type(group["weight_decay"]) is int and type(group["amsgrad"]) is bool


def test_nan_leaf_roundtrips():
    assert math.isnan(roundtrip({"x": float("nan")})["x"])


def test_keys_with_dots_and_clashing_flat_names_roundtrip():
    a, b, c = (sample((2,), ember.int32, seed) for seed in range(3))
    obj = {"a.b": {"c": a}, "a": {"b.c": b, "b": {"c": c}}}
    loaded = roundtrip(obj)
    assert list(loaded) == ["a.b", "a"] and list(loaded["a"]) == ["b.c", "b"]
    assert_same_tensor(loaded["a.b"]["c"], a)
    assert_same_tensor(loaded["a"]["b.c"], b)
    assert_same_tensor(loaded["a"]["b"]["c"], c)


def test_lists_tuples_and_scalars_at_any_level():
    t = sample((3,), ember.uint8)
    obj = {"seq": [t, (t, 1, "x"), [], {}], "s": "", "z": -7, "big": 2**70}
    loaded = roundtrip(obj)
    assert_same_tensor(loaded["seq"][0], t)
    assert_same_tensor(loaded["seq"][1][0], t)
    assert loaded["seq"][1][1:] == (1, "x") and loaded["seq"][2:] == [[], {}]
    assert (loaded["s"], loaded["z"], loaded["big"]) == ("", -7, 2**70)
    assert_same_tensor(roundtrip([t])[0], t)


def test_flat_dict_keeps_key_order_and_writes_a_plain_file():
    tensors = {"z": sample((2,), ember.int8), "a.weight": sample((3,), ember.float64),
               "m": sample((), ember.int16)}
    buffer = io.BytesIO()
    ember.save(tensors, buffer)
    header, length = header_of(buffer.getvalue())
    assert "__metadata__" not in header
    assert list(ember.load(io.BytesIO(buffer.getvalue()))) == ["z", "a.weight", "m"]
    assert length % 8 == 0
    for entry in header.values():   # each tensor aligned to its element size
        itemsize = {"I8": 1, "F64": 8, "I16": 2}[entry["dtype"]]
        assert entry["data_offsets"][0] % itemsize == 0


def test_save_to_path_is_atomic_and_leaves_no_temporary(tmp_dir):
    path = tmp_dir / "model.safetensors"
    ember.save({"a": ember.ones(2, dtype=ember.float32)}, str(path))
    ember.save({"b": ember.zeros(3, dtype=ember.int64)}, path)
    assert os.listdir(tmp_dir) == ["model.safetensors"]
    assert list(ember.load(str(path))) == ["b"]
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask


def test_failed_save_leaves_the_old_file(tmp_dir):
    path = tmp_dir / "keep.safetensors"
    ember.save({"a": ember.ones(2, dtype=ember.float32)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="cannot save an object of type set"):
        ember.save({"a": {1, 2}}, path)
    assert path.read_bytes() == before and os.listdir(tmp_dir) == ["keep.safetensors"]


def test_file_objects_read_from_current_position_and_unseekable_streams():
    buffer = io.BytesIO(b"prefix")
    buffer.seek(6)
    ember.save({"a": ember.arange(3, dtype=ember.int16)}, buffer)
    buffer.seek(6)
    assert ember.load(buffer)["a"].numpy().tolist() == [0, 1, 2]

    class Pipe(io.RawIOBase):   # no seek: read in one go
        def __init__(self, data):
            self._data = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self._data.readinto(b)

    assert ember.load(Pipe(buffer.getvalue()[6:]))["a"].numpy().tolist() == [0, 1, 2]


class LyingStream:
    """A seekable binary stream whose readinto (or read, without readinto)
    returns what `answer(buffer, honest_count)` says."""

    def __init__(self, data, answer, with_readinto=True):
        self._data = io.BytesIO(data)
        self._answer = answer
        self.calls = 0
        if with_readinto:
            self.readinto = self._readinto

    def seekable(self):
        return True

    def seek(self, *args):
        return self._data.seek(*args)

    def tell(self):
        return self._data.tell()

    def read(self, n=-1):
        if hasattr(self, "readinto") or self._data.tell() < 16:
            return self._data.read(n)   # the header: honest
        return self._lie(bytearray(n), self._data.readinto)

    def _readinto(self, b):
        return self._lie(b, self._data.readinto)

    def _lie(self, b, honest):
        self.calls += 1
        if self.calls > 10_000:
            pytest.fail("the loader keeps reading from a stream that lies")
        return self._answer(b, honest)


def tensor_file():
    buffer = io.BytesIO()
    ember.save({"a": ember.arange(1000, dtype=ember.int32)}, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("answer", [
    lambda b, honest: -1,                      # looped forever
    lambda b, honest: len(b) + 100,            # uninitialised memory
    lambda b, honest: 2**70,
    lambda b, honest: "3",
    lambda b, honest: 3.0,
    lambda b, honest: True,
])
def test_load_rejects_a_readinto_that_lies(answer):
    with pytest.raises(OSError, match="readinto"):
        ember.load(LyingStream(tensor_file(), answer))


@pytest.mark.parametrize("answer, error", [
    (lambda b, honest: bytes(honest(b)) + b"xx", "returned"),   # more than asked
    (lambda b, honest: "text", "should return bytes"),
    (lambda b, honest: 12, "should return bytes"),
])
def test_load_rejects_a_read_that_lies(answer, error):
    def lie(b, honest):
        return answer(b, lambda buf: buf[:honest(buf)])
    with pytest.raises(OSError, match=error):
        ember.load(LyingStream(tensor_file(), lie, with_readinto=False))


def test_load_handles_short_reads_and_none():
    one_byte = LyingStream(tensor_file(), lambda b, honest: honest(b[:1]))
    assert ember.load(one_byte)["a"].tolist() == list(range(1000))
    with pytest.raises(SafetensorsError, match="truncated"):
        ember.load(LyingStream(tensor_file(), lambda b, honest: None))


def test_numpy_and_subclassed_scalars_load_as_plain_python_values():
    class Flag(int):
        pass

    values = [np.float32(0.5), np.int64(-3), np.bool_(True), np.str_("s"), Flag(4)]
    loaded = roundtrip({"v": values})["v"]
    assert loaded == [0.5, -3, True, "s", 4]
    assert [type(x) for x in loaded] == [float, int, bool, str, int]


def test_save_finishes_short_writes_of_raw_streams():
    class ThreeBytesAtATime(io.RawIOBase):
        def __init__(self):
            self.data = bytearray()

        def writable(self):
            return True

        def write(self, b):
            chunk = bytes(memoryview(b)[:3])
            self.data += chunk
            return len(chunk)

    sink = ThreeBytesAtATime()
    ember.save({"x": ember.arange(5, dtype=ember.int64)}, sink)
    assert ember.load(io.BytesIO(bytes(sink.data)))["x"].tolist() == [0, 1, 2, 3, 4]


def test_load_refuses_text_mode_files(tmp_dir):
    path = tmp_dir / "t.safetensors"
    ember.save({"x": ember.ones(1)}, path)
    with open(path) as text, pytest.raises(TypeError, match="binary mode"):
        ember.load(text)


@pytest.mark.parametrize("bad, error, message", [
    ({"a": {1, 2}}, TypeError, "type set"),
    ({(1, 2): ember.ones(1)}, TypeError, "keys must be str or int"),
    ({True: ember.ones(1)}, TypeError, "keys must be str or int"),
    (object(), TypeError, "type object"),
])
def test_save_refuses_what_it_cannot_store(bad, error, message):
    with pytest.raises(error, match=message):
        ember.save(bad, io.BytesIO())


def test_save_refuses_self_containing_objects():
    loop = {"a": []}
    loop["a"].append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        ember.save(loop, io.BytesIO())


def test_metadata_key_as_a_tensor_name_goes_through_the_structure():
    t = ember.ones(1, dtype=ember.float32)
    loaded = roundtrip({"__metadata__": t})
    assert list(loaded) == ["__metadata__"]
    assert_same_tensor(loaded["__metadata__"], t)


# ----------------------------------------------- interchange with safetensors

def test_header_matches_safetensors_numpy_byte_for_byte_when_order_agrees():
    st_numpy = pytest.importorskip("safetensors.numpy")
    arrays = {"a": np.arange(6, dtype=np.float64).reshape(2, 3),
              "b": np.arange(4, dtype=np.int16)}
    buffer = io.BytesIO()
    ember.save({k: ember.from_numpy(v) for k, v in arrays.items()}, buffer)
    ours, theirs = buffer.getvalue(), st_numpy.save(arrays)
    assert header_of(ours)[0] == header_of(theirs)[0]
    assert ours[-40:] == theirs[-40:]   # the byte buffers agree


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_safetensors_numpy_reads_ember_files_and_back(tmp_dir, dtype):
    st_numpy = pytest.importorskip("safetensors.numpy")
    tensors = {"x.weight": sample((2, 3), dtype).t(), "empty": sample((0, 2), dtype),
               "scalar": sample((), dtype)}
    path = tmp_dir / "e.safetensors"
    ember.save(tensors, path)
    theirs = st_numpy.load_file(str(path))
    assert theirs.keys() == tensors.keys()
    for name, t in tensors.items():
        assert theirs[name].dtype == NUMPY_OF[dtype]
        np.testing.assert_array_equal(theirs[name], t.numpy())
    st_numpy.save_file(theirs, str(path))
    for name, t in ember.load(path).items():
        assert_same_tensor(t, tensors[name])


def test_nested_files_are_still_plain_safetensors_for_the_numpy_reader():
    st_numpy = pytest.importorskip("safetensors.numpy")
    buffer = io.BytesIO()
    ember.save({"state": {0: {"exp_avg": ember.ones(2, dtype=ember.float32)}},
                "param_groups": [{"lr": 0.1}]}, buffer)
    assert list(st_numpy.load(buffer.getvalue())) == ["state.0.exp_avg"]


def test_torch_reads_ember_files(tmp_dir):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    tensors = {f"{dtype}": sample((3, 2), dtype, i).t() for i, dtype in enumerate(DTYPES)}
    path = tmp_dir / "e.safetensors"
    ember.save(tensors, path)
    theirs = st_torch.load_file(str(path))
    for name, t in tensors.items():
        expected = torch.from_numpy(np.ascontiguousarray(t.numpy()))
        assert torch.equal(theirs[name], expected), name


def test_ember_reads_torch_files(tmp_dir):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    g = torch.Generator().manual_seed(0)
    theirs = {
        "linear.weight": torch.randn(3, 4, generator=g, dtype=torch.float32),
        "linear.bias": torch.randn(3, generator=g, dtype=torch.float64),
        "idx": torch.tensor([[-1, 2**40]], dtype=torch.int64),
        "mask": torch.tensor([True, False, True]),
        "bytes": torch.tensor([0, 255], dtype=torch.uint8),
        "small": torch.tensor([-128, 127], dtype=torch.int8),
        "short": torch.tensor([-(2**15)], dtype=torch.int16),
        "int": torch.tensor(7, dtype=torch.int32),
        "none": torch.zeros(0, 5),
    }
    path = tmp_dir / "t.safetensors"
    st_torch.save_file(theirs, str(path), metadata={"format": "pt"})
    ours = ember.load(path)
    assert ours.keys() == theirs.keys()
    for name, t in theirs.items():
        assert ours[name].shape == tuple(t.shape)
        assert str(ours[name].dtype).split(".")[1] == str(t.dtype).split(".")[1]
        np.testing.assert_array_equal(ours[name].numpy(), t.numpy())


def test_unsupported_dtype_from_torch_is_refused_by_name(tmp_dir):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    path = tmp_dir / "h.safetensors"
    st_torch.save_file({"h": torch.zeros(2, dtype=torch.uint16)}, str(path))
    with pytest.raises(SafetensorsError, match="dtype U16 is not supported by ember"):
        ember.load(path)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("mmap", [False, True])
def test_half_precision_files_both_ways_with_torch(tmp_dir, name, mmap):
    """F16 and BF16 entries load bit for bit from a file torch wrote, and
    torch loads the same bits from ember's file (bfloat16 has no NumPy
    type: its 16-bit patterns are moved as they are)."""
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    values = [0.0, -0.0, 1.5, -2.25, 65504.0, 1e-3, float("inf"), float("nan"), 3.0e38]
    theirs = torch.tensor(values, dtype=getattr(torch, name)).reshape(3, 3)
    path = tmp_dir / "theirs.safetensors"
    st_torch.save_file({"w": theirs, "v": theirs[1:].clone()}, str(path))
    ours = ember.load(path, mmap=mmap)
    assert ours["w"].dtype == getattr(ember, name)
    for key, expected in (("w", theirs), ("v", theirs[1:])):
        np.testing.assert_array_equal(ours[key].float().numpy(), expected.float().numpy())
    back = tmp_dir / "ours.safetensors"
    ember.save({"w": ours["w"].t(), "s": ours["w"][1]}, back)
    again = st_torch.load_file(str(back))
    assert again["w"].dtype == theirs.dtype
    assert torch.equal(again["w"].view(torch.int16), theirs.t().contiguous().view(torch.int16))
    assert torch.equal(again["s"].view(torch.int16), theirs[1].view(torch.int16))


# ---------------------------------------------------------- hostile files

def file_of(header, data=b"", raw=None):
    text = raw if raw is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def entry(dtype, shape, offsets):
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


def structured(structure, tensors=None):
    """A file whose ember.structure metadata is `structure` (any JSON)."""
    tensors = tensors or {}
    header = {"__metadata__": {"ember.structure": json.dumps(structure)}}
    data, at = b"", 0
    for name, n in tensors.items():
        header[name] = entry("U8", [n], [at, at + n])
        data, at = data + bytes(n), at + n
    return file_of(header, data)


def root(node, tensors=None):
    return structured({"version": 1, "root": node}, tensors)


F4 = b"\0" * 4
HOSTILE = [
    ("empty file", b"", "file too small"),
    ("truncated length", b"\x10\0\0", "file too small"),
    ("header past end", struct.pack("<Q", 100) + b"{}", "larger than the 2 bytes"),
    ("absurd header length", struct.pack("<Q", 2**62) + b"{}", "exceeds the limit"),
    ("zero header", struct.pack("<Q", 0), "not valid JSON"),
    ("not utf-8", file_of(None, raw=b'{"\xff":1}'), "not valid UTF-8"),
    ("invalid json", file_of(None, raw=b'{"a":'), "not valid JSON"),
    ("trailing junk", file_of(None, raw=b'{}\0'), "not valid JSON"),
    ("NaN in header", file_of(None, raw=b'{"a":NaN}'), "NaN is not valid JSON"),
    ("duplicate key", file_of(None, raw=b'{"a":{},"a":{}}'), "duplicate key 'a'"),
    ("header is a list", file_of([]), "must be a JSON object, got list"),
    ("header is a number", file_of(3), "must be a JSON object, got int"),
    ("deep nesting", file_of(None, raw=b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
     "nested too deeply"),
    ("huge integer", file_of(None, raw=b'{"a":' + b"9" * 5000 + b"}"), "not valid JSON"),
    ("entry not object", file_of({"a": [1]}), "entry must be an object"),
    ("missing offsets", file_of({"a": {"dtype": "F32", "shape": [1]}}, F4),
     "missing field 'data_offsets'"),
    ("unknown dtype", file_of({"a": entry("F99", [1], [0, 4])}, F4), "unknown dtype 'F99'"),
    ("dtype not str", file_of({"a": entry(["F32"], [1], [0, 4])}, F4), "unknown dtype"),
    ("unsupported dtype", file_of({"a": entry("U16", [2], [0, 4])}, F4),
     "dtype U16 is not supported"),
    ("negative dim", file_of({"a": entry("F32", [-1], [0, 4])}, F4), "got -1"),
    ("float dim", file_of({"a": entry("F32", [1.0], [0, 4])}, F4), "got 1.0"),
    ("bool dim", file_of({"a": entry("F32", [True], [0, 4])}, F4), "got True"),
    ("shape not list", file_of({"a": entry("F32", "1", [0, 4])}, F4), "must be a list"),
    ("too many dims", file_of({"a": entry("F32", [1] * 33, [0, 4])}, F4), "at most 32"),
    ("dim past int64", file_of({"a": entry("F32", [2**63, 0], [0, 0])}), "got 9223372036854775808"),
    ("shape overflows", file_of({"a": entry("F32", [2**40] * 3, [0, 4])}, F4), "too large"),
    ("empty but unrepresentable", file_of({"a": entry("U8", [2**62, 2, 0], [0, 0])}),
     "too large"),
    ("negative offset", file_of({"a": entry("F32", [1], [-4, 0])}, F4), "got -4"),
    ("bool offset", file_of({"a": entry("U8", [1], [False, True])}, b"\0"), "got False"),
    ("three offsets", file_of({"a": entry("F32", [1], [0, 4, 4])}, F4), "got 3 numbers"),
    ("offset past end", file_of({"a": entry("F32", [2], [0, 8])}, F4), "past the end"),
    ("begin after end", file_of({"a": entry("F32", [0], [4, 0])}, F4), "begin 4 > end 0"),
    ("size mismatch", file_of({"a": entry("F32", [2], [0, 4])}, b"\0" * 8),
     "takes 8 bytes, but data_offsets span 4"),
    ("more than buffer", file_of({"a": entry("F64", [1000], [0, 4])}, F4),
     "more than the whole 4-byte buffer"),
    ("overlap", file_of({"a": entry("F32", [1], [0, 4]), "b": entry("F32", [1], [0, 4])}, F4),
     "overlap"),
    ("hole", file_of({"a": entry("F32", [1], [0, 4]), "b": entry("F32", [1], [8, 12])},
                     b"\0" * 12), "hole"),
    ("trailing bytes", file_of({"a": entry("F32", [1], [0, 4])}, b"\0" * 8),
     "4 bytes after the last tensor"),
    ("data but no tensors", file_of({}, b"abc"), "3 bytes after the last tensor"),
    ("metadata not object", file_of({"__metadata__": []}), "must be an object of strings"),
    ("metadata value not str", file_of({"__metadata__": {"k": 1}}), "'k' holds int"),
    ("structure not json", file_of({"__metadata__": {"ember.structure": "{"}}),
     "ember.structure is not valid JSON"),
    ("structure wrong version", structured({"version": 2, "root": {"value": 1}}),
     "version 1"),
    ("structure not object", structured([1]), "version 1"),
    ("structure node not object", root([1]), "one key"),
    ("structure unknown kind", root({"pickle": "os.system"}), "unknown node kind"),
    ("structure missing tensor", root({"tensor": "nope"}), "does not hold"),
    ("structure tensor twice", root({"list": [{"tensor": "a"}, {"tensor": "a"}]}, {"a": 1}),
     "named twice"),
    ("structure forgets tensor", root({"value": 1}, {"a": 1}),
     "does not mention the tensors ['a']"),
    ("structure bad dict item", root({"dict": [[1.5, {"value": 1}]]}), "dict item"),
    ("structure bool dict key", root({"dict": [[True, {"value": 1}]]}), "dict item"),
    ("structure duplicate dict key", root({"dict": [["k", {"value": 1}], ["k", {"value": 2}]]}),
     "duplicate dict key 'k'"),
    ("structure list not array", root({"list": {"a": 1}}), "must be a JSON array"),
    ("structure value container", root({"value": [1]}), "must be a JSON scalar"),
    ("structure too deep", root(json.loads('{"list":[' * 100 + "]}" * 100)),
     "more than 64 deep"),
    ("structure json too deep",
     file_of({"__metadata__": {"ember.structure": "[" * 100_000 + "]" * 100_000}}),
     "nested too deeply"),
]


# Pure-Python parsing, 55 cases: the refcount gate runs them once instead of
# six times each (the ASan gate still runs them all).
@pytest.mark.noleakcheck
@pytest.mark.parametrize("data, message", [h[1:] for h in HOSTILE],
                         ids=[h[0] for h in HOSTILE])
def test_hostile_file_raises_a_clear_error(data, message):
    with pytest.raises(SafetensorsError) as info:
        ember.load(io.BytesIO(data))
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.noleakcheck
def test_truncated_real_file_raises_at_every_cut():
    buffer = io.BytesIO()
    ember.save({"a": sample((3,), ember.float64), "b": {"c": ember.ones(2)}}, buffer)
    data = buffer.getvalue()
    for cut in range(len(data)):
        with pytest.raises(SafetensorsError):
            ember.load(io.BytesIO(data[:cut]))


def test_lenient_where_safetensors_is():
    # safetensors accepts these; so does ember.
    assert ember.load(io.BytesIO(file_of(None, raw=b' {} \t'))) == {}
    assert ember.load(io.BytesIO(file_of({"__metadata__": None}))) == {}
    extra = {"a": dict(entry("U8", [1], [0, 1]), extra=1)}
    assert ember.load(io.BytesIO(file_of(extra, b"\7")))["a"].tolist() == [7]
    unsorted = {"a": entry("U8", [1], [1, 2]), "b": entry("U8", [1], [0, 1])}
    loaded = ember.load(io.BytesIO(file_of(unsorted, b"\1\2")))
    assert list(loaded) == ["a", "b"] and loaded["a"].tolist() == [2]


def test_bool_bytes_other_than_one_load_as_true():
    loaded = ember.load(io.BytesIO(file_of({"m": entry("BOOL", [3], [0, 3])}, b"\2\0\xff")))
    assert loaded["m"].tolist() == [True, False, True]
    assert loaded["m"].numpy().view(np.uint8).tolist() == [1, 0, 1]


# --------------------------------------------------------------- hypothesis

@given(dtype=st.sampled_from(DTYPES),
       shape=st.lists(st.integers(0, 4), max_size=4),
       transpose=st.booleans(), seed=st.integers(0, 2**16))
def test_roundtrip_hypothesis(dtype, shape, transpose, seed):
    t = sample(tuple(shape), dtype, seed)
    if transpose and t.dim() >= 2:
        t = t.transpose(0, t.dim() - 1)
    assert_same_tensor(roundtrip({"t": t})["t"], t)
    assert_same_tensor(roundtrip(t), t)

"""ember.save and ember.load: tensors on disk in the safetensors format.

No pickle: a file holds only numbers, names and JSON, so loading one can
never run code.  The layout (https://github.com/huggingface/safetensors):

    8 bytes   N, the header length, a little-endian unsigned 64-bit integer
    N bytes   the header: a UTF-8 JSON object, padded with spaces
    the rest  the byte buffer: every tensor's elements, row-major, little-endian

The header maps each tensor name to its dtype, shape and byte range in the
buffer, relative to the buffer's start:

    {"fc.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
     "fc.bias":   {"dtype": "F32", "shape": [2],    "data_offsets": [24, 32]},
     "__metadata__": {"any key": "any string"}}

The ranges tile the buffer exactly: no holes, no overlaps, nothing after the
last tensor.  ember writes the tensors in order of decreasing element size
and pads the header to a multiple of 8 bytes, so every tensor starts on a
multiple of its element size, as safetensors' own writer does.

What ember.save accepts, and what ember.load gives back:

  * a dict of str -> tensor is written as a plain safetensors file (no
    metadata), readable by safetensors.torch.load_file and
    safetensors.numpy.load_file; ember.load returns the same flat dict.
    Any safetensors file without ember's metadata loads as such a dict.
  * anything else -- a single tensor, nested dicts (int keys too, as in an
    optimizer's state), lists and tuples, with int/float/bool/str/None or
    NumPy array leaves (arrays load back as arrays)
    -- is flattened: each tensor gets a dotted name ("state.0.exp_avg") and
    the whole tree is recorded as JSON in the metadata key "ember.structure".
    That tree names each tensor's entry exactly, so keys holding dots (or
    names that would clash) still come back as they were.  The non-tensor
    leaves live in that JSON too.  ember.load rebuilds the same object.

Tensors are copied: entries that shared memory when saved (two views of one
tensor, a tensor saved twice) load as independent tensors, and
non-contiguous tensors are saved by value.  requires_grad is not saved:
loaded tensors are plain leaves without it.

ember.load treats a file as hostile: every number in the header is checked
before it is used, and a malformed file raises SafetensorsError (a
ValueError) naming the problem, never reads out of bounds.
"""

import io
import json
import os
import sys

import numpy as np

from . import _C
from ._tensor import Tensor

__all__ = ["save", "load", "SafetensorsError", "add_safe_globals", "get_safe_globals",
           "clear_safe_globals", "safe_globals"]


class SafetensorsError(ValueError):
    """A file that is not a valid safetensors file (or not one ember can load)."""


# dtype <-> safetensors code, and the little-endian NumPy type of each code.
_CODE_OF_DTYPE = {
    _C.bool: "BOOL", _C.uint8: "U8", _C.int8: "I8", _C.int16: "I16",
    _C.int32: "I32", _C.int64: "I64", _C.float32: "F32", _C.float64: "F64",
    _C.float16: "F16", _C.bfloat16: "BF16",
}
_DTYPE_OF_CODE = {code: dtype for dtype, code in _CODE_OF_DTYPE.items()}
_NUMPY_OF_CODE = {
    "BOOL": np.dtype("|b1"), "U8": np.dtype("|u1"), "I8": np.dtype("|i1"),
    "I16": np.dtype("<i2"), "I32": np.dtype("<i4"), "I64": np.dtype("<i8"),
    "F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # NumPy has no bfloat16: its bits, moved as they are
}
# Codes safetensors knows but ember has no dtype for: refused by name.
_UNSUPPORTED_CODES = {
    "U16", "U32", "U64", "C64", "F4", "F6_E2M3", "F6_E3M2",
    "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
}

METADATA_KEY = "__metadata__"
STRUCTURE_KEY = "ember.structure"
STRUCTURE_VERSION = 1
MAX_HEADER_BYTES = 100 * 1024 * 1024   # safetensors' own limit
MAX_DEPTH = 64                          # nesting of saved containers
MAX_DIMS = 32                           # TH_MAX_DIMS
_INT64_MAX = 2**63 - 1


# ------------------------------------------------------- allowed globals

# PyTorch's torch.load(weights_only=True) unpickles only the classes a
# program allows with these.  ember files hold no pickles and load no
# classes, so the list is kept (programs call these) and nothing reads it.
_safe_globals = []


def add_safe_globals(safe_globals):
    _safe_globals.extend(safe_globals)


def get_safe_globals():
    return list(_safe_globals)


def clear_safe_globals():
    _safe_globals.clear()


class safe_globals:
    """`with safe_globals([...]):` allows the globals within the block."""

    def __init__(self, safe_globals):
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        self._saved = get_safe_globals()
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc_info):
        _safe_globals[:] = self._saved
        return False


# --------------------------------------------------------------------- save

def save(obj, f):
    """Saves `obj` to `f` (a path or a writable binary file) as safetensors.

    `obj` is a tensor, or a dict (nested dicts, lists and tuples allowed)
    whose leaves are tensors, int, float, bool, str or None.  A flat dict of
    str -> tensor becomes a plain safetensors file.  Given a path, the file
    is written to a temporary file in the same directory and renamed over
    `f`, so a reader never sees half a file.

    Entries sharing memory are saved as independent copies; requires_grad
    is not saved.  See the module docstring for the format.
    """
    tensors, metadata = _flatten_for_file(obj)
    if isinstance(f, (str, bytes, os.PathLike)):
        _write_atomically(os.fsdecode(f), tensors, metadata)
    else:
        _write_stream(f, tensors, metadata)


def _flatten_for_file(obj):
    """(name -> tensor dict, metadata dict or None) to write for `obj`."""
    if _is_plain_tensor_dict(obj):
        return dict(obj), None
    tensors = {}
    tree = _describe(obj, [], tensors, set())
    structure = {"version": STRUCTURE_VERSION, "root": tree}
    return tensors, {STRUCTURE_KEY: json.dumps(structure, separators=(",", ":"))}


def _is_plain_tensor_dict(obj):
    return (isinstance(obj, dict)
            and all(type(k) is str and isinstance(v, Tensor) for k, v in obj.items())
            and METADATA_KEY not in obj)


def _describe(obj, path, tensors, open_containers):
    """The JSON tree of `obj`; adds its tensors to `tensors` under fresh names.

    Tree nodes: {"tensor": name}, {"ndarray": name} (a NumPy array, saved as
    a tensor and loaded back as an array), {"value": json scalar},
    {"dict": [[key, node], ...]} (keys str or int, in order),
    {"list": [node, ...]}, {"tuple": [node, ...]}.
    """
    if isinstance(obj, Tensor):
        name = _fresh_name(path, tensors)
        tensors[name] = obj
        return {"tensor": name}
    if isinstance(obj, np.ndarray):
        name = _fresh_name(path, tensors)
        tensors[name] = _tensor_of_array(obj, path)
        return {"ndarray": name}
    scalar = _json_scalar(obj)
    if scalar is not _NOT_SCALAR:
        return {"value": scalar}
    if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
        raise TypeError(f"ember.save: cannot save a whole {type(obj).__name__} at "
                        f"{_where(path)}: ember files hold data, never code; save its "
                        f"state_dict() instead (ember.save(obj.state_dict(), f)) and "
                        f"load it into a new instance with load_state_dict()")
    if not isinstance(obj, (dict, list, tuple)):
        raise TypeError(f"ember.save: cannot save an object of type {type(obj).__name__} "
                        f"at {_where(path)}: only tensors, dicts, lists, tuples, int, "
                        f"float, bool, str and None")
    if id(obj) in open_containers:
        raise ValueError(f"ember.save: the object at {_where(path)} contains itself")
    if len(path) >= MAX_DEPTH:
        raise ValueError(f"ember.save: containers nested more than {MAX_DEPTH} deep "
                         f"at {_where(path)}")
    open_containers.add(id(obj))
    try:
        if isinstance(obj, dict):
            items = []
            for key, value in obj.items():
                if type(key) not in (str, int):
                    raise TypeError(f"ember.save: dict keys must be str or int, got "
                                    f"{type(key).__name__} at {_where(path)}")
                items.append([key, _describe(value, path + [key], tensors, open_containers)])
            return {"dict": items}
        nodes = [_describe(v, path + [i], tensors, open_containers) for i, v in enumerate(obj)]
        return {"tuple" if isinstance(obj, tuple) else "list": nodes}
    finally:
        open_containers.discard(id(obj))


_NOT_SCALAR = object()


def _tensor_of_array(array, path):
    """A NumPy array inside a saved object, as a tensor (a view when it can be)."""
    if array.dtype.newbyteorder("=") not in _NUMPY_OF_CODE.values() or array.dtype.hasobject:
        raise TypeError(f"ember.save: cannot save a NumPy array of dtype {array.dtype} at "
                        f"{_where(path)}: ember has no such dtype")
    return _C.from_numpy(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("=")))


def _json_scalar(obj):
    """obj as a plain JSON scalar (bool, int, float, str, None), or _NOT_SCALAR.

    Subclasses (IntEnum, np.float64) and NumPy scalars become the plain type.
    """
    if isinstance(obj, (np.bool_, np.integer, np.floating, np.str_)):
        obj = obj.item()
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, str):
        return str(obj)
    return _NOT_SCALAR


def _fresh_name(path, taken):
    """The dotted path, made unique (a key "a.b" and a path a -> b would clash)."""
    name = ".".join(str(part) for part in path) or "tensor"
    candidate, n = name, 1
    while candidate in taken or candidate == METADATA_KEY:
        candidate, n = f"{name}~{n}", n + 1
    return candidate


def _where(path):
    return "the top level" if not path else "key path " + repr(path)


def _write_atomically(path, tensors, metadata):
    tmp, fd = _create_temporary_next_to(path)
    try:
        with os.fdopen(fd, "wb") as stream:
            _write_stream(stream, tensors, metadata)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _create_temporary_next_to(path):
    """(name, fd) of a new file in path's directory (so os.replace is atomic).

    Created with mode 0o666 like open(path, "wb"), so the umask applies as it
    would to `path` itself (tempfile.mkstemp would make it 0o600).
    """
    directory, base = os.path.split(os.path.abspath(path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue


def _write_stream(stream, tensors, metadata):
    arrays = {name: _little_endian_array(name, t) for name, t in tensors.items()}
    codes = {name: _CODE_OF_DTYPE[t.dtype] for name, t in tensors.items()}
    header = _build_header(arrays, codes, metadata)
    _write_all(stream, len(header).to_bytes(8, "little"))
    _write_all(stream, header)
    for name in _buffer_order(arrays):
        array = arrays[name]
        if array.size:
            _write_all(stream, np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def _write_all(stream, data):
    """stream.write until all of `data` is written (a raw stream may write less)."""
    view, done = memoryview(data), 0
    while done < len(view):
        written = stream.write(view[done:])
        done += len(view) - done if written is None else written


def _little_endian_array(name, tensor):
    """The tensor's elements as a NumPy array (a view where possible), little-endian."""
    if tensor.dtype not in _CODE_OF_DTYPE:
        raise TypeError(f"ember.save: tensor {name!r} has dtype {tensor.dtype}, "
                        f"which safetensors cannot store")
    array = _elements(tensor.detach().cpu().contiguous())
    return array.astype(array.dtype.newbyteorder("<"), copy=False)


def _elements(tensor):
    """A NumPy array sharing a contiguous tensor's memory: numpy() for the
    dtypes NumPy has, and for bfloat16 its 16-bit patterns as uint16."""
    if tensor.dtype != _C.bfloat16:
        return tensor.numpy()
    start = tensor.storage_offset() * 2
    raw = np.frombuffer(tensor.untyped_storage(), dtype=np.uint8)
    return raw[start:start + tensor.numel() * 2].view(np.uint16).reshape(tensor.shape)


def _buffer_order(arrays):
    # Largest element size first: with the header padded to 8 bytes, every
    # tensor then starts at a multiple of its own element size.
    return sorted(arrays, key=lambda name: -arrays[name].itemsize)


def _build_header(arrays, codes, metadata):
    """The header bytes, padded with spaces to a multiple of 8."""
    offsets, position = {}, 0
    for name in _buffer_order(arrays):
        offsets[name] = [position, position + arrays[name].nbytes]
        position += arrays[name].nbytes
    header = {}
    if metadata is not None:
        header[METADATA_KEY] = metadata
    for name, array in arrays.items():   # entries in the caller's order
        header[name] = {"dtype": codes[name], "shape": list(array.shape),
                        "data_offsets": offsets[name]}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return text + b" " * (-len(text) % 8)


# --------------------------------------------------------------------- load

def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Loads what ember.save wrote to `f` (a path or a readable binary file).

    Files without ember's structure metadata (e.g. from
    safetensors.torch.save_file) load as a flat dict of name -> tensor, in
    header order.  The tensors own their memory: nothing refers to the file
    afterwards, unless `mmap=True`.  A malformed file raises SafetensorsError.
    A file object is read from its current position to its end.

    PyTorch's other arguments, as far as they mean something here:
      * map_location: where the tensors go: None, 'cpu', an ember.device, a
        dict of saved location -> location, or a callable(storage, location)
        returning the storage to use.  Tensors are saved from the CPU, so
        their location is 'cpu'; mapping it to a device that is not
        available raises.
      * weights_only: every ember load is weights-only (a file holds no
        code), so True, False and None all load the same way.
      * mmap: with True and a path, tensors are copy-on-write views of the
        file mapped into memory (no bytes read up front; writes to them stay
        in this process), as torch.load(mmap=True).
      * pickle_module and pickle_load_args: ember never unpickles, so a
        pickle_module is refused and the pickle arguments (encoding=...)
        have nothing to act on.
    """
    if pickle_module is not None:
        raise TypeError("ember.load: ember files hold no pickles, so there is no use "
                        "for pickle_module")
    if mmap:
        if not isinstance(f, (str, bytes, os.PathLike)):
            raise ValueError("f must be a file path in order to use the mmap argument")
        obj = _load_mapped(os.fsdecode(f))
    elif isinstance(f, (str, bytes, os.PathLike)):
        with open(f, "rb") as stream:
            obj = _load_stream(*_sized_stream(stream))
    else:
        obj = _load_stream(*_sized_stream(f))
    if map_location is not None:
        obj = _map_locations(obj, map_location)
    return obj


def _load_mapped(path):
    """load() of a path through a copy-on-write memory map of the whole file."""
    with open(path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        entries, metadata, buffer_size = _read_header(stream, size)
    mapping = np.memmap(path, dtype=np.uint8, mode="c") if size else np.zeros(0, np.uint8)
    start = size - buffer_size
    tensors = {name: _mapped_tensor(mapping, start, entry) for name, entry in entries.items()}
    if metadata is None or STRUCTURE_KEY not in metadata:
        return tensors
    return _rebuild(metadata[STRUCTURE_KEY], tensors)


def _mapped_tensor(mapping, start, entry):
    """A tensor viewing its bytes in the mapped file; a copy where a view
    cannot be (bool bytes must be normalised, bfloat16 has no NumPy type,
    misaligned or big-endian data)."""
    code = entry["dtype"]
    begin, end = entry["data_offsets"]
    dtype = _NUMPY_OF_CODE[code]
    raw = mapping[start + begin:start + end]
    if (code in ("BOOL", "BF16") or sys.byteorder == "big"
            or (start + begin) % dtype.itemsize or raw.size == 0):
        return _read_tensor(io.BytesIO(raw.tobytes()), entry)
    return _C.from_numpy(raw.view(dtype).reshape(entry["shape"]))


def _map_locations(obj, map_location):
    """`obj` with each tensor moved where map_location says a 'cpu' tensor goes."""
    if isinstance(obj, Tensor):
        return _map_tensor(obj, map_location)
    if isinstance(obj, dict):
        return {key: _map_locations(value, map_location) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [_map_locations(value, map_location) for value in obj]
        return items if isinstance(obj, list) else tuple(items)
    return obj


def _map_tensor(tensor, map_location):
    from ._device import device
    if callable(map_location) and not isinstance(map_location, (str, device)):
        storage = tensor.untyped_storage()
        result = map_location(storage, "cpu")
        if result is None or result is storage:
            return tensor
        raise TypeError("ember.load: a map_location function must return the storage it "
                        "was given (or None): ember cannot rebuild a tensor on another "
                        "storage")
    if isinstance(map_location, dict):
        map_location = map_location.get("cpu", "cpu")
    target = device(map_location)
    if target.type == "cpu":
        return tensor
    from . import cuda
    if not cuda.is_available():
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but "
            "ember.cuda.is_available() is False. If you are running on a CPU-only "
            "machine, please use ember.load with map_location=ember.device('cpu') to "
            "map your storages to the CPU.")
    # a leaf on the device, as the file's tensors are leaves on the host
    return tensor.detach().to(target).requires_grad_(tensor.requires_grad)


def _sized_stream(f):
    """(stream, bytes from the current position to the end) for a file object."""
    if isinstance(f, io.TextIOBase):
        raise TypeError("ember.load: the file must be opened in binary mode ('rb')")
    try:
        if f.seekable():
            start = f.tell()
            end = f.seek(0, os.SEEK_END)
            f.seek(start)
            return f, end - start
    except (AttributeError, OSError):
        pass
    data = f.read()   # a pipe or socket: its length is known only once read
    return io.BytesIO(data), len(data)


def _read_tensors_and_metadata(stream, size):
    """(name -> tensor in header order, metadata or None) of a file: the
    container alone (ember.jit's program files use it too)."""
    entries, metadata, buffer_size = _read_header(stream, size)
    tensors = {name: _read_tensor(stream, entry) for name, entry in
               sorted(entries.items(), key=lambda item: item[1]["data_offsets"])}
    return {name: tensors[name] for name in entries}, metadata   # header order


def _load_stream(stream, size):
    tensors, metadata = _read_tensors_and_metadata(stream, size)
    if metadata is None or STRUCTURE_KEY not in metadata:
        return tensors
    return _rebuild(metadata[STRUCTURE_KEY], tensors)


def _read_header(stream, size):
    """(name -> checked entry, metadata or None, buffer size); the stream ends up
    at the start of the buffer."""
    if size < 8:
        raise SafetensorsError(f"file too small: {size} bytes, but the header length "
                               f"alone takes 8")
    header_length = int.from_bytes(_read_exactly(stream, 8), "little")
    if header_length > MAX_HEADER_BYTES:
        raise SafetensorsError(f"header length {header_length} exceeds the limit of "
                               f"{MAX_HEADER_BYTES} bytes")
    if header_length > size - 8:
        raise SafetensorsError(f"header length {header_length} is larger than the "
                               f"{size - 8} bytes after it (truncated file?)")
    header = _parse_header_json(_read_exactly(stream, header_length))
    metadata = _check_metadata(header.pop(METADATA_KEY, None))
    buffer_size = size - 8 - header_length
    entries = {name: _check_entry(name, info, buffer_size) for name, info in header.items()}
    _check_tiling(entries, buffer_size)
    return entries, metadata, buffer_size


def _parse_header_json(raw):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SafetensorsError(f"header is not valid UTF-8: {e}") from None
    try:
        header = _strict_json_loads(text)
    except RecursionError:
        raise SafetensorsError("header JSON is nested too deeply") from None
    except ValueError as e:
        raise SafetensorsError(f"header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"header must be a JSON object, got {type(header).__name__}")
    return header


def _strict_json_loads(text, allow_nan=False):
    """json.loads refusing duplicate keys, and NaN/Infinity (not JSON) unless
    allow_nan (ember's own structure JSON may hold float("nan") leaves)."""
    def no_duplicates(pairs):
        result = {}
        for key, value in pairs:
            if key in result:
                raise ValueError(f"duplicate key {key!r}")
            result[key] = value
        return result

    def no_constants(name):
        raise ValueError(f"{name} is not valid JSON")

    return json.loads(text, object_pairs_hook=no_duplicates,
                      parse_constant=float if allow_nan else no_constants)


def _check_metadata(metadata):
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise SafetensorsError(f"__metadata__ must be an object of strings, got "
                               f"{type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise SafetensorsError(f"__metadata__ values must be strings, but {key!r} "
                                   f"holds {type(value).__name__}")
    return metadata


def _check_entry(name, info, buffer_size):
    """The entry {"dtype", "shape", "data_offsets"} of tensor `name`, checked."""
    if not isinstance(info, dict):
        raise SafetensorsError(f"tensor {name!r}: entry must be an object, "
                               f"got {type(info).__name__}")
    for field in ("dtype", "shape", "data_offsets"):
        if field not in info:
            raise SafetensorsError(f"tensor {name!r}: missing field {field!r}")
    code = info["dtype"]
    if isinstance(code, str) and code in _UNSUPPORTED_CODES:
        raise SafetensorsError(f"tensor {name!r}: dtype {code} is not supported by ember")
    if not isinstance(code, str) or code not in _NUMPY_OF_CODE:
        raise SafetensorsError(f"tensor {name!r}: unknown dtype {code!r}")
    shape = _check_int_list(name, "shape", info["shape"])
    if len(shape) > MAX_DIMS:
        raise SafetensorsError(f"tensor {name!r}: {len(shape)} dimensions, but ember "
                               f"tensors have at most {MAX_DIMS}")
    offsets = _check_int_list(name, "data_offsets", info["data_offsets"])
    if len(offsets) != 2:
        raise SafetensorsError(f"tensor {name!r}: data_offsets must be [begin, end], "
                               f"got {len(offsets)} numbers")
    begin, end = offsets
    if begin > end:
        raise SafetensorsError(f"tensor {name!r}: data_offsets begin {begin} > end {end}")
    if end > buffer_size:
        raise SafetensorsError(f"tensor {name!r}: data_offsets end {end} is past the end "
                               f"of the {buffer_size}-byte buffer")
    itemsize = _NUMPY_OF_CODE[code].itemsize
    nbytes = _nbytes(name, shape, itemsize, limit=buffer_size)
    if nbytes != end - begin:
        raise SafetensorsError(f"tensor {name!r}: shape {shape} of {code} takes {nbytes} "
                               f"bytes, but data_offsets span {end - begin}")
    return {"dtype": code, "shape": shape, "data_offsets": (begin, end)}


def _check_int_list(name, field, value):
    """`value` as a list of non-negative int64s (JSON true/false are not numbers)."""
    if not isinstance(value, list):
        raise SafetensorsError(f"tensor {name!r}: {field} must be a list of integers, "
                               f"got {type(value).__name__}")
    for x in value:
        if type(x) is not int or not 0 <= x <= _INT64_MAX:
            raise SafetensorsError(f"tensor {name!r}: {field} must hold non-negative "
                                   f"integers, got {x!r}")
    return value


def _nbytes(name, shape, itemsize, limit):
    """Bytes of a tensor of `shape`, checked to be at most `limit`.

    Zero dims are left out of the int64 overflow check, as NumPy and ember
    do: [2**62, 2**62, 0] holds no element, yet no array can have that shape.
    """
    nbytes = itemsize
    for size in shape:
        if size:
            nbytes *= size
            if nbytes > _INT64_MAX:
                raise SafetensorsError(f"tensor {name!r}: shape {shape} is too large")
    nbytes = 0 if 0 in shape else nbytes
    if nbytes > limit:
        raise SafetensorsError(f"tensor {name!r}: shape {shape} needs {nbytes} bytes, "
                               f"more than the whole {limit}-byte buffer")
    return nbytes


def _check_tiling(entries, buffer_size):
    """The byte ranges must cover [0, buffer_size) exactly once."""
    expected = 0
    ordered = sorted(entries.items(), key=lambda item: item[1]["data_offsets"])
    for name, entry in ordered:
        begin, end = entry["data_offsets"]
        if begin > expected:
            raise SafetensorsError(f"tensor {name!r}: data_offsets leave a hole: bytes "
                                   f"[{expected}, {begin}) belong to no tensor")
        if begin < expected:
            raise SafetensorsError(f"tensor {name!r}: data_offsets [{begin}, {end}] "
                                   f"overlap another tensor (which ends at {expected})")
        expected = end
    if expected != buffer_size:
        raise SafetensorsError(f"buffer holds {buffer_size - expected} bytes after the "
                               f"last tensor (tensors cover {expected} of {buffer_size})")


def _read_tensor(stream, entry):
    """A fresh ember tensor filled straight from the stream (at its data_offsets)."""
    code, shape = entry["dtype"], entry["shape"]
    tensor = _C.empty(shape, dtype=_DTYPE_OF_CODE[code])
    array = _elements(tensor)
    if array.size == 0:
        return tensor
    raw = array.reshape(-1).view(np.uint8)
    _read_exactly_into(stream, raw)
    if code == "BOOL":
        np.minimum(raw, 1, out=raw)   # a bool byte must be 0 or 1: any non-zero is True
    elif sys.byteorder == "big" and array.itemsize > 1:
        array.byteswap(inplace=True)  # the file is little-endian
    return tensor


# Note [Streams are untrusted code]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A file object's read() and readinto() may be Python code that returns
# anything.  A count outside [0, wanted] (readinto returning -1 looped
# forever; one above the buffer ended the loop with the tensor's memory
# left uninitialised) or a result of the wrong type raises OSError, as
# io.BufferedReader does for a raw stream that lies; None (no data yet,
# non-blocking) counts as the end of the data: a truncated file.


def _read_exactly(stream, n):
    data = stream.read(n)
    if data is None:
        data = b""
    if not isinstance(data, (bytes, bytearray)):
        raise OSError(f"read() should return bytes, not {type(data).__name__}")
    if len(data) > n:
        raise OSError(f"read({n}) returned {len(data)} bytes")
    if len(data) != n:
        raise SafetensorsError(f"file truncated: wanted {n} bytes, got {len(data)}")
    return data


def _read_some_into(stream, view):
    """Reads into the memoryview `view`; how many bytes (0 at the end)."""
    wanted = len(view)
    readinto = getattr(stream, "readinto", None)
    if readinto is None:
        chunk = _read_exactly(stream, 0) if wanted == 0 else stream.read(wanted)
        if chunk is None:
            return 0
        if not isinstance(chunk, (bytes, bytearray)):
            raise OSError(f"read() should return bytes, not {type(chunk).__name__}")
        if len(chunk) > wanted:
            raise OSError(f"read({wanted}) returned {len(chunk)} bytes")
        view[:len(chunk)] = chunk
        return len(chunk)
    n = readinto(view)
    if n is None:
        return 0
    if type(n) is not int or not 0 <= n <= wanted:
        raise OSError(f"readinto() returned {_short(n)}, not a byte count between "
                      f"0 and {wanted}")
    return n


def _read_exactly_into(stream, buffer):
    """Fills `buffer` from the stream (Note [Streams are untrusted code])."""
    with memoryview(buffer) as view:
        filled = 0
        while filled < len(view):
            with view[filled:] as rest:
                n = _read_some_into(stream, rest)
            if n == 0:
                raise SafetensorsError(f"file truncated: a tensor wanted {len(view)} "
                                       f"bytes, got {filled}")
            filled += n


# ------------------------------------------------------------ the structure

def _rebuild(structure_json, tensors):
    """The object described by the "ember.structure" metadata, with `tensors`."""
    try:
        structure = _strict_json_loads(structure_json, allow_nan=True)
    except RecursionError:
        raise SafetensorsError(f"{STRUCTURE_KEY} is nested too deeply") from None
    except ValueError as e:
        raise SafetensorsError(f"{STRUCTURE_KEY} is not valid JSON: {e}") from None
    if (not isinstance(structure, dict) or structure.get("version") != STRUCTURE_VERSION
            or "root" not in structure):
        raise SafetensorsError(f"{STRUCTURE_KEY} must be an object with version "
                               f"{STRUCTURE_VERSION} and a root")
    unused = dict(tensors)
    obj = _rebuild_node(structure["root"], unused, 0)
    if unused:
        raise SafetensorsError(f"{STRUCTURE_KEY} does not mention the tensors "
                               f"{sorted(unused)}")
    return obj


def _rebuild_node(node, unused, depth):
    if depth > MAX_DEPTH:
        raise SafetensorsError(f"{STRUCTURE_KEY} is nested more than {MAX_DEPTH} deep")
    if not isinstance(node, dict) or len(node) != 1:
        raise SafetensorsError(f"{STRUCTURE_KEY}: each node must be an object with one "
                               f"key, got {_short(node)}")
    (kind, payload), = node.items()
    if kind == "tensor":
        if not isinstance(payload, str) or payload not in unused:
            raise SafetensorsError(f"{STRUCTURE_KEY} names tensor {_short(payload)}, which "
                                   f"the file does not hold (or which is named twice)")
        return unused.pop(payload)
    if kind == "ndarray":
        return _rebuild_node({"tensor": payload}, unused, depth).numpy()
    if kind == "value":
        if isinstance(payload, (dict, list)):
            raise SafetensorsError(f"{STRUCTURE_KEY}: a value must be a JSON scalar, "
                                   f"got {_short(payload)}")
        return payload
    if kind in ("list", "tuple"):
        if not isinstance(payload, list):
            raise SafetensorsError(f"{STRUCTURE_KEY}: a {kind} must be a JSON array")
        items = [_rebuild_node(child, unused, depth + 1) for child in payload]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return _rebuild_dict(payload, unused, depth)
    raise SafetensorsError(f"{STRUCTURE_KEY}: unknown node kind {_short(kind)}")


def _rebuild_dict(payload, unused, depth):
    if not isinstance(payload, list):
        raise SafetensorsError(f"{STRUCTURE_KEY}: a dict must be a JSON array of pairs")
    result = {}
    for pair in payload:
        if not (isinstance(pair, list) and len(pair) == 2
                and type(pair[0]) in (str, int)):
            raise SafetensorsError(f"{STRUCTURE_KEY}: a dict item must be [str or int "
                                   f"key, node], got {_short(pair)}")
        key, child = pair
        if key in result:
            raise SafetensorsError(f"{STRUCTURE_KEY}: duplicate dict key {key!r}")
        result[key] = _rebuild_node(child, unused, depth + 1)
    return result


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."

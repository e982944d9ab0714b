"""Text rendering of tensors.

This module turns the data of a tensor (handed over as a NumPy array) into the
same text PyTorch 2.x produces for ``repr(tensor)`` / ``str(tensor)``, with the
``torch.`` namespace replaced by ``ember.`` in dtype suffixes.

It is deliberately free of any dependency on the rest of the ``ember`` package
so that it can be imported (and tested) on its own.

Layout rules reproduced here:

* floating tensors whose finite non-zero values are all integral print as
  ``1.``; otherwise fixed notation with ``precision`` digits (``1.2346``);
  scientific notation (``1.0000e+10``) is chosen when the largest/smallest
  magnitude ratio exceeds 1000, the largest magnitude exceeds 1e8 or the
  smallest is below 1e-4 (unless forced through ``set_printoptions``);
* every element of a tensor is right-aligned to a common width;
* 1-D rows wrap at ``linewidth`` columns;
* sub-tensors of an n-D tensor are separated by ``n - 1`` newlines and
  indented under their opening bracket;
* tensors with more than ``threshold`` elements are summarised, keeping
  ``edgeitems`` entries at both ends of each dimension;
* empty tensors print as ``[]`` with ``size=``/``dtype=`` suffixes, and the
  ``dtype=`` suffix is omitted for the default float dtype, int64 and bool.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator

import numpy as np

__all__ = [
    "tensor_repr",
    "set_printoptions",
    "get_printoptions",
    "printoptions",
]


# ---------------------------------------------------------------------------
# Print options (module-level state)
# ---------------------------------------------------------------------------


class _PrintOptions:
    __slots__ = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")

    def __init__(self) -> None:
        self.precision: int = 4
        self.threshold: float = 1000
        self.edgeitems: int = 3
        self.linewidth: int = 80
        self.sci_mode: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


_OPTS = _PrintOptions()

_PROFILES: dict[str, dict[str, Any]] = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(
    precision=None,
    threshold=None,
    edgeitems=None,
    linewidth=None,
    profile=None,
    sci_mode=None,
):
    """Set options for printing tensors (same semantics as torch).

    Args:
        precision: digits after the decimal point for floating output (default 4).
        threshold: element count above which output is summarised (default 1000).
        edgeitems: items kept at each end of a summarised dimension (default 3).
        linewidth: characters per line used for wrapping rows (default 80).
        profile: ``"default"``, ``"short"`` or ``"full"`` presets; explicit
            arguments override the preset.  Unknown names are ignored.
        sci_mode: ``True``/``False`` forces scientific / fixed notation;
            ``None`` lets the formatter decide.  Like torch, this option is
            reset on every call, so omitting it means ``None``.
    """
    # Every value is checked before any is set, so a bad call changes
    # nothing (NumPy's checks and messages: torch checks nothing, and a bad
    # value would break every later repr).
    chosen = dict(_PROFILES[profile]) if profile in _PROFILES else {}
    given = {"precision": precision, "threshold": threshold,
             "edgeitems": edgeitems, "linewidth": linewidth}
    chosen.update({name: value for name, value in given.items() if value is not None})
    for name, value in chosen.items():
        _check_print_option(name, value)
    if sci_mode is not None and not isinstance(sci_mode, (bool, np.bool_)):
        raise TypeError(f"sci_mode must be a bool or None, got {type(sci_mode).__name__}")
    for name, value in chosen.items():
        setattr(_OPTS, name, value)
    _OPTS.sci_mode = sci_mode


def _check_print_option(name, value):
    """Raises TypeError/ValueError for a value the layout code can't use."""
    if name == "threshold":
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError("threshold must be numeric")
        if math.isnan(value):
            raise ValueError("threshold must be non-NAN, try sys.maxsize for "
                             "untruncated representation")
        if value < 0:
            raise ValueError("threshold must be >= 0")
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer")
    if value < 0:
        raise ValueError(f"{name} must be >= 0")


def get_printoptions() -> dict[str, Any]:
    """Current print options, usable as ``**kwargs`` for ``set_printoptions``."""
    return _OPTS.as_dict()


@contextlib.contextmanager
def printoptions(**kwargs) -> Iterator[None]:
    """Context manager temporarily changing the print options."""
    saved = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**saved)


# ---------------------------------------------------------------------------
# dtype helpers
# ---------------------------------------------------------------------------

_DTYPE_ALIASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "bool_": "bool",
}


def _dtype_key(dtype: Any) -> str | None:
    """Normalise a dtype given as ``"float32"``, ``"ember.float32"``, a
    NumPy dtype or any object with a ``name`` attribute to a bare name."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        text = dtype
    else:
        text = getattr(dtype, "name", None)
        if not isinstance(text, str):
            text = str(dtype)
    text = text.strip().rsplit(".", 1)[-1]
    return _DTYPE_ALIASES.get(text, text)


_INTEGRAL_NAMES = frozenset(
    ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]
)


def _is_float_name(name: str) -> bool:
    return name.startswith(("float", "bfloat"))


def _is_complex_name(name: str) -> bool:
    return name.startswith("complex")


# ---------------------------------------------------------------------------
# Element formatting
# ---------------------------------------------------------------------------


class _ElementFormatter:
    """Decides how one family of values is printed and the common width.

    ``sample`` holds the values that are going to be displayed (the
    summarised subset when summarising).
    """

    def __init__(self, sample: np.ndarray, floating: bool) -> None:
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = np.asarray(sample).reshape(-1)

        if not floating:
            for item in flat.tolist():
                self.width = max(self.width, len(str(item)))
            return

        vals = flat.astype(np.float64)  # exact for every supported float dtype
        interesting = vals[np.isfinite(vals) & (vals != 0)]
        if interesting.size == 0:
            # Only zeros / nan / inf: keep integer style, fixed notation.
            return

        mags = np.abs(interesting)
        smallest = float(mags.min())
        largest = float(mags.max())
        self.int_mode = bool(np.all(interesting == np.ceil(interesting)))
        if _OPTS.sci_mode is None:
            self.sci_mode = (
                largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4
            )
        else:
            self.sci_mode = bool(_OPTS.sci_mode)

        digits = _OPTS.precision
        items = interesting.tolist()
        if self.sci_mode:
            longest = max(len(f"{x:.{digits}e}") for x in items)
        elif self.int_mode:
            # room for the trailing "." marking a floating tensor
            longest = max(len(f"{x:.0f}") for x in items) + 1
        else:
            longest = max(len(f"{x:.{digits}f}") for x in items)
        self.width = max(self.width, longest)

    def render(self, value: Any) -> str:
        if self.floating:
            digits = _OPTS.precision
            if self.sci_mode:
                text = f"{value:{self.width}.{digits}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if math.isfinite(value):
                    text += "."
            else:
                text = f"{value:.{digits}f}"
        else:
            text = str(value)
        return text.rjust(self.width)


class _Renderer:
    """Bundles the formatter(s) for a tensor: one for real dtypes, a pair
    (real part, imaginary part) for complex dtypes."""

    def __init__(self, sample: np.ndarray, floating: bool, complex_: bool) -> None:
        self.complex = complex_
        if complex_:
            self.real = _ElementFormatter(sample.real, True)
            self.imag: _ElementFormatter | None = _ElementFormatter(sample.imag, True)
        else:
            self.real = _ElementFormatter(sample, floating)
            self.imag = None

    def cell_width(self) -> int:
        width = self.real.width
        if self.imag is not None:
            width += self.imag.width + 1  # the trailing "j"
        return width

    def render(self, value: Any) -> str:
        if self.imag is None:
            return self.real.render(value)
        value = complex(value)
        re_text = self.real.render(value.real)
        im_text = (self.imag.render(value.imag) + "j").lstrip()
        if im_text[0] in "+-":
            return re_text + im_text
        return re_text + "+" + im_text


# ---------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------


def _displayed_values(arr: np.ndarray) -> np.ndarray:
    """Flat array of the values that survive summarisation."""
    edge = _OPTS.edgeitems
    if arr.ndim == 0:
        return arr.reshape(-1)
    if arr.ndim == 1:
        if arr.shape[0] > 2 * edge:
            # note: with edge == 0, arr[-0:] is the whole row (as in torch)
            return np.concatenate((arr[:edge], arr[-edge:]))
        return arr
    if not edge:
        return arr.reshape(-1)[:0]
    count = arr.shape[0]
    if count > 2 * edge:
        rows = list(range(edge)) + list(range(count - edge, count))
    else:
        rows = range(count)
    return np.concatenate([_displayed_values(arr[i]).reshape(-1) for i in rows])


def _format_row(arr: np.ndarray, indent: int, summarize: bool, fmt: _Renderer) -> str:
    edge = _OPTS.edgeitems
    per_line = max(1, math.floor((_OPTS.linewidth - indent) / (fmt.cell_width() + 2)))

    if summarize and not edge:
        cells = ["..."]
    elif summarize and arr.shape[0] > 2 * edge:
        cells = [fmt.render(v) for v in arr[:edge].tolist()]
        cells.append(" ...")
        cells.extend(fmt.render(v) for v in arr[-edge:].tolist())
    else:
        cells = [fmt.render(v) for v in arr.tolist()]

    lines = [", ".join(cells[i : i + per_line]) for i in range(0, len(cells), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _format_block(arr: np.ndarray, indent: int, summarize: bool, fmt: _Renderer) -> str:
    if arr.ndim == 0:
        return fmt.render(arr.item())
    if arr.ndim == 1:
        return _format_row(arr, indent, summarize, fmt)

    edge = _OPTS.edgeitems
    count = arr.shape[0]
    if summarize and count > 2 * edge:
        parts = [_format_block(arr[i], indent + 1, summarize, fmt) for i in range(edge)]
        parts.append("...")
        parts.extend(
            _format_block(arr[i], indent + 1, summarize, fmt)
            for i in range(count - edge, count)
        )
    else:
        parts = [_format_block(arr[i], indent + 1, summarize, fmt) for i in range(count)]

    separator = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(parts) + "]"


def _format_data(
    arr: np.ndarray, indent: int, floating: bool, complex_: bool, summarize: bool | None = None
) -> str:
    if arr.size == 0:
        return "[]"
    if summarize is None:
        summarize = arr.size > _OPTS.threshold
    sample = _displayed_values(arr) if summarize else arr
    fmt = _Renderer(sample, floating, complex_)
    return _format_block(arr, indent, summarize, fmt)


def _attach_suffixes(body: str, suffixes: list[str], indent: int) -> str:
    out = [body]
    # Same arithmetic as torch (including its off-by-two for single-line bodies).
    current = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if current + len(suffix) + 2 > _OPTS.linewidth:
            out.append(",\n" + " " * indent + suffix)
            current = indent + len(suffix)
        else:
            out.append(", " + suffix)
            current += len(suffix) + 2
    out.append(")")
    return "".join(out)


# ---------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------


def tensor_repr(
    values,
    dtype_name,
    *,
    requires_grad: bool = False,
    grad_fn_name: str | None = None,
    default_float: str = "float32",
    default_int: str = "int64",
    prefix: str = "tensor(",
    summarize: bool | None = None,
    shape: tuple[int, ...] | None = None,
    device: str | None = None,
) -> str:
    """Render a tensor the way ``repr(torch_tensor)`` does.

    Args:
        values: NumPy array (or array-like) holding the tensor's data.
        dtype_name: the tensor's dtype, e.g. ``"float32"`` (``"ember.float32"``
            and dtype objects with a ``name`` are accepted too).  ``None``
            means "use ``values.dtype``".
        requires_grad: adds ``requires_grad=True`` (if no ``grad_fn_name``).
        grad_fn_name: adds ``grad_fn=<NAME>``.
        default_float: the current default floating dtype; tensors of that
            dtype get no ``dtype=`` suffix.
        default_int: the integer dtype that gets no ``dtype=`` suffix (int64
            in torch; it is still shown for empty tensors, as in torch).
        prefix: text before the data; continuation lines are indented by
            its length.
        summarize: whether to summarise; ``None`` decides by the size of
            ``values`` and the threshold.  A caller that hands over only the
            rows a summary shows (see :func:`summary_rows`) passes ``True``.
        shape: the tensor's real shape when ``values`` holds only its
            summary rows (it is printed in the ``size=`` suffix).
        device: a device other than the CPU, e.g. ``"cuda:0"``: shown first
            among the suffixes (``device='cuda:0'``), as torch does.
    """
    arr = np.asarray(values)
    name = _dtype_key(dtype_name) or _dtype_key(arr.dtype)
    default_float = _dtype_key(default_float) or "float32"
    default_int = _dtype_key(default_int) or "int64"

    complex_ = _is_complex_name(name)
    floating = _is_float_name(name)
    if not (complex_ or floating) and name not in _INTEGRAL_NAMES:
        # unknown dtype name: fall back on the array's own kind
        complex_ = arr.dtype.kind == "c"
        floating = arr.dtype.kind == "f"
    if complex_:
        if arr.dtype.kind != "c":
            arr = arr.astype(np.complex128)
    elif floating:
        if arr.dtype.kind != "f":
            arr = arr.astype(np.float64)
    elif arr.dtype.kind in "fc":
        arr = arr.astype(np.bool_ if name == "bool" else np.int64)

    default_complex = "complex128" if default_float == "float64" else "complex64"
    dtype_is_default = name in (default_float, default_complex, default_int, "bool")
    dtype_suffix = "dtype=ember." + name

    indent = len(prefix)
    suffixes: list[str] = [] if device is None else [f"device='{device}'"]
    if arr.size == 0:
        # shape is shown unless it is plain (0,); the dtype cannot be inferred
        # from "[]", so anything but the default float dtype is spelled out.
        if arr.ndim != 1:
            suffixes.append("size=" + str(tuple(int(n) for n in arr.shape)))
        if name != default_float:
            suffixes.append(dtype_suffix)
        body = "[]"
    else:
        if not _OPTS.edgeitems:
            real_shape = arr.shape if shape is None else shape
            suffixes.append("size=" + str(tuple(int(n) for n in real_shape)))
        if not dtype_is_default:
            suffixes.append(dtype_suffix)
        body = _format_data(arr, indent, floating, complex_, summarize)

    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")

    return _attach_suffixes(prefix + body, suffixes, indent)


def summary_edges(shape) -> list[int | None] | None:
    """Which rows of each dimension a summarised repr reads, or ``None``.

    ``None`` when a tensor of ``shape`` is printed whole (no more than
    ``threshold`` elements).  Otherwise one entry per dimension: ``None``
    to keep it whole, or ``edgeitems``: keep the first ``edgeitems + 1``
    rows and the last ``edgeitems`` (the row after the head stands for the
    ones the summary prints as ``...``), so that a huge (e.g. expanded)
    tensor need never become a NumPy array whole.
    """
    numel = math.prod(int(n) for n in shape)
    if numel <= _OPTS.threshold:
        return None
    edge = _OPTS.edgeitems
    return [None if n <= 2 * edge + 1 else edge for n in shape]

"""Putting samples together into batches (torch.utils.data._utils.collate).

In a worker process a batch tensor is made directly in shared memory, so
that its bytes are written once, by the stack, and the loader maps the same
pages (Note [Shared memory by file descriptor] in c/th/THShared.h).
"""
import collections.abc
import re

import numpy as np

import ember
from ember._tensor import _contiguous_strides

from . import worker

_NUMPY_STRING_OR_OBJECT = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, "
    "dicts or lists; found {}")


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def default_convert(data):
    """Without batching: NumPy arrays become tensors, containers are
    converted inside, anything else is left alone."""
    if isinstance(data, np.ndarray) and not _NUMPY_STRING_OR_OBJECT.search(data.dtype.str):
        return ember.from_numpy(data)
    if isinstance(data, np.generic) and not _NUMPY_STRING_OR_OBJECT.search(data.dtype.str):
        return ember.tensor(data.item(), dtype=_ember_dtype(data.dtype))
    if isinstance(data, collections.abc.Mapping):
        return type(data)({key: default_convert(data[key]) for key in data}) \
            if type(data) is not dict else {key: default_convert(data[key]) for key in data}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def _ember_dtype(numpy_dtype):
    return ember.from_numpy(np.zeros(0, dtype=numpy_dtype)).dtype


def _field_name(path):
    return "".join(f"[{key!r}]" for key in path) or "the samples"


def _collate_tensors(batch, path):
    elem = batch[0]
    for i, t in enumerate(batch):
        if t.shape != elem.shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(elem.shape)} "
                f"at entry 0 and {list(t.shape)} at entry {i} (collating {_field_name(path)})")
    out = None
    if worker.get_worker_info() is not None:
        shape = (len(batch),) + tuple(elem.shape)
        numel = len(batch) * elem.numel()
        storage = ember.UntypedStorage._new_shared(numel * elem.element_size())
        out = storage._tensor(elem.dtype, 0, shape, _contiguous_strides(shape))
    return ember.stack(batch, 0, out=out)


def _collate(batch, path):
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, ember.Tensor):
        return _collate_tensors(batch, path)
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if _NUMPY_STRING_OR_OBJECT.search(elem.dtype.str):
            raise TypeError(default_collate_err_msg_format.format(elem.dtype))
        if isinstance(elem, np.ndarray):
            return _collate_tensors([ember.from_numpy(b) for b in batch], path)
        return ember.tensor([b.item() for b in batch], dtype=_ember_dtype(elem.dtype))
    if isinstance(elem, bool):
        return ember.tensor(batch, dtype=ember.bool)
    if isinstance(elem, float):
        return ember.tensor(batch, dtype=ember.float64)
    if isinstance(elem, int):
        return ember.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: _collate([d[key] for d in batch], path + (key,)) for key in elem}
        try:
            return elem_type(collated) if elem_type is not dict else collated
        except TypeError:
            return collated
    if _is_namedtuple(elem):
        return elem_type(*(_collate(list(samples), path + (name,))
                           for name, samples in zip(elem._fields, zip(*batch))))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        collated = [_collate(list(samples), path + (i,))
                    for i, samples in enumerate(zip(*batch))]
        if isinstance(elem, tuple):
            return collated  # PyTorch gives a list for tuples too
        try:
            return elem_type(collated)
        except TypeError:
            return collated
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def default_collate(batch):
    """Stacks a list of samples into a batch, field by field: tensors, NumPy
    arrays and scalars become one tensor with a new first dimension, Python
    numbers a tensor, strings stay a list, and dicts, namedtuples and
    sequences are collated inside."""
    return _collate(batch, ())

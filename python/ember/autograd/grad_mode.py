"""Grad mode: whether operators record the graph (thread-local, kept in C).

Each class works as a context manager and as a decorator, as PyTorch's do.
The flag lives in C (THPAutograd_gradEnabled, Note [The autograd boundary])
because every operator call reads it.
"""

import functools
import inspect

from .. import _C

is_grad_enabled = _C.is_grad_enabled
_set_grad_enabled = _C._set_grad_enabled


class _GradModeContext:
    """Base: a context manager that is also a decorator."""

    def __call__(self, func):
        if inspect.isclass(func):
            raise TypeError(f"{type(self).__name__} cannot decorate a class")
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def generator_wrapper(*args, **kwargs):
                generator = func(*args, **kwargs)
                response = None
                while True:
                    with self.clone():
                        try:
                            request = generator.send(response)
                        except StopIteration as stop:
                            return stop.value
                    response = yield request
            return generator_wrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)()

    def __exit__(self, *exc):
        _set_grad_enabled(self._previous)


class no_grad(_GradModeContext):
    """Operators inside do not record the graph; results have no grad_fn."""

    def __enter__(self):
        self._previous = is_grad_enabled()
        _set_grad_enabled(False)


class enable_grad(_GradModeContext):
    """Records the graph again inside a no_grad region."""

    def __enter__(self):
        self._previous = is_grad_enabled()
        _set_grad_enabled(True)


class set_grad_enabled(_GradModeContext):
    """set_grad_enabled(mode): takes effect at once (also as a plain call);
    as a context manager, restores the previous mode on exit."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(
                f"set_grad_enabled(): argument 'mode' must be bool, not {type(mode).__name__}")
        self._previous = is_grad_enabled()
        self._mode = mode
        _set_grad_enabled(mode)

    def __call__(self, func):
        # As a decorator the mode applies to calls only: undo __init__'s switch.
        _set_grad_enabled(self._previous)
        return super().__call__(func)

    def __enter__(self):
        _set_grad_enabled(self._mode)

    def clone(self):
        return type(self)(self._mode)


class inference_mode(_GradModeContext):
    """inference_mode(mode=True): no graph recording, like no_grad.

    PyTorch additionally marks the tensors created inside as inference
    tensors (no version counter); ember does not, so this is no_grad with
    PyTorch's spelling."""

    def __init__(self, mode=True):
        self._mode = mode

    def __enter__(self):
        self._previous = is_grad_enabled()
        if self._mode:
            _set_grad_enabled(False)

    def clone(self):
        return type(self)(self._mode)


def is_inference_mode_enabled():
    return False

"""Helpers of the DataLoader (torch.utils.data._utils)."""
import sys
import traceback

from . import collate, worker  # noqa: F401

# How often a waiting loader checks that its workers are alive, and a
# waiting worker that its loader is (seconds).
MP_STATUS_CHECK_INTERVAL = 0.2


class ExceptionWrapper:
    """An exception caught in a worker, carried to the loader with its
    traceback as text (a traceback object does not pickle)."""

    def __init__(self, exc_info=None, where="in background"):
        exc_info = exc_info or sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except TypeError:  # an exception class with other arguments
            raise RuntimeError(msg) from None
        raise exception


class _KeyErrorMessage(str):
    """KeyError shows its message through repr(); keep the newlines."""

    def __repr__(self):
        return self

"""Derivative formulas, one module per operator family (Note [Writing a
formula] in _common.py).  Importing this package registers them all."""

from . import basics, indexing, linalg, pointwise, random, reduce, shape, unary, views  # noqa: F401

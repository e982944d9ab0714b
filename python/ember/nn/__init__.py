"""ember.nn: neural-network building blocks.

For now only `ember.nn.functional`, the stateless functions that are thin
names for C operators; modules, layers and losses come with autograd.
"""

from . import functional  # noqa: F401

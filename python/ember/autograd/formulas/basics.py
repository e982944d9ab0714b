"""Entry points that never record: detach returns a tensor without history
(sharing memory and version counter), detach_ removes the history in place."""

from ._common import nondifferentiable

nondifferentiable("detach", "detach_")

"""Algorithms over the collectives (torch.distributed.algorithms): the
join context manager for uneven inputs."""
from .join import Join, Joinable, JoinHook  # noqa: F401

__all__ = ["Join", "Joinable", "JoinHook"]

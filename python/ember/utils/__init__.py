"""ember.utils: helpers around the core (torch.utils)."""
from . import data  # noqa: F401

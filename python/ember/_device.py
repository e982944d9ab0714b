"""ember.device: where a tensor's memory lives.

Only 'cpu' exists in this build; the type is here so code written for
PyTorch (`t.device`, `device='cpu'`) reads the same.
"""


class device:
    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        if not isinstance(type, str):
            raise TypeError(f"device() expected a string, got {type!r}")
        name, _, number = type.partition(":")
        if name not in ("cpu", "cuda"):
            raise RuntimeError(
                f"Expected one of cpu, cuda device type at start of device "
                f"string: {type}")
        if number:
            if index is not None:
                raise RuntimeError("device index given twice")
            index = int(number)
        self.type = name
        self.index = index

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

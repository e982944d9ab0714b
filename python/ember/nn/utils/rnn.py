"""Variable-length sequences for the recurrent modules (PyTorch's
torch.nn.utils.rnn).

A PackedSequence stores a batch of sequences of different lengths without
padding: time step by time step, the elements of the sequences still
running, longest sequence first.  batch_sizes[t] says how many there are
at step t; sorted_indices maps the packed order back to the caller's.
"""

from collections import namedtuple

import ember

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence",
           "invert_permutation"]


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes,
                                                          self.sorted_indices,
                                                          self.unsorted_indices)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    inverse = ember.empty(permutation.shape, dtype=ember.int64)
    inverse[permutation] = ember.arange(permutation.numel())
    return inverse


def _lengths_list(lengths):
    if isinstance(lengths, ember.Tensor):
        if lengths.dim() != 1:
            raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but "
                               f"got {lengths.dim()}D {lengths.dtype} tensor")
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (or (B, T, *)) of sequences of `lengths`."""
    lengths = _lengths_list(lengths)
    if batch_first:
        input = input.transpose(0, 1)
    if len(lengths) != input.shape[1]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={input.shape[1]})")
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` "
                "is True. You can pass `enforce_sorted=False` to pack_padded_sequence "
                "and/or pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.")
        sorted_indices = None
        order = list(range(len(lengths)))
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        sorted_indices = ember.tensor(order, dtype=ember.int64)
        input = input.index_select(1, sorted_indices)
    sorted_lengths = [lengths[i] for i in order]
    if sorted_lengths and sorted_lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if sorted_lengths and sorted_lengths[0] > input.shape[0]:
        raise RuntimeError(f"Expected the longest length ({sorted_lengths[0]}) to be at most "
                           f"the sequence dimension ({input.shape[0]})")
    batch_sizes = [sum(1 for n in sorted_lengths if n > t)
                   for t in range(sorted_lengths[0] if sorted_lengths else 0)]
    data = ember.cat([input[t, :size] for t, size in enumerate(batch_sizes)])
    return PackedSequence(data, ember.tensor(batch_sizes, dtype=ember.int64), sorted_indices,
                          None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded (T, B, *), lengths): the inverse of pack_padded_sequence, in
    the caller's batch order."""
    data, batch_sizes = sequence.data, [int(n) for n in sequence.batch_sizes.tolist()]
    max_length = len(batch_sizes)
    if total_length is not None:
        if total_length < max_length:
            raise ValueError(f"Expected total_length to be at least the length of the "
                             f"longest sequence in input, but got total_length={total_length} "
                             f"and max sequence length being {max_length}")
        max_length = total_length
    batch = batch_sizes[0] if batch_sizes else 0
    steps, offset = [], 0
    for size in batch_sizes:
        step = data[offset:offset + size]
        if size < batch:
            filler = ember.full((batch - size,) + tuple(data.shape[1:]), padding_value,
                                dtype=data.dtype)
            step = ember.cat([step, filler])
        steps.append(step)
        offset += size
    for _ in range(max_length - len(batch_sizes)):
        steps.append(ember.full((batch,) + tuple(data.shape[1:]), padding_value,
                                dtype=data.dtype))
    padded = ember.stack(steps)
    lengths = [sum(1 for size in batch_sizes if size > b) for b in range(batch)]
    lengths = ember.tensor(lengths, dtype=ember.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices]
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences of shape (L_i, *) into (max L, B, *), padding each."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    if isinstance(sequences, ember.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            filler = ember.full((missing,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype)
            s = ember.cat([s, filler] if padding_side == "right" else [filler, s])
        padded.append(s)
    return ember.stack(padded, dim=0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(n)] for seq, n in zip(padded_sequences, _lengths_list(lengths))]


def unpack_sequence(packed_sequences):
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

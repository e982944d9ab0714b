"""ember.memory: allocator statistics and pluggable allocators.

Every tensor's bytes come from the allocator installed for its device
(c/th/THAllocator.h).  From Python you can read the statistics, and install
an allocator of your own: any object with

    malloc(nbytes) -> int address     (non-zero; raise to fail)
    free(address)

The address must be a positive int aligned to 16 bytes (what C's malloc
guarantees); anything else raises, and the refused block is handed back to
free().  An exception raised by malloc becomes the exception of the
operation that allocated.  A tensor allocated under an allocator is freed
through that same allocator, even after another one has been installed, and
an allocator may install another one from inside its own malloc.  An
allocator that keeps a tensor it allocated is collected by the GC once it is
uninstalled (unless it keeps several tensors sharing one block).

CAllocator.raw_malloc/raw_free lend the C allocator's blocks to Python
allocators: raw_free(0) does nothing, and raw_free of an address that
raw_malloc did not hand out (or that was freed already) raises ValueError.

The built-in CPU allocator keeps freed blocks in a cache, by size class, and
hands them out again (Note [The CPU block cache] in c/th/THAllocator.h):
reusing a block costs neither malloc nor page faults.  Blocks of 2 MiB and
more are mapped on 2 MiB boundaries and advised to use transparent huge
pages.  Cached blocks are not "allocated": stats() counts them apart, in
cached_bytes and cached_blocks; empty_cache() gives them back to the system
and set_cache_limit() bounds (or, with 0, turns off) the cache.

Two allocators written in Python come with ember, both wrapping another
allocator (by default the built-in C one):

    CountingAllocator   counts calls and bytes, e.g. for leak tests;
    PoisoningAllocator  fills fresh memory with 0xAA and freed memory with
                        0xDD, so reads of uninitialised or freed memory
                        show up as garbage instead of plausible values.
"""

import contextlib
import ctypes

from . import _C

CAllocator = _C.CAllocator


def stats(device="cpu"):
    """Statistics of all memory ember allocated on `device`.

    A dict with allocated_bytes (in use now), peak_allocated_bytes,
    live_blocks (allocations not yet freed), num_allocs and num_frees (ever);
    and, for the built-in CPU allocator's cache, cached_bytes and
    cached_blocks (freed blocks kept for reuse, by capacity), cache_hits and
    cache_misses (allocations served from it or not, ever).
    Memory lent by NumPy or DLPack is not counted: ember did not allocate it.
    """
    return _C._memory_stats(device)


def empty_cache():
    """Frees every block the CPU allocator keeps for reuse.

    Like torch.cuda.empty_cache(): tensors still alive are untouched; only
    memory no tensor uses goes back to the system.
    """
    _C._empty_cache()


def set_cache_limit(nbytes):
    """Bounds the CPU allocator's cache to `nbytes` of block capacity.

    0 turns caching off.  A cache holding more than the new limit is
    emptied.  Returns the previous limit.
    """
    return _C._set_cache_limit(nbytes)


def get_cache_limit():
    """The most bytes of block capacity the CPU allocator's cache may hold."""
    return _C._get_cache_limit()


def block_capacity(nbytes):
    """The capacity of the CPU allocator's block for a request of nbytes.

    Requests with the same capacity share a size class, so a freed block
    serves any of them.
    """
    return _C._block_capacity(nbytes)


def reset_peak_stats(device="cpu"):
    """Sets peak_allocated_bytes to the bytes in use now."""
    _C._reset_peak_memory_stats(device)


def get_allocator(device="cpu"):
    """The allocator installed for `device` (a CAllocator or your object)."""
    return _C._get_allocator(device)


def set_allocator(allocator, device="cpu"):
    """Installs `allocator` for `device` and returns the previous one.

    For 'cuda' the previous one is None until CUDA is first used (that
    installs ember.cuda.CupyAllocator), and None uninstalls: the next CUDA
    use installs CuPy's again.  The CPU always has an allocator.
    """
    return _C._set_allocator(allocator, device)


@contextlib.contextmanager
def use_allocator(allocator, device="cpu"):
    """Installs `allocator` for the duration of a with-block."""
    previous = set_allocator(allocator, device)
    try:
        yield allocator
    finally:
        set_allocator(previous, device)


class CountingAllocator:
    """Counts allocations made through it; delegates the memory itself."""

    def __init__(self, base=None):
        self.base = base if base is not None else get_allocator("cpu")
        self.sizes = {}  # address -> nbytes of each live block
        self.num_allocs = 0
        self.num_frees = 0

    def malloc(self, nbytes):
        address = _raw_malloc(self.base, nbytes)
        self.sizes[address] = nbytes
        self.num_allocs += 1
        return address

    def free(self, address):
        nbytes = self.sizes.pop(address)
        self.num_frees += 1
        _raw_free(self.base, address, nbytes)

    @property
    def live_blocks(self):
        return len(self.sizes)

    @property
    def allocated_bytes(self):
        return sum(self.sizes.values())

    def __repr__(self):
        return (f"CountingAllocator(live_blocks={self.live_blocks}, "
                f"allocated_bytes={self.allocated_bytes}, "
                f"num_allocs={self.num_allocs})")


class PoisoningAllocator(CountingAllocator):
    """Fills new blocks with 0xAA and freed blocks with 0xDD."""

    FRESH = 0xAA
    FREED = 0xDD

    def malloc(self, nbytes):
        address = super().malloc(nbytes)
        ctypes.memset(address, self.FRESH, nbytes)
        return address

    def free(self, address):
        ctypes.memset(address, self.FREED, self.sizes[address])
        super().free(address)


def _raw_malloc(base, nbytes):
    if isinstance(base, CAllocator):
        return base.raw_malloc(nbytes)
    return base.malloc(nbytes)


def _raw_free(base, address, nbytes):
    if isinstance(base, CAllocator):
        base.raw_free(address, nbytes)
    else:
        base.free(address)

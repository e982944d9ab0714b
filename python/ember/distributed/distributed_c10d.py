"""Process groups and collectives over MPI (PyTorch's distributed_c10d.py).

Note [Tensors as MPI buffers]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A contiguous tensor's `.numpy()` is a NumPy array over the tensor's own
memory, and mpi4py takes any buffer-protocol object: so MPI reads and
writes the tensor in place, no copy on either side.  Three cases need a
staging tensor, filled before the call and copied back once it finishes
(`Work.wait`): a non-contiguous tensor (MPI wants one contiguous block);
float16/bfloat16 in a reduction (MPI has no 16-bit floats: the reduction
runs in float32); and outputs given as a list of tensors (the collective
writes one block, then it is split into the list).  float16/bfloat16 in a
pure data movement travel as raw 16-bit words.  A nonblocking call's Work
holds every buffer it gave MPI until it completes: MPI reads and writes
them until then, and mpi4py's request does not keep them alive (an input
staged into a temporary would be freed under MPI's feet).
"""

import ctypes
import enum
import functools
import inspect
import json
import os
import sys
import time
import warnings
from datetime import timedelta

import numpy as np

from .. import _C

_RAW_16BIT = ("float16", "bfloat16")
_TYPE_NAMES = {"int8": "Char", "uint8": "Byte", "int16": "Short", "int32": "Int",
               "int64": "Long", "bool": "Bool"}


# Set by mpirun (Open MPI), by PMIx launchers and by MPICH's Hydra.
_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK")

# Note [Waiting processes yield their core]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A process waiting in an MPI call polls: Open MPI spins on its progress
# engine until the peer's data arrives.  Alone on its core that costs
# nothing, but a collective over shared memory needs every process of the
# group running to move on, so when the machine is shared with other work
# (more runnable threads than cores), a spinning process keeps its core for
# the rest of its time slice while the peer it waits for is queued behind
# someone else: a training step that synchronises its processes every step
# (DistributedDataParallel) then loses whole time slices.  Open MPI's
# mpi_yield_when_idle makes a poll that found nothing call sched_yield,
# which hands the core to another runnable thread and returns at once when
# there is none; Open MPI turns it on itself only when a node is
# oversubscribed at launch, which a machine loaded by other jobs is not.
# Gloo, PyTorch's CPU backend, waits in the kernel, so PyTorch's processes
# never spin either.  Set before MPI starts (mpi4py starts it on import),
# and only as a default: OMPI_MCA_mpi_yield_when_idle=0 in the environment
# keeps the spinning (bench/bench_distributed.py measures DDP both ways).
#
# Yielding is still polling, and it does not help enough under heavy load.
# Once both processes have reached an all-reduce, each round of Open MPI's
# shared-memory protocol still needs both of them on a core at the same
# time; a process that yields stays runnable and spends its share, where
# one asleep in the kernel (gloo's waits) is woken by its peer's data and
# the scheduler favours it on wakeup.  bench_distributed at load 10-20 on
# its 2 CPUs: the bench MLP's 1.6 MB all-reduce took 29-55 ms (median)
# after the later process arrived (0.5 ms with the machine near quiet),
# and PyTorch's DDP over gloo ran 1.9-2.1x ember's samples/s with 2
# processes in 3 runs of 4 (even in the 4th; 0.95-1.28x in 3 more paired
# jobs at load 12).  Near quiet it is the other way round: one run at
# load 1.7 kept 0.99x of one process's samples/s with PyTorch over gloo,
# against ember's ~1.5x.  Sleeping on a socket until the peer arrives and
# then running MPI's all-reduce did not help at load 12 (its rounds still
# poll): waits that sleep need a transport that can wake a process, which
# Open MPI's shared-memory one cannot.
_YIELD_WHEN_IDLE = "OMPI_MCA_mpi_yield_when_idle"


def _mpi():
    if "mpi4py.MPI" not in sys.modules:
        os.environ.setdefault(_YIELD_WHEN_IDLE, "1")  # Note [Waiting processes yield their core]
        if not any(name in os.environ for name in _LAUNCHER_VARIABLES):
            # A process started without mpirun is a world of one (an MPI
            # "singleton"); Open MPI would still map a shared-memory segment
            # for it and leave it in /dev/shm at exit.  Alone, it needs none.
            os.environ.setdefault("OMPI_MCA_btl", "self")
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise RuntimeError(
            "ember.distributed needs mpi4py and an MPI library: "
            "pip install 'ember[distributed]'") from exc
    return MPI


# ---- reduction operators ---------------------------------------------------------

class ReduceOp:
    """The reduction of all_reduce, reduce and reduce_scatter_tensor."""

    class RedOpType(enum.Enum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7

    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR


@functools.cache
def _mpi_ops():
    """{ReduceOp: MPI's operation}, built once (hashing an enum member runs
    Python code: a collective should not pay it eight times)."""
    MPI = _mpi()
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
            ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
            ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}


def _mpi_op(op):
    try:
        return _mpi_ops()[op]
    except (KeyError, TypeError):
        raise ValueError(f"unknown reduce op {op!r}") from None


class Backend(str):
    """The backend names; only "mpi" exists in ember."""
    MPI = "mpi"
    GLOO = "gloo"

    def __new__(cls, name):
        return str.__new__(cls, name.lower())


# ---- process groups ---------------------------------------------------------------

class ProcessGroup:
    """A set of processes with its own MPI communicator; `ranks` are their
    global ranks, in group-rank order."""

    def __init__(self, comm, ranks, timeout=None):
        self.comm = comm
        self.ranks = list(ranks)
        self.timeout = timeout  # None: MPI's blocking calls (Note [Timeouts])

    def rank(self):
        return self.comm.Get_rank()

    def size(self):
        return self.comm.Get_size()

    def name(self):
        return "mpi"

    def __repr__(self):
        return f"<ProcessGroup mpi ranks={self.ranks}>"


class GroupMember:
    WORLD = None                   # the default group once initialized
    NON_GROUP_MEMBER = object()    # what new_group returns to non-members


_subgroups = []


def is_mpi_available():
    from . import is_available
    return is_available()


def is_initialized():
    return GroupMember.WORLD is not None


def _world():
    if GroupMember.WORLD is None:
        raise ValueError("Default process group has not been initialized, "
                         "please make sure to call init_process_group.")
    return GroupMember.WORLD


def _group(group):
    world = _world()
    if group is None:
        return world
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("this process is not a member of the group")
    return group


def _check_matches(what, given, actual):
    if given is not None and int(given) >= 0 and int(given) != actual:
        raise ValueError(f"init_process_group: {what}={given} but MPI gives {actual} "
                         f"(start the processes with mpirun or ember.distributed.run)")


def _check_valid_timeout(timeout):
    if timeout is not None and not isinstance(timeout, timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, "
                        f"got {timeout}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1,
                       rank=-1, store=None, group_name="", pg_options=None,
                       device_id=None):
    """Joins the default group: every process started by mpirun.  MPI does
    the rendezvous, so init_method (env:// or none) only has to agree:
    a given rank/world_size, or RANK/WORLD_SIZE in the environment, must be
    MPI's.  "gloo" is accepted as a name for the same CPU backend, so CPU
    programs written for PyTorch run unchanged.  A timeout bounds the wait
    of every tensor collective on the group (Note [Timeouts])."""
    _check_valid_timeout(timeout)
    if GroupMember.WORLD is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if backend is not None and Backend(backend) not in (Backend.MPI, Backend.GLOO):
        raise RuntimeError(f"Invalid backend: '{backend}': ember.distributed has "
                           f"the 'mpi' backend only")
    if init_method not in (None, "env://"):
        raise ValueError(f"init_method {init_method!r}: ember.distributed rendezvous "
                         f"through MPI; use env:// (the default)")
    comm = _mpi().COMM_WORLD
    _check_matches("world_size", world_size, comm.Get_size())
    _check_matches("rank", rank, comm.Get_rank())
    _check_matches("WORLD_SIZE", os.environ.get("WORLD_SIZE"), comm.Get_size())
    _check_matches("RANK", os.environ.get("RANK"), comm.Get_rank())
    GroupMember.WORLD = ProcessGroup(comm, range(comm.Get_size()), timeout)


def destroy_process_group(group=None):
    """Leaves the group (the default one: all of them).  MPI stays up, so a
    later init_process_group works."""
    if group is None or group is GroupMember.WORLD:
        _world()
        for sub in _subgroups:
            sub.comm.Free()
        _subgroups.clear()
        GroupMember.WORLD = None
    elif group is not GroupMember.NON_GROUP_MEMBER:
        _subgroups.remove(group)
        group.comm.Free()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None,
              sort_ranks=True):
    """A group of the given global ranks; every process must call it (it
    is a collective on the default group), non-members get
    GroupMember.NON_GROUP_MEMBER.  timeout as init_process_group's."""
    _check_valid_timeout(timeout)
    world = _world()
    ranks = list(range(world.size())) if ranks is None else list(ranks)
    if sort_ranks:
        ranks = sorted(ranks)
    for r in ranks:
        if not 0 <= r < world.size():
            raise ValueError(f"The new group's rank should be within the world_size "
                             f"set by init_process_group, got {r}")
    mpi_group = world.comm.Get_group().Incl(ranks)
    comm = world.comm.Create(mpi_group)
    mpi_group.Free()
    if comm == _mpi().COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    group = ProcessGroup(comm, ranks, timeout)
    _subgroups.append(group)
    return group


def get_rank(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).rank()


def get_world_size(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).size()


def get_backend(group=None):
    _group(group)
    return Backend.MPI


def _group_rank(group, global_rank, group_rank, what):
    """The rank inside `group` of a src/dst given as a global rank or as
    group_src/group_dst (exactly one of them)."""
    if global_rank is not None and group_rank is not None:
        raise ValueError("Can't specify both group_rank and global_rank")
    if group_rank is not None:
        return group_rank
    if global_rank is None:
        raise ValueError("Must specify global_rank or group_rank")
    if global_rank not in group.ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return group.ranks.index(global_rank)


def _skip_for_non_members(collective):
    """PyTorch's rule: a collective on a group this process is not in does
    nothing (a warning) and returns None."""
    position = list(inspect.signature(collective).parameters).index("group")

    @functools.wraps(collective)
    def wrapper(*args, **kwargs):
        group = args[position] if len(args) > position else kwargs.get("group")
        if group is GroupMember.NON_GROUP_MEMBER:
            warnings.warn(f"Running {collective.__name__} on global rank "
                          f"{get_rank()} which does not belong to the given group.")
            return None
        return collective(*args, **kwargs)
    return wrapper


# ---- tensors as buffers (Note [Tensors as MPI buffers]) ---------------------------

def _dtype_name(tensor):
    return str(tensor.dtype).rsplit(".", 1)[-1]


def _raw_words(tensor):
    """A contiguous 16-bit float tensor's memory as uint16 words (NumPy
    has no bfloat16), no copy."""
    count = tensor.numel()
    if count == 0:
        return np.empty(0, np.uint16)
    words = (ctypes.c_uint16 * count).from_address(tensor.data_ptr())
    words.tensor = tensor  # the memory lives as long as any view of it
    return np.ctypeslib.as_array(words)


def _buffer(tensor):
    """The memory of a contiguous tensor as a NumPy array, no copy."""
    if _dtype_name(tensor) in _RAW_16BIT:
        return _raw_words(tensor)
    return tensor.numpy().reshape(-1)


class _Staged:
    """A tensor as MPI will see it: itself when it can (contiguous, a type
    MPI reduces), else a staging copy that `finish` writes back."""

    def __init__(self, tensor, reduction=False, write_back=True):
        self.tensor = tensor
        staging = tensor.detach()  # MPI's writes are not autograd's business
        if reduction and _dtype_name(tensor) in _RAW_16BIT:
            staging = staging.to(_C.float32)
        if not staging.is_contiguous():
            staging = staging.contiguous()
        self.staging = staging
        self.copied = write_back and staging.data_ptr() != tensor.data_ptr()
        self.array = _buffer(staging)

    def finish(self):
        if self.copied:
            with _no_grad():
                self.tensor.copy_(self.staging)


def _no_grad():
    from ..autograd.grad_mode import no_grad
    return no_grad()


def _flat_empty(count, like):
    return _C.empty((count,), dtype=like.dtype)


# ---- work handles -----------------------------------------------------------------
#
# Note [Timeouts]
# ~~~~~~~~~~~~~~~
# MPI's blocking calls cannot time out, and MPI cannot cancel a collective
# once started.  So a timeout (init_process_group's or new_group's for the
# whole group, or one Work.wait's or barrier's) turns the wait into a loop
# of MPI tests that raises RuntimeError once the time has passed; the
# operation stays pending, as a timed-out collective leaves PyTorch's group
# unusable: the process should exit.  A group with a timeout therefore runs
# even its blocking collectives as nonblocking ones (Open MPI's libnbc,
# slower for large messages).  Without one (the default, where PyTorch
# waits 30 minutes) waits are MPI's own and never time out.  The object
# collectives (broadcast_object_list and the others) make blocking MPI
# calls and ignore the timeout.

# Note [A Work dropped before it is done]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# MPI reads and writes a nonblocking collective's memory until the
# operation completes, whether or not anyone still waits for it: a Work
# dropped early (a user's, or DistributedDataParallel's when a backward
# raises halfway) must not take that memory with it.  Its requests,
# buffers and tensors are kept here, and let go once MPI says they are
# done; each new collective asks.  (PyTorch's process groups keep their
# works alive in the same way until the backend is done with them.)
_unfinished = []


def _let_go_of_finished():
    if _unfinished:
        _unfinished[:] = [kept for kept in _unfinished if not _mpi().Request.Testall(kept[0])]


class Work:
    """What a collective with async_op=True returns: wait() blocks until it
    is done (and writes staged results back), is_completed() asks."""

    def __init__(self, requests, finish=None, outputs=(), buffers=(), timeout=None):
        self._requests = list(requests)
        self._timeout = timeout
        self._buffers = list(buffers)  # Note [Tensors as MPI buffers]
        self._finish = finish
        self._outputs = list(outputs)
        self._done = False
        self.source_rank = None

    def __del__(self):
        # Note [A Work dropped before it is done]; _unfinished is None when
        # the interpreter is tearing the module down.
        if not self._done and self._requests and _unfinished is not None:
            _unfinished.append((self._requests, self._buffers, self._outputs, self._finish))

    def _complete(self):
        self._done = True
        self._requests = []
        self._buffers = []
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()

    def wait(self, timeout=None):
        """Blocks until done; with a timeout (this call's, else the
        group's: Note [Timeouts]) raises RuntimeError once it passes."""
        if not self._done:
            timeout = timeout or self._timeout
            if timeout:
                _wait_until(lambda: _mpi().Request.Testall(self._requests), timeout)
            else:
                _mpi().Request.Waitall(self._requests)
            self._complete()
        return True

    def is_completed(self):
        if not self._done and _mpi().Request.Testall(self._requests):
            self._complete()
        return self._done

    def is_success(self):
        return self._done

    def result(self):
        return self._outputs

    def _source_rank(self):
        return self.source_rank


def _finish_all(*actions):
    def finish():
        for action in actions:
            if action is not None:
                action()
    return finish


def _wait_until(test, timeout):
    """Calls test() (an MPI Test, which also moves the operation on) until
    it returns True; RuntimeError once `timeout` has passed."""
    deadline = time.monotonic() + timeout.total_seconds()
    while not test():
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Timed out waiting {round(timeout.total_seconds() * 1000)}ms for the "
                f"operation to complete (MPI cannot cancel it: the process should exit)")
        time.sleep(0)


def _call(group, name, async_op, *args, **kwargs):
    """Starts comm.I<name> when async_op or the group has a timeout
    (returning its request), else runs the blocking comm.<name>: for large
    messages Open MPI's blocking collectives pick faster algorithms than
    its nonblocking ones (libnbc)."""
    if async_op or group.timeout is not None:
        return [getattr(group.comm, "I" + name[0].lower() + name[1:])(*args, **kwargs)]
    getattr(group.comm, name)(*args, **kwargs)
    return []


def _issue(group, requests, finish, async_op, outputs=(), buffers=(), timeout=None):
    _let_go_of_finished()
    work = Work(requests, finish, outputs, buffers, timeout or group.timeout)
    if async_op:
        return work
    work.wait()
    return None


# ---- collectives ------------------------------------------------------------------

def _check_average(tensor, op):
    # PyTorch's message: it divides the sum in the tensor's own dtype.
    if op == ReduceOp.AVG and not tensor.is_floating_point():
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{_TYPE_NAMES.get(_dtype_name(tensor), _dtype_name(tensor))}")


def _averaging(staged, op, size):
    if op != ReduceOp.AVG:
        return None

    def divide():
        with _no_grad():
            staged.staging.div_(size)
    return divide


@_skip_for_non_members
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces `tensor` across the group in place on every process."""
    group = _group(group)
    _check_average(tensor, op)
    staged = _Staged(tensor, reduction=True)
    requests = _call(group, "Allreduce", async_op, _mpi().IN_PLACE, staged.array, _mpi_op(op))
    finish = _finish_all(_averaging(staged, op, group.size()), staged.finish)
    return _issue(group, requests, finish, async_op, [tensor])


class _RepeatedAllReduce:
    """The SUM all-reduce of one tensor in place, run again and again: a
    DistributedDataParallel bucket's, once per backward.  What all_reduce
    works out on every call (the group, the staging of Note [Tensors as MPI
    buffers], the MPI buffer over the tensor's memory) is worked out here
    once, so a call is the MPI call alone.  Inside a training step, where
    the interpreter's code runs with cold caches, all_reduce's own Python
    took ~55 us a call (6 us in a tight loop): a third of the 1.6 MB
    all-reduce of bench/bench_distributed.py's MLP.  A tensor that needs
    staging (16-bit floats, not contiguous) takes all_reduce's path every
    time."""

    def __init__(self, tensor, group=None):
        self.tensor = tensor
        self.group = _group(group)
        MPI = _mpi()
        self.in_place, self.sum = MPI.IN_PLACE, MPI.SUM
        staged = _Staged(tensor, reduction=True)  # MPI reads the tensor itself?
        self.array = None if staged.copied else staged.array

    def __call__(self, async_op=False, tensor=None):
        """As all_reduce(tensor, group=group, async_op=async_op), on the
        prepared tensor or on `tensor`, which must then be laid out as it
        (same dtype and number of elements, contiguous): the same MPI call,
        on other memory."""
        group = self.group
        if self.array is None:
            return all_reduce(self.tensor, group=group, async_op=async_op)
        if tensor is None:
            tensor, array = self.tensor, self.array
        else:
            array = _buffer(tensor)
        if async_op or group.timeout is not None:  # Note [Timeouts]
            request = group.comm.Iallreduce(self.in_place, array, self.sum)
            return _issue(group, [request], None, async_op, [tensor], [array])
        group.comm.Allreduce(self.in_place, array, self.sum)
        return None


@_skip_for_non_members
def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduces into `tensor` on dst; the others' tensors are inputs only."""
    group = _group(group)
    root = _group_rank(group, dst, group_dst, "dst")
    _check_average(tensor, op)
    is_root = group.rank() == root
    staged = _Staged(tensor, reduction=True, write_back=is_root)
    if is_root:
        requests = _call(group, "Reduce", async_op, _mpi().IN_PLACE, staged.array,
                         _mpi_op(op), root=root)
        finish = _finish_all(_averaging(staged, op, group.size()), staged.finish)
    else:
        requests = _call(group, "Reduce", async_op, staged.array, None, _mpi_op(op), root=root)
        finish = None
    return _issue(group, requests, finish, async_op, [tensor], [staged])


@_skip_for_non_members
def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copies src's `tensor` into every process's `tensor`."""
    group = _group(group)
    root = _group_rank(group, src, group_src, "src")
    staged = _Staged(tensor, write_back=group.rank() != root)
    requests = _call(group, "Bcast", async_op, staged.array, root=root)
    return _issue(group, requests, staged.finish, async_op, [tensor])


def _check_same_shape(tensors, like, what):
    for t in tensors:
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise RuntimeError(f"{what}: every tensor must have the input's shape "
                             f"{list(like.shape)} and dtype {like.dtype}, got "
                             f"{list(t.shape)} {t.dtype}")


def _split_into(flat, tensors):
    """Copies consecutive blocks of `flat` into `tensors` (a Work's finish)."""
    def finish():
        offset = 0
        with _no_grad():
            for out in tensors:
                out.copy_(flat[offset:offset + out.numel()].reshape(out.shape))
                offset += out.numel()
    return finish


def _lengths_and_offsets(lengths):
    """The counts of consecutive blocks and where each starts."""
    lengths = [int(n) for n in lengths]
    return lengths, [sum(lengths[:i]) for i in range(len(lengths))]


def _flat_cat(tensors):
    """The tensors' elements one after the other, as one contiguous 1-d
    tensor (a copy: MPI sends it as one block)."""
    return _C.cat([t.detach().reshape(-1) for t in tensors])


@_skip_for_non_members
def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[i] = process i's `tensor`, on every process."""
    group = _group(group)
    if len(tensor_list) != group.size():
        raise RuntimeError(f"all_gather: tensor_list must have {group.size()} tensors "
                         f"(the group's size), got {len(tensor_list)}")
    _check_same_shape(tensor_list, tensor, "all_gather")
    staged = _Staged(tensor, write_back=False)
    flat = _flat_empty(tensor.numel() * group.size(), tensor)
    requests = _call(group, "Allgather", async_op, staged.array, _buffer(flat))
    return _issue(group, requests, _split_into(flat, tensor_list), async_op, tensor_list, [staged])


@_skip_for_non_members
def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Process i's input lands in block i of output_tensor (along dim 0, or
    as a stack), on every process."""
    group = _group(group)
    if output_tensor.numel() != input_tensor.numel() * group.size():
        raise RuntimeError("output tensor size must be equal to world_size times "
                         "input tensor size")
    if output_tensor.dtype != input_tensor.dtype:
        raise RuntimeError("output tensor must have the same type as input tensor")
    source = _Staged(input_tensor, write_back=False)
    target = _Staged(output_tensor)
    requests = _call(group, "Allgather", async_op, source.array, target.array)
    return _issue(group, requests, target.finish, async_op, [output_tensor], [source])


@_skip_for_non_members
def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces `input` across the group; process i keeps block i."""
    group = _group(group)
    if input.numel() != output.numel() * group.size():
        raise RuntimeError("input tensor must be the same size as output size times "
                         "world size")
    if output.dtype != input.dtype:
        raise RuntimeError("input tensor must be the same type as the output tensor.")
    _check_average(output, op)
    source = _Staged(input, reduction=True, write_back=False)
    target = _Staged(output, reduction=True)
    requests = _call(group, "Reduce_scatter_block", async_op, source.array, target.array,
                     _mpi_op(op))
    finish = _finish_all(_averaging(target, op, group.size()), target.finish)
    return _issue(group, requests, finish, async_op, [output], [source])


def _check_same_dtype(tensors, like):
    for t in tensors:
        if t.dtype != like.dtype:
            raise ValueError("Invalid usage of tensors with different dtypes"
                             f"Found {like.dtype} and  {t.dtype}")


@_skip_for_non_members
def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces input_list[i] across the group into process i's `output`."""
    group = _group(group)
    _check_same_dtype(input_list, output)
    if len(input_list) != group.size():
        raise RuntimeError(f"reduce_scatter: input_list must have {group.size()} tensors "
                           f"(the group's size), got {len(input_list)}")
    _check_same_shape(input_list, output, "reduce_scatter")
    _check_average(output, op)
    source = _Staged(_flat_cat(input_list), reduction=True, write_back=False)
    target = _Staged(output, reduction=True)
    requests = _call(group, "Reduce_scatter_block", async_op, source.array, target.array,
                     _mpi_op(op))
    finish = _finish_all(_averaging(target, op, group.size()), target.finish)
    return _issue(group, requests, finish, async_op, [output], [source])


@_skip_for_non_members
def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """gather_list[i] = process i's `tensor`, on dst only."""
    group = _group(group)
    root = _group_rank(group, dst, group_dst, "dst")
    staged = _Staged(tensor, write_back=False)
    if group.rank() != root:
        if gather_list:
            raise ValueError("Argument ``gather_list`` must NOT be specified on "
                             "non-destination ranks.")
        requests = _call(group, "Gather", async_op, staged.array, None, root=root)
        return _issue(group, requests, None, async_op, buffers=[staged])
    if not gather_list:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    if len(gather_list) != group.size():
        raise ValueError("Argument ``gather_list`` must have the group's size "
                         f"({group.size()}) tensors, got {len(gather_list)}")
    _check_same_shape(gather_list, tensor, "gather")
    flat = _flat_empty(tensor.numel() * group.size(), tensor)
    requests = _call(group, "Gather", async_op, staged.array, _buffer(flat), root=root)
    return _issue(group, requests, _split_into(flat, gather_list), async_op, gather_list, [staged])


@_skip_for_non_members
def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Process i's `tensor` = src's scatter_list[i]."""
    group = _group(group)
    root = _group_rank(group, src, group_src, "src")
    target = _Staged(tensor)
    if group.rank() != root:
        if scatter_list:
            raise ValueError("Argument ``scatter_list`` must NOT be specified on "
                             "non-source ranks.")
        requests = _call(group, "Scatter", async_op, None, target.array, root=root)
        return _issue(group, requests, target.finish, async_op, [tensor])
    if not scatter_list:
        raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
    if len(scatter_list) != group.size():
        raise ValueError("Argument ``scatter_list`` must have the group's size "
                         f"({group.size()}) tensors, got {len(scatter_list)}")
    _check_same_shape(scatter_list, tensor, "scatter")
    flat = _flat_cat(scatter_list)
    requests = _call(group, "Scatter", async_op, _buffer(flat), target.array, root=root)
    return _issue(group, requests, target.finish, async_op, [tensor], [flat])


def _splits(split_sizes, tensor, size, what):
    """Element counts and offsets of the blocks of `tensor` along dim 0."""
    rows = tensor.shape[0] if tensor.dim() else 1
    row = tensor.numel() // rows if rows else 0
    if not split_sizes:
        if rows % size:
            raise RuntimeError("Tensor's dim 0 does not divide equally across group size")
        split_sizes = [rows // size] * size
    split_sizes = list(split_sizes)
    if len(split_sizes) != size:
        raise RuntimeError(f"Number of {what} splits must equal the group size")
    if sum(split_sizes) != rows:
        raise RuntimeError("Split sizes doesn't match total dim 0 size")
    return _lengths_and_offsets(s * row for s in split_sizes)


@_skip_for_non_members
def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Block j of process i's input (along dim 0) lands as block i of
    process j's output."""
    group = _group(group)
    if output.dtype != input.dtype:
        raise RuntimeError("output tensor must have the same type as input tensor")
    send_counts, send_offsets = _splits(input_split_sizes, input, group.size(), "input")
    recv_counts, recv_offsets = _splits(output_split_sizes, output, group.size(), "output")
    source = _Staged(input, write_back=False)
    target = _Staged(output)
    requests = _call(group, "Alltoallv", async_op, [source.array, (send_counts, send_offsets)],
                                    [target.array, (recv_counts, recv_offsets)])
    return _issue(group, requests, target.finish, async_op, [output], [source])


@_skip_for_non_members
def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Process i's input_tensor_list[j] lands in process j's
    output_tensor_list[i]; the tensors may differ in size (each pair of
    processes must agree on theirs)."""
    group = _group(group)
    for name, tensor_list in (("output_tensor_list", output_tensor_list),
                              ("input_tensor_list", input_tensor_list)):
        if len(tensor_list) != group.size():
            raise RuntimeError(f"all_to_all: {name} must have {group.size()} tensors "
                               f"(the group's size), got {len(tensor_list)}")
    _check_same_dtype(input_tensor_list, output_tensor_list[0])
    _check_same_dtype(output_tensor_list, output_tensor_list[0])
    send_counts, send_offsets = _lengths_and_offsets(t.numel() for t in input_tensor_list)
    recv_counts, recv_offsets = _lengths_and_offsets(t.numel() for t in output_tensor_list)
    source = _Staged(_flat_cat(input_tensor_list), write_back=False)
    flat = _flat_empty(sum(recv_counts), output_tensor_list[0])
    requests = _call(group, "Alltoallv", async_op, [source.array, (send_counts, send_offsets)],
                     [_buffer(flat), (recv_counts, recv_offsets)])
    return _issue(group, requests, _split_into(flat, output_tensor_list), async_op,
                  output_tensor_list, [source])


@_skip_for_non_members
def barrier(group=None, async_op=False, device_ids=None, timeout=None):
    """Returns once every process of the group has called barrier (or
    raises once timeout has passed: Note [Timeouts])."""
    _check_valid_timeout(timeout)
    group = _group(group)
    # Always MPI_Ibarrier, so that a barrier with a timeout on one process
    # matches one without on another (MPI never matches a nonblocking
    # collective with a blocking one).
    requests = _call(group, "Barrier", True)
    return _issue(group, requests, None, async_op, timeout=timeout)


# ---- point to point ---------------------------------------------------------------

@_skip_for_non_members
def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    group = _group(group)
    peer = _group_rank(group, dst, group_dst, "dst")
    staged = _Staged(tensor, write_back=False)
    return Work([group.comm.Isend(staged.array, dest=peer, tag=tag)], None, [tensor], [staged],
                group.timeout)


class _ReceiveWork(Work):
    """irecv's handle: the MPI status of its wait says who sent."""

    def __init__(self, request, staged, group):
        super().__init__([request], staged.finish, [staged.tensor], timeout=group.timeout)
        self._status = _mpi().Status()
        self._group = group

    def wait(self, timeout=None):
        if not self._done:
            timeout = timeout or self._timeout
            if timeout:
                _wait_until(lambda: self._requests[0].Test(self._status), timeout)
            else:
                self._requests[0].Wait(self._status)
            self._received()
        return True

    def is_completed(self):
        if not self._done and self._requests[0].Test(self._status):
            self._received()
        return self._done

    def _received(self):
        self.source_rank = self._group.ranks[self._status.Get_source()]
        self._complete()


@_skip_for_non_members
def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into `tensor` from src (from anyone when src and group_src
    are None)."""
    group = _group(group)
    if src is None and group_src is None:
        peer = _mpi().ANY_SOURCE
    else:
        peer = _group_rank(group, src, group_src, "src")
    staged = _Staged(tensor)
    request = group.comm.Irecv(staged.array, source=peer, tag=tag)
    return _ReceiveWork(request, staged, group)


@_skip_for_non_members
def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    isend(tensor, dst, group, tag, group_dst).wait()


@_skip_for_non_members
def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into `tensor`; returns the sender's global rank."""
    work = irecv(tensor, src, group, tag, group_src)
    work.wait()
    return work.source_rank


# ---- objects ----------------------------------------------------------------------
#
# Note [Objects travel as JSON]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch pickles the objects of broadcast_object_list, all_gather_object,
# gather_object and scatter_object_list; unpickling runs whatever code the
# sender chose, so ember sends JSON instead.  What travels: None, bool, int,
# float (nan and inf too), str, and lists, tuples and dicts with str keys of
# these; a tuple arrives as a list.  Anything else (a tensor, a set, a
# dict with int keys, which JSON would turn into str keys) is refused with
# a TypeError on the sending process before anything is sent.  The bytes
# move as uint8 arrays: lengths first, then the payloads (MPI's v-forms).

_JSON_LEAVES = (type(None), bool, int, float, str)


def _check_json_able(obj, what):
    if isinstance(obj, _JSON_LEAVES):
        return
    if isinstance(obj, (list, tuple)):
        for item in obj:
            _check_json_able(item, what)
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, str):
                raise TypeError(f"{what} sends objects as JSON, not pickle: dict keys must "
                                f"be str, got {type(key).__name__} key {key!r}")
            _check_json_able(value, what)
        return
    raise TypeError(f"{what} sends objects as JSON, not pickle: supported are None, bool, "
                    f"int, float, str, and lists, tuples and str-keyed dicts of them; got "
                    f"an object of type {type(obj).__name__}")


def _encode(obj, what):
    _check_json_able(obj, what)
    return np.frombuffer(json.dumps(obj).encode(), np.uint8).copy()


def _decode(data):
    return json.loads(data.tobytes().decode())


def _object_root(group, src, group_src):
    """src/dst of the object collectives: rank 0 when neither is given."""
    if src is None and group_src is None:
        src = 0
    return _group_rank(group, src, group_src, "src")


@_skip_for_non_members
def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replaces object_list's items by src's (rank 0's by default), in place
    (Note [Objects travel as JSON])."""
    group = _group(group)
    root = _object_root(group, src, group_src)
    if group.rank() == root:
        data = _encode(list(object_list), "broadcast_object_list")
    length = np.array([data.size if group.rank() == root else 0], np.int64)
    group.comm.Bcast(length, root=root)
    if group.rank() != root:
        data = np.empty(int(length[0]), np.uint8)
    group.comm.Bcast(data, root=root)
    if group.rank() != root:
        objects = _decode(data)
        if len(objects) != len(object_list):
            raise ValueError(f"broadcast_object_list: src sent {len(objects)} objects, "
                             f"this list holds {len(object_list)}")
        object_list[:] = objects


def _gathered_payloads(group, data, root=None):
    """Every process's bytes, on every process (root None) or on root only
    (None elsewhere), as a list of uint8 arrays in group-rank order."""
    lengths = np.empty(group.size(), np.int64)
    group.comm.Allgather(np.array([data.size], np.int64), lengths)
    counts, offsets = _lengths_and_offsets(lengths)
    if root is not None and group.rank() != root:
        group.comm.Gatherv(data, None, root=root)
        return None
    received = np.empty(sum(counts), np.uint8)
    if root is None:
        group.comm.Allgatherv(data, [received, (counts, offsets)])
    else:
        group.comm.Gatherv(data, [received, (counts, offsets)], root=root)
    return [received[o:o + n] for o, n in zip(offsets, counts)]


@_skip_for_non_members
def all_gather_object(object_list, obj, group=None):
    """object_list[i] = process i's obj, on every process (Note [Objects
    travel as JSON])."""
    group = _group(group)
    if len(object_list) != group.size():
        raise ValueError(f"all_gather_object: object_list must have {group.size()} items "
                         f"(the group's size), got {len(object_list)}")
    payloads = _gathered_payloads(group, _encode(obj, "all_gather_object"))
    object_list[:] = [_decode(p) for p in payloads]


@_skip_for_non_members
def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """object_gather_list[i] = process i's obj, on dst (rank 0 by default)
    only (Note [Objects travel as JSON])."""
    group = _group(group)
    root = _object_root(group, dst, group_dst)
    if group.rank() == root:
        if not object_gather_list:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
        if len(object_gather_list) != group.size():
            raise ValueError(f"gather_object: object_gather_list must have {group.size()} "
                             f"items (the group's size), got {len(object_gather_list)}")
    elif object_gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on "
                         "non-destination ranks.")
    payloads = _gathered_payloads(group, _encode(obj, "gather_object"), root)
    if payloads is not None:
        object_gather_list[:] = [_decode(p) for p in payloads]


@_skip_for_non_members
def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    """scatter_object_output_list[0] = src's scatter_object_input_list[i]
    on process i (src is rank 0 by default; Note [Objects travel as JSON])."""
    group = _group(group)
    root = _object_root(group, src, group_src)
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size "
                         "at least 1.")
    if group.rank() == root:
        if scatter_object_input_list is None:
            raise ValueError("source rank must provide non-None scatter_object_input_list")
        if len(scatter_object_input_list) != group.size():
            raise ValueError(f"scatter_object_list: scatter_object_input_list must have "
                             f"{group.size()} items (the group's size), got "
                             f"{len(scatter_object_input_list)}")
        pieces = [_encode(obj, "scatter_object_list") for obj in scatter_object_input_list]
        counts, offsets = _lengths_and_offsets(p.size for p in pieces)
        sendbuf = [np.concatenate(pieces), (counts, offsets)]
    else:
        counts, sendbuf = None, None
    length = np.empty(1, np.int64)
    group.comm.Scatter(None if counts is None else np.array(counts, np.int64), length,
                       root=root)
    received = np.empty(int(length[0]), np.uint8)
    group.comm.Scatterv(sendbuf, received, root=root)
    scatter_object_output_list[0] = _decode(received)

"""ember.distributed: PyTorch's torch.distributed on MPI (through mpi4py).

ember does not carry its own transport: every collective is one MPI call
(a blocking one, or with async_op=True or a group timeout the nonblocking
MPI_I* one, whose Work.wait() waits for it: Note [Timeouts] in
distributed_c10d.py), and tensors reach MPI through the buffer protocol without a copy
(Note [Tensors as MPI buffers] in distributed_c10d.py).  Only the "mpi"
backend exists; processes start under `mpirun` or the torchrun-like
launcher `python -m ember.distributed.run`.
"""

import importlib.util


def is_available():
    """True when mpi4py can be imported (MPI itself starts only in
    init_process_group)."""
    return importlib.util.find_spec("mpi4py") is not None


from .distributed_c10d import (  # noqa: E402,F401
    Backend, GroupMember, ProcessGroup, ReduceOp, Work,
    all_gather, all_gather_into_tensor, all_gather_object, all_reduce, all_to_all,
    all_to_all_single, barrier, broadcast, broadcast_object_list, destroy_process_group,
    gather, gather_object, get_backend, get_rank, get_world_size, init_process_group,
    irecv, is_initialized, is_mpi_available, isend, new_group, recv, reduce,
    reduce_scatter, reduce_scatter_tensor, scatter, scatter_object_list, send,
)

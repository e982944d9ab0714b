"""How tensors and storages pickle between processes
(torch.multiprocessing.reductions).

A storage pickles as a duplicate of its shared memory file's descriptor
(multiprocessing.reduction.DupFd sends it over a Unix socket) and its size;
a tensor as its storage plus dtype, offset, sizes and strides.  Note
[Shared memory by file descriptor] in c/th/THShared.h.
"""
import os
from multiprocessing.reduction import DupFd, ForkingPickler

import ember
from ember.nn import Parameter


def rebuild_storage_fd(dup_fd, nbytes):
    fd = dup_fd.detach()
    try:
        # The storage maps the file through a duplicate of its own.
        return ember.UntypedStorage._new_shared_fd_cpu(fd, nbytes)
    finally:
        os.close(fd)


def reduce_storage(storage):
    fd, nbytes = storage._share_fd_cpu_()
    return (rebuild_storage_fd, (DupFd(fd), nbytes))


def rebuild_tensor(cls, storage, dtype, storage_offset, size, stride, requires_grad):
    tensor = storage._tensor(dtype, storage_offset, size, stride)
    if cls is Parameter:
        return Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad)


def reduce_tensor(tensor):
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries.  If you just want "
            "to transfer the data, call detach() on the tensor before serializing "
            "(e.g., putting it on the queue).")
    return (rebuild_tensor, (type(tensor), tensor.untyped_storage(), tensor.dtype,
                             tensor.storage_offset(), tuple(tensor.shape),
                             tensor.stride(), tensor.requires_grad))


def init_reductions():
    ForkingPickler.register(ember.UntypedStorage, reduce_storage)
    for cls in (ember.Tensor, Parameter):
        ForkingPickler.register(cls, reduce_tensor)

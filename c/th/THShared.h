/*
 * THShared.h -- storages whose bytes live in shared memory, so that another
 * process can map the same bytes (ember.multiprocessing, DataLoader workers).
 *
 * Note [Shared memory by file descriptor]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The bytes of a shared storage are an anonymous memory file
 * (memfd_create, or shm_open followed at once by shm_unlink where memfd is
 * missing), mapped MAP_SHARED.  The file has no name anywhere, so nothing
 * can be left behind in /dev/shm, even by a process that crashes: the
 * kernel frees the memory when the last mapping and the last descriptor
 * are gone.  The storage keeps its descriptor open; another process gets
 * the bytes by receiving a duplicate of it (over a Unix socket, which is
 * what Python's multiprocessing.reduction.DupFd does) and mapping it with
 * THStorage_newSharedFromFd.  This is PyTorch's "file_descriptor" sharing
 * strategy, its Linux default.
 *
 * A shared storage is an external storage (THStorage.h) whose deleter
 * unmaps the bytes and closes the descriptor; THStorage_isShared tells it
 * from any other.
 *
 * Note [Moving a storage into shared memory]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * THStorage_shareInPlace (tensor.share_memory_()) keeps the THStorage and
 * swaps its bytes: every tensor viewing it sees the move, as in PyTorch.
 * But a pointer to the old bytes may still be in use: a NumPy array or
 * memoryview exported earlier, or a kernel that runs without the GIL on
 * another thread (docs/walkthrough/13-lifetimes.md).  So the old bytes are
 * not freed by the move: they go back to their owner only when the storage
 * itself dies, and until then such a reader reads (or writes) the old copy
 * instead of freed memory.
 */
#ifndef TH_SHARED_H
#define TH_SHARED_H

#include "THStorage.h"

#include <stdbool.h>
#include <stdint.h>

/* A new zero-filled shared storage of nbytes (>= 0).  Owned reference, or
 * NULL with a TH error. */
THStorage *THStorage_newShared(int64_t nbytes);
/* Maps nbytes of the shared memory file `fd` (which the caller keeps: the
 * storage holds a duplicate).  Owned reference, or NULL with a TH error. */
THStorage *THStorage_newSharedFromFd(int fd, int64_t nbytes);
/* Moves a CPU storage's bytes into shared memory in place (a no-op for one
 * already shared).  0, or -1 with a TH error and the storage unchanged. */
int THStorage_shareInPlace(THStorage *storage);
bool THStorage_isShared(const THStorage *storage);
/* The descriptor a shared storage holds (borrowed), or -1. */
int THStorage_sharedFd(const THStorage *storage);

#endif /* TH_SHARED_H */

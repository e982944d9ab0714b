/*
 * THStorage.h -- a refcounted block of bytes that tensors view.
 *
 * A storage owns its data one of two ways:
 *   - allocated: `allocator` is set (and retained); the bytes go back to that
 *     allocator when the last reference drops;
 *   - external: memory lent by someone else (a NumPy array through the
 *     buffer protocol, a DLPack capsule).  `deleter(deleter_context, data)`
 *     is called when the last reference drops: that is where the Python
 *     layer releases the exporter, so the exporter lives exactly as long as
 *     the storage.
 * A storage has no dtype and no shape: those belong to the tensors viewing
 * it (PyTorch's "untyped storage").
 *
 * Invariants: refcount >= 1 while reachable; nbytes >= 0; data != NULL
 * whenever nbytes > 0; at most one of `allocator` and `deleter` is set.
 */
#ifndef TH_STORAGE_H
#define TH_STORAGE_H

#include "THAllocator.h"

#include <stdbool.h>
#include <stdint.h>

typedef void (*THStorageDeleter)(void *context, void *data);

typedef struct THStorage {
    int refcount; /* atomic */
    void *data;
    int64_t nbytes;
    THAllocator *allocator; /* owned reference, or NULL for external data */
    THStorageDeleter deleter;
    void *deleter_context;
    THDeviceType device;
    bool read_only; /* lent read-only memory: writes must be refused */
} THStorage;

/* A new storage of nbytes from `allocator` (retained).  Returns an owned
 * reference, or NULL with a TH error. */
THStorage *THStorage_newWithAllocator(int64_t nbytes,
                                      THAllocator *allocator);
/* The same, from the allocator registered for the device. */
THStorage *THStorage_new(int64_t nbytes, THDeviceType device);
/* Wraps memory owned elsewhere.  On success the storage owns the obligation
 * to call deleter(context, data) exactly once.  On failure (NULL returned)
 * nothing is called: the caller keeps the obligation. */
THStorage *THStorage_newExternal(void *data, int64_t nbytes,
                                 THDeviceType device, bool read_only,
                                 THStorageDeleter deleter, void *context);
void THStorage_retain(THStorage *storage);
void THStorage_release(THStorage *storage);

#endif /* TH_STORAGE_H */

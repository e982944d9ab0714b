/*
 * THStorage.c -- creation and reference counting of storages.
 * See THStorage.h for the two ways a storage owns its bytes.
 */
#include "THStorage.h"

#include "THGeneral.h"
#include "THHeaderCache.h"

#include <stdlib.h>

static THStorage *
storage_alloc_header(void)
{
    /* Note [Header free lists]: a reused header keeps its old fields */
    THStorage *storage = THHeader_alloc(TH_HEADER_STORAGE);
    if (storage == NULL) {
        return NULL;
    }
    *storage = (THStorage){.refcount = 1};
    return storage;
}

THStorage *
THStorage_newWithAllocator(int64_t nbytes, THAllocator *allocator)
{
    if (nbytes < 0) {
        THError_set(TH_ERR_VALUE, "storage size must be non-negative, "
                    "got %lld", (long long)nbytes);
        return NULL;
    }
    if (nbytes > TH_MAX_NBYTES) {
        THError_set(TH_ERR_MEMORY, "can't allocate a storage of %lld bytes",
                    (long long)nbytes);
        return NULL;
    }
    THStorage *storage = storage_alloc_header();
    if (storage == NULL) {
        return NULL;
    }
    /* Retained before the call: a Python allocator's malloc may drop every
     * other reference to it (Note [Registry references]). */
    THAllocator_retain(allocator);
    storage->data = THAllocator_alloc(allocator, (size_t)nbytes);
    if (storage->data == NULL && nbytes > 0) {
        THAllocator_release(allocator);
        THHeader_free(TH_HEADER_STORAGE, storage);
        return NULL;
    }
    storage->allocator = allocator;
    storage->nbytes = nbytes;
    storage->device = allocator->device;
    return storage;
}

THStorage *
THStorage_new(int64_t nbytes, THDeviceType device)
{
    THAllocator *allocator = THAllocator_acquire(device);
    if (allocator == NULL) {
        THError_set(TH_ERR_RUNTIME,
                    "no allocator is installed for device type %d",
                    (int)device);
        return NULL;
    }
    THStorage *storage = THStorage_newWithAllocator(nbytes, allocator);
    THAllocator_release(allocator); /* the storage holds its own */
    return storage;
}

THStorage *
THStorage_newExternal(void *data, int64_t nbytes, THDeviceType device,
                      bool read_only, THStorageDeleter deleter,
                      void *context)
{
    if (nbytes < 0 || (data == NULL && nbytes > 0)) {
        THError_set(TH_ERR_VALUE, "invalid external memory (%lld bytes at "
                    "%p)", (long long)nbytes, data);
        return NULL;
    }
    THStorage *storage = storage_alloc_header();
    if (storage == NULL) {
        return NULL;
    }
    storage->data = data;
    storage->nbytes = nbytes;
    storage->device = device;
    storage->read_only = read_only;
    storage->deleter = deleter;
    storage->deleter_context = context;
    return storage;
}

void
THStorage_retain(THStorage *storage)
{
    __atomic_add_fetch(&storage->refcount, 1, __ATOMIC_RELAXED);
}

void
THStorage_release(THStorage *storage)
{
    if (storage == NULL) {
        return;
    }
    if (!TH_dropReference(&storage->refcount)) {
        return;
    }
    if (storage->allocator != NULL) {
        THAllocator_free(storage->allocator, storage->data,
                         (size_t)storage->nbytes);
        THAllocator_release(storage->allocator);
    }
    else if (storage->deleter != NULL) {
        storage->deleter(storage->deleter_context, storage->data);
    }
    THHeader_free(TH_HEADER_STORAGE, storage);
}

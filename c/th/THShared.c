/*
 * THShared.c -- shared-memory storages.  See THShared.h, above all
 * Note [Shared memory by file descriptor].
 */
#define _GNU_SOURCE /* memfd_create, F_DUPFD_CLOEXEC */

#include "THShared.h"

#include "THGeneral.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a shared storage's deleter releases: the mapping, the descriptor,
 * and the bytes the storage had before a move (Note [Moving a storage into
 * shared memory]), which are NULL/0 for a storage born shared. */
typedef struct {
    int fd;
    void *mapping; /* NULL for an empty storage: nothing is mapped */
    size_t mapped_bytes;
    void *old_data;
    int64_t old_nbytes;
    THAllocator *old_allocator; /* owned reference, or NULL */
    THStorageDeleter old_deleter;
    void *old_deleter_context;
} SharedMemory;

static void
release_old_bytes(SharedMemory *shared)
{
    if (shared->old_allocator != NULL) {
        THAllocator_free(shared->old_allocator, shared->old_data,
                         (size_t)shared->old_nbytes);
        THAllocator_release(shared->old_allocator);
    }
    else if (shared->old_deleter != NULL) {
        shared->old_deleter(shared->old_deleter_context, shared->old_data);
    }
}

/* The deleter of every shared storage (THStorageDeleter). */
static void
release_shared_memory(void *context, void *data)
{
    (void)data;
    SharedMemory *shared = context;
    if (shared->mapping != NULL) {
        munmap(shared->mapping, shared->mapped_bytes);
    }
    close(shared->fd);
    release_old_bytes(shared);
    free(shared);
}

static int
set_os_error(const char *what, int64_t nbytes)
{
    return THError_set(TH_ERR_RUNTIME, "unable to %s of %lld bytes: %s (%d)",
                       what, (long long)nbytes, strerror(errno), errno);
}

/* A nameless shared memory file, close-on-exec, or -1 with a TH error. */
static int
open_anonymous_file(int64_t nbytes)
{
    int fd = memfd_create("ember-shared", MFD_CLOEXEC);
    if (fd < 0 && errno == ENOSYS) {
        /* An old kernel: a POSIX name, removed before anyone can see it. */
        static unsigned counter;
        char name[64];
        snprintf(name, sizeof(name), "/ember_%d_%u", (int)getpid(),
                 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            shm_unlink(name);
        }
    }
    if (fd < 0) {
        set_os_error("create a shared memory file", nbytes);
    }
    return fd;
}

/* Maps nbytes of `fd` and wraps them in a storage that owns `fd` from
 * then on.  On failure `fd` is closed and NULL returned with a TH error. */
static THStorage *
storage_on_file(int fd, int64_t nbytes)
{
    SharedMemory *shared = calloc(1, sizeof(*shared));
    if (shared == NULL) {
        close(fd);
        THError_set(TH_ERR_MEMORY, "out of memory sharing a storage");
        return NULL;
    }
    shared->fd = fd;
    if (nbytes > 0) {
        void *mapping = mmap(NULL, (size_t)nbytes, PROT_READ | PROT_WRITE,
                             MAP_SHARED, fd, 0);
        if (mapping == MAP_FAILED) {
            set_os_error("map shared memory", nbytes);
            release_shared_memory(shared, NULL);
            return NULL;
        }
        shared->mapping = mapping;
        shared->mapped_bytes = (size_t)nbytes;
    }
    THStorage *storage =
        THStorage_newExternal(shared->mapping, nbytes, TH_DEVICE_CPU, false,
                              release_shared_memory, shared);
    if (storage == NULL) {
        release_shared_memory(shared, NULL);
    }
    return storage;
}

static int
check_size(int64_t nbytes)
{
    if (nbytes < 0) {
        return THError_set(TH_ERR_VALUE, "storage size must be "
                           "non-negative, got %lld", (long long)nbytes);
    }
    if (nbytes > TH_MAX_NBYTES) {
        return THError_set(TH_ERR_MEMORY, "can't allocate a storage of %lld "
                           "bytes", (long long)nbytes);
    }
    return 0;
}

THStorage *
THStorage_newShared(int64_t nbytes)
{
    if (check_size(nbytes) < 0) {
        return NULL;
    }
    int fd = open_anonymous_file(nbytes);
    if (fd < 0) {
        return NULL;
    }
    if (ftruncate(fd, (off_t)nbytes) < 0) {
        set_os_error("size a shared memory file", nbytes);
        close(fd);
        return NULL;
    }
    return storage_on_file(fd, nbytes);
}

THStorage *
THStorage_newSharedFromFd(int fd, int64_t nbytes)
{
    if (check_size(nbytes) < 0) {
        return NULL;
    }
    struct stat info;
    if (fstat(fd, &info) < 0) {
        set_os_error("inspect a shared memory file", nbytes);
        return NULL;
    }
    if ((int64_t)info.st_size < nbytes) {
        THError_set(TH_ERR_VALUE, "the shared memory file holds %lld bytes, "
                    "fewer than the %lld asked for",
                    (long long)info.st_size, (long long)nbytes);
        return NULL;
    }
    int own_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own_fd < 0) {
        set_os_error("duplicate a shared memory descriptor", nbytes);
        return NULL;
    }
    return storage_on_file(own_fd, nbytes);
}

bool
THStorage_isShared(const THStorage *storage)
{
    return storage->deleter == release_shared_memory;
}

int
THStorage_sharedFd(const THStorage *storage)
{
    return THStorage_isShared(storage)
               ? ((SharedMemory *)storage->deleter_context)->fd
               : -1;
}

int
THStorage_shareInPlace(THStorage *storage)
{
    if (THStorage_isShared(storage)) {
        return 0;
    }
    if (storage->device != TH_DEVICE_CPU) {
        return THError_set(TH_ERR_RUNTIME, "share_memory_: only CPU "
                           "storages can be moved to shared memory");
    }
    THStorage *fresh = THStorage_newShared(storage->nbytes);
    if (fresh == NULL) {
        return -1;
    }
    if (storage->nbytes > 0) {
        memcpy(fresh->data, storage->data, (size_t)storage->nbytes);
    }
    /* Take the shared bytes out of `fresh` and hand it the old ones to
     * keep (Note [Moving a storage into shared memory]). */
    SharedMemory *shared = fresh->deleter_context;
    shared->old_data = storage->data;
    shared->old_nbytes = storage->nbytes;
    shared->old_allocator = storage->allocator;
    shared->old_deleter = storage->deleter;
    shared->old_deleter_context = storage->deleter_context;
    storage->data = fresh->data;
    storage->allocator = NULL;
    storage->deleter = release_shared_memory;
    storage->deleter_context = shared;
    fresh->deleter = NULL; /* its bytes now belong to `storage` */
    THStorage_release(fresh);
    return 0;
}

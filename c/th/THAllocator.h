/*
 * THAllocator.h -- where tensor memory comes from.
 *
 * An allocator is a struct of two function pointers plus an opaque context,
 * a device tag and running statistics.  The core never calls malloc() for
 * tensor data directly: it asks the allocator registered for the device, and
 * every storage remembers (and retains) the allocator it came from, so its
 * memory goes back to the same allocator even after another one has been
 * installed (Note [Allocator lifetime]).
 *
 * Built in: the default CPU allocator, 64-byte aligned (a cache line, and the
 * widest AVX-512 vector), with a cache of freed blocks (Note [The CPU block
 * cache]).  Anything else plugs in through THAllocator_new(): the Python
 * layer uses it for allocators written in Python, whose context is the
 * Python object.
 *
 * Note [Allocator lifetime]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~
 * Allocators are refcounted.  The registry holds one reference to each
 * installed allocator and every live storage holds one to its own.  The
 * context is released (release_context) only when the last reference goes,
 * i.e. when the allocator is neither installed nor backing any memory.
 * The built-in CPU allocator is static and never freed.
 *
 * Note [The CPU block cache]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Every block of the built-in CPU allocator has the capacity of its size
 * class: 64-byte steps up to 256 bytes, then four classes per power of two
 * (at most 25% rounding).  Blocks under 2 MiB come from malloc(); larger
 * ones are mapped directly, 2 MiB aligned and advised MADV_HUGEPAGE, so
 * that first touch costs one fault per 2 MiB instead of one per 4 KiB.
 *
 * THAllocator_free() of such a block keeps it on its class's free list
 * instead of freeing it, while the cache holds at most its limit
 * (THAllocator_setCacheLimit) in capacity; THAllocator_alloc() of a size in
 * that class takes it back (the same pointer, no fault, no malloc).  A
 * cached block belongs to nobody: it counts in cached_bytes/cached_blocks,
 * not in allocated_bytes/live_blocks, and is only handed out again once its
 * holder has freed it.  THAllocator_emptyCache() really frees every cached
 * block; it also runs at process exit, so valgrind and LeakSanitizer see
 * every block freed.  Under AddressSanitizer the cache is off by default, so
 * a use after free is still caught.
 *
 * Only THAllocator_alloc/free go through the cache: the raw entry points
 * (cpu->malloc/cpu->free, which Python allocators delegate to) allocate
 * and free for real, so allocators built on them see exactly what they ask.
 * One lock guards the cache and every statistic.
 */
#ifndef TH_ALLOCATOR_H
#define TH_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TH_DEVICE_CPU = 0,
    TH_DEVICE_CUDA = 1,
    TH_NUM_DEVICE_TYPES
} THDeviceType;

/* Running totals, kept under one lock because kernels may allocate with
 * the GIL released.  The cache counters stay 0 for allocators other than
 * the built-in CPU one (Note [The CPU block cache]). */
typedef struct {
    int64_t allocated_bytes;      /* bytes currently handed out */
    int64_t peak_allocated_bytes; /* high-water mark of the above */
    int64_t live_blocks;          /* blocks currently handed out */
    int64_t num_allocs;           /* successful allocations, ever */
    int64_t num_frees;            /* frees, ever */
    int64_t cached_bytes;         /* capacity of the freed blocks kept */
    int64_t cached_blocks;        /* freed blocks kept for reuse */
    int64_t cache_hits;           /* allocations served from the cache */
    int64_t cache_misses;         /* allocations the cache could not serve */
} THAllocatorStats;

typedef struct THAllocator THAllocator;

struct THAllocator {
    /* Returns nbytes of memory (nbytes > 0), or NULL with a TH error set. */
    void *(*malloc)(void *context, size_t nbytes);
    /* Gives back a block; nbytes is what was asked for.  Cannot fail. */
    void (*free)(void *context, void *ptr, size_t nbytes);
    /* Called once when the allocator's last reference goes; may be NULL. */
    void (*release_context)(void *context);
    void *context;
    const char *name;
    THDeviceType device;
    int refcount; /* atomic; ignored for static allocators */
    int is_static;
    THAllocatorStats stats;
};

/* The built-in 64-byte aligned allocator.  Returns a borrowed pointer. */
THAllocator *THAllocator_cpu(void);

/* A new allocator around user functions, with one reference owned by the
 * caller.  name is copied.  Returns NULL with a TH error on failure. */
THAllocator *THAllocator_new(void *(*malloc_fn)(void *, size_t),
                             void (*free_fn)(void *, void *, size_t),
                             void (*release_context)(void *), void *context,
                             const char *name, THDeviceType device);
void THAllocator_retain(THAllocator *allocator);
void THAllocator_release(THAllocator *allocator);

/* Allocates through `allocator` and keeps its statistics (and the device's).
 * nbytes == 0 returns NULL without error and counts nothing. */
void *THAllocator_alloc(THAllocator *allocator, size_t nbytes);
void THAllocator_free(THAllocator *allocator, void *ptr, size_t nbytes);

/* Note [Registry references]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * An allocator written in Python runs Python code in malloc, and that code
 * may install another allocator (ember.memory.set_allocator), dropping the
 * registry's reference to the one being called.  So whoever allocates
 * through the registry takes an owned reference first
 * (THAllocator_acquire) and drops it after the call, and a storage retains
 * its allocator before asking it for memory.  The registry itself is read
 * and written under the allocator lock, so a kernel that allocates without
 * the GIL never sees a half-exchanged slot. */

/* The allocator installed for a device, as a new reference (release it),
 * or NULL when none is installed. */
THAllocator *THAllocator_acquire(THDeviceType device);
/* The same as a borrowed pointer, only good for comparing identities
 * (it may be freed by the next call that can run Python). */
THAllocator *THAllocator_get(THDeviceType device);
/* Installs `allocator` for its device and returns the previous one, whose
 * registry reference passes to the caller (it may be NULL for a device that
 * had none).  The registry takes a new reference to `allocator`. */
THAllocator *THAllocator_exchange(THAllocator *allocator);
/* Empties the registry slot of a device other than the CPU (whose slot is
 * never empty) and returns what it held, whose registry reference passes
 * to the caller (NULL when it was empty, or for the CPU).  Storages made
 * before keep their allocator (Note [Allocator lifetime]). */
THAllocator *THAllocator_uninstall(THDeviceType device);

/* Statistics of all memory on a device, whichever allocator it came from. */
THAllocatorStats THAllocator_deviceStats(THDeviceType device);
/* Statistics of one allocator. */
THAllocatorStats THAllocator_stats(const THAllocator *allocator);
/* Resets the peaks of a device's totals to the current use. */
void THAllocator_resetPeak(THDeviceType device);

/* Really frees every block in the CPU cache (Note [The CPU block cache]). */
void THAllocator_emptyCache(void);
/* Sets the most bytes (of capacity) the CPU cache may hold; 0 turns it
 * off.  Empties the cache when it holds more than the new limit.  Returns
 * the previous limit, or -1 with a TH error for a negative one. */
int64_t THAllocator_setCacheLimit(int64_t nbytes);
int64_t THAllocator_getCacheLimit(void);
/* The capacity of the CPU allocator's blocks for requests of nbytes (>0):
 * requests with the same capacity share a size class. */
size_t THAllocator_blockCapacity(size_t nbytes);

#endif /* TH_ALLOCATOR_H */

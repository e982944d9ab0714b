/*
 * THAllocator.c -- the default CPU allocator, the per-device registry and
 * the statistics every allocation updates.  See THAllocator.h.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "THAllocator.h"

#include "THGeneral.h"

#include <stdlib.h>
#include <string.h>

enum { TH_CPU_ALIGNMENT = 64 };

/* Note [Aligned blocks from malloc]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * posix_memalign() is slow for small blocks in glibc: it bypasses the
 * per-thread cache and walks the general heap (measured: empty(4) spent
 * more time in _int_memalign/malloc_consolidate than in all of ember).  So
 * we over-allocate by one alignment unit with plain malloc(), round the
 * address up to the next multiple of 64, and keep malloc's own pointer in
 * the 8 bytes just below the aligned block (malloc returns 16-byte aligned
 * memory, so at least 16 bytes lie between the two).  free() reads it
 * back.  Large blocks cost one wasted cache line, which is nothing. */
static void *
cpu_malloc(void *context, size_t nbytes)
{
    (void)context;
    char *raw = malloc(nbytes + TH_CPU_ALIGNMENT);
    if (raw == NULL) {
        THError_set(TH_ERR_MEMORY,
                    "DefaultCPUAllocator: can't allocate memory: you tried "
                    "to allocate %zu bytes",
                    nbytes);
        return NULL;
    }
    uintptr_t aligned = ((uintptr_t)raw + TH_CPU_ALIGNMENT)
                        & ~(uintptr_t)(TH_CPU_ALIGNMENT - 1);
    ((void **)aligned)[-1] = raw;
    return (void *)aligned;
}

static void
cpu_free(void *context, void *ptr, size_t nbytes)
{
    (void)context;
    (void)nbytes;
    free(((void **)ptr)[-1]);
}

static THAllocator cpu_allocator = {
    .malloc = cpu_malloc,
    .free = cpu_free,
    .release_context = NULL,
    .context = NULL,
    .name = "cpu",
    .device = TH_DEVICE_CPU,
    .refcount = 1,
    .is_static = 1,
};

/* registry[device] holds one reference to the installed allocator (or is
 * NULL, e.g. for CUDA before ember.cuda installs one).  It is only changed
 * with the GIL held (from Python), so a plain load is enough for readers
 * that hold the GIL; kernels never look it up. */
static THAllocator *registry[TH_NUM_DEVICE_TYPES] = {
    [TH_DEVICE_CPU] = &cpu_allocator,
};

static THAllocatorStats device_stats[TH_NUM_DEVICE_TYPES];

THAllocator *
THAllocator_cpu(void)
{
    return &cpu_allocator;
}

THAllocator *
THAllocator_new(void *(*malloc_fn)(void *, size_t),
                void (*free_fn)(void *, void *, size_t),
                void (*release_context)(void *), void *context,
                const char *name, THDeviceType device)
{
    if (malloc_fn == NULL || free_fn == NULL) {
        THError_set(TH_ERR_VALUE, "an allocator needs malloc and free");
        return NULL;
    }
    if ((int)device < 0 || device >= TH_NUM_DEVICE_TYPES) {
        THError_set(TH_ERR_VALUE, "unknown device type %d", (int)device);
        return NULL;
    }
    THAllocator *allocator = calloc(1, sizeof(*allocator));
    char *name_copy = strdup(name != NULL ? name : "custom");
    if (allocator == NULL || name_copy == NULL) {
        free(allocator);
        free(name_copy);
        THError_set(TH_ERR_MEMORY, "out of memory creating an allocator");
        return NULL;
    }
    allocator->malloc = malloc_fn;
    allocator->free = free_fn;
    allocator->release_context = release_context;
    allocator->context = context;
    allocator->name = name_copy;
    allocator->device = device;
    allocator->refcount = 1;
    return allocator;
}

void
THAllocator_retain(THAllocator *allocator)
{
    if (!allocator->is_static) {
        __atomic_add_fetch(&allocator->refcount, 1, __ATOMIC_RELAXED);
    }
}

void
THAllocator_release(THAllocator *allocator)
{
    if (allocator == NULL || allocator->is_static) {
        return;
    }
    if (__atomic_sub_fetch(&allocator->refcount, 1, __ATOMIC_ACQ_REL) != 0) {
        return;
    }
    if (allocator->release_context != NULL) {
        allocator->release_context(allocator->context);
    }
    free((char *)allocator->name);
    free(allocator);
}

/* Adds delta to *counter and raises *peak to the new value if needed. */
static void
stats_add_bytes(THAllocatorStats *stats, int64_t delta)
{
    int64_t now = __atomic_add_fetch(&stats->allocated_bytes, delta,
                                     __ATOMIC_RELAXED);
    int64_t peak = __atomic_load_n(&stats->peak_allocated_bytes,
                                   __ATOMIC_RELAXED);
    while (now > peak
           && !__atomic_compare_exchange_n(&stats->peak_allocated_bytes,
                                           &peak, now, true,
                                           __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED)) {
        /* peak was reloaded by the failed exchange; try again */
    }
}

static void
stats_record_alloc(THAllocatorStats *stats, size_t nbytes)
{
    stats_add_bytes(stats, (int64_t)nbytes);
    __atomic_add_fetch(&stats->live_blocks, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&stats->num_allocs, 1, __ATOMIC_RELAXED);
}

static void
stats_record_free(THAllocatorStats *stats, size_t nbytes)
{
    __atomic_sub_fetch(&stats->allocated_bytes, (int64_t)nbytes,
                       __ATOMIC_RELAXED);
    __atomic_sub_fetch(&stats->live_blocks, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&stats->num_frees, 1, __ATOMIC_RELAXED);
}

void *
THAllocator_alloc(THAllocator *allocator, size_t nbytes)
{
    if (nbytes == 0) {
        return NULL;
    }
    if (nbytes > (size_t)TH_MAX_NBYTES) {
        THError_set(TH_ERR_MEMORY,
                    "%s allocator: can't allocate %zu bytes (the limit is "
                    "%lld)",
                    allocator->name, nbytes, (long long)TH_MAX_NBYTES);
        return NULL;
    }
    /* Cleared first so that a stale error from an earlier call is not
     * mistaken for this allocator's own report below. */
    THError_clear();
    void *ptr = allocator->malloc(allocator->context, nbytes);
    if (ptr == NULL) {
        if (THError_kind() == TH_ERR_NONE) {
            THError_set(TH_ERR_MEMORY, "%s allocator returned no memory "
                        "for %zu bytes", allocator->name, nbytes);
        }
        return NULL;
    }
    stats_record_alloc(&allocator->stats, nbytes);
    stats_record_alloc(&device_stats[allocator->device], nbytes);
    return ptr;
}

void
THAllocator_free(THAllocator *allocator, void *ptr, size_t nbytes)
{
    if (ptr == NULL) {
        return;
    }
    stats_record_free(&allocator->stats, nbytes);
    stats_record_free(&device_stats[allocator->device], nbytes);
    allocator->free(allocator->context, ptr, nbytes);
}

THAllocator *
THAllocator_get(THDeviceType device)
{
    if ((int)device < 0 || device >= TH_NUM_DEVICE_TYPES) {
        return NULL;
    }
    return registry[device];
}

THAllocator *
THAllocator_exchange(THAllocator *allocator)
{
    THAllocator_retain(allocator);
    THAllocator *previous = registry[allocator->device];
    registry[allocator->device] = allocator;
    return previous;
}

static THAllocatorStats
stats_snapshot(const THAllocatorStats *stats)
{
    THAllocatorStats copy;
    copy.allocated_bytes = __atomic_load_n(&stats->allocated_bytes,
                                           __ATOMIC_RELAXED);
    copy.peak_allocated_bytes =
        __atomic_load_n(&stats->peak_allocated_bytes, __ATOMIC_RELAXED);
    copy.live_blocks = __atomic_load_n(&stats->live_blocks, __ATOMIC_RELAXED);
    copy.num_allocs = __atomic_load_n(&stats->num_allocs, __ATOMIC_RELAXED);
    copy.num_frees = __atomic_load_n(&stats->num_frees, __ATOMIC_RELAXED);
    return copy;
}

THAllocatorStats
THAllocator_deviceStats(THDeviceType device)
{
    THAllocatorStats empty = {0};
    if ((int)device < 0 || device >= TH_NUM_DEVICE_TYPES) {
        return empty;
    }
    return stats_snapshot(&device_stats[device]);
}

THAllocatorStats
THAllocator_stats(const THAllocator *allocator)
{
    return stats_snapshot(&allocator->stats);
}

void
THAllocator_resetPeak(THDeviceType device)
{
    if ((int)device < 0 || device >= TH_NUM_DEVICE_TYPES) {
        return;
    }
    THAllocatorStats *stats = &device_stats[device];
    __atomic_store_n(&stats->peak_allocated_bytes,
                     __atomic_load_n(&stats->allocated_bytes,
                                     __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
}

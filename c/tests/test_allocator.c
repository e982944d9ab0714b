/*
 * test_allocator.c -- the CPU allocator, statistics, custom allocators and
 * Note [Allocator lifetime] (THAllocator.h).
 */
#include "th_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- a counting allocator: everything goes through its context ---------- */

typedef struct {
    int mallocs;
    int frees;
    int releases;
    int64_t live_bytes;
    bool fail;           /* malloc returns NULL */
    bool fail_with_error; /* ... after setting its own TH error */
    void *last_ptr;
} Counter;

static void *
counting_malloc(void *context, size_t nbytes)
{
    Counter *c = context;
    if (c->fail) {
        if (c->fail_with_error) {
            THError_set(TH_ERR_VALUE, "counting allocator says no");
        }
        return NULL;
    }
    c->mallocs++;
    c->live_bytes += (int64_t)nbytes;
    c->last_ptr = malloc(nbytes);
    return c->last_ptr;
}

static void
counting_free(void *context, void *ptr, size_t nbytes)
{
    Counter *c = context;
    c->frees++;
    c->live_bytes -= (int64_t)nbytes;
    free(ptr);
}

static void
counting_release(void *context)
{
    ((Counter *)context)->releases++;
}

static THAllocator *
counting_allocator(Counter *c, THDeviceType device)
{
    return THAllocator_new(counting_malloc, counting_free, counting_release,
                           c, "counting", device);
}

/* ---- tests ----------------------------------------------------------------- */

static void
test_allocator_cpu_is_aligned_and_static(void)
{
    THAllocator *cpu = THAllocator_cpu();
    CHECK(cpu != NULL && cpu->is_static);
    CHECK(THAllocator_get(TH_DEVICE_CPU) == cpu);
    CHECK_EQ_INT(cpu->device, TH_DEVICE_CPU);
    static const size_t sizes[] = {1, 3, 63, 64, 65, 1000, 4097, 1 << 20};
    void *ptrs[sizeof(sizes) / sizeof(sizes[0])];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        ptrs[i] = THAllocator_alloc(cpu, sizes[i]);
        CHECK_NOT_NULL(ptrs[i]);
        CHECK_MSG((uintptr_t)ptrs[i] % 64 == 0, "%zu bytes at %p: not "
                  "64-byte aligned", sizes[i], ptrs[i]);
        if (ptrs[i] != NULL) {
            memset(ptrs[i], 0xab, sizes[i]); /* valgrind: really usable */
        }
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        THAllocator_free(cpu, ptrs[i], sizes[i]);
    }
    /* retain/release of the static allocator is a no-op, never a free */
    THAllocator_retain(cpu);
    THAllocator_release(cpu);
    THAllocator_release(cpu);
    THAllocator_release(NULL);
    CHECK(THAllocator_get(TH_DEVICE_CPU) == cpu);
    /* a storage's data is aligned too */
    THStorage *s = THStorage_new(10, TH_DEVICE_CPU);
    CHECK(s != NULL && (uintptr_t)s->data % 64 == 0);
    THStorage_release(s);
}

static void
test_allocator_stats_exact(void)
{
    THAllocator *cpu = THAllocator_cpu();
    THAllocator_resetPeak(TH_DEVICE_CPU);
    THAllocatorStats d0 = THAllocator_deviceStats(TH_DEVICE_CPU);
    THAllocatorStats a0 = THAllocator_stats(cpu);
    CHECK_EQ_INT(d0.peak_allocated_bytes, d0.allocated_bytes);

    void *p = THAllocator_alloc(cpu, 1000);
    void *q = THAllocator_alloc(cpu, 24);
    THAllocatorStats d1 = THAllocator_deviceStats(TH_DEVICE_CPU);
    THAllocatorStats a1 = THAllocator_stats(cpu);
    CHECK_EQ_INT(d1.allocated_bytes - d0.allocated_bytes, 1024);
    CHECK_EQ_INT(d1.peak_allocated_bytes, d0.allocated_bytes + 1024);
    CHECK_EQ_INT(d1.live_blocks - d0.live_blocks, 2);
    CHECK_EQ_INT(d1.num_allocs - d0.num_allocs, 2);
    CHECK_EQ_INT(d1.num_frees - d0.num_frees, 0);
    CHECK_EQ_INT(a1.allocated_bytes - a0.allocated_bytes, 1024);
    CHECK_EQ_INT(a1.live_blocks - a0.live_blocks, 2);
    CHECK_EQ_INT(a1.num_allocs - a0.num_allocs, 2);

    THAllocator_free(cpu, p, 1000);
    THAllocatorStats d2 = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(d2.allocated_bytes - d0.allocated_bytes, 24);
    CHECK_EQ_INT(d2.peak_allocated_bytes, d0.allocated_bytes + 1024);
    CHECK_EQ_INT(d2.live_blocks - d0.live_blocks, 1);
    CHECK_EQ_INT(d2.num_frees - d0.num_frees, 1);

    /* resetPeak drops the high-water mark to current use */
    THAllocator_resetPeak(TH_DEVICE_CPU);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).peak_allocated_bytes,
                 d0.allocated_bytes + 24);

    THAllocator_free(cpu, q, 24);
    THAllocatorStats d3 = THAllocator_deviceStats(TH_DEVICE_CPU);
    THAllocatorStats a3 = THAllocator_stats(cpu);
    CHECK_EQ_INT(d3.allocated_bytes, d0.allocated_bytes);
    CHECK_EQ_INT(d3.live_blocks, d0.live_blocks);
    CHECK_EQ_INT(d3.num_allocs - d0.num_allocs, 2);
    CHECK_EQ_INT(d3.num_frees - d0.num_frees, 2);
    CHECK_EQ_INT(a3.allocated_bytes, a0.allocated_bytes);
    CHECK_EQ_INT(a3.num_frees - a0.num_frees, 2);

    /* tensors count through storages: 2*3 float64 = 48 bytes */
    THTensor *t = THTensor_newEmpty(TT_SIZES(2, 3), TH_Float64, TH_DEVICE_CPU);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).allocated_bytes
                     - d0.allocated_bytes, 48);
    THTensor_release(t);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).allocated_bytes,
                 d0.allocated_bytes);

    /* invalid devices */
    THAllocatorStats none = THAllocator_deviceStats(TH_NUM_DEVICE_TYPES);
    CHECK_EQ_INT(none.allocated_bytes + none.live_blocks + none.num_allocs, 0);
    CHECK(THAllocator_get(TH_NUM_DEVICE_TYPES) == NULL);
    CHECK(THAllocator_get((THDeviceType)-1) == NULL);
    THAllocator_resetPeak(TH_NUM_DEVICE_TYPES); /* no crash */
}

static void
test_allocator_zero_bytes(void)
{
    Counter c = {0};
    THAllocator *alloc = counting_allocator(&c, TH_DEVICE_CPU);
    THAllocatorStats before = THAllocator_deviceStats(TH_DEVICE_CPU);

    THError_clear();
    CHECK(THAllocator_alloc(alloc, 0) == NULL);
    CHECK_EQ_INT(THError_kind(), TH_ERR_NONE);
    THAllocator_free(alloc, NULL, 0); /* no-op */

    THStorage *s = THStorage_newWithAllocator(0, alloc);
    CHECK_NOT_NULL(s);
    if (s != NULL) {
        CHECK(s->data == NULL);
        CHECK_EQ_INT(s->nbytes, 0);
        CHECK(s->allocator == alloc);
        CHECK_EQ_INT(alloc->refcount, 2); /* ours + the storage's */
    }
    THStorage_release(s);
    CHECK_EQ_INT(alloc->refcount, 1);
    CHECK_EQ_INT(c.mallocs, 0);
    CHECK_EQ_INT(c.frees, 0);
    THAllocatorStats after = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(after.num_allocs, before.num_allocs);
    CHECK_EQ_INT(after.num_frees, before.num_frees);
    CHECK_EQ_INT(THAllocator_stats(alloc).num_allocs, 0);

    /* zero-size tensors on the CPU allocator */
    THTensor *t = THTensor_newEmpty(TT_SIZES(3, 0), TH_Float32, TH_DEVICE_CPU);
    CHECK(t != NULL && t->storage->nbytes == 0 && t->numel == 0);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).num_allocs,
                 before.num_allocs);
    THTensor_release(t);

    THAllocator_release(alloc);
    CHECK_EQ_INT(c.releases, 1);
}

static void
test_allocator_new_validates(void)
{
    Counter c = {0};
    THError_clear();
    CHECK(THAllocator_new(NULL, counting_free, NULL, &c, "x", TH_DEVICE_CPU)
          == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "malloc and free");
    CHECK(THAllocator_new(counting_malloc, NULL, NULL, &c, "x", TH_DEVICE_CPU)
          == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "malloc and free");
    CHECK(THAllocator_new(counting_malloc, counting_free, NULL, &c, "x",
                          TH_NUM_DEVICE_TYPES)
          == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "unknown device type");
    CHECK(THAllocator_new(counting_malloc, counting_free, NULL, &c, "x",
                          (THDeviceType)-1)
          == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "unknown device type");

    /* the name is copied; NULL gets a default; release_context may be NULL */
    char name[] = "mine";
    THAllocator *a = THAllocator_new(counting_malloc, counting_free, NULL, &c,
                                     name, TH_DEVICE_CPU);
    THAllocator *b = THAllocator_new(counting_malloc, counting_free, NULL, &c,
                                     NULL, TH_DEVICE_CUDA);
    CHECK(a != NULL && b != NULL);
    if (a != NULL && b != NULL) {
        name[0] = 'X';
        CHECK_STR_EQ(a->name, "mine");
        CHECK(a->name != name);
        CHECK_STR_EQ(b->name, "custom");
        CHECK_EQ_INT(a->refcount, 1);
        CHECK(!a->is_static);
        CHECK_EQ_INT(b->device, TH_DEVICE_CUDA);
    }
    THAllocator_release(a);
    THAllocator_release(b);
    CHECK_EQ_INT(c.mallocs + c.frees + c.releases, 0);
}

/* Note [Allocator lifetime]: installed, used, replaced, and still the one
 * that frees its storage; release_context runs once, at the very end. */
static void
test_allocator_exchange_and_lifetime(void)
{
    Counter c = {0};
    THAllocator *custom = counting_allocator(&c, TH_DEVICE_CPU);
    CHECK_NOT_NULL(custom);
    if (custom == NULL) {
        return;
    }
    THAllocatorStats dev0 = THAllocator_deviceStats(TH_DEVICE_CPU);

    THAllocator *previous = THAllocator_exchange(custom);
    CHECK(previous == THAllocator_cpu());
    CHECK(THAllocator_get(TH_DEVICE_CPU) == custom);
    CHECK_EQ_INT(custom->refcount, 2); /* ours + the registry's */

    /* storages and tensors made now come from the custom allocator */
    THStorage *s = THStorage_new(100, TH_DEVICE_CPU);
    THTensor *t = THTensor_newEmpty(TT_SIZES(4), TH_Int32, TH_DEVICE_CPU);
    CHECK(s != NULL && t != NULL);
    if (s == NULL || t == NULL) {
        THStorage_release(s);
        THTensor_release(t);
        THAllocator_release(THAllocator_exchange(previous));
        THAllocator_release(custom);
        return;
    }
    CHECK(s->allocator == custom && t->storage->allocator == custom);
    CHECK(c.last_ptr == t->storage->data);
    CHECK_EQ_INT(c.mallocs, 2);
    CHECK_EQ_INT(c.live_bytes, 116);
    CHECK_EQ_INT(custom->refcount, 4);
    THAllocatorStats cs = THAllocator_stats(custom);
    CHECK_EQ_INT(cs.allocated_bytes, 116);
    CHECK_EQ_INT(cs.live_blocks, 2);
    CHECK_EQ_INT(cs.num_allocs, 2);
    CHECK_EQ_INT(cs.peak_allocated_bytes, 116);
    /* device statistics include every allocator of the device */
    THAllocatorStats dev1 = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(dev1.allocated_bytes - dev0.allocated_bytes, 116);
    CHECK_EQ_INT(dev1.live_blocks - dev0.live_blocks, 2);
    /* a clone of t also goes through the installed allocator */
    THTensor *clone = THTensor_newClone(t);
    CHECK(clone != NULL && clone->storage->allocator == custom);
    THTensor_release(clone);
    CHECK_EQ_INT(c.mallocs, 3);
    CHECK_EQ_INT(c.frees, 1);

    /* re-install the CPU allocator: the registry's reference comes back */
    THAllocator *back = THAllocator_exchange(previous);
    CHECK(back == custom);
    CHECK(THAllocator_get(TH_DEVICE_CPU) == THAllocator_cpu());
    THAllocator_release(back);     /* the registry's reference */
    THAllocator_release(custom);   /* ours */
    CHECK_EQ_INT(c.releases, 0);   /* s and t still hold it */
    CHECK_EQ_INT(custom->refcount, 2);

    /* new memory comes from the CPU allocator again ... */
    THStorage *plain = THStorage_new(8, TH_DEVICE_CPU);
    CHECK(plain != NULL && plain->allocator == THAllocator_cpu());
    THStorage_release(plain);
    CHECK_EQ_INT(c.mallocs, 3);

    /* ... but old storages are freed through the allocator they came from */
    THStorage_release(s);
    CHECK_EQ_INT(c.frees, 2);
    CHECK_EQ_INT(c.releases, 0);
    THTensor_release(t);
    CHECK_EQ_INT(c.frees, 3);
    CHECK_EQ_INT(c.live_bytes, 0);
    CHECK_EQ_INT(c.releases, 1); /* exactly once, at the last reference */

    THAllocatorStats dev2 = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(dev2.allocated_bytes, dev0.allocated_bytes);
    CHECK_EQ_INT(dev2.live_blocks, dev0.live_blocks);
}

/* The registry's reference alone keeps an allocator alive. */
static void
test_allocator_registry_reference(void)
{
    Counter c = {0};
    THAllocator *custom = counting_allocator(&c, TH_DEVICE_CPU);
    THAllocator *previous = THAllocator_exchange(custom);
    THAllocator_release(custom); /* the registry holds the only reference */
    CHECK_EQ_INT(c.releases, 0);
    CHECK(THAllocator_get(TH_DEVICE_CPU) == custom);
    THStorage *s = THStorage_new(16, TH_DEVICE_CPU);
    CHECK(s != NULL && s->allocator == custom);
    THStorage_release(s);
    CHECK_EQ_INT(c.releases, 0);
    /* installing the same allocator twice keeps the count balanced */
    THAllocator *same = THAllocator_exchange(custom);
    CHECK(same == custom);
    THAllocator_release(same);
    CHECK_EQ_INT(c.releases, 0);
    THAllocator_release(THAllocator_exchange(previous));
    CHECK_EQ_INT(c.releases, 1);
    CHECK_EQ_INT(c.mallocs, 1);
    CHECK_EQ_INT(c.frees, 1);
}

/* An allocator whose malloc uninstalls itself (what a Python allocator can
 * do): the registry drops its only reference in the middle of the call,
 * and THStorage_new must still hold one (Note [Registry references]). */
static THAllocator *uninstall_previous; /* what to put back */

static void *
uninstalling_malloc(void *context, size_t nbytes)
{
    THAllocator_release(THAllocator_exchange(uninstall_previous));
    return counting_malloc(context, nbytes);
}

static void
test_allocator_uninstalled_during_its_own_malloc(void)
{
    Counter c = {0};
    THAllocator *custom =
        THAllocator_new(uninstalling_malloc, counting_free, counting_release,
                        &c, "uninstalling", TH_DEVICE_CPU);
    CHECK_NOT_NULL(custom);
    if (custom == NULL) {
        return;
    }
    uninstall_previous = THAllocator_exchange(custom);
    THAllocator_release(custom); /* the registry holds the only reference */
    THAllocator *acquired = THAllocator_acquire(TH_DEVICE_CPU);
    CHECK(acquired == custom);
    CHECK_EQ_INT(custom->refcount, 2); /* the registry's + acquired */
    THAllocator_release(acquired);

    THStorage *s = THStorage_new(32, TH_DEVICE_CPU);
    CHECK(s != NULL && s->allocator == custom);
    CHECK(THAllocator_get(TH_DEVICE_CPU) == uninstall_previous);
    CHECK_EQ_INT(c.releases, 0); /* the storage keeps it alive */
    if (s != NULL) {
        CHECK_EQ_INT(custom->refcount, 1);
    }
    THStorage_release(s);
    CHECK_EQ_INT(c.frees, 1);
    CHECK_EQ_INT(c.releases, 1);
    CHECK(THAllocator_acquire(TH_DEVICE_CPU) == THAllocator_cpu());
    CHECK(THAllocator_acquire(TH_NUM_DEVICE_TYPES) == NULL);
}

/* Statistics are kept per device tag: a CUDA-tagged allocator (host memory
 * here) counts under CUDA, not CPU. */
static void
test_allocator_device_tags(void)
{
    Counter c = {0};
    THAllocator *fake_cuda = counting_allocator(&c, TH_DEVICE_CUDA);
    THAllocatorStats cpu0 = THAllocator_deviceStats(TH_DEVICE_CPU);
    THAllocatorStats cuda0 = THAllocator_deviceStats(TH_DEVICE_CUDA);
    THStorage *s = THStorage_newWithAllocator(64, fake_cuda);
    CHECK(s != NULL && s->device == TH_DEVICE_CUDA);
    THAllocatorStats cuda1 = THAllocator_deviceStats(TH_DEVICE_CUDA);
    CHECK_EQ_INT(cuda1.allocated_bytes - cuda0.allocated_bytes, 64);
    CHECK_EQ_INT(cuda1.live_blocks - cuda0.live_blocks, 1);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).allocated_bytes,
                 cpu0.allocated_bytes);
    /* a tensor on it lives on that device; clones ask the (absent) CUDA
     * registry entry and fail cleanly */
    THTensor *t = s ? THTensor_newWithStorage(s, 0, TT_SIZES(16), NULL,
                                              TH_Float32)
                    : NULL;
    CHECK_NOT_NULL(t);
    if (THAllocator_get(TH_DEVICE_CUDA) == NULL && t != NULL) {
        CHECK_NEW_FAILS(THTensor_newClone(t), TH_ERR_RUNTIME,
                        "no allocator is installed for device type 1");
        THError_clear();
        CHECK(THStorage_new(8, TH_DEVICE_CUDA) == NULL);
        CHECK_ERROR(TH_ERR_RUNTIME, "no allocator");
    }
    THTensor_release(t);
    THStorage_release(s);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CUDA).allocated_bytes,
                 cuda0.allocated_bytes);
    THAllocator_release(fake_cuda);
    CHECK_EQ_INT(c.releases, 1);
    CHECK_EQ_INT(c.frees, 1);
}

/* A device's slot can be emptied again (the CPU's cannot); a storage made
 * while an allocator was installed still frees through it. */
static void
test_allocator_uninstall(void)
{
    Counter c = {0};
    THAllocator *fake_cuda = counting_allocator(&c, TH_DEVICE_CUDA);
    THAllocator *before = THAllocator_exchange(fake_cuda);
    THStorage *s = THStorage_new(32, TH_DEVICE_CUDA);
    CHECK(s != NULL && s->allocator == fake_cuda);
    CHECK(THAllocator_uninstall(TH_DEVICE_CUDA) == fake_cuda);
    THAllocator_release(fake_cuda); /* the registry's reference */
    CHECK(THAllocator_get(TH_DEVICE_CUDA) == NULL);
    CHECK(THAllocator_uninstall(TH_DEVICE_CUDA) == NULL);
    CHECK(THAllocator_uninstall(TH_DEVICE_CPU) == NULL);
    CHECK(THAllocator_get(TH_DEVICE_CPU) == THAllocator_cpu());
    CHECK_EQ_INT(c.releases, 0); /* the storage still holds it */
    THStorage_release(s);
    THAllocator_release(fake_cuda); /* ours, from counting_allocator */
    CHECK_EQ_INT(c.frees, 1);
    CHECK_EQ_INT(c.releases, 1);
    if (before != NULL) {
        THAllocator_release(THAllocator_exchange(before));
        THAllocator_release(before);
    }
}

static void
test_allocator_failures_leak_nothing(void)
{
    THAllocator *cpu = THAllocator_cpu();
    THAllocatorStats d0 = THAllocator_deviceStats(TH_DEVICE_CPU);

    /* over the limit: refused before asking any allocator */
    THError_clear();
    CHECK(THAllocator_alloc(cpu, (size_t)TH_MAX_NBYTES + 1) == NULL);
    CHECK_ERROR(TH_ERR_MEMORY, "can't allocate");
    CHECK(THAllocator_alloc(cpu, SIZE_MAX) == NULL);
    CHECK_ERROR(TH_ERR_MEMORY, "");
    CHECK(THStorage_new(TH_MAX_NBYTES + 1, TH_DEVICE_CPU) == NULL);
    CHECK_ERROR(TH_ERR_MEMORY, "");
    CHECK(THStorage_new(INT64_MAX, TH_DEVICE_CPU) == NULL);
    CHECK_ERROR(TH_ERR_MEMORY, "");
    CHECK(THStorage_new(-1, TH_DEVICE_CPU) == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "non-negative");
    /* float32 * (2^50 + 1) elements is just over the limit */
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(((int64_t)1 << 50) + 1),
                                      TH_Float32, TH_DEVICE_CPU),
                    TH_ERR_MEMORY, "");

    /* an allocator that fails: nothing counted, nothing retained */
    Counter c = {.fail = true};
    THAllocator *failing = counting_allocator(&c, TH_DEVICE_CPU);
    THError_clear();
    CHECK(THStorage_newWithAllocator(32, failing) == NULL);
    CHECK_ERROR(TH_ERR_MEMORY, "counting allocator returned no memory for "
                               "32 bytes");
    CHECK_EQ_INT(failing->refcount, 1);
    /* its own error message wins over the generic one */
    c.fail_with_error = true;
    CHECK(THStorage_newWithAllocator(32, failing) == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "counting allocator says no");
    /* a stale error from earlier must not be reported instead */
    c.fail_with_error = false;
    THError_set(TH_ERR_INDEX, "stale");
    CHECK(THAllocator_alloc(failing, 8) == NULL);
    CHECK_ERROR(TH_ERR_MEMORY, "returned no memory");

    THAllocator *previous = THAllocator_exchange(failing);
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(2, 2), TH_Float32,
                                      TH_DEVICE_CPU),
                    TH_ERR_MEMORY, "");
    THAllocator_release(THAllocator_exchange(previous));
    CHECK_EQ_INT(failing->refcount, 1);
    CHECK_EQ_INT(THAllocator_stats(failing).num_allocs, 0);
    CHECK_EQ_INT(THAllocator_stats(failing).live_blocks, 0);
    THAllocator_release(failing);
    CHECK_EQ_INT(c.releases, 1);
    CHECK_EQ_INT(c.mallocs + c.frees, 0);

    THAllocatorStats d1 = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(d1.allocated_bytes, d0.allocated_bytes);
    CHECK_EQ_INT(d1.live_blocks, d0.live_blocks);
    CHECK_EQ_INT(d1.num_allocs, d0.num_allocs);
}

/* ---- Note [The CPU block cache] ------------------------------------------------ */

enum { TEST_CACHE_LIMIT = 64 << 20 };

/* Every cache test starts from an empty cache with a known limit and puts
 * the previous limit back (emptying what it cached) at the end. */
static int64_t
cache_begin(void)
{
    int64_t previous = THAllocator_setCacheLimit(TEST_CACHE_LIMIT);
    THAllocator_emptyCache();
    return previous;
}

static void
cache_end(int64_t previous)
{
    THAllocator_setCacheLimit(previous);
    THAllocator_emptyCache();
}

static void
test_allocator_size_classes(void)
{
    static const size_t cases[][2] = {
        {1, 64}, {64, 64}, {65, 128}, {256, 256}, {257, 320}, {513, 640},
        {1000, 1024}, {1024, 1024}, {1025, 1280}, {(1 << 20) + 1, 1280 << 10},
        {2 << 20, 2 << 20}, {(2 << 20) + 1, 4 << 20}, {(4 << 20) + 1, 6 << 20},
        {(size_t)1 << 40, (size_t)1 << 40},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK_MSG(THAllocator_blockCapacity(cases[i][0]) == cases[i][1],
                  "capacity for %zu: %zu, expected %zu", cases[i][0],
                  THAllocator_blockCapacity(cases[i][0]), cases[i][1]);
    }
    size_t previous = 0;
    for (size_t n = 1; n < ((size_t)1 << 34); n = n * 9 / 8 + 1) {
        size_t capacity = THAllocator_blockCapacity(n);
        CHECK_MSG(capacity >= n && capacity >= previous && capacity % 64 == 0,
                  "capacity %zu for %zu bytes", capacity, n);
        previous = capacity;
    }
}

static void
test_allocator_cache_reuses_and_counts_exactly(void)
{
    int64_t limit = cache_begin();
    THAllocator *cpu = THAllocator_cpu();
    THAllocatorStats d0 = THAllocator_deviceStats(TH_DEVICE_CPU);
    THAllocatorStats a0 = THAllocator_stats(cpu);
    CHECK_EQ_INT(d0.cached_bytes, 0);
    CHECK_EQ_INT(d0.cached_blocks, 0);

    void *p = THAllocator_alloc(cpu, 1000);
    CHECK_NOT_NULL(p);
    THAllocator_free(cpu, p, 1000);
    THAllocatorStats d1 = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(d1.allocated_bytes, d0.allocated_bytes);
    CHECK_EQ_INT(d1.live_blocks, d0.live_blocks);
    CHECK_EQ_INT(d1.num_frees - d0.num_frees, 1);
    CHECK_EQ_INT(d1.cached_bytes, 1024);
    CHECK_EQ_INT(d1.cached_blocks, 1);
    CHECK_EQ_INT(d1.cache_misses - d0.cache_misses, 1);

    /* the same class: the same block, counted as a hit and as live */
    void *q = THAllocator_alloc(cpu, 1017);
    CHECK(q == p);
    THAllocatorStats d2 = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(d2.allocated_bytes - d0.allocated_bytes, 1017);
    CHECK_EQ_INT(d2.live_blocks - d0.live_blocks, 1);
    CHECK_EQ_INT(d2.cached_bytes, 0);
    CHECK_EQ_INT(d2.cached_blocks, 0);
    CHECK_EQ_INT(d2.cache_hits - d0.cache_hits, 1);
    /* a block in use is never handed out twice */
    void *r = THAllocator_alloc(cpu, 1000);
    CHECK(r != NULL && r != q);
    THAllocatorStats a2 = THAllocator_stats(cpu);
    CHECK_EQ_INT(a2.cache_hits - a0.cache_hits, 1);
    CHECK_EQ_INT(a2.cache_misses - a0.cache_misses, 2);
    THAllocator_free(cpu, q, 1017);
    THAllocator_free(cpu, r, 1000);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).cached_blocks, 2);

    THAllocator_emptyCache();
    THAllocatorStats d3 = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(d3.cached_bytes, 0);
    CHECK_EQ_INT(d3.cached_blocks, 0);
    CHECK_EQ_INT(THAllocator_stats(cpu).cached_blocks, 0);
    CHECK_EQ_INT(d3.allocated_bytes, d0.allocated_bytes);
    cache_end(limit);
}

static void
test_allocator_cache_limit(void)
{
    int64_t limit = cache_begin();
    THAllocator *cpu = THAllocator_cpu();
    CHECK_EQ_INT(THAllocator_getCacheLimit(), TEST_CACHE_LIMIT);
    CHECK_EQ_INT(THAllocator_setCacheLimit(128), TEST_CACHE_LIMIT);
    void *a = THAllocator_alloc(cpu, 100);
    void *b = THAllocator_alloc(cpu, 100);
    THAllocator_free(cpu, a, 100);
    THAllocator_free(cpu, b, 100); /* over the limit: really freed */
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).cached_blocks, 1);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).cached_bytes, 128);
    /* lowering the limit below what is cached empties the cache */
    CHECK_EQ_INT(THAllocator_setCacheLimit(0), 128);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).cached_blocks, 0);
    void *c = THAllocator_alloc(cpu, 100);
    THAllocator_free(cpu, c, 100);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).cached_blocks, 0);

    THError_clear();
    CHECK_EQ_INT(THAllocator_setCacheLimit(-1), -1);
    CHECK_ERROR(TH_ERR_VALUE, "non-negative");
    CHECK_EQ_INT(THAllocator_getCacheLimit(), 0);
    cache_end(limit);
}

/* Mapped blocks: 2 MiB aligned, usable to the last byte, reused whole. */
static void
test_allocator_large_blocks(void)
{
    int64_t limit = cache_begin();
    THAllocator *cpu = THAllocator_cpu();
    size_t sizes[] = {2 << 20, (3 << 20) + 17, 9 << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *p = THAllocator_alloc(cpu, sizes[i]);
        CHECK_NOT_NULL(p);
        if (p == NULL) {
            continue;
        }
        CHECK_MSG((uintptr_t)p % (2 << 20) == 0, "%zu bytes at %p: not 2 MiB "
                  "aligned", sizes[i], (void *)p);
        memset(p, 0x5a, THAllocator_blockCapacity(sizes[i]));
        THAllocator_free(cpu, p, sizes[i]);
        char *q = THAllocator_alloc(cpu, sizes[i]);
        CHECK(q == p);
        /* the same memory (its first 8 bytes held the free-list link) */
        CHECK(q != NULL && q[64] == 0x5a && q[sizes[i] - 1] == 0x5a);
        THAllocator_free(cpu, q, sizes[i]);
    }
    /* the raw entry points neither cache nor count */
    THAllocatorStats before = THAllocator_stats(cpu);
    void *raw = cpu->malloc(cpu->context, 5 << 20);
    CHECK(raw != NULL && (uintptr_t)raw % (2 << 20) == 0);
    cpu->free(cpu->context, raw, 0);
    THAllocatorStats after = THAllocator_stats(cpu);
    CHECK_EQ_INT(after.cached_blocks, before.cached_blocks);
    CHECK_EQ_INT(after.cache_misses, before.cache_misses);
    CHECK_EQ_INT(after.num_allocs, before.num_allocs);
    cache_end(limit);
}

/* Custom allocators get every malloc and free; nothing is cached for them. */
static void
test_allocator_cache_leaves_custom_allocators_alone(void)
{
    int64_t limit = cache_begin();
    Counter c = {0};
    THAllocator *alloc = counting_allocator(&c, TH_DEVICE_CPU);
    for (int i = 0; i < 3; i++) {
        void *p = THAllocator_alloc(alloc, 48);
        THAllocator_free(alloc, p, 48);
    }
    CHECK_EQ_INT(c.mallocs, 3);
    CHECK_EQ_INT(c.frees, 3);
    THAllocatorStats s = THAllocator_stats(alloc);
    CHECK_EQ_INT(s.cached_blocks + s.cache_hits + s.cache_misses, 0);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).cached_blocks, 0);
    THAllocator_release(alloc);
    cache_end(limit);
}

/* Several threads allocate, stamp and check blocks: a block held by one
 * thread must never be handed to another. */
enum { CACHE_THREADS = 4, CACHE_ROUNDS = 2000, CACHE_HELD = 8 };

static void *
cache_thread(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    THAllocator *cpu = THAllocator_cpu();
    unsigned char *held[CACHE_HELD] = {0};
    size_t held_size[CACHE_HELD] = {0};
    uintptr_t bad = 0;
    for (int round = 0; round < CACHE_ROUNDS; round++) {
        int slot = round % CACHE_HELD;
        if (held[slot] != NULL) {
            for (size_t k = 0; k < held_size[slot]; k++) {
                bad += held[slot][k] != (unsigned char)id;
            }
            THAllocator_free(cpu, held[slot], held_size[slot]);
        }
        size_t n = 1 + ((size_t)round * 2654435761u + id * 97) % 5000;
        held[slot] = THAllocator_alloc(cpu, n);
        held_size[slot] = n;
        if (held[slot] == NULL) {
            return (void *)1;
        }
        memset(held[slot], (int)id, n);
    }
    for (int slot = 0; slot < CACHE_HELD; slot++) {
        THAllocator_free(cpu, held[slot], held_size[slot]);
    }
    return (void *)bad;
}

static void
test_allocator_cache_threads(void)
{
    int64_t limit = cache_begin();
    THAllocatorStats before = THAllocator_deviceStats(TH_DEVICE_CPU);
    pthread_t threads[CACHE_THREADS];
    for (uintptr_t t = 0; t < CACHE_THREADS; t++) {
        CHECK_EQ_INT(pthread_create(&threads[t], NULL, cache_thread,
                                    (void *)(t + 1)),
                     0);
    }
    for (int t = 0; t < CACHE_THREADS; t++) {
        void *bad = NULL;
        pthread_join(threads[t], &bad);
        CHECK_MSG(bad == NULL, "thread %d saw %zu foreign bytes", t,
                  (size_t)(uintptr_t)bad);
    }
    THAllocatorStats after = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(after.live_blocks, before.live_blocks);
    CHECK_EQ_INT(after.allocated_bytes, before.allocated_bytes);
    CHECK_EQ_INT(after.num_allocs - before.num_allocs,
                 CACHE_THREADS * CACHE_ROUNDS);
    CHECK_EQ_INT(after.cache_hits + after.cache_misses
                     - before.cache_hits - before.cache_misses,
                 CACHE_THREADS * CACHE_ROUNDS);
    CHECK(after.cached_bytes > 0 && after.cached_bytes <= TEST_CACHE_LIMIT);
    cache_end(limit);
}

TH_TEST_SUITE(allocator) = {
    TH_TEST(test_allocator_cpu_is_aligned_and_static),
    TH_TEST(test_allocator_stats_exact),
    TH_TEST(test_allocator_zero_bytes),
    TH_TEST(test_allocator_new_validates),
    TH_TEST(test_allocator_exchange_and_lifetime),
    TH_TEST(test_allocator_registry_reference),
    TH_TEST(test_allocator_uninstalled_during_its_own_malloc),
    TH_TEST(test_allocator_device_tags),
    TH_TEST(test_allocator_uninstall),
    TH_TEST(test_allocator_failures_leak_nothing),
    TH_TEST(test_allocator_size_classes),
    TH_TEST(test_allocator_cache_reuses_and_counts_exactly),
    TH_TEST(test_allocator_cache_limit),
    TH_TEST(test_allocator_large_blocks),
    TH_TEST(test_allocator_cache_leaves_custom_allocators_alone),
    TH_TEST(test_allocator_cache_threads),
    TH_TEST_END,
};

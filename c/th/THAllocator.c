/*
 * THAllocator.c -- the default CPU allocator and its block cache, the
 * per-device registry and the statistics every allocation updates.  See
 * THAllocator.h, above all Note [The CPU block cache].
 */
#define _DEFAULT_SOURCE /* strdup, MAP_ANONYMOUS, MADV_HUGEPAGE */

#include "THAllocator.h"

#include "THGeneral.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
    TH_CPU_ALIGNMENT = 64,
    /* Size classes: 64, 128, 192, 256 bytes, then four per power of two
     * (2^k + 2^(k-2) * j for j = 1..4, k >= 8) up to 2^64. */
    SMALL_CLASSES = 4,
    SMALL_CLASS_MAX = 256,
    CLASSES_PER_OCTAVE = 4,
    FIRST_OCTAVE = 8,
    NUM_SIZE_CLASSES = SMALL_CLASSES
                       + CLASSES_PER_OCTAVE * (64 - FIRST_OCTAVE),
};

/* Blocks of at least this capacity are mapped, aligned to it, and advised
 * to use transparent huge pages of this size. */
#define TH_HUGE_PAGE_BYTES ((size_t)2 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define TH_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_UNDER_ASAN 1
#endif
#endif

#ifdef TH_UNDER_ASAN
#define TH_DEFAULT_CACHE_LIMIT 0 /* ASan must see every free at once */
#else
#define TH_DEFAULT_CACHE_LIMIT ((int64_t)256 << 20)
#endif

/* ---- size classes ------------------------------------------------------ */

static size_t
class_capacity(size_t size_class)
{
    if (size_class < SMALL_CLASSES) {
        return (size_class + 1) * TH_CPU_ALIGNMENT;
    }
    size_t index = size_class - SMALL_CLASSES;
    size_t octave = FIRST_OCTAVE + index / CLASSES_PER_OCTAVE;
    size_t step = index % CLASSES_PER_OCTAVE + 1;
    return ((size_t)1 << octave) + step * ((size_t)1 << (octave - 2));
}

static bool
class_is_mapped(size_t size_class)
{
    return class_capacity(size_class) >= TH_HUGE_PAGE_BYTES;
}

static size_t
round_up(size_t n, size_t multiple)
{
    return (n + multiple - 1) / multiple * multiple;
}

/* The smallest class whose capacity is at least nbytes (nbytes >= 1). */
static size_t
smallest_class(size_t nbytes)
{
    if (nbytes <= SMALL_CLASS_MAX) {
        return (nbytes - 1) / TH_CPU_ALIGNMENT;
    }
    /* 2^octave < nbytes <= 2^(octave+1), octave >= FIRST_OCTAVE */
    size_t octave =
        (size_t)(63 - __builtin_clzll((unsigned long long)nbytes - 1));
    size_t step = ((nbytes - 1) >> (octave - 2)) & (CLASSES_PER_OCTAVE - 1);
    return SMALL_CLASSES + (octave - FIRST_OCTAVE) * CLASSES_PER_OCTAVE + step;
}

/* A mapped block is a whole number of huge pages (the last one would be
 * faulted in whole anyway), so a class like 2.5 MiB gives way to the 4 MiB
 * one: every mapped class's capacity is a multiple of 2 MiB. */
static size_t
class_for_size(size_t nbytes)
{
    size_t size_class = smallest_class(nbytes);
    size_t capacity = class_capacity(size_class);
    if (capacity > TH_HUGE_PAGE_BYTES && capacity % TH_HUGE_PAGE_BYTES != 0) {
        size_class = smallest_class(round_up(capacity, TH_HUGE_PAGE_BYTES));
    }
    return size_class;
}

size_t
THAllocator_blockCapacity(size_t nbytes)
{
    return class_capacity(class_for_size(nbytes));
}

/* ---- blocks ------------------------------------------------------------ */

/* Note [Block header]
 * ~~~~~~~~~~~~~~~~~~~
 * The 16 bytes just below every block's aligned address record where its
 * memory came from and its size class, so a block can be freed (or cached)
 * knowing only its address: Python allocators call raw_free(address)
 * without a size.  For a mapped block the mapping starts one page below
 * the 2 MiB aligned data, and the header lives at the end of that page; for
 * a small block, see below.
 *
 * Note [Aligned blocks from malloc]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * posix_memalign() is slow for small blocks in glibc: it bypasses the
 * per-thread cache and walks the general heap (measured: empty(4) spent
 * more time in _int_memalign/malloc_consolidate than in all of ember).  So
 * we over-allocate by one alignment unit with plain malloc(), round the
 * address up to the next multiple of 64, and keep the block header in the
 * bytes just below the aligned block (malloc returns 16-byte aligned
 * memory, so at least 16 bytes lie between the two). */
typedef struct {
    void *base; /* what malloc() or mmap() returned */
    size_t size_class;
} BlockHeader;

_Static_assert(sizeof(BlockHeader) <= 16, "the header must fit below a "
               "64-byte aligned block carved from 16-byte aligned malloc");

static BlockHeader *
block_header(void *ptr)
{
    return (BlockHeader *)ptr - 1;
}

static void *
with_header(void *ptr, void *base, size_t size_class)
{
    block_header(ptr)->base = base;
    block_header(ptr)->size_class = size_class;
    return ptr;
}

static void *
malloc_block(size_t size_class)
{
    char *base = malloc(class_capacity(size_class) + TH_CPU_ALIGNMENT);
    if (base == NULL) {
        return NULL;
    }
    uintptr_t aligned = ((uintptr_t)base + TH_CPU_ALIGNMENT)
                        & ~(uintptr_t)(TH_CPU_ALIGNMENT - 1);
    return with_header((void *)aligned, base, size_class);
}

static size_t
page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* The class's capacity at a 2 MiB boundary, one header page below it. */
static void *
map_block(size_t size_class)
{
    size_t capacity = class_capacity(size_class);
    size_t page = page_size();
    size_t length = capacity + TH_HUGE_PAGE_BYTES + page; /* with slack */
    char *mapping = mmap(NULL, length, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED) {
        return NULL;
    }
    char *data = (char *)round_up((uintptr_t)mapping + page,
                                  TH_HUGE_PAGE_BYTES);
    char *start = data - page;
    char *end = data + capacity;
    /* Give the slack on both sides back. */
    if (start > mapping) {
        munmap(mapping, (size_t)(start - mapping));
    }
    if (mapping + length > end) {
        munmap(end, (size_t)(mapping + length - end));
    }
#ifdef MADV_HUGEPAGE
    madvise(data, capacity, MADV_HUGEPAGE); /* only advice: may fail */
#endif
    return with_header(data, start, size_class);
}

static void *
new_block(size_t size_class)
{
    return class_is_mapped(size_class) ? map_block(size_class)
                                       : malloc_block(size_class);
}

static void
release_block(void *ptr)
{
    BlockHeader *header = block_header(ptr);
    if (class_is_mapped(header->size_class)) {
        munmap(header->base, class_capacity(header->size_class) + page_size());
    }
    else {
        free(header->base);
    }
}

static void *
cpu_malloc(void *context, size_t nbytes)
{
    (void)context;
    void *ptr = nbytes <= (size_t)TH_MAX_NBYTES
                    ? new_block(class_for_size(nbytes))
                    : NULL;
    if (ptr == NULL) {
        THError_set(TH_ERR_MEMORY,
                    "DefaultCPUAllocator: can't allocate memory: you tried "
                    "to allocate %zu bytes",
                    nbytes);
    }
    return ptr;
}

static void
cpu_free(void *context, void *ptr, size_t nbytes)
{
    (void)context;
    (void)nbytes;
    release_block(ptr);
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
 * NULL, e.g. for CUDA before ember.cuda installs one).  Read and written
 * under the allocator lock (Note [Registry references]). */
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
    if (!TH_dropReference(&allocator->refcount)) {
        return;
    }
    if (allocator->release_context != NULL) {
        allocator->release_context(allocator->context);
    }
    free((char *)allocator->name);
    free(allocator);
}

/* ---- statistics and the cache, under one lock -------------------------- */

/* Guards every THAllocatorStats (the allocators' and the devices') and the
 * cache.  Held only for a few loads and stores, never around malloc, mmap
 * or a user's allocator function, so a spinlock suffices: one atomic
 * exchange to take it and a plain store to drop it (half the cost of a
 * pthread mutex on the small-tensor path).  A waiter yields its CPU, in
 * case the holder was preempted. */
static int allocator_lock;

/* free_lists[c]: the cached blocks of size class c, linked through their
 * first 8 bytes (a cached block's contents belong to nobody). */
static void *free_lists[NUM_SIZE_CLASSES];
static int64_t cache_limit = TH_DEFAULT_CACHE_LIMIT;

static void
lock_allocators(void)
{
    while (__atomic_exchange_n(&allocator_lock, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&allocator_lock, __ATOMIC_RELAXED)) {
            sched_yield();
        }
    }
}

static void
unlock_allocators(void)
{
    __atomic_store_n(&allocator_lock, 0, __ATOMIC_RELEASE);
}

/* The process hooks: a child forked while another thread held the lock
 * must not inherit it held, and the cache is emptied at exit so that leak
 * checkers see every block freed. */
static void
empty_cache_at_exit(void)
{
    lock_allocators();
    cache_limit = 0; /* frees after this one really free */
    unlock_allocators();
    THAllocator_emptyCache();
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static bool hooks_installed;

static void
install_process_hooks(void)
{
    pthread_atfork(lock_allocators, unlock_allocators, unlock_allocators);
    atexit(empty_cache_at_exit);
    __atomic_store_n(&hooks_installed, true, __ATOMIC_RELEASE);
}

static void
ensure_process_hooks(void)
{
    if (!__atomic_load_n(&hooks_installed, __ATOMIC_ACQUIRE)) {
        pthread_once(&hooks_once, install_process_hooks);
    }
}

/* The two statistics one allocation counts in: its allocator's and its
 * device's.  Called with the lock held, as are the stats_* helpers. */
typedef void (*StatsUpdate)(THAllocatorStats *stats, int64_t amount);

static void
update_both(THAllocator *allocator, StatsUpdate update, int64_t amount)
{
    update(&allocator->stats, amount);
    update(&device_stats[allocator->device], amount);
}

static void
stats_alloc(THAllocatorStats *stats, int64_t nbytes)
{
    stats->allocated_bytes += nbytes;
    if (stats->allocated_bytes > stats->peak_allocated_bytes) {
        stats->peak_allocated_bytes = stats->allocated_bytes;
    }
    stats->live_blocks++;
    stats->num_allocs++;
}

static void
stats_free(THAllocatorStats *stats, int64_t nbytes)
{
    stats->allocated_bytes -= nbytes;
    stats->live_blocks--;
    stats->num_frees++;
}

/* capacity > 0: a block enters the cache; < 0: one leaves it. */
static void
stats_cache(THAllocatorStats *stats, int64_t capacity)
{
    stats->cached_bytes += capacity;
    stats->cached_blocks += capacity > 0 ? 1 : -1;
}

static void
stats_hit(THAllocatorStats *stats, int64_t unused)
{
    (void)unused;
    stats->cache_hits++;
}

static void
stats_miss(THAllocatorStats *stats, int64_t unused)
{
    (void)unused;
    stats->cache_misses++;
}

/* A cached block of nbytes' size class, counted as allocated, or NULL
 * (counted as a miss). */
static void *
cache_take(size_t nbytes)
{
    THAllocator *cpu = &cpu_allocator;
    size_t size_class = class_for_size(nbytes);
    lock_allocators();
    void *ptr = free_lists[size_class];
    if (ptr == NULL) {
        update_both(cpu, stats_miss, 0);
    }
    else {
        free_lists[size_class] = *(void **)ptr;
        update_both(cpu, stats_cache, -(int64_t)class_capacity(size_class));
        update_both(cpu, stats_hit, 0);
        update_both(cpu, stats_alloc, (int64_t)nbytes);
    }
    unlock_allocators();
    return ptr;
}

/* Keeps a freed CPU block if the cache has room; false if not.  Called
 * with the lock held. */
static bool
cache_keep_locked(void *ptr)
{
    size_t size_class = block_header(ptr)->size_class;
    int64_t capacity = (int64_t)class_capacity(size_class);
    if (cpu_allocator.stats.cached_bytes + capacity > cache_limit) {
        return false;
    }
    *(void **)ptr = free_lists[size_class];
    free_lists[size_class] = ptr;
    update_both(&cpu_allocator, stats_cache, capacity);
    return true;
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
    ensure_process_hooks();
    if (allocator == &cpu_allocator) {
        void *cached = cache_take(nbytes);
        if (cached != NULL) {
            return cached;
        }
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
    lock_allocators();
    update_both(allocator, stats_alloc, (int64_t)nbytes);
    unlock_allocators();
    return ptr;
}

void
THAllocator_free(THAllocator *allocator, void *ptr, size_t nbytes)
{
    if (ptr == NULL) {
        return;
    }
    lock_allocators();
    update_both(allocator, stats_free, (int64_t)nbytes);
    bool kept = allocator == &cpu_allocator && cache_keep_locked(ptr);
    unlock_allocators();
    if (!kept) {
        allocator->free(allocator->context, ptr, nbytes);
    }
}

void
THAllocator_emptyCache(void)
{
    void *lists[NUM_SIZE_CLASSES];
    lock_allocators();
    memcpy(lists, free_lists, sizeof(lists));
    memset(free_lists, 0, sizeof(free_lists));
    THAllocatorStats *counted[] = {&cpu_allocator.stats,
                                   &device_stats[TH_DEVICE_CPU]};
    for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++) {
        counted[i]->cached_bytes = 0;
        counted[i]->cached_blocks = 0;
    }
    unlock_allocators();
    /* Detached from the lists: nobody else can reach these blocks now. */
    for (size_t c = 0; c < NUM_SIZE_CLASSES; c++) {
        void *block = lists[c];
        while (block != NULL) {
            void *next = *(void **)block;
            release_block(block);
            block = next;
        }
    }
}

int64_t
THAllocator_setCacheLimit(int64_t nbytes)
{
    if (nbytes < 0) {
        THError_set(TH_ERR_VALUE, "the cache limit must be non-negative, "
                    "got %lld", (long long)nbytes);
        return -1;
    }
    lock_allocators();
    int64_t previous = cache_limit;
    cache_limit = nbytes;
    bool over = cpu_allocator.stats.cached_bytes > nbytes;
    unlock_allocators();
    if (over) {
        THAllocator_emptyCache();
    }
    return previous;
}

int64_t
THAllocator_getCacheLimit(void)
{
    lock_allocators();
    int64_t limit = cache_limit;
    unlock_allocators();
    return limit;
}

static bool
valid_device(THDeviceType device)
{
    return (int)device >= 0 && device < TH_NUM_DEVICE_TYPES;
}

THAllocator *
THAllocator_get(THDeviceType device)
{
    return valid_device(device)
               ? __atomic_load_n(&registry[device], __ATOMIC_ACQUIRE)
               : NULL;
}

THAllocator *
THAllocator_acquire(THDeviceType device)
{
    THAllocator *allocator = THAllocator_get(device);
    if (allocator == NULL || allocator->is_static) {
        return allocator; /* static: never freed, nothing to retain */
    }
    /* Retained under the lock, so an exchange cannot release it between
     * our load and our retain. */
    lock_allocators();
    allocator = registry[device];
    if (allocator != NULL) {
        THAllocator_retain(allocator);
    }
    unlock_allocators();
    return allocator;
}

THAllocator *
THAllocator_exchange(THAllocator *allocator)
{
    THAllocator_retain(allocator);
    lock_allocators();
    THAllocator *previous = registry[allocator->device];
    __atomic_store_n(&registry[allocator->device], allocator,
                     __ATOMIC_RELEASE);
    unlock_allocators();
    return previous;
}

THAllocator *
THAllocator_uninstall(THDeviceType device)
{
    if ((int)device <= TH_DEVICE_CPU || device >= TH_NUM_DEVICE_TYPES) {
        return NULL; /* the CPU always keeps one */
    }
    lock_allocators();
    THAllocator *previous = registry[device];
    __atomic_store_n(&registry[device], NULL, __ATOMIC_RELEASE);
    unlock_allocators();
    return previous;
}

static THAllocatorStats
stats_snapshot(const THAllocatorStats *stats)
{
    lock_allocators();
    THAllocatorStats copy = *stats;
    unlock_allocators();
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
    lock_allocators();
    THAllocatorStats *stats = &device_stats[device];
    stats->peak_allocated_bytes = stats->allocated_bytes;
    unlock_allocators();
}

/*
 * THHeaderCache.c -- per-thread free lists of tensor, storage and version
 * counter headers: Note [Header free lists] in THHeaderCache.h.
 */
#include "THHeaderCache.h"

#include "THGeneral.h"
#include "THTensor.h"

#include <pthread.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define TH_HEADER_CACHE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_HEADER_CACHE_UNDER_ASAN 1
#endif
#endif

static const size_t header_size[TH_NUM_HEADER_KINDS] = {
    [TH_HEADER_TENSOR] = sizeof(THTensor),
    [TH_HEADER_STORAGE] = sizeof(THStorage),
    [TH_HEADER_VERSION_COUNTER] = sizeof(THVersionCounter),
};

typedef struct {
    void *headers[TH_NUM_HEADER_KINDS][TH_HEADER_CACHE_DEPTH];
    int count[TH_NUM_HEADER_KINDS];
} ThreadCache;

/* This thread's stacks: allocated on its first free, freed when it exits
 * (then `closed` keeps every later free real).  initial-exec: read on
 * every tensor's creation, and the extension is loaded once (as in
 * c/python/Pin.c); the stacks themselves live on the heap, so the static
 * TLS block only grows by a pointer and a flag. */
#define TH_TLS __attribute__((tls_model("initial-exec"))) _Thread_local
static TH_TLS ThreadCache *cache;
static TH_TLS bool closed;

/* Cleared for good at process exit (and never set under ASan). */
static bool caching_enabled;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_exit_key;

void
THHeader_emptyThreadCache(void)
{
    if (cache == NULL) {
        return;
    }
    for (int kind = 0; kind < TH_NUM_HEADER_KINDS; kind++) {
        while (cache->count[kind] > 0) {
            free(cache->headers[kind][--cache->count[kind]]);
        }
    }
}

/* The pthread key's destructor (the thread is exiting), and the atexit
 * hook for the main thread. */
static void
close_thread_cache(void *unused)
{
    (void)unused;
    THHeader_emptyThreadCache();
    free(cache);
    cache = NULL;
    closed = true;
}

static void
stop_caching_at_exit(void)
{
    __atomic_store_n(&caching_enabled, false, __ATOMIC_RELAXED);
    close_thread_cache(NULL);
}

static void
setup(void)
{
#ifdef TH_HEADER_CACHE_UNDER_ASAN
    bool enabled = false; /* ASan must see every free at once */
#else
    bool enabled = true;
#endif
    if (enabled && pthread_key_create(&thread_exit_key, close_thread_cache) == 0
        && atexit(stop_caching_at_exit) == 0) {
        __atomic_store_n(&caching_enabled, true, __ATOMIC_RELAXED);
    }
}

bool
THHeader_cacheEnabled(void)
{
    pthread_once(&setup_once, setup);
    return __atomic_load_n(&caching_enabled, __ATOMIC_RELAXED);
}

/* This thread's stacks, made on its first free; NULL when it may not
 * cache.  Registered with the key so they are freed when it exits. */
static ThreadCache *
open_thread_cache(void)
{
    if (closed || !THHeader_cacheEnabled()) {
        return NULL;
    }
    ThreadCache *fresh = calloc(1, sizeof(*fresh));
    if (fresh == NULL || pthread_setspecific(thread_exit_key, fresh) != 0) {
        free(fresh);
        closed = true; /* no memory to spare: just free from now on */
        return NULL;
    }
    cache = fresh;
    return fresh;
}

/* An empty stack: a fresh header from malloc (out of line, as free_slow
 * below). */
static __attribute__((noinline)) void *
alloc_slow(THHeaderKind kind)
{
    void *header = malloc(header_size[kind]);
    if (header == NULL) {
        THError_set(TH_ERR_MEMORY, "out of memory allocating a tensor "
                    "header");
    }
    return header;
}

void *
THHeader_alloc(THHeaderKind kind)
{
    ThreadCache *c = cache;
    if (c != NULL && c->count[kind] > 0) {
        return c->headers[kind][--c->count[kind]];
    }
    return alloc_slow(kind);
}

/* Pushes `header` on c's stack of its kind if there is room.  Inlined in
 * both callers below. */
static inline bool
try_push(ThreadCache *c, THHeaderKind kind, void *header)
{
    if (c == NULL || c->count[kind] >= TH_HEADER_CACHE_DEPTH
        || !__atomic_load_n(&caching_enabled, __ATOMIC_RELAXED)) {
        return false;
    }
    c->headers[kind][c->count[kind]++] = header;
    return true;
}

/* The thread's first free (its stacks are made here) or a full stack:
 * out of line, so the common push saves no registers. */
static __attribute__((noinline)) void
free_slow(THHeaderKind kind, void *header)
{
    if (!try_push(cache != NULL ? cache : open_thread_cache(), kind,
                  header)) {
        free(header);
    }
}

void
THHeader_free(THHeaderKind kind, void *header)
{
    if (header != NULL && !try_push(cache, kind, header)) {
        free_slow(kind, header);
    }
}

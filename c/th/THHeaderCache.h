/*
 * THHeaderCache.h -- per-thread free lists of the core's small headers.
 *
 * Note [Header free lists]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * Every tensor object the Python layer makes (a view, a slice, empty(4))
 * needs a THTensor header, and a fresh tensor also a THStorage header and a
 * THVersionCounter.  malloc/free of those cost more than the rest of a
 * view (glibc's tcache still takes ~120 instructions a pair), so freed
 * headers are kept on a short stack per kind and handed out again, as
 * NumPy keeps freed small blocks and CPython freed small objects.
 *
 *   - Per thread: each thread pushes and pops only its own stacks (a
 *     _Thread_local array), so no lock and no atomic is needed, with or
 *     without the GIL; a header freed on another thread than the one that
 *     allocated it simply joins that other thread's stack.
 *   - Bounded: at most TH_HEADER_CACHE_DEPTH headers per kind per thread;
 *     past that, frees really free.
 *   - Honest to leak checkers: a thread's stacks are freed when the thread
 *     exits (a pthread key's destructor) and the main thread's at process
 *     exit (atexit), after which every free is real, so valgrind (whose
 *     C half fails on any block still reachable) sees every header freed.
 *     Only released headers are ever cached: a leaked tensor is never
 *     released, so it is still reported.  Under AddressSanitizer the cache
 *     is off, so a use of a released tensor is caught at once (as the CPU
 *     block cache is, Note [The CPU block cache]).
 *   - Headers are not tensor memory: they were never counted in the
 *     allocator statistics (ember.memory), and still are not.
 * A header comes back with whatever its last owner left in it: callers
 * initialise every field they read.
 */
#ifndef TH_HEADER_CACHE_H
#define TH_HEADER_CACHE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    TH_HEADER_TENSOR,
    TH_HEADER_STORAGE,
    TH_HEADER_VERSION_COUNTER,
    TH_NUM_HEADER_KINDS
} THHeaderKind;

#define TH_HEADER_CACHE_DEPTH 16

/* sizeof the kind's struct; NULL (with a TH memory error) when out of
 * memory. */
void *THHeader_alloc(THHeaderKind kind);
/* Gives back a header from THHeader_alloc of the same kind (NULL: no-op). */
void THHeader_free(THHeaderKind kind, void *header);
/* Really frees the calling thread's cached headers. */
void THHeader_emptyThreadCache(void);
/* Whether freed headers are kept (false under ASan, and once the process
 * is exiting). */
bool THHeader_cacheEnabled(void);

#endif /* TH_HEADER_CACHE_H */

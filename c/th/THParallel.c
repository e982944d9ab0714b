/*
 * THParallel.c -- the worker pool behind THParallel_for.
 *
 * Note [One job at a time]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * The pool runs one job (fn, ctx, n split into nchunks) at a time.  A caller
 * takes `job_lock` for the whole job; a second caller that finds it taken
 * (another Python thread with the GIL released) runs its loop serially
 * instead of waiting, so there is no queue and no deadlock.  Within a job,
 * `pool_lock` guards the chunk counter: the caller runs chunk 0, workers
 * take chunks 1.. in order, and the last one to finish signals the caller.
 */
#include "THParallel.h"

#include "THGeneral.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work_done = PTHREAD_COND_INITIALIZER;

static pthread_t workers[TH_PARALLEL_MAX_THREADS];
static int nworkers;        /* started and not yet joined */
static int num_threads;     /* 0 until first asked: see default_num_threads */
static bool shutting_down;
static bool atfork_registered;

static struct {
    THParallelFn fn;
    void *ctx;
    int64_t n;
    int64_t chunk; /* elements per chunk (the last may be shorter) */
    int nchunks;
} job;
static int next_chunk;   /* the next chunk a worker takes */
static int chunks_left;  /* chunks handed to workers and not yet finished */

static _Thread_local bool in_region;

static int
default_num_threads(void)
{
    const char *env = getenv("EMBER_NUM_THREADS");
    long n = env != NULL ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) {
        n = 1;
    }
    return n > TH_PARALLEL_MAX_THREADS ? TH_PARALLEL_MAX_THREADS : (int)n;
}

int
THParallel_getNumThreads(void)
{
    pthread_mutex_lock(&pool_lock);
    if (num_threads == 0) {
        num_threads = default_num_threads();
    }
    int n = num_threads;
    pthread_mutex_unlock(&pool_lock);
    return n;
}

int
THParallel_setNumThreads(int nthreads)
{
    if (nthreads < 1 || nthreads > TH_PARALLEL_MAX_THREADS) {
        return THError_set(TH_ERR_VALUE,
                           "set_num_threads: expected 1 to %d threads, got %d",
                           TH_PARALLEL_MAX_THREADS, nthreads);
    }
    pthread_mutex_lock(&pool_lock);
    num_threads = nthreads;
    pthread_mutex_unlock(&pool_lock);
    return 0;
}

bool
THParallel_inParallelRegion(void)
{
    return in_region;
}

static void
run_chunk(int c)
{
    int64_t begin = (int64_t)c * job.chunk;
    int64_t end = begin + job.chunk < job.n ? begin + job.chunk : job.n;
    in_region = true;
    job.fn(begin, end, job.ctx);
    in_region = false;
}

static void *
worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool_lock);
    for (;;) {
        while (!shutting_down && next_chunk >= job.nchunks) {
            pthread_cond_wait(&work_ready, &pool_lock);
        }
        if (shutting_down) {
            break;
        }
        int c = next_chunk++;
        pthread_mutex_unlock(&pool_lock);
        run_chunk(c);
        pthread_mutex_lock(&pool_lock);
        if (--chunks_left == 0) {
            pthread_cond_signal(&work_done);
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return NULL;
}

/* A forked child has only the thread that called fork(): forget the
 * workers (they do not exist there) and reset the locks. */
static void
after_fork_in_child(void)
{
    pthread_mutex_init(&job_lock, NULL);
    pthread_mutex_init(&pool_lock, NULL);
    pthread_cond_init(&work_ready, NULL);
    pthread_cond_init(&work_done, NULL);
    nworkers = 0;
    job.nchunks = 0;
    next_chunk = 0;
    chunks_left = 0;
    in_region = false;
}

/* Starts workers until there are `want`; called with pool_lock held.
 * Returns how many there are (fewer if pthread_create failed). */
static int
ensure_workers(int want)
{
    if (!atfork_registered) {
        pthread_atfork(NULL, NULL, after_fork_in_child);
        atfork_registered = true;
    }
    while (nworkers < want) {
        if (pthread_create(&workers[nworkers], NULL, worker_main, NULL) != 0) {
            break;
        }
        nworkers++;
    }
    return nworkers;
}

static void
run_serially(int64_t n, THParallelFn fn, void *ctx)
{
    bool was_in_region = in_region;
    in_region = true;
    fn(0, n, ctx);
    in_region = was_in_region;
}

/* The chunk length for splitting n into at most *nchunks equal chunks,
 * lowering *nchunks so that none is empty: 22 on 16 threads is 11 chunks
 * of 2, not 16 whose last five would start past n (a kernel given an
 * empty or inverted range once divided by its zero length). */
static int64_t
equal_chunks(int64_t n, int *nchunks)
{
    int64_t chunk = (n + *nchunks - 1) / *nchunks;
    *nchunks = (int)((n + chunk - 1) / chunk);
    return chunk;
}

void
THParallel_for(int64_t n, int64_t grain, THParallelFn fn, void *ctx)
{
    if (n <= 0) {
        return;
    }
    if (grain < 1) {
        grain = 1;
    }
    int threads = THParallel_getNumThreads();
    int64_t max_chunks = n / grain;
    if (threads < 2 || max_chunks < 2 || in_region
        || pthread_mutex_trylock(&job_lock) != 0) {
        run_serially(n, fn, ctx);
        return;
    }
    int nchunks = max_chunks < threads ? (int)max_chunks : threads;
    equal_chunks(n, &nchunks);

    pthread_mutex_lock(&pool_lock);
    int started = ensure_workers(nchunks - 1);
    if (started < nchunks - 1) {
        nchunks = started + 1; /* pthread_create failed: use what runs */
    }
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.chunk = equal_chunks(n, &nchunks);
    job.nchunks = nchunks;
    next_chunk = 1;
    chunks_left = nchunks - 1;
    pthread_cond_broadcast(&work_ready);
    pthread_mutex_unlock(&pool_lock);

    run_chunk(0);

    pthread_mutex_lock(&pool_lock);
    while (chunks_left > 0) {
        pthread_cond_wait(&work_done, &pool_lock);
    }
    job.nchunks = 0;
    next_chunk = 0;
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&job_lock);
}

void
THParallel_shutdown(void)
{
    pthread_mutex_lock(&job_lock);
    pthread_mutex_lock(&pool_lock);
    shutting_down = true;
    pthread_cond_broadcast(&work_ready);
    int n = nworkers;
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < n; i++) {
        pthread_join(workers[i], NULL);
    }
    pthread_mutex_lock(&pool_lock);
    nworkers = 0;
    shutting_down = false;
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&job_lock);
}

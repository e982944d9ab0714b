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
 *
 * Note [Workers poll before they sleep]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A worker asleep on a condition variable has to be woken for every job: a
 * futex call from the caller, and on a virtual machine whose host halted
 * the idle vCPU, tens of microseconds before the worker runs.  With the
 * workers always asleep between jobs, two threads were slower than one for
 * every float32 mul(out=) from 64K to 4M elements on a 2-core Zen 4 VM
 * (64K: 56 us against 9.5 us on one thread), and the training step of a
 * 256-512-512-10 MLP took 6.6 ms on ember's default two threads against
 * 4.0 ms on one.  PyTorch's OpenMP runtime lets its threads poll a while
 * after a parallel region (libgomp's GOMP_SPINCOUNT), and so do these: a
 * worker that finds no chunk polls `jobs_published` for TH_PARALLEL_POLL_NS
 * before it sleeps, and the caller polls `chunks_left` as long before it
 * sleeps on the last chunk.  Operators issued back to back, as a training
 * step issues them, then find the workers awake.
 *
 * Between two polls a thread calls sched_yield, not a pause instruction:
 * on a machine busy with other processes a polling thread must give its
 * CPU to them (the thread it waits for may be one of those queued).  The
 * same MLP step at two threads, one process, 2 CPUs: quiet, 3.2 ms with
 * sleeping workers, 2.3 ms polling with pause, 2.2 ms polling with
 * sched_yield; beside two busy processes, 4.8-6.8 ms, 11.7 ms and
 * 3.4-3.9 ms.  On an idle CPU sched_yield returns at once.  The clock is
 * read once every 64 polls.
 */
#include "THParallel.h"

#include "THGeneral.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* How long a worker without a chunk, or a caller waiting for the workers,
 * polls before it sleeps (Note [Workers poll before they sleep]). */
#define TH_PARALLEL_POLL_NS 200000

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
/* Chunks handed to workers and not yet finished: the caller polls it, so
 * it is atomic; the last worker to finish brings it to 0. */
static _Atomic int chunks_left;
/* Bumped by every job (and by shutdown): what idle workers poll. */
static _Atomic uint64_t jobs_published;
static int sleeping_workers; /* on work_ready; pool_lock */
static bool caller_sleeping; /* on work_done; pool_lock */

static _Thread_local bool in_region;

/* EMBER_NUM_THREADS, else OMP_NUM_THREADS (which PyTorch's pool reads, so
 * scripts that set it for PyTorch set it for ember), else the online CPUs. */
static int
default_num_threads(void)
{
    const char *env = getenv("EMBER_NUM_THREADS");
    if (env == NULL) {
        env = getenv("OMP_NUM_THREADS");
    }
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

static int64_t
monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static bool
job_published_since(uint64_t seen)
{
    return atomic_load_explicit(&jobs_published, memory_order_acquire) != seen;
}

static bool
workers_finished(uint64_t unused)
{
    (void)unused;
    return atomic_load_explicit(&chunks_left, memory_order_acquire) == 0;
}

/* Polls condition(arg) for up to TH_PARALLEL_POLL_NS; true once it holds,
 * false when the time is up (Note [Workers poll before they sleep]). */
static bool
poll_until(bool (*condition)(uint64_t), uint64_t arg)
{
    int64_t deadline = 0;
    for (unsigned polls = 0;; polls++) {
        if (condition(arg)) {
            return true;
        }
        if (polls % 64 == 0) {
            int64_t now = monotonic_ns();
            if (deadline == 0) {
                deadline = now + TH_PARALLEL_POLL_NS;
            } else if (now >= deadline) {
                return false;
            }
        }
        sched_yield();
    }
}

/* A worker's end of a chunk: the last one wakes a caller that went to
 * sleep waiting for it. */
static void
finish_chunk(void)
{
    if (atomic_fetch_sub_explicit(&chunks_left, 1, memory_order_acq_rel) == 1) {
        pthread_mutex_lock(&pool_lock);
        if (caller_sleeping) {
            pthread_cond_signal(&work_done);
        }
        pthread_mutex_unlock(&pool_lock);
    }
}

static void *
worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool_lock);
    while (!shutting_down) {
        if (next_chunk < job.nchunks) {
            int c = next_chunk++;
            pthread_mutex_unlock(&pool_lock);
            run_chunk(c);
            finish_chunk();
            pthread_mutex_lock(&pool_lock);
            continue;
        }
        uint64_t seen = atomic_load_explicit(&jobs_published, memory_order_relaxed);
        pthread_mutex_unlock(&pool_lock);
        bool published = poll_until(job_published_since, seen);
        pthread_mutex_lock(&pool_lock);
        /* Checked again under the lock a job is published under, so a job
         * published after the poll gave up is seen here or wakes us. */
        if (!published && !shutting_down && next_chunk >= job.nchunks) {
            sleeping_workers++;
            pthread_cond_wait(&work_ready, &pool_lock);
            sleeping_workers--;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return NULL;
}

/* The caller's wait for the chunks it handed out: polls, then sleeps until
 * the last worker's finish_chunk signals. */
static void
wait_for_workers(void)
{
    if (poll_until(workers_finished, 0)) {
        return;
    }
    pthread_mutex_lock(&pool_lock);
    while (atomic_load_explicit(&chunks_left, memory_order_acquire) > 0) {
        caller_sleeping = true;
        pthread_cond_wait(&work_done, &pool_lock);
    }
    caller_sleeping = false;
    pthread_mutex_unlock(&pool_lock);
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
    atomic_store(&chunks_left, 0);
    sleeping_workers = 0;
    caller_sleeping = false;
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
    atomic_store_explicit(&chunks_left, nchunks - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&jobs_published, 1, memory_order_release);
    if (sleeping_workers > 0) {
        pthread_cond_broadcast(&work_ready);
    }
    pthread_mutex_unlock(&pool_lock);

    run_chunk(0);
    /* Every chunk was taken (chunks_left counted them), so no worker
     * reads `job` again until the next one is published. */
    wait_for_workers();
    pthread_mutex_unlock(&job_lock);
}

void
THParallel_shutdown(void)
{
    pthread_mutex_lock(&job_lock);
    pthread_mutex_lock(&pool_lock);
    shutting_down = true;
    atomic_fetch_add(&jobs_published, 1); /* ends the workers' polls */
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

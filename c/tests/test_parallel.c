/*
 * test_parallel.c -- the worker pool (THParallel.h) and the iterator's
 * range and parallel drivers (THIter_runRange, THIter_runParallel).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "th_test.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* Counts how often each index of [0, n) was visited. */
typedef struct {
    atomic_int *hits;
    atomic_int calls;
    atomic_int nested_serial; /* nested calls that ran on the caller */
    atomic_int empty_calls;   /* begin >= end: THParallel_for never makes one */
} Coverage;

static void
mark_range(int64_t begin, int64_t end, void *arg)
{
    Coverage *cov = arg;
    atomic_fetch_add(&cov->calls, 1);
    if (begin >= end) {
        atomic_fetch_add(&cov->empty_calls, 1);
    }
    for (int64_t i = begin; i < end; i++) {
        atomic_fetch_add(&cov->hits[i], 1);
    }
}

static void
check_covers_once(int threads, int64_t n, int64_t grain, int max_calls)
{
    Coverage cov = {calloc((size_t)(n > 0 ? n : 1), sizeof(atomic_int)), 0, 0, 0};
    CHECK_OK(THParallel_setNumThreads(threads));
    THParallel_for(n, grain, mark_range, &cov);
    for (int64_t i = 0; i < n; i++) {
        if (atomic_load(&cov.hits[i]) != 1) {
            CHECK_MSG(false, "threads=%d n=%lld grain=%lld: index %lld hit %d times",
                      threads, (long long)n, (long long)grain, (long long)i,
                      atomic_load(&cov.hits[i]));
            break;
        }
    }
    CHECK(atomic_load(&cov.calls) <= max_calls);
    CHECK_EQ_INT(atomic_load(&cov.empty_calls), 0);
    free(cov.hits);
}

static void
test_parallel_for_covers_every_index_once(void)
{
    int saved = THParallel_getNumThreads();
    check_covers_once(1, 1000, 1, 1);
    check_covers_once(2, 1000, 1, 2);
    check_covers_once(4, 1001, 10, 4);
    check_covers_once(3, 7, 1, 3);
    check_covers_once(16, 22, 1, 11); /* 16 chunks of 2 would leave 5 empty */
    check_covers_once(4, 9, 1, 3);    /* 4 chunks of 3 would leave 1 empty */
    check_covers_once(4, 100, 60, 1); /* below 2 * grain: serial */
    check_covers_once(4, 0, 1, 0);
    for (int rep = 0; rep < 50; rep++) { /* hand-offs back to back */
        check_covers_once(2, 4096, 64, 2);
    }
    CHECK_OK(THParallel_setNumThreads(saved));
}

/* The workers poll for a while after a job and then sleep (Note [Workers
 * poll before they sleep]): a job must reach them in either state, and
 * shutdown must end polling workers as well as sleeping ones. */
static void
test_parallel_jobs_reach_polling_and_sleeping_workers(void)
{
    int saved = THParallel_getNumThreads();
    const struct timespec past_the_polls = {0, 2 * 1000 * 1000}; /* 2 ms */
    for (int threads = 2; threads <= 4; threads++) {
        for (int rep = 0; rep < 200; rep++) { /* each finds them polling */
            check_covers_once(threads, 1000, 1, threads);
        }
        nanosleep(&past_the_polls, NULL); /* now they sleep */
        check_covers_once(threads, 1000, 1, threads);
        nanosleep(&past_the_polls, NULL);
        check_covers_once(threads, 1000, 1, threads);
        THParallel_shutdown(); /* right after a job: still polling */
        check_covers_once(threads, 1000, 1, threads); /* restarted */
    }
    THParallel_shutdown();
    CHECK_OK(THParallel_setNumThreads(saved));
}

static void
nested_body(int64_t begin, int64_t end, void *arg)
{
    Coverage *cov = arg;
    CHECK(THParallel_inParallelRegion());
    /* A call from inside a region runs serially on this thread. */
    Coverage inner = {calloc(8, sizeof(atomic_int)), 0, 0, 0};
    THParallel_for(8, 1, mark_range, &inner);
    if (atomic_load(&inner.calls) == 1) {
        atomic_fetch_add(&cov->nested_serial, 1);
    }
    free(inner.hits);
    mark_range(begin, end, cov);
}

static void
test_parallel_nested_runs_serially(void)
{
    int saved = THParallel_getNumThreads();
    CHECK_OK(THParallel_setNumThreads(2));
    Coverage cov = {calloc(64, sizeof(atomic_int)), 0, 0, 0};
    THParallel_for(64, 1, nested_body, &cov);
    CHECK_EQ_INT(atomic_load(&cov.nested_serial), atomic_load(&cov.calls));
    CHECK(!THParallel_inParallelRegion());
    free(cov.hits);
    CHECK_OK(THParallel_setNumThreads(saved));
}

static void
test_parallel_set_num_threads_checks(void)
{
    int saved = THParallel_getNumThreads();
    CHECK(saved >= 1);
    CHECK_FAILS(THParallel_setNumThreads(0), TH_ERR_VALUE, "got 0");
    CHECK_FAILS(THParallel_setNumThreads(TH_PARALLEL_MAX_THREADS + 1),
                TH_ERR_VALUE, "set_num_threads");
    CHECK_EQ_INT(THParallel_getNumThreads(), saved);
}

static void
add_one_loop(char **data, const int64_t *strides, int64_t n, void *ctx)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) {
        double *out = (double *)(data[0] + i * strides[0]);
        const double *in = (const double *)(data[1] + i * strides[1]);
        *out = *in + 1;
    }
}

/* runRange over any split of [0, numel) writes what one run writes, on a
 * transposed (non-coalescing) output. */
static void
test_iter_run_range_and_parallel(void)
{
    THTensor *src = tt_arange(TH_Float64, TT_SIZES(5, 7, 3));
    THTensor *base = THTensor_newEmpty(TT_SIZES(3, 7, 5), TH_Float64,
                                       TH_DEVICE_CPU);
    THTensor *dst = THTensor_newTranspose(base, 0, 2);
    THTensor *ops[2] = {dst, src};
    THIter iter;
    CHECK_OK(THIter_init(&iter, 2, ops));
    int64_t cuts[] = {0, 1, 4, 5, 17, 34, 35, 104, 105};
    for (size_t c = 0; c + 1 < sizeof(cuts) / sizeof(cuts[0]); c++) {
        THIter_runRange(&iter, add_one_loop, NULL, cuts[c], cuts[c + 1]);
    }
    for (int64_t i = 0; i < 105; i++) {
        CHECK_EQ_DBL(tt_get(dst, i), tt_get(src, i) + 1);
    }
    int saved = THParallel_getNumThreads();
    for (int threads = 1; threads <= 3; threads++) {
        CHECK_OK(THParallel_setNumThreads(threads));
        CHECK_OK(THTensor_fill(dst, THScalar_fromInt(-1)));
        THIter_runParallel(&iter, add_one_loop, NULL, 2);
        for (int64_t i = 0; i < 105; i++) {
            CHECK_EQ_DBL(tt_get(dst, i), tt_get(src, i) + 1);
        }
    }
    CHECK_OK(THParallel_setNumThreads(saved));
    THTensor_release(dst);
    THTensor_release(base);
    THTensor_release(src);
}

/* Operands given as raw memory: a scalar in a local is an ndim-0 operand. */
static void
test_iter_raw_scalar_operand(void)
{
    THTensor *dst = THTensor_newEmpty(TT_SIZES(2, 3), TH_Float64, TH_DEVICE_CPU);
    THTensor *src = tt_arange(TH_Float64, TT_SIZES(3));
    double scalar = 41.0;
    THIterOperand ops[2] = {
        THIterOperand_fromTensor(dst),
        {(char *)&scalar, 0, NULL, NULL, sizeof(double)},
    };
    THIter iter;
    CHECK_OK(THIter_initOperands(&iter, 2, ops, dst->ndim, dst->sizes));
    CHECK_EQ_INT(iter.ndim, 1); /* coalesced into one run of 6 */
    THIter_run(&iter, add_one_loop, NULL);
    for (int64_t i = 0; i < 6; i++) {
        CHECK_EQ_DBL(tt_get(dst, i), 42.0);
    }
    THIterOperand bad[2] = {THIterOperand_fromTensor(dst),
                            THIterOperand_fromTensor(src)};
    CHECK_FAILS(THIter_initOperands(&iter, 2, bad, TT_SIZES(2, 4)),
                TH_ERR_RUNTIME, "must match");
    THTensor_release(src);
    THTensor_release(dst);
}

TH_TEST_SUITE(parallel) = {
    TH_TEST(test_parallel_for_covers_every_index_once),
    TH_TEST(test_parallel_jobs_reach_polling_and_sleeping_workers),
    TH_TEST(test_parallel_nested_runs_serially),
    TH_TEST(test_parallel_set_num_threads_checks),
    TH_TEST(test_iter_run_range_and_parallel),
    TH_TEST(test_iter_raw_scalar_operand),
    TH_TEST_END,
};

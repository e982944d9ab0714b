/*
 * THParallel.h -- run a loop over [0, n) on the worker threads.
 *
 * A small pool of pthreads, started on first use and sized by
 * THParallel_setNumThreads (default: EMBER_NUM_THREADS, else
 * OMP_NUM_THREADS, else the number of online CPUs).  THParallel_for splits
 * [0, n) into one contiguous, non-empty chunk per thread, never smaller
 * than `grain` elements (fewer chunks where equal ones would leave some
 * empty), runs chunk 0 on the calling thread and the others on workers,
 * and returns when all are done.  Work
 * below 2 * grain, and any call made from inside a parallel region, runs
 * serially on the caller: small ops never pay for a thread hand-off.
 *
 * Kernels run here must not touch Python objects (the caller may have
 * released the GIL) and must not report errors through THError (its slot is
 * thread-local): check everything that can fail before going parallel.
 */
#ifndef TH_PARALLEL_H
#define TH_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

/* Below this many elements an elementwise kernel stays on one thread (a
 * hand-off costs a few microseconds; 32K float32 adds take about as long). */
#define TH_PARALLEL_GRAIN 32768

typedef void (*THParallelFn)(int64_t begin, int64_t end, void *ctx);

void THParallel_for(int64_t n, int64_t grain, THParallelFn fn, void *ctx);

int THParallel_getNumThreads(void);
/* 1 <= nthreads <= TH_PARALLEL_MAX_THREADS; -1 with a TH error otherwise. */
int THParallel_setNumThreads(int nthreads);
bool THParallel_inParallelRegion(void);
/* Joins the workers (they restart on the next parallel call).  The C unit
 * tests call it so valgrind sees every thread gone. */
void THParallel_shutdown(void);

#define TH_PARALLEL_MAX_THREADS 64

#endif /* TH_PARALLEL_H */

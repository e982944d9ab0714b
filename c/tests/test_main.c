/*
 * test_main.c -- runs the C unit tests of the TH core.
 *
 *     build/ctest/test_th            run every test
 *     build/ctest/test_th view copy  run the tests whose name contains
 *                                    "view" or "copy"
 *
 * Prints one line per failing check ("file:line: [test] message"), then
 * "N passed, M failed" (N, M: test functions) alone on the last line, and
 * exits 1 when any test failed.  See th_test.h.
 */
#include "th_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The suites, one per test file; TH_TEST_SUITES is the single list. */
#define TH_TEST_SUITES(_) \
    _(dtype)              \
    _(error)              \
    _(allocator)          \
    _(storage)            \
    _(tensor)             \
    _(views)              \
    _(iter)               \
    _(copy)               \
    _(index)              \
    _(factories)          \
    _(random)             \
    _(parallel)           \
    _(pointwise)          \
    _(reduce)             \
    _(conv)               \
    _(pool_norm)          \
    _(stream)             \
    _(attention)          \
    _(rnn)                \
    _(optim)              \
    _(blas)

#define TH_DECLARE_SUITE(name) extern const THTestCase th_suite_##name[];
TH_TEST_SUITES(TH_DECLARE_SUITE)
#undef TH_DECLARE_SUITE

static const THTestCase *const suites[] = {
#define TH_SUITE_ENTRY(name) th_suite_##name,
    TH_TEST_SUITES(TH_SUITE_ENTRY)
#undef TH_SUITE_ENTRY
};

static const char *current_test = "";
static int current_failures = 0;

void
th_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list args;
    current_failures++;
    printf("%s:%d: [%s] ", file, line, current_test);
    va_start(args, fmt);
    vprintf(fmt, args);
    va_end(args);
    printf("\n");
    fflush(stdout);
}

static bool
selected(const char *name, int argc, char **argv)
{
    if (argc <= 1) {
        return true;
    }
    for (int i = 1; i < argc; i++) {
        if (strstr(name, argv[i]) != NULL) {
            return true;
        }
    }
    return false;
}

int
main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    for (size_t s = 0; s < sizeof(suites) / sizeof(suites[0]); s++) {
        for (const THTestCase *tc = suites[s]; tc->fn != NULL; tc++) {
            if (!selected(tc->name, argc, argv)) {
                continue;
            }
            current_test = tc->name;
            current_failures = 0;
            THError_clear();
            int64_t live = THAllocator_deviceStats(TH_DEVICE_CPU).live_blocks;
            tc->fn();
            int64_t left =
                THAllocator_deviceStats(TH_DEVICE_CPU).live_blocks - live;
            if (left != 0) {
                th_test_fail(__FILE__, __LINE__,
                             "leaked %lld CPU allocator block(s)",
                             (long long)left);
            }
            if (THAllocator_get(TH_DEVICE_CPU) != THAllocator_cpu()) {
                th_test_fail(__FILE__, __LINE__,
                             "left a custom CPU allocator installed");
            }
            if (current_failures == 0) {
                passed++;
            }
            else {
                failed++;
            }
        }
    }
    /* Join the pool's workers so valgrind sees no thread left running. */
    THParallel_shutdown();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

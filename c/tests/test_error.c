/*
 * test_error.c -- the thread-local error slot (THGeneral.h) and checked
 * arithmetic.
 */
#include "th_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void
test_error_set_kind_message_clear(void)
{
    THError_clear();
    CHECK_EQ_INT(THError_kind(), TH_ERR_NONE);
    CHECK_STR_EQ(THError_message(), "");

    CHECK_EQ_INT(THError_set(TH_ERR_INDEX, "index %d of %s", 7, "x"), -1);
    CHECK_EQ_INT(THError_kind(), TH_ERR_INDEX);
    CHECK_STR_EQ(THError_message(), "index 7 of x");

    /* a later error replaces the earlier one */
    THError_set(TH_ERR_MEMORY, "second");
    CHECK_EQ_INT(THError_kind(), TH_ERR_MEMORY);
    CHECK_STR_EQ(THError_message(), "second");

    THError_clear();
    CHECK_EQ_INT(THError_kind(), TH_ERR_NONE);
    CHECK_STR_EQ(THError_message(), "");

    /* every kind round-trips */
    for (int k = TH_ERR_RUNTIME; k <= TH_ERR_MEMORY; k++) {
        THError_set((THErrorKind)k, "kind %d", k);
        CHECK_EQ_INT(THError_kind(), k);
    }
    THError_clear();
}

static void
test_error_long_message_is_truncated(void)
{
    char big[2000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    THError_set(TH_ERR_VALUE, "%s", big);
    const char *msg = THError_message();
    size_t len = strlen(msg);
    CHECK(len > 100 && len < sizeof(big) - 1);
    CHECK(msg[0] == 'a' && msg[len - 1] == 'a');
    THError_clear();
}

typedef struct {
    THErrorKind seen_kind;
    char seen_message[64];
    THErrorKind own_kind;
} ThreadReport;

static void *
error_thread(void *arg)
{
    ThreadReport *report = arg;
    report->seen_kind = THError_kind();
    snprintf(report->seen_message, sizeof(report->seen_message), "%s",
             THError_message());
    THError_set(TH_ERR_TYPE, "set by the second thread");
    report->own_kind = THError_kind();
    return NULL;
}

static void
test_error_is_thread_local(void)
{
    pthread_t thread;
    ThreadReport report = {TH_ERR_MEMORY, "unset", TH_ERR_NONE};
    THError_set(TH_ERR_INDEX, "main thread's error");
    CHECK_EQ_INT(pthread_create(&thread, NULL, error_thread, &report), 0);
    CHECK_EQ_INT(pthread_join(thread, NULL), 0);
    /* the second thread started with a clean slot ... */
    CHECK_EQ_INT(report.seen_kind, TH_ERR_NONE);
    CHECK_STR_EQ(report.seen_message, "");
    CHECK_EQ_INT(report.own_kind, TH_ERR_TYPE);
    /* ... and its error did not leak into ours */
    CHECK_EQ_INT(THError_kind(), TH_ERR_INDEX);
    CHECK_STR_EQ(THError_message(), "main thread's error");
    THError_clear();
}

static void
test_checked_arithmetic(void)
{
    int64_t out = 0;
    CHECK(!TH_mul_overflows(1 << 20, 1 << 20, &out));
    CHECK_EQ_INT(out, (int64_t)1 << 40);
    CHECK(TH_mul_overflows((int64_t)1 << 40, (int64_t)1 << 40, &out));
    CHECK(TH_mul_overflows(INT64_MAX, 2, &out));
    CHECK(!TH_mul_overflows(INT64_MAX, 1, &out));
    CHECK(!TH_add_overflows(INT64_MAX - 1, 1, &out));
    CHECK_EQ_INT(out, INT64_MAX);
    CHECK(TH_add_overflows(INT64_MAX, 1, &out));
    CHECK(TH_MAX_NBYTES < INT64_MAX / 2);
}

/* Note [Counts to bytes]: the helpers refuse what would wrap. */
static void
test_counts_to_bytes(void)
{
    size_t nbytes = 0;
    CHECK(TH_arrayNbytes(3, 8, &nbytes));
    CHECK_EQ_INT(nbytes, 24);
    CHECK(TH_arrayNbytes(0, 16, &nbytes));
    CHECK_EQ_INT(nbytes, 0);
    CHECK(!TH_arrayNbytes(-1, 8, &nbytes));
    /* 2^61 * 8 wraps to 0 in uint64: the unbind overflow of issue 11 */
    CHECK(!TH_arrayNbytes((int64_t)1 << 61, 8, &nbytes));
    CHECK(!TH_arrayNbytes(TH_MAX_NBYTES / 8 + 1, 8, &nbytes));
    CHECK(TH_arrayNbytes(TH_MAX_NBYTES / 8, 8, &nbytes));
    THError_clear();
    CHECK(TH_mallocArray((int64_t)1 << 62, 16, "sort") == NULL);
    CHECK_ERROR(TH_ERR_MEMORY, "sort: cannot allocate");
    void *empty = TH_mallocArray(0, 8, "test");
    CHECK_NOT_NULL(empty);
    free(empty);
    CHECK_EQ_INT(TH_ceilDiv(0, 5), 0);
    CHECK_EQ_INT(TH_ceilDiv(10, 5), 2);
    CHECK_EQ_INT(TH_ceilDiv(11, 5), 3);
    /* (a + b - 1) / b would wrap here */
    CHECK_EQ_INT(TH_ceilDiv((int64_t)1 << 62, INT64_MAX), 1);
    CHECK_EQ_INT(TH_ceilDiv(INT64_MAX, INT64_MAX), 1);
    CHECK_EQ_INT(TH_ceilDiv(INT64_MAX, 2), (int64_t)1 << 62);
}

TH_TEST_SUITE(error) = {
    TH_TEST(test_error_set_kind_message_clear),
    TH_TEST(test_error_long_message_is_truncated),
    TH_TEST(test_error_is_thread_local),
    TH_TEST(test_checked_arithmetic),
    TH_TEST(test_counts_to_bytes),
    TH_TEST_END,
};

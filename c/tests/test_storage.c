/*
 * test_storage.c -- refcounting of storages, external memory and its
 * deleter (THStorage.h).
 */
#include "th_test.h"

#include "THHeaderCache.h"

#include <pthread.h>

typedef struct {
    int calls;
    void *data;
    void *context;
} DeleterLog;

static void
logging_deleter(void *context, void *data)
{
    DeleterLog *log = context;
    log->calls++;
    log->data = data;
    log->context = context;
}

static void
test_storage_refcount(void)
{
    THAllocatorStats d0 = THAllocator_deviceStats(TH_DEVICE_CPU);
    THStorage *s = THStorage_new(40, TH_DEVICE_CPU);
    CHECK_NOT_NULL(s);
    if (s == NULL) {
        return;
    }
    CHECK_EQ_INT(s->refcount, 1);
    CHECK_EQ_INT(s->nbytes, 40);
    CHECK(s->data != NULL);
    CHECK(s->allocator == THAllocator_cpu());
    CHECK(s->deleter == NULL);
    CHECK(!s->read_only);
    CHECK_EQ_INT(s->device, TH_DEVICE_CPU);
    memset(s->data, 7, 40);

    THStorage_retain(s);
    THStorage_retain(s);
    CHECK_EQ_INT(s->refcount, 3);
    THStorage_release(s);
    THStorage_release(s);
    CHECK_EQ_INT(s->refcount, 1);
    /* still alive and usable: valgrind would flag a use after free */
    CHECK_EQ_INT(((unsigned char *)s->data)[39], 7);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).live_blocks,
                 d0.live_blocks + 1);
    THStorage_release(s);
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).live_blocks,
                 d0.live_blocks);
    THStorage_release(NULL); /* allowed */
}

static void
test_storage_tensors_hold_references(void)
{
    THStorage *s = THStorage_new(24, TH_DEVICE_CPU);
    THTensor *a = THTensor_newWithStorage(s, 0, TT_SIZES(6), NULL, TH_Int32);
    THTensor *b = THTensor_newWithStorage(s, 2, TT_SIZES(2, 2), NULL,
                                          TH_Int32);
    CHECK(a != NULL && b != NULL);
    CHECK_EQ_INT(s->refcount, 3);
    THTensor *view = a ? THTensor_newTranspose(a, 0, 0) : NULL;
    CHECK_EQ_INT(s->refcount, 4);
    THTensor_release(view);
    THStorage_release(s); /* the tensors keep it alive */
    CHECK_EQ_INT(s->refcount, 2);
    if (a != NULL && b != NULL) {
        CHECK(a->storage == s && b->storage == s);
        /* different tensors on one storage have separate counters */
        CHECK(a->version_counter != b->version_counter);
        ((int32_t *)s->data)[3] = 99;
        CHECK_EQ_INT(tt_get_int(b, 1), 99);
    }
    THTensor_release(a);
    CHECK_EQ_INT(s->refcount, 1);
    THTensor_release(b);
}

static void
test_storage_external_deleter_once(void)
{
    double buffer[4] = {1, 2, 3, 4};
    DeleterLog log = {0};
    THAllocatorStats d0 = THAllocator_deviceStats(TH_DEVICE_CPU);
    THStorage *s = THStorage_newExternal(buffer, sizeof(buffer),
                                         TH_DEVICE_CPU, false,
                                         logging_deleter, &log);
    CHECK_NOT_NULL(s);
    if (s == NULL) {
        return;
    }
    CHECK(s->data == buffer);
    CHECK(s->allocator == NULL);
    CHECK_EQ_INT(s->nbytes, sizeof(buffer));
    CHECK(!s->read_only);
    /* no allocator involved */
    CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).num_allocs,
                 d0.num_allocs);

    THTensor *t = THTensor_newWithStorage(s, 1, TT_SIZES(3), NULL,
                                          TH_Float64);
    CHECK_VALUES(t, 2, 3, 4);
    THTensor *v = t ? THTensor_newSelect(t, 0, -1) : NULL;
    THStorage_retain(s);
    THStorage_release(s);
    THStorage_release(s); /* our reference: t and v keep it */
    CHECK_EQ_INT(log.calls, 0);
    THTensor_release(t);
    CHECK_EQ_INT(log.calls, 0);
    CHECK_EQ_INT(v ? tt_get(v, 0) : -1, 4);
    THTensor_release(v); /* the last reference */
    CHECK_EQ_INT(log.calls, 1);
    CHECK(log.data == buffer);
    CHECK(log.context == &log);
}

static void
test_storage_external_failure_calls_nothing(void)
{
    DeleterLog log = {0};
    char byte;
    THError_clear();
    CHECK(THStorage_newExternal(NULL, 8, TH_DEVICE_CPU, false,
                                logging_deleter, &log)
          == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "invalid external memory");
    CHECK(THStorage_newExternal(&byte, -1, TH_DEVICE_CPU, false,
                                logging_deleter, &log)
          == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "invalid external memory");
    CHECK_EQ_INT(log.calls, 0);

    /* a tensor that does not fit the external memory fails too, and the
     * storage (not the failed tensor) still owns the deleter */
    THStorage *s = THStorage_newExternal(&byte, 1, TH_DEVICE_CPU, true,
                                         logging_deleter, &log);
    CHECK_NOT_NULL(s);
    if (s == NULL) {
        return;
    }
    CHECK(s->read_only);
    CHECK_NEW_FAILS(THTensor_newWithStorage(s, 0, TT_SIZES(2), NULL,
                                            TH_UInt8),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_EQ_INT(s->refcount, 1);
    CHECK_EQ_INT(log.calls, 0);
    THStorage_release(s);
    CHECK_EQ_INT(log.calls, 1);

    /* empty external memory (e.g. a zero-length NumPy array), no deleter */
    THStorage *empty = THStorage_newExternal(NULL, 0, TH_DEVICE_CPU, false,
                                             NULL, NULL);
    CHECK(empty != NULL && empty->nbytes == 0);
    THStorage_release(empty);
}

static void
test_storage_negative_and_huge(void)
{
    THError_clear();
    CHECK(THStorage_newWithAllocator(-5, THAllocator_cpu()) == NULL);
    CHECK_ERROR(TH_ERR_VALUE, "must be non-negative, got -5");
    CHECK(THStorage_newWithAllocator(TH_MAX_NBYTES + 1, THAllocator_cpu())
          == NULL);
    CHECK_ERROR(TH_ERR_MEMORY, "");
}

/* Note [Header free lists]: a header handed out again starts clean (an
 * external read-only storage's header becomes an allocated one). */
static void
test_storage_reused_header_is_clean(void)
{
    char bytes[8];
    DeleterLog log = {0};
    THStorage *external = THStorage_newExternal(bytes, 8, TH_DEVICE_CPU,
                                                true, logging_deleter, &log);
    CHECK_NOT_NULL(external);
    if (external == NULL) {
        return;
    }
    void *first = external;
    THStorage_release(external);
    CHECK_EQ_INT(log.calls, 1);
    THStorage *fresh = THStorage_new(8, TH_DEVICE_CPU);
    CHECK_NOT_NULL(fresh);
    if (fresh == NULL) {
        return;
    }
    if (THHeader_cacheEnabled()) {
        CHECK(fresh == first); /* the cached header came back */
    }
    CHECK(!fresh->read_only);
    CHECK(fresh->deleter == NULL && fresh->deleter_context == NULL);
    CHECK(fresh->allocator == THAllocator_cpu());
    CHECK_EQ_INT(fresh->refcount, 1);
    THStorage_release(fresh);
}

/* Tensors made and released on other threads, one freed on another thread
 * than its own: each thread's cached headers are freed when it exits
 * (valgrind's C half fails on any block left). */
static void *
churn_tensors(void *handoff)
{
    int64_t size = 5;
    for (int i = 0; i < 3 * TH_HEADER_CACHE_DEPTH; i++) {
        THTensor *t = THTensor_newEmpty(1, &size, TH_Float32, TH_DEVICE_CPU);
        THTensor *v = t != NULL ? THTensor_newTranspose(t, 0, 0) : NULL;
        THTensor_release(t);
        THTensor_release(v);
    }
    THTensor_release(handoff); /* made on the main thread */
    return NULL;
}

static void
test_storage_headers_across_threads(void)
{
    int64_t size = 3;
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        THTensor *handoff = THTensor_newEmpty(1, &size, TH_Int64,
                                              TH_DEVICE_CPU);
        CHECK_NOT_NULL(handoff);
        CHECK_EQ_INT(pthread_create(&threads[i], NULL, churn_tensors,
                                    handoff),
                     0);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(pthread_join(threads[i], NULL), 0);
    }
}

TH_TEST_SUITE(storage) = {
    TH_TEST(test_storage_refcount),
    TH_TEST(test_storage_tensors_hold_references),
    TH_TEST(test_storage_external_deleter_once),
    TH_TEST(test_storage_external_failure_calls_nothing),
    TH_TEST(test_storage_negative_and_huge),
    TH_TEST(test_storage_reused_header_is_clean),
    TH_TEST(test_storage_headers_across_threads),
    TH_TEST_END,
};

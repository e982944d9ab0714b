/*
 * th_test_util.c -- helpers shared by the test files (see th_test.h).
 */
#include "th_test.h"

#include <stdio.h>

void
th_check_i64s(const char *file, int line, const char *what, int ndim,
              const int64_t *got, int n, const int64_t *want)
{
    char gbuf[256] = "", wbuf[256] = "";
    bool same = got != NULL && ndim == n;
    for (int d = 0; same && d < n; d++) {
        same = got[d] == want[d];
    }
    if (same) {
        return;
    }
    size_t used = 0;
    for (int d = 0; got != NULL && d < ndim && used < sizeof(gbuf); d++) {
        used += (size_t)snprintf(gbuf + used, sizeof(gbuf) - used, "%s%lld",
                                 d ? ", " : "", (long long)got[d]);
    }
    used = 0;
    for (int d = 0; d < n && used < sizeof(wbuf); d++) {
        used += (size_t)snprintf(wbuf + used, sizeof(wbuf) - used, "%s%lld",
                                 d ? ", " : "", (long long)want[d]);
    }
    th_test_fail(file, line, "%s: got [%s]%s, expected [%s]", what, gbuf,
                 got == NULL ? " (NULL tensor)" : "", wbuf);
}

void
th_check_error(const char *file, int line, const char *kind_name,
               THErrorKind kind, const char *needle)
{
    THErrorKind got = THError_kind();
    const char *message = THError_message();
    if (got != kind) {
        th_test_fail(file, line, "error kind %s (%d) expected, got %d: \"%s\"",
                     kind_name, (int)kind, (int)got, message);
    }
    else if (strstr(message, needle) == NULL) {
        th_test_fail(file, line,
                     "error message should contain \"%s\", got \"%s\"",
                     needle, message);
    }
    THError_clear();
}

void
th_check_values(const char *file, int line, const char *what,
                const THTensor *t, int64_t n, const double *want)
{
    if (t == NULL) {
        th_test_fail(file, line, "%s is NULL", what);
        return;
    }
    if (t->numel != n) {
        th_test_fail(file, line, "%s has %lld elements, expected %lld", what,
                     (long long)t->numel, (long long)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double got = tt_get(t, i);
        if (!(got == want[i])) {
            th_test_fail(file, line, "%s[%lld] (row-major) is %.17g, "
                         "expected %.17g", what, (long long)i, got, want[i]);
            return;
        }
    }
}

/* Byte offset from the data pointer of logical element i. */
static int64_t
element_offset(const THTensor *t, int64_t i)
{
    int64_t offset = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t size = t->sizes[d];
        offset += (i % size) * t->strides[d];
        i /= size;
    }
    return offset * THTensor_itemsize(t);
}

#define TT_GET_CASE(Name, ctype, py) \
    case TH_##Name: return (double)TH_TO_FLOAT_##Name(*(const ctype *)p);

double
tt_get(const THTensor *t, int64_t i)
{
    const char *p = THTensor_data(t) + element_offset(t, i);
    switch (t->dtype) {
        TH_FORALL_DTYPES(TT_GET_CASE)
    default: return -12345.0;
    }
}
#undef TT_GET_CASE

#define TT_GET_INT_CASE(Name, ctype, py) \
    case TH_##Name: return (int64_t)TH_TO_FLOAT_##Name(*(const ctype *)p);

int64_t
tt_get_int(const THTensor *t, int64_t i)
{
    const char *p = THTensor_data(t) + element_offset(t, i);
    switch (t->dtype) {
        TH_FORALL_DTYPES(TT_GET_INT_CASE)
    default: return -12345;
    }
}
#undef TT_GET_INT_CASE

#define TT_SET_CASE(Name, ctype, py) \
    case TH_##Name: *(ctype *)p = TH_FROM_FLOAT_##Name(value); break;

void
tt_set(THTensor *t, int64_t i, double value)
{
    char *p = THTensor_data(t) + element_offset(t, i);
    switch (t->dtype) {
        TH_FORALL_DTYPES(TT_SET_CASE)
    default: break;
    }
}
#undef TT_SET_CASE

THTensor *
tt_from(THDtype dtype, int ndim, const int64_t *sizes, const double *values)
{
    THTensor *t = THTensor_newEmpty(ndim, sizes, dtype, TH_DEVICE_CPU);
    if (t == NULL) {
        return NULL;
    }
    for (int64_t i = 0; i < t->numel; i++) {
        tt_set(t, i, values[i]);
    }
    return t;
}

THTensor *
tt_arange(THDtype dtype, int ndim, const int64_t *sizes)
{
    THTensor *t = THTensor_newEmpty(ndim, sizes, dtype, TH_DEVICE_CPU);
    if (t == NULL) {
        return NULL;
    }
    for (int64_t i = 0; i < t->numel; i++) {
        tt_set(t, i, (double)i);
    }
    return t;
}

int64_t
tt_version(const THTensor *t)
{
    return t->version_counter->version;
}

void
tt_fill_pattern(THTensor *t, unsigned seed)
{
    for (int64_t i = 0; i < t->numel; i++) {
        seed = seed * 1103515245u + 12345u;
        tt_set(t, i, (double)(seed >> 8 & 0xffff) / 32768.0 - 1.0);
    }
}

double
tt_dot(const THTensor *a, const THTensor *b)
{
    double sum = 0.0;
    for (int64_t i = 0; i < a->numel; i++) {
        sum += tt_get(a, i) * tt_get(b, i);
    }
    return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* XGETBV with ECX = 1 reads XINUSE: bit 2 the upper halves of ymm0-15,
 * bit 6 the upper halves of zmm0-15 (Intel SDM vol. 1, 13.6). */
static bool
xinuse_readable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) {
        return false;
    }
    __cpuid_count(0xD, 1, a, b, c, d);
    return (a & (1u << 2)) != 0;
}

bool
th_vector_upper_in_use(void)
{
    if (!xinuse_readable()) {
        return false;
    }
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return (lo & ((1u << 2) | (1u << 6))) != 0;
}

__attribute__((target("avx"))) static void
zero_upper(void)
{
    __asm__ volatile("vzeroupper" ::: "memory");
}

void
th_clear_vector_upper(void)
{
    if (__builtin_cpu_supports("avx")) {
        zero_upper();
    }
}
#else
bool
th_vector_upper_in_use(void)
{
    return false;
}

void
th_clear_vector_upper(void)
{
}
#endif

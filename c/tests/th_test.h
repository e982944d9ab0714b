/*
 * th_test.h -- the C unit tests' own tiny harness (no external framework).
 *
 * A test is a `void test_xxx(void)` listed in a suite table
 * (TH_TEST_SUITE), and the suites are listed once in test_main.c.  The
 * CHECK macros record file:line and a message for each failing check and
 * keep going, so one run shows every broken check.  A test function fails
 * when any of its checks failed; test_main prints "N passed, M failed"
 * (counting test functions) and exits non-zero on any failure.
 *
 * Besides its own checks, every test must leave the CPU allocator with as
 * many live blocks as it found (test_main checks), and under valgrind the
 * whole binary must be leak-free and error-free.
 */
#ifndef TH_TEST_H
#define TH_TEST_H

#include "TH.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef void (*THTestFn)(void);

typedef struct {
    const char *name;
    THTestFn fn;
} THTestCase;

/* A suite is a NULL-terminated array of cases named th_suite_<name>. */
#define TH_TEST_SUITE(name) const THTestCase th_suite_##name[]
#define TH_TEST(fn) {#fn, fn}
#define TH_TEST_END {NULL, NULL}

/* Records one failed check of the current test and prints it. */
void th_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            th_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);           \
        }                                                                   \
    } while (0)

/* Like CHECK, with a printf-style explanation. */
#define CHECK_MSG(cond, ...)                                                \
    do {                                                                    \
        if (!(cond)) {                                                      \
            th_test_fail(__FILE__, __LINE__, __VA_ARGS__);                  \
        }                                                                   \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                  \
    do {                                                                    \
        long long th_a_ = (long long)(a), th_b_ = (long long)(b);           \
        if (th_a_ != th_b_) {                                               \
            th_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a,  \
                         #b, th_a_, th_b_);                                 \
        }                                                                   \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                  \
    do {                                                                    \
        unsigned long long th_a_ = (a), th_b_ = (b);                        \
        if (th_a_ != th_b_) {                                               \
            th_test_fail(__FILE__, __LINE__, "%s == %s: 0x%llx != 0x%llx",  \
                         #a, #b, th_a_, th_b_);                             \
        }                                                                   \
    } while (0)

/* Exact equality of doubles (use CHECK_NEAR for computed values). */
#define CHECK_EQ_DBL(a, b)                                                  \
    do {                                                                    \
        double th_a_ = (a), th_b_ = (b);                                    \
        if (!(th_a_ == th_b_)) {                                            \
            th_test_fail(__FILE__, __LINE__, "%s == %s: %.17g != %.17g",    \
                         #a, #b, th_a_, th_b_);                             \
        }                                                                   \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                               \
    do {                                                                    \
        double th_a_ = (a), th_b_ = (b), th_t_ = (tol);                     \
        if (!(th_a_ - th_b_ <= th_t_ && th_b_ - th_a_ <= th_t_)) {          \
            th_test_fail(__FILE__, __LINE__,                                \
                         "%s ~= %s: %.17g vs %.17g (tol %g)", #a, #b,       \
                         th_a_, th_b_, th_t_);                              \
        }                                                                   \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                  \
    do {                                                                    \
        const char *th_a_ = (a), *th_b_ = (b);                              \
        if (th_a_ == NULL || th_b_ == NULL || strcmp(th_a_, th_b_) != 0) {  \
            th_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"",  \
                         #a, #b, th_a_ ? th_a_ : "(null)",                  \
                         th_b_ ? th_b_ : "(null)");                         \
        }                                                                   \
    } while (0)

#define CHECK_STR_CONTAINS(haystack, needle)                                \
    do {                                                                    \
        const char *th_h_ = (haystack), *th_n_ = (needle);                  \
        if (th_h_ == NULL || strstr(th_h_, th_n_) == NULL) {                \
            th_test_fail(__FILE__, __LINE__, "%s contains \"%s\": got "     \
                         "\"%s\"", #haystack, th_n_,                        \
                         th_h_ ? th_h_ : "(null)");                         \
        }                                                                   \
    } while (0)

/* A call that must succeed (status 0 or non-NULL pointer). */
#define CHECK_OK(status)                                                    \
    do {                                                                    \
        THError_clear();                                                    \
        if ((status) != 0) {                                                \
            th_test_fail(__FILE__, __LINE__, "%s failed: %s", #status,      \
                         THError_message());                                \
        }                                                                   \
    } while (0)

#define CHECK_NOT_NULL(ptr)                                                 \
    do {                                                                    \
        if ((ptr) == NULL) {                                                \
            th_test_fail(__FILE__, __LINE__, "%s is NULL: %s", #ptr,        \
                         THError_message());                                \
        }                                                                   \
    } while (0)

/* The last TH call failed with this kind, and its message contains
 * `needle` ("" for any message).  Clears the error afterwards. */
#define CHECK_ERROR(kind, needle) \
    th_check_error(__FILE__, __LINE__, #kind, (kind), (needle))

/* `status` is -1 with a TH error of `kind` whose message contains needle. */
#define CHECK_FAILS(status, kind, needle)                                   \
    do {                                                                    \
        THError_clear();                                                    \
        int th_s_ = (status);                                               \
        if (th_s_ != -1) {                                                  \
            th_test_fail(__FILE__, __LINE__, "%s should fail, returned %d", \
                         #status, th_s_);                                   \
        }                                                                   \
        CHECK_ERROR(kind, needle);                                          \
    } while (0)

/* A `new` call that must return NULL with a TH error of `kind` whose
 * message contains needle.  If it wrongly succeeds the result is released
 * (so a wrong success is reported, not leaked). */
#define CHECK_NEW_FAILS(expr, kind, needle)                                 \
    do {                                                                    \
        THError_clear();                                                    \
        THTensor *th_t_ = (expr);                                           \
        if (th_t_ != NULL) {                                                \
            th_test_fail(__FILE__, __LINE__, "%s should return NULL",       \
                         #expr);                                            \
            THTensor_release(th_t_);                                        \
        }                                                                   \
        CHECK_ERROR(kind, needle);                                          \
    } while (0)

/* Tensor geometry: sizes and strides equal to the given literal arrays. */
#define CHECK_SHAPE(t, ...)                                                 \
    th_check_i64s(__FILE__, __LINE__, #t " sizes", (t) ? (t)->ndim : -1,    \
                  (t) ? (t)->sizes : NULL,                                  \
                  (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                  (int64_t[]){__VA_ARGS__})
#define CHECK_STRIDES(t, ...)                                               \
    th_check_i64s(__FILE__, __LINE__, #t " strides", (t) ? (t)->ndim : -1,  \
                  (t) ? (t)->strides : NULL,                                \
                  (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                  (int64_t[]){__VA_ARGS__})
/* For a 0-dim tensor (the literal forms above need at least one value). */
#define CHECK_SCALAR_SHAPE(t) CHECK((t) != NULL && (t)->ndim == 0)

/* Values in row-major logical order equal the literal list (compared as
 * doubles, exactly). */
#define CHECK_VALUES(t, ...)                                                \
    th_check_values(__FILE__, __LINE__, #t, (t),                            \
                    (int64_t)(sizeof((double[]){__VA_ARGS__})               \
                              / sizeof(double)),                            \
                    (double[]){__VA_ARGS__})

/* checkInvariants holds (reports the TH message otherwise). */
#define CHECK_INVARIANTS(t)                                                 \
    do {                                                                    \
        THError_clear();                                                    \
        if ((t) == NULL) {                                                  \
            th_test_fail(__FILE__, __LINE__, "%s is NULL", #t);             \
        }                                                                   \
        else if (THTensor_checkInvariants(t) != 0) {                        \
            th_test_fail(__FILE__, __LINE__, "invariants of %s: %s", #t,    \
                         THError_message());                                \
            THError_clear();                                                \
        }                                                                   \
    } while (0)

/* ---- helpers (th_test_util.c) -------------------------------------------- */

void th_check_i64s(const char *file, int line, const char *what, int ndim,
                   const int64_t *got, int n, const int64_t *want);
void th_check_error(const char *file, int line, const char *kind_name,
                    THErrorKind kind, const char *needle);
void th_check_values(const char *file, int line, const char *what,
                     const THTensor *t, int64_t n, const double *want);

/* A contiguous CPU tensor of `dtype` holding 0, 1, 2, ... (numel values). */
THTensor *tt_arange(THDtype dtype, int ndim, const int64_t *sizes);
/* A contiguous CPU tensor holding `values` (converted by C casts). */
THTensor *tt_from(THDtype dtype, int ndim, const int64_t *sizes,
                  const double *values);
/* Element i in row-major logical order (follows strides), as a double. */
double tt_get(const THTensor *t, int64_t i);
/* The same element, for integer dtypes, as an exact int64. */
int64_t tt_get_int(const THTensor *t, int64_t i);
/* Writes element i in row-major logical order. */
void tt_set(THTensor *t, int64_t i, double value);
/* The tensor's version counter value. */
int64_t tt_version(const THTensor *t);
/* Fills every element with deterministic values in [-1, 1) drawn from `seed`. */
void tt_fill_pattern(THTensor *t, unsigned seed);
/* sum(a[i] * b[i]) over the elements, in double. */
double tt_dot(const THTensor *a, const THTensor *b);

/* Whether the upper halves of vector registers 0-15 are in use (their
 * XINUSE bits), false where the CPU cannot tell; and clears them
 * (vzeroupper) where it has AVX.  Note [Vector kernels call no plain
 * code] in THGeneral.h. */
bool th_vector_upper_in_use(void);
void th_clear_vector_upper(void);

/* Literal-array conveniences for sizes. */
#define TT_SIZES(...)                                                       \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),              \
        (int64_t[]){__VA_ARGS__}

#endif /* TH_TEST_H */

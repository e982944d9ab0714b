/*
 * THGeneral.h -- error reporting and checked arithmetic for the TH core.
 *
 * The TH core is plain C11 and never sees the Python interpreter.  It reports
 * failure the way C libraries do: a function returns a status (0 ok, -1
 * failed) or a NULL pointer, and leaves a message plus an error kind in a
 * thread-local slot.  The Python layer (c/python/) turns that slot into an
 * exception in exactly one place (THPUtils_setErrorFromTH).
 *
 * Nothing in the core calls abort() or exit(): a broken invariant is a bug we
 * want to see in a test, not a crashed interpreter.
 */
#ifndef TH_GENERAL_H
#define TH_GENERAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which Python exception an error becomes; the core only names the kind. */
typedef enum {
    TH_ERR_NONE = 0,
    TH_ERR_RUNTIME, /* RuntimeError: the operation is impossible here */
    TH_ERR_VALUE,   /* ValueError: an argument has a bad value */
    TH_ERR_TYPE,    /* TypeError: an argument has a bad type/dtype */
    TH_ERR_INDEX,   /* IndexError: an index or dim is out of range */
    TH_ERR_MEMORY,  /* MemoryError: an allocation failed or would overflow */
    TH_ERR_EXTERNAL, /* a plugged-in component (e.g. an allocator written in
                      * Python) failed and already reported the error in its
                      * own way; the message only summarises it */
} THErrorKind;

/* Records an error for the current thread; always returns -1 so callers can
 * write `return THError_set(...)`.  printf-style format. */
int THError_set(THErrorKind kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
THErrorKind THError_kind(void);
const char *THError_message(void);
void THError_clear(void);

/* Checked arithmetic on sizes: return false (and leave *out undefined) when
 * the exact result does not fit in an int64_t. */
static inline bool
TH_mul_overflows(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

static inline bool
TH_add_overflows(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

/* ceil(a / b) for a >= 0 and b > 0, without forming a + b - 1 (which
 * wraps for a near INT64_MAX: expand(2**62).split(2**63 - 1)). */
static inline int64_t
TH_ceilDiv(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

/* The largest byte count any single storage may have: well below SIZE_MAX and
 * INT64_MAX so that pointer arithmetic on it can never wrap. */
#define TH_MAX_NBYTES ((int64_t)1 << 52)

/* Note [Counts to bytes]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * Every place that turns an element count into a byte count for an
 * allocation goes through TH_arrayNbytes (scratch arrays) or
 * THTensor_checkedNbytes (tensor storage): a count taken from a tensor's
 * sizes can be anything up to INT64_MAX (zeros(1).expand(2**62) is a valid
 * view), and `count * itemsize` computed unchecked wraps to a small number,
 * so the allocation succeeds and the writes run past it. */

/* count * itemsize in *nbytes; false when count is negative or the product
 * exceeds TH_MAX_NBYTES (so it cannot wrap a size_t either). */
static inline bool
TH_arrayNbytes(int64_t count, size_t itemsize, size_t *nbytes)
{
    int64_t product;
    if (count < 0 || itemsize > (size_t)TH_MAX_NBYTES
        || TH_mul_overflows(count, (int64_t)itemsize, &product)
        || product > TH_MAX_NBYTES) {
        return false;
    }
    *nbytes = (size_t)product;
    return true;
}

/* malloc for `count` items of `itemsize` bytes (at least one byte, so a
 * zero count is not NULL); NULL with a MemoryError-kind error naming
 * `what` when the size does not fit or malloc fails. */
void *TH_mallocArray(int64_t count, size_t itemsize, const char *what);

/* Note [Dropping the last reference]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Tensors, storages, version counters and allocators are counted with
 * atomic increments and decrements, as any thread may hold them.  A locked
 * read-modify-write costs tens of cycles (it drains the store buffer), and
 * a fresh tensor freed by its only owner (empty(4), the header of a view)
 * paid one per object.  When the count reads 1, the caller holds the only
 * reference: no other thread can add one (that needs a reference to copy)
 * or drop one, so the object is freed without writing the count at all,
 * as PyTorch's intrusive_ptr does.  The load is an acquire, pairing with
 * the release half of the last other owner's decrement, so everything that
 * owner wrote happens before the free.  A freed header keeps its count of
 * 1; every allocation of one sets the count anew. */

/* Drops one reference from *refcount; true when it was the last one and
 * the caller must free the object. */
static inline bool
TH_dropReference(int *refcount)
{
    return __atomic_load_n(refcount, __ATOMIC_ACQUIRE) == 1
           || __atomic_sub_fetch(refcount, 1, __ATOMIC_ACQ_REL) == 0;
}

/* Note [Vector clones]
 * ~~~~~~~~~~~~~~~~~~~~~
 * The build targets baseline x86-64 (SSE2, 4 floats a vector) so one
 * binary runs everywhere.  gcc's target_clones compiles each loop twice,
 * once more for x86-64-v3 (AVX2 + FMA: 8 floats a vector), and picks the
 * copy for the running CPU when the library loads (an ifunc).  That more
 * than doubles the speed of the vectorised loops (exp: 2.4 -> 0.9 ns an
 * element) for about 300 KB of code.  Both copies compute the same bits:
 * the build turns off FMA contraction (Note [No FMA contraction] in
 * THFormulas.h).  THUnary.c's loops, the norm loops, THRNN.c's gate
 * kernels and THAttention.c use it.  TH_VECTOR_CLONES_AVX512 adds a third
 * copy for x86-64-v4 (AVX-512: 16 floats a vector), the same bits again;
 * the LSTM gate kernels, five exps and five divisions an element, use it:
 * on the Zen 4 (perf cpu-clock, one thread) it took their share of an LSTM
 * training step from 0.28 to 0.22 of the input projections' GEMMs. */
/* Note [Vector kernels call no plain code]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Code built for the baseline (SSE) must not run while the upper halves
 * of the vector registers 0-15 are in use: on the Zen 4 these numbers
 * come from, every SSE instruction then waits for the old value of its
 * register (it keeps the upper half), and a float32 mul_ over 100K
 * elements in L2 took 28.8 us instead of 7.1, until something ran
 * vzeroupper.  gcc puts vzeroupper at a wide function's exits and before
 * its calls, but not always once registers 16-31 are in play: the
 * AVX-512 micro-kernels called their plain partial-row store with the
 * uppers in use, and returned past their vzeroupper after it (gcc takes
 * the state after a call for clean).  A training step's SGD update, run
 * after the weight gradient's GEMM, took 58 us instead of 14.5.  So
 * THBlas's micro-kernels inline that store, and end with an explicit
 * vzeroupper (TH_LEAVE_WIDE_VECTORS), as do its other vector paths;
 * c/tests/test_blas.c reads the state (XINUSE, XGETBV with ECX = 1)
 * after every product of every family. */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) \
    && __GNUC__ >= 12
#define TH_VECTOR_CLONES \
    __attribute__((target_clones("arch=x86-64-v3", "default")))
#define TH_VECTOR_CLONES_AVX512 \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TH_VECTOR_CLONES
#define TH_VECTOR_CLONES_AVX512
#endif

#endif /* TH_GENERAL_H */

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

/* The largest byte count any single storage may have: well below SIZE_MAX and
 * INT64_MAX so that pointer arithmetic on it can never wrap. */
#define TH_MAX_NBYTES ((int64_t)1 << 52)

#endif /* TH_GENERAL_H */

/*
 * THGeneral.c -- the thread-local error slot of the TH core.
 * See THGeneral.h for the conventions.
 */
#include "THGeneral.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum { TH_ERROR_MESSAGE_SIZE = 512 };

static _Thread_local THErrorKind error_kind = TH_ERR_NONE;
static _Thread_local char error_message[TH_ERROR_MESSAGE_SIZE];

int
THError_set(THErrorKind kind, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(error_message, sizeof(error_message), fmt, args);
    va_end(args);
    error_kind = kind;
    return -1;
}

THErrorKind
THError_kind(void)
{
    return error_kind;
}

const char *
THError_message(void)
{
    return error_kind == TH_ERR_NONE ? "" : error_message;
}

void
THError_clear(void)
{
    error_kind = TH_ERR_NONE;
    error_message[0] = '\0';
}

void *
TH_mallocArray(int64_t count, size_t itemsize, const char *what)
{
    size_t nbytes;
    if (!TH_arrayNbytes(count, itemsize, &nbytes)) {
        THError_set(TH_ERR_MEMORY,
                    "%s: cannot allocate %lld items of %zu bytes (the size "
                    "overflows)",
                    what, (long long)count, itemsize);
        return NULL;
    }
    void *block = malloc(nbytes > 0 ? nbytes : 1);
    if (block == NULL) {
        THError_set(TH_ERR_MEMORY, "%s: out of memory for %lld items", what,
                    (long long)count);
    }
    return block;
}

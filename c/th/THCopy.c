/*
 * THCopy.c -- copy_ with broadcasting and dtype conversion, fill_, and the
 * factories that fill a fresh tensor (arange, linspace, eye).
 *
 * All of them run through THIter with one family of inner loops: the casts
 * from every dtype to every dtype, generated from the dtype X-macros (Note
 * [Dtype X-macro]).  fill_ is a copy from a one-element source with stride
 * 0, so there is exactly one way values get converted.
 */
#include "THIter.h"
#include "THTensor.h"

#include <stdlib.h>
#include <string.h>

/* ---- cast loops: cast_<Src>_to_<Dst>(data, strides, n, ctx) --------------- */

/* Contiguous float32 <-> 16-bit runs go to THHalf's bulk conversions (F16C
 * where the CPU has it).  Returns false for every other pair; it is inlined
 * into each generated loop with constant dtypes, so the test folds away. */
static inline bool
convert_bulk(THDtype src, THDtype dst, const void *in, void *out, int64_t n)
{
    if (src == TH_Float32 && dst == TH_Float16) {
        THHalf_fromFloatN(in, out, n);
    }
    else if (src == TH_Float16 && dst == TH_Float32) {
        THHalf_toFloatN(in, out, n);
    }
    else if (src == TH_Float32 && dst == TH_BFloat16) {
        THBFloat16_fromFloatN(in, out, n);
    }
    else if (src == TH_BFloat16 && dst == TH_Float32) {
        THBFloat16_toFloatN(in, out, n);
    }
    else {
        return false;
    }
    return true;
}

/* data[0]/strides[0] is the destination, data[1]/strides[1] the source.
 * The contiguous branch is the same loop again: with constant strides the
 * compiler can vectorise it.  Within one dtype the elements move as bits
 * (the test is a constant, so each loop keeps one branch): a round trip
 * through float would quiet a signalling float16 NaN and rewrite a
 * bfloat16 NaN's bits, where PyTorch's copy_ keeps every bit.
 *
 * A source of stride 0 under a contiguous destination is a fill (fill_,
 * and .contiguous() of an expanded tensor: the gradient of x.sum() as a
 * backward kernel reads it): one value converted once and stored by a
 * loop the compiler vectorises, where the strided loop would reload and
 * reconvert it per element (a 3 MB fill took ~7x as long). */
#define TH_DEFINE_CAST(Src, src_t, Dst, dst_t)                               \
    static void cast_##Src##_to_##Dst(char **data, const int64_t *strides, \
                                      int64_t n, void *ctx)                \
    {                                                                      \
        (void)ctx;                                                         \
        char *out = data[0];                                               \
        const char *in = data[1];                                          \
        if (strides[1] == 0 && strides[0] == sizeof(dst_t) && n > 0) {     \
            dst_t value;                                                   \
            if (TH_##Src == TH_##Dst) {                                    \
                memcpy(&value, in, sizeof(dst_t));                         \
            } else {                                                       \
                value = TH_CONVERT(Src, Dst, *(const src_t *)in);          \
            }                                                              \
            dst_t *o = (dst_t *)out;                                       \
            for (int64_t k = 0; k < n; k++) {                              \
                o[k] = value;                                              \
            }                                                              \
            return;                                                        \
        }                                                                  \
        if (TH_##Src == TH_##Dst) { /* src and dst are disjoint */         \
            if (strides[0] == sizeof(dst_t) && strides[1] == sizeof(dst_t)) { \
                memcpy(out, in, (size_t)n * sizeof(dst_t));                \
                return;                                                    \
            }                                                              \
            for (int64_t k = 0; k < n; k++) {                              \
                memcpy(out + k * strides[0], in + k * strides[1],          \
                       sizeof(dst_t));                                     \
            }                                                              \
            return;                                                        \
        }                                                                  \
        if (strides[0] == sizeof(dst_t) && strides[1] == sizeof(src_t)) {  \
            if (convert_bulk(TH_##Src, TH_##Dst, in, out, n)) {            \
                return;                                                    \
            }                                                              \
            dst_t *o = (dst_t *)out;                                       \
            const src_t *i = (const src_t *)in;                            \
            for (int64_t k = 0; k < n; k++) {                              \
                o[k] = TH_CONVERT(Src, Dst, i[k]);                         \
            }                                                              \
            return;                                                        \
        }                                                                  \
        for (int64_t k = 0; k < n; k++) {                                  \
            *(dst_t *)(out + k * strides[0]) =                             \
                TH_CONVERT(Src, Dst, *(const src_t *)(in + k * strides[1])); \
        }                                                                  \
    }

/* Every (Src, Dst) pair: the outer list picks Src, the inner one Dst. */
#define TH_DEFINE_CAST_PAIR(src, Dst, dst_t, py) \
    TH_APPLY(TH_DEFINE_CAST, TH_UNPAREN src, Dst, dst_t)
#define TH_DEFINE_CASTS_FROM(Src, src_t, py) \
    TH_FORALL_DTYPES_INNER(TH_DEFINE_CAST_PAIR, (Src, src_t))
TH_FORALL_DTYPES(TH_DEFINE_CASTS_FROM)

/* cast_loops[src][dst], in enum order. */
#define TH_CAST_ENTRY(src, Dst, dst_t, py) \
    TH_APPLY(TH_CAST_NAME, TH_UNPAREN src, Dst),
#define TH_CAST_NAME(Src, Dst) cast_##Src##_to_##Dst
#define TH_CAST_ROW(Src, src_t, py) \
    {TH_FORALL_DTYPES_INNER(TH_CAST_ENTRY, (Src))},
static const THLoop cast_loops[TH_NUM_DTYPES][TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_CAST_ROW)
};

/* ---- copy ------------------------------------------------------------------ */

int
THTensor_checkWritable(const THTensor *tensor)
{
    if (tensor->storage->read_only) {
        return THError_set(TH_ERR_RUNTIME,
                           "cannot write to a read-only tensor: its memory "
                           "was lent read-only (e.g. by a non-writeable NumPy "
                           "array); use .clone() to get a writable copy");
    }
    return 0;
}

/* Refuses writes through a tensor in which several elements share one
 * memory location (an expanded dim): the result would depend on order. */
int
THTensor_checkNoInternalOverlap(const THTensor *tensor)
{
    if (tensor->numel == 0) {
        return 0; /* nothing is written (PyTorch: empty means no overlap) */
    }
    for (int d = 0; d < tensor->ndim; d++) {
        if (tensor->strides[d] == 0 && tensor->sizes[d] > 1) {
            return THError_set(TH_ERR_RUNTIME,
                               "unsupported operation: more than one element "
                               "of the written-to tensor refers to a single "
                               "memory location. Please clone() the tensor "
                               "before performing the operation.");
        }
    }
    return 0;
}

/* The byte range [lo, hi) a tensor can touch. */
static void
memory_span(const THTensor *tensor, uintptr_t *lo, uintptr_t *hi)
{
    int64_t last = 0;
    for (int d = 0; d < tensor->ndim; d++) {
        last += (tensor->sizes[d] - 1) * tensor->strides[d];
    }
    *lo = (uintptr_t)THTensor_data(tensor);
    *hi = *lo + (uintptr_t)((last + 1) * THTensor_itemsize(tensor));
}

bool
THTensor_mayOverlap(const THTensor *a, const THTensor *b)
{
    uintptr_t alo, ahi, blo, bhi;
    if (a->numel == 0 || b->numel == 0) {
        return false;
    }
    memory_span(a, &alo, &ahi);
    memory_span(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

bool
THTensor_overlapsPartially(const THTensor *output, const THTensor *input)
{
    return THTensor_mayOverlap(output, input)
           && !THTensor_isSameView(output, input);
}

int
THTensor_checkNoOverlap(const THTensor *written, const THTensor *input)
{
    if (!THTensor_isNonOverlappingAndDense(written)
        || !THTensor_isNonOverlappingAndDense(input)
        || !THTensor_mayOverlap(written, input)) {
        return 0;
    }
    return THError_set(TH_ERR_RUNTIME,
                       "unsupported operation: some elements of the input "
                       "tensor and the written-to tensor refer to a single "
                       "memory location. Please clone() the tensor before "
                       "performing the operation.");
}

/* The copy itself, once overlap is ruled out. */
static int
copy_disjoint(THTensor *dst, THTensor *src)
{
    THIter iter;
    THTensor *operands[2] = {dst, src};
    if (THIter_init(&iter, 2, operands) < 0) {
        return -1;
    }
    THIter_run(&iter, cast_loops[src->dtype][dst->dtype], NULL);
    return 0;
}

int
THTensor_copy(THTensor *dst, THTensor *src)
{
    if (THTensor_checkWritable(dst) < 0
        || THTensor_checkNoInternalOverlap(dst) < 0) {
        return -1;
    }
    if (THTensor_isSameView(dst, src)) {
        THTensor_bumpVersion(dst);
        return 0;
    }
    int status;
    if (THTensor_mayOverlap(dst, src)) {
        /* Like NumPy, read the source before writing anything: copy it
         * aside first (PyTorch raises instead). */
        THTensor *aside = THTensor_newClone(src);
        if (aside == NULL) {
            return -1;
        }
        status = copy_disjoint(dst, aside);
        THTensor_release(aside);
    }
    else {
        status = copy_disjoint(dst, src);
    }
    if (status == 0) {
        THTensor_bumpVersion(dst);
    }
    return status;
}

/* A new tensor (row-major, or laid out like `tensor`) holding tensor's
 * values converted to dtype. */
static THTensor *
copy_into_new(THTensor *tensor, THDtype dtype, bool row_major)
{
    THTensor *copy =
        row_major ? THTensor_newEmpty(tensor->ndim, tensor->sizes, dtype,
                                      tensor->storage->device)
                  : THTensor_newEmptyLike(tensor, dtype);
    if (copy == NULL) {
        return NULL;
    }
    if (copy_disjoint(copy, tensor) < 0) {
        THTensor_release(copy);
        return NULL;
    }
    return copy;
}

THTensor *
THTensor_newClone(THTensor *tensor)
{
    return copy_into_new(tensor, tensor->dtype, false);
}

THTensor *
THTensor_newContiguous(THTensor *tensor)
{
    if (tensor->is_contiguous) {
        THTensor_retain(tensor);
        return tensor;
    }
    return copy_into_new(tensor, tensor->dtype, true);
}

THTensor *
THTensor_newCast(THTensor *tensor, THDtype dtype, bool copy)
{
    if (!THDtype_isValid(dtype)) {
        THError_set(TH_ERR_TYPE, "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (tensor->dtype == dtype && !copy) {
        THTensor_retain(tensor);
        return tensor;
    }
    return copy_into_new(tensor, dtype, false);
}

int
THTensor_convertOwned(THTensor **tensor, THDtype dtype)
{
    if (*tensor == NULL || (*tensor)->dtype == dtype) {
        return *tensor == NULL ? -1 : 0;
    }
    THTensor *converted = THTensor_newCast(*tensor, dtype, false);
    THTensor_release(*tensor);
    *tensor = converted;
    return converted == NULL ? -1 : 0;
}

/* ---- fill ------------------------------------------------------------------ */

/* A 0-dim tensor header over a scalar that lives on the C stack.  It is only
 * ever a source of copy_disjoint, never retained or released. */
static void
scalar_view(THScalar *value, THStorage *storage, THTensor *view)
{
    memset(storage, 0, sizeof(*storage));
    storage->refcount = 1;
    storage->data = &value->value;
    storage->nbytes = THDtype_itemsize(value->dtype);
    memset(view, 0, sizeof(*view));
    view->refcount = 1;
    view->dtype = value->dtype;
    view->storage = storage;
    view->numel = 1;
    view->is_contiguous = true;
}

int
THTensor_fill(THTensor *tensor, THScalar value)
{
    THStorage storage;
    THTensor source;
    if (THTensor_checkWritable(tensor) < 0
        || THTensor_checkNoInternalOverlap(tensor) < 0
        || THScalar_checkFits(value, tensor->dtype) < 0) {
        return -1;
    }
    scalar_view(&value, &storage, &source);
    if (copy_disjoint(tensor, &source) < 0) {
        return -1;
    }
    THTensor_bumpVersion(tensor);
    return 0;
}

/* ---- factories ------------------------------------------------------------- */

/* Writes `value` as element i of a contiguous tensor of any dtype. */
#define TH_STORE_CASE(Name, ctype, py)                 \
    case TH_##Name:                                    \
        ((ctype *)base)[i] = TH_FROM_FLOAT_##Name(value); \
        break;

static void
store_double(THTensor *tensor, int64_t i, double value)
{
    char *base = THTensor_data(tensor);
    switch (tensor->dtype) {
        TH_FORALL_DTYPES(TH_STORE_CASE)
    default:
        break;
    }
}

static void
store_int(THTensor *tensor, int64_t i, int64_t value)
{
    char *base = THTensor_data(tensor);
    switch (tensor->dtype) {
        TH_FORALL_DTYPES(TH_STORE_CASE)
    default:
        break;
    }
}
#undef TH_STORE_CASE

static double
scalar_as_double(THScalar s)
{
    switch (s.dtype) {
    case TH_Bool: return s.value.b;
    case TH_Int64: return (double)s.value.i;
    default: return s.value.d;
    }
}

/* The exact integer value of a bool or int scalar (a bool scalar only
 * initialises the first byte of the union, so value.i would read garbage). */
static int64_t
scalar_as_int(THScalar s)
{
    return s.dtype == TH_Bool ? (int64_t)s.value.b : s.value.i;
}

static int
check_fresh(const THTensor *tensor)
{
    if (!tensor->is_contiguous) {
        return THError_set(TH_ERR_RUNTIME,
                           "factory fill needs a contiguous tensor");
    }
    return THTensor_checkWritable(tensor);
}

int
THTensor_arange(THTensor *tensor, THScalar start, THScalar step)
{
    if (check_fresh(tensor) < 0) {
        return -1;
    }
    bool exact_ints = start.dtype != TH_Float64 && step.dtype != TH_Float64
                      && THDtype_isIntegral(tensor->dtype, false);
    int64_t start_i = exact_ints ? scalar_as_int(start) : 0;
    int64_t step_i = exact_ints ? scalar_as_int(step) : 0;
    for (int64_t i = 0; i < tensor->numel; i++) {
        if (exact_ints) {
            /* in uint64: wraps like int64 tensor arithmetic instead of
             * overflowing (undefined behaviour) on absurd inputs */
            store_int(tensor, i,
                      (int64_t)((uint64_t)start_i
                                + (uint64_t)i * (uint64_t)step_i));
        }
        else {
            store_double(tensor, i,
                         scalar_as_double(start)
                             + (double)i * scalar_as_double(step));
        }
    }
    return 0;
}

/* An interpolated value of linspace: ends that fit int64 can still round
 * to 2^63 in double (linspace(0, 2**63 - 1, 3)), whose cast to int64 is
 * undefined; it saturates instead. */
static void
store_interpolated(THTensor *tensor, int64_t i, double value)
{
    if (tensor->dtype == TH_Int64 && value >= 9223372036854775808.0) {
        store_int(tensor, i, INT64_MAX);
    }
    else {
        store_double(tensor, i, value);
    }
}

int
THTensor_linspace(THTensor *tensor, double start, double end)
{
    if (check_fresh(tensor) < 0) {
        return -1;
    }
    int64_t steps = tensor->numel;
    if (steps == 1) {
        store_interpolated(tensor, 0, start);
    }
    else if (steps > 1) {
        /* PyTorch fills symmetrically from both ends, so the last element
         * is exactly `end` and rounding errors mirror around the middle. */
        double step = (end - start) / (double)(steps - 1);
        int64_t half = steps / 2;
        for (int64_t i = 0; i < steps; i++) {
            double v = i < half ? start + step * (double)i
                                : end - step * (double)(steps - 1 - i);
            store_interpolated(tensor, i, v);
        }
    }
    return 0;
}

int
THTensor_eye(THTensor *tensor)
{
    if (check_fresh(tensor) < 0) {
        return -1;
    }
    if (tensor->ndim != 2) {
        return THError_set(TH_ERR_RUNTIME, "eye needs a 2-d tensor");
    }
    if (tensor->numel == 0) {
        return 0; /* data may be NULL: memset(NULL, 0, 0) is undefined */
    }
    memset(THTensor_data(tensor), 0,
           (size_t)(tensor->numel * THTensor_itemsize(tensor)));
    int64_t rows = tensor->sizes[0], cols = tensor->sizes[1];
    int64_t diag = rows < cols ? rows : cols;
    for (int64_t i = 0; i < diag; i++) {
        store_int(tensor, i * cols + i, 1);
    }
    return 0;
}

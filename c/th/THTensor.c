/*
 * THTensor.c -- creation, lifetime, geometry and views of tensors.
 * The invariants are listed in THTensor.h; copies live in THCopy.c.
 */
#include "THTensor.h"

#include "THHeaderCache.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- scalars -------------------------------------------------------------- */

THScalar
THScalar_fromBool(bool b)
{
    THScalar s = {.dtype = TH_Bool, .value.b = b};
    return s;
}

THScalar
THScalar_fromInt(int64_t i)
{
    THScalar s = {.dtype = TH_Int64, .value.i = i};
    return s;
}

THScalar
THScalar_fromDouble(double d)
{
    THScalar s = {.dtype = TH_Float64, .value.d = d};
    return s;
}

/* The range of each integral dtype, as doubles (exact: all are < 2^63). */
#define TH_RANGE_CASE(Name, lo, hi) \
    case TH_##Name: *min = (lo); *max = (hi); return;

static void
integral_range(THDtype dtype, double *min, double *max)
{
    switch (dtype) {
        TH_RANGE_CASE(UInt8, 0.0, 255.0)
        TH_RANGE_CASE(Int8, -128.0, 127.0)
        TH_RANGE_CASE(Int16, -32768.0, 32767.0)
        TH_RANGE_CASE(Int32, -2147483648.0, 2147483647.0)
    default:
        /* int64: every Int64 scalar fits; doubles must be < 2^63 */
        *min = -9223372036854775808.0;
        *max = 9223372036854775807.0;
        return;
    }
}
#undef TH_RANGE_CASE

int
THScalar_checkFits(THScalar value, THDtype dtype)
{
    bool fits = true;
    if (value.dtype == TH_Bool || dtype == TH_Bool || dtype == TH_Float64) {
        return 0;
    }
    if (THDtype_isFloating(dtype)) {
        /* a finite value past the dtype's largest one overflows (it would
         * round to inf); inf and NaN themselves fit */
        double d = value.dtype == TH_Float64 ? value.value.d
                                             : (double)value.value.i;
        fits = !(isfinite(d) && fabs(d) > THDtype_floatingMax(dtype));
    }
    else if (value.dtype == TH_Int64) {
        double min, max;
        integral_range(dtype, &min, &max);
        /* uint8 also takes -255..-1, which wrap (PyTorch's fill_(-1)) */
        if (dtype == TH_UInt8) {
            min = -255.0;
        }
        fits = dtype == TH_Int64
               || (value.value.i >= (int64_t)min
                   && value.value.i <= (int64_t)max);
    }
    else {
        /* A double fits when it lies in [min, max] (PyTorch: 127.5 does
         * not fit int8, -1.0 does not fit uint8, -2.5 fits int32).  The
         * int64 bound 2^63 is max rounded up, and does not fit. */
        double min, max, d = value.value.d;
        integral_range(dtype, &min, &max);
        fits = d >= min
               && (dtype == TH_Int64 ? d < 9223372036854775808.0 : d <= max);
    }
    if (!fits) {
        return THError_set(TH_ERR_RUNTIME,
                           "value cannot be converted to type %s without "
                           "overflow",
                           THDtype_isHalf(dtype) ? THDtype_cppTypeName(dtype)
                                                 : THDtype_name(dtype));
    }
    return 0;
}

/* ---- version counters ------------------------------------------------------ */

static THVersionCounter *
version_counter_new(void)
{
    THVersionCounter *counter = THHeader_alloc(TH_HEADER_VERSION_COUNTER);
    if (counter == NULL) {
        return NULL;
    }
    counter->refcount = 1;
    counter->version = 0;
    return counter;
}

static void
version_counter_release(THVersionCounter *counter)
{
    if (counter != NULL && TH_dropReference(&counter->refcount)) {
        THHeader_free(TH_HEADER_VERSION_COUNTER, counter);
    }
}

void
THTensor_bumpVersion(THTensor *tensor)
{
    __atomic_add_fetch(&tensor->version_counter->version, 1,
                       __ATOMIC_RELAXED);
}

/* ---- geometry helpers ------------------------------------------------------ */

/* a * b for non-negative a and b, saturating at INT64_MAX instead of
 * overflowing.  Used only for strides that nothing is ever read through (a
 * dim of a zero-element tensor, or of size <= 1), where any non-negative
 * value is right but a wrapped, negative one would break the invariants. */
static int64_t
mul_saturating(int64_t a, int64_t b)
{
    int64_t out;
    return TH_mul_overflows(a, b, &out) ? INT64_MAX : out;
}

const char *
THTensor_formatSizes(char *buf, size_t buflen, int ndim, const int64_t *sizes)
{
    size_t used = (size_t)snprintf(buf, buflen, "[");
    for (int d = 0; d < ndim && used < buflen; d++) {
        used += (size_t)snprintf(buf + used, buflen - used, "%s%lld",
                                 d ? ", " : "", (long long)sizes[d]);
    }
    if (used < buflen) {
        snprintf(buf + used, buflen - used, "]");
    }
    return buf;
}

int
THTensor_wrapDimError(int64_t dim, int ndim)
{
    int64_t range = ndim > 0 ? ndim : 1;
    return THError_set(TH_ERR_INDEX,
                       "Dimension out of range (expected to be in range of "
                       "[%lld, %lld], but got %lld)",
                       (long long)-range, (long long)(range - 1),
                       (long long)dim);
}

static int
check_ndim(int ndim)
{
    if (ndim < 0 || ndim > TH_MAX_DIMS) {
        return THError_set(TH_ERR_VALUE,
                           "ember tensors have at most %d dimensions, got %d",
                           TH_MAX_DIMS, ndim);
    }
    return 0;
}

int
THTensor_checkedNumel(int ndim, const int64_t *sizes, int64_t *numel)
{
    char buf[256];
    int64_t n = 1;
    if (check_ndim(ndim) < 0) {
        return -1;
    }
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0) {
            return THError_set(TH_ERR_RUNTIME,
                               "Trying to create tensor with negative "
                               "dimension %lld: %s",
                               (long long)sizes[d],
                               THTensor_formatSizes(buf, sizeof(buf), ndim, sizes));
        }
    }
    for (int d = 0; d < ndim; d++) {
        if (TH_mul_overflows(n, sizes[d], &n)) {
            return THError_set(TH_ERR_RUNTIME,
                               "Storage size calculation overflowed with "
                               "sizes=%s",
                               THTensor_formatSizes(buf, sizeof(buf), ndim, sizes));
        }
    }
    *numel = n;
    return 0;
}

int
THTensor_checkedNbytes(int ndim, const int64_t *sizes, THDtype dtype,
                       int64_t *nbytes)
{
    char buf[256];
    int64_t numel;
    if (THTensor_checkedNumel(ndim, sizes, &numel) < 0) {
        return -1;
    }
    if (TH_mul_overflows(numel, THDtype_itemsize(dtype), nbytes)) {
        return THError_set(TH_ERR_RUNTIME,
                           "Storage size calculation overflowed with "
                           "sizes=%s",
                           THTensor_formatSizes(buf, sizeof(buf), ndim,
                                                sizes));
    }
    return 0;
}

void
THTensor_contiguousStrides(int ndim, const int64_t *sizes, int64_t *strides)
{
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = stride;
        stride = mul_saturating(stride, sizes[d] > 1 ? sizes[d] : 1);
    }
}

static bool
compute_is_contiguous(int ndim, const int64_t *sizes, const int64_t *strides)
{
    int64_t expected = 1;
    bool dense = true;
    /* One pass, innermost dim first.  An empty tensor is contiguous
     * whatever its strides (PyTorch's compute_contiguous), so a 0 in any
     * dim decides even after a stride has not matched. */
    for (int d = ndim - 1; d >= 0; d--) {
        if (sizes[d] == 0) {
            return true;
        }
        if (sizes[d] != 1) {
            dense = dense && strides[d] == expected;
            expected = mul_saturating(expected, sizes[d]);
        }
    }
    return dense;
}

void
THTensor_refreshGeometry(THTensor *tensor)
{
    int64_t numel = 1;
    for (int d = 0; d < tensor->ndim; d++) {
        numel *= tensor->sizes[d];
    }
    tensor->numel = numel;
    tensor->is_contiguous = compute_is_contiguous(tensor->ndim, tensor->sizes,
                                                  tensor->strides);
}

/* Checks that (offset, sizes, strides) stays inside `nbytes` of storage
 * with no overflow on the way.  Strides must be non-negative. */
static int
check_in_bounds(int64_t nbytes, int64_t offset, int ndim,
                const int64_t *sizes, const int64_t *strides,
                int64_t itemsize)
{
    char sizes_buf[200], strides_buf[200];
    int64_t numel;
    if (THTensor_checkedNumel(ndim, sizes, &numel) < 0) {
        return -1;
    }
    if (offset < 0) {
        return THError_set(TH_ERR_RUNTIME,
                           "Tensor: invalid storage offset %lld",
                           (long long)offset);
    }
    for (int d = 0; d < ndim; d++) {
        if (strides[d] < 0) {
            return THError_set(TH_ERR_RUNTIME,
                               "as_strided: Negative strides are not "
                               "supported at the moment, got strides: %s",
                               THTensor_formatSizes(strides_buf, sizeof(strides_buf),
                                            ndim, strides));
        }
    }
    if (numel == 0) {
        return 0;
    }
    /* last = offset + sum (size-1)*stride; needed = (last + 1) * itemsize */
    int64_t last = offset, step, needed;
    bool overflow = false;
    for (int d = 0; d < ndim && !overflow; d++) {
        overflow = TH_mul_overflows(sizes[d] - 1, strides[d], &step)
                   || TH_add_overflows(last, step, &last);
    }
    overflow = overflow || TH_add_overflows(last, 1, &needed)
               || TH_mul_overflows(needed, itemsize, &needed);
    if (overflow || needed > nbytes) {
        return THError_set(TH_ERR_RUNTIME,
                           "setStorage: sizes %s, strides %s, storage offset "
                           "%lld, and itemsize %lld requiring a storage size "
                           "of %lld are out of bounds for storage of size "
                           "%lld",
                           THTensor_formatSizes(sizes_buf, sizeof(sizes_buf), ndim,
                                        sizes),
                           THTensor_formatSizes(strides_buf, sizeof(strides_buf),
                                        ndim, strides),
                           (long long)offset, (long long)itemsize,
                           overflow ? (long long)-1 : (long long)needed,
                           (long long)nbytes);
    }
    return 0;
}

int
THTensor_checkInvariants(const THTensor *tensor)
{
    int64_t numel;
    if (tensor->refcount < 1 || tensor->storage == NULL
        || tensor->version_counter == NULL
        || !THDtype_isValid(tensor->dtype)) {
        return THError_set(TH_ERR_RUNTIME, "tensor header is corrupt");
    }
    if (check_in_bounds(tensor->storage->nbytes, tensor->storage_offset,
                        tensor->ndim, tensor->sizes, tensor->strides,
                        THTensor_itemsize(tensor))
        < 0) {
        return -1;
    }
    THTensor_checkedNumel(tensor->ndim, tensor->sizes, &numel);
    if (numel != tensor->numel) {
        return THError_set(TH_ERR_RUNTIME, "cached numel %lld != %lld",
                           (long long)tensor->numel, (long long)numel);
    }
    if (tensor->is_contiguous
        != compute_is_contiguous(tensor->ndim, tensor->sizes,
                                 tensor->strides)) {
        return THError_set(TH_ERR_RUNTIME, "cached is_contiguous is stale");
    }
    return 0;
}

bool
THTensor_isSameView(const THTensor *a, const THTensor *b)
{
    return a->storage == b->storage && a->dtype == b->dtype
           && a->storage_offset == b->storage_offset && a->ndim == b->ndim
           && memcmp(a->sizes, b->sizes, sizeof(int64_t) * a->ndim) == 0
           && memcmp(a->strides, b->strides, sizeof(int64_t) * a->ndim) == 0;
}

int
THTensor_inferSize(int ndim, int64_t *sizes, int64_t numel)
{
    char buf[256];
    int infer_dim = -1;
    int64_t known = 1;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == -1) {
            if (infer_dim >= 0) {
                return THError_set(TH_ERR_RUNTIME,
                                   "only one dimension can be inferred");
            }
            infer_dim = d;
        }
        else if (sizes[d] < 0) {
            return THError_set(TH_ERR_RUNTIME,
                               "invalid shape dimension %lld",
                               (long long)sizes[d]);
        }
        else if (TH_mul_overflows(known, sizes[d], &known)) {
            return THError_set(TH_ERR_RUNTIME,
                               "shape %s is too large",
                               THTensor_formatSizes(buf, sizeof(buf), ndim, sizes));
        }
    }
    if (infer_dim >= 0 && known != 0 && numel % known == 0) {
        sizes[infer_dim] = numel / known;
        return 0;
    }
    if (infer_dim < 0 && known == numel) {
        return 0;
    }
    if (infer_dim >= 0 && known == 0 && numel == 0) {
        return THError_set(TH_ERR_RUNTIME,
                           "cannot reshape tensor of 0 elements into shape "
                           "%s because the unspecified dimension size -1 "
                           "can be any value and is ambiguous",
                           THTensor_formatSizes(buf, sizeof(buf), ndim, sizes));
    }
    return THError_set(TH_ERR_RUNTIME,
                       "shape '%s' is invalid for input of size %lld",
                       THTensor_formatSizes(buf, sizeof(buf), ndim, sizes),
                       (long long)numel);
}

/* ---- creation and lifetime ------------------------------------------------- */

static THTensor *
tensor_alloc_header(void)
{
    /* Note [Header free lists]: usually last freed tensor's header */
    THTensor *tensor = THHeader_alloc(TH_HEADER_TENSOR);
    if (tensor == NULL) {
        return NULL;
    }
    tensor->refcount = 1;
    return tensor;
}

/* The header of a new tensor on `storage` with a fresh version counter.
 * Takes over the caller's reference to the storage (released on failure):
 * a fresh storage passes straight to its tensor, with no retain and
 * release around it.  No checks: the caller has validated the geometry,
 * or made it itself (a fresh allocation is in bounds by construction).
 * `contiguous`: the caller made the strides row-major itself, so only
 * numel is left to compute. */
static THTensor *
tensor_taking_storage(THStorage *storage, int64_t offset, int ndim,
                      const int64_t *sizes, const int64_t *strides,
                      THDtype dtype, bool contiguous)
{
    THTensor *tensor = tensor_alloc_header();
    THVersionCounter *counter = version_counter_new();
    if (tensor == NULL || counter == NULL) {
        THHeader_free(TH_HEADER_TENSOR, tensor);
        version_counter_release(counter);
        THStorage_release(storage);
        return NULL;
    }
    tensor->storage = storage;
    tensor->version_counter = counter;
    tensor->storage_offset = offset;
    tensor->dtype = dtype;
    tensor->ndim = ndim;
    if (ndim > 0) { /* sizes may be NULL for a 0-dim tensor */
        memcpy(tensor->sizes, sizes, sizeof(int64_t) * ndim);
        memcpy(tensor->strides, strides, sizeof(int64_t) * ndim);
    }
    if (contiguous) {
        int64_t numel = 1;
        for (int d = 0; d < ndim; d++) {
            numel *= sizes[d];
        }
        tensor->numel = numel;
        tensor->is_contiguous = true;
    }
    else {
        THTensor_refreshGeometry(tensor);
    }
    return tensor;
}

THTensor *
THTensor_newWithStorage(THStorage *storage, int64_t offset, int ndim,
                        const int64_t *sizes, const int64_t *strides,
                        THDtype dtype)
{
    int64_t contiguous[TH_MAX_DIMS];
    if (!THDtype_isValid(dtype)) {
        THError_set(TH_ERR_TYPE, "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (check_ndim(ndim) < 0) {
        return NULL;
    }
    if (strides == NULL) {
        THTensor_contiguousStrides(ndim, sizes, contiguous);
        strides = contiguous;
    }
    if (check_in_bounds(storage->nbytes, offset, ndim, sizes, strides,
                        THDtype_itemsize(dtype))
        < 0) {
        return NULL;
    }
    THStorage_retain(storage); /* the new tensor's reference */
    return tensor_taking_storage(storage, offset, ndim, sizes, strides,
                                 dtype, false);
}

THTensor *
THTensor_newEmpty(int ndim, const int64_t *sizes, THDtype dtype,
                  THDeviceType device)
{
    int64_t nbytes;
    if (!THDtype_isValid(dtype)) {
        THError_set(TH_ERR_TYPE, "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (THTensor_checkedNbytes(ndim, sizes, dtype, &nbytes) < 0) {
        return NULL;
    }
    THStorage *storage = THStorage_new(nbytes, device);
    if (storage == NULL) {
        return NULL;
    }
    int64_t strides[TH_MAX_DIMS];
    THTensor_contiguousStrides(ndim, sizes, strides);
    return tensor_taking_storage(storage, 0, ndim, sizes, strides, dtype,
                                 true);
}

/* perm[0..ndim) lists the dims from the largest stride to the smallest
 * (outermost in memory first); ties keep the dims' own order. */
static void
stride_order(const THTensor *tensor, int *perm)
{
    for (int i = 0; i < tensor->ndim; i++) {
        int d = i, j = i - 1;
        while (j >= 0 && tensor->strides[perm[j]] < tensor->strides[d]) {
            perm[j + 1] = perm[j];
            j--;
        }
        perm[j + 1] = d;
    }
}

/* True when the elements tile one block of memory exactly, in some dim
 * order: no gaps, no element reached twice. */
bool
THTensor_isNonOverlappingAndDense(const THTensor *tensor)
{
    int perm[TH_MAX_DIMS];
    int64_t expected = 1;
    if (tensor->numel == 0) {
        return true; /* no element at all (PyTorch: randn(3, 0) is dense) */
    }
    stride_order(tensor, perm);
    for (int i = tensor->ndim - 1; i >= 0; i--) {
        int64_t size = tensor->sizes[perm[i]];
        if (size == 1) {
            continue;
        }
        if (tensor->strides[perm[i]] != expected) {
            return false;
        }
        expected *= size;
    }
    return true;
}

THTensor *
THTensor_newEmptyLike(const THTensor *tensor, THDtype dtype)
{
    return THTensor_newEmptyLikeOn(tensor, dtype, tensor->storage->device);
}

THTensor *
THTensor_newEmptyLikeOn(const THTensor *tensor, THDtype dtype,
                        THDeviceType device)
{
    int64_t strides[TH_MAX_DIMS], nbytes;
    if (tensor->numel == 0) {
        return THTensor_newEmpty(tensor->ndim, tensor->sizes, dtype, device);
    }
    /* A view's numel fits an int64 but its bytes may not (expand(2**62));
     * checked before the strides below multiply the sizes together. */
    if (THTensor_checkedNbytes(tensor->ndim, tensor->sizes, dtype, &nbytes)
        < 0) {
        return NULL;
    }
    if (THTensor_isNonOverlappingAndDense(tensor)) {
        memcpy(strides, tensor->strides, sizeof(int64_t) * tensor->ndim);
    }
    else {
        int perm[TH_MAX_DIMS];
        int64_t running = 1;
        stride_order(tensor, perm);
        for (int i = tensor->ndim - 1; i >= 0; i--) {
            strides[perm[i]] = running;
            running *= tensor->sizes[perm[i]];
        }
    }
    THStorage *storage = THStorage_new(nbytes, device);
    if (storage == NULL) {
        return NULL;
    }
    return tensor_taking_storage(storage, 0, tensor->ndim, tensor->sizes,
                                 strides, dtype, false);
}

void
THTensor_retain(THTensor *tensor)
{
    __atomic_add_fetch(&tensor->refcount, 1, __ATOMIC_RELAXED);
}

void
THTensor_release(THTensor *tensor)
{
    if (tensor == NULL) {
        return;
    }
    if (!TH_dropReference(&tensor->refcount)) {
        return;
    }
    THStorage_release(tensor->storage);
    version_counter_release(tensor->version_counter);
    THHeader_free(TH_HEADER_TENSOR, tensor);
}

/* ---- views ----------------------------------------------------------------- */

/* A new tensor header that shares base's storage and version counter (both
 * retained), with base's offset; the caller fills in the geometry. */
static THTensor *
share_base(THTensor *base)
{
    THTensor *view = tensor_alloc_header();
    if (view == NULL) {
        return NULL;
    }
    THStorage_retain(base->storage);
    __atomic_add_fetch(&base->version_counter->refcount, 1,
                       __ATOMIC_RELAXED);
    view->storage = base->storage;
    view->version_counter = base->version_counter;
    view->storage_offset = base->storage_offset;
    view->dtype = base->dtype;
    return view;
}

/* A new tensor header on base's storage and version counter with the given
 * geometry, of `numel` elements (the caller knows: a view or a reshape of
 * base has base's).  The caller guarantees the geometry is in bounds
 * (derived from base's own); as_strided checks it before calling. */
static THTensor *
make_view_of_numel(THTensor *base, int64_t offset, int ndim,
                   const int64_t *sizes, const int64_t *strides,
                   int64_t numel)
{
    THTensor *view = share_base(base);
    if (view == NULL) {
        return NULL;
    }
    view->storage_offset = offset;
    view->ndim = ndim;
    if (ndim > 0) { /* sizes may be NULL for a 0-dim view */
        memcpy(view->sizes, sizes, sizeof(int64_t) * ndim);
        memcpy(view->strides, strides, sizeof(int64_t) * ndim);
    }
    view->numel = numel;
    view->is_contiguous = compute_is_contiguous(ndim, view->sizes,
                                                view->strides);
    return view;
}

static THTensor *
make_view(THTensor *base, int64_t offset, int ndim, const int64_t *sizes,
          const int64_t *strides)
{
    int64_t numel;
    /* Also catches an element count beyond int64 (expand can ask for one). */
    if (THTensor_checkedNumel(ndim, sizes, &numel) < 0) {
        return NULL;
    }
    return make_view_of_numel(base, offset, ndim, sizes, strides, numel);
}

/* A view with base's own geometry, copied as it is (nothing to check):
 * the start of the views that then edit one or two dims in place, such as
 * a slice or a transpose, which call THTensor_refreshGeometry after. */
THTensor *
THTensor_newAlias(THTensor *tensor)
{
    THTensor *view = share_base(tensor);
    if (view == NULL) {
        return NULL;
    }
    view->ndim = tensor->ndim;
    memcpy(view->sizes, tensor->sizes, sizeof(int64_t) * tensor->ndim);
    memcpy(view->strides, tensor->strides, sizeof(int64_t) * tensor->ndim);
    view->numel = tensor->numel;
    view->is_contiguous = tensor->is_contiguous;
    return view;
}

/* Strides that let `new_sizes` view memory laid out as (sizes, strides), or
 * false when no such strides exist (PyTorch's computeStride): the old dims
 * are split into chunks that are contiguous among themselves, and each
 * chunk must be covered exactly by a run of new dims. */
static bool
compute_view_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                     int64_t numel, int new_ndim, const int64_t *new_sizes,
                     int64_t *new_strides)
{
    if (numel == 0 && new_ndim == ndim
        && memcmp(sizes, new_sizes, sizeof(int64_t) * ndim) == 0) {
        /* An empty tensor viewed as its own shape keeps its strides, as
         * in PyTorch (an expanded zeros(1).expand(0) keeps stride 0). */
        memcpy(new_strides, strides, sizeof(int64_t) * ndim);
        return true;
    }
    if (numel == 0 || ndim == 0) {
        THTensor_contiguousStrides(new_ndim, new_sizes, new_strides);
        return true;
    }
    int view_d = new_ndim - 1;
    int64_t chunk_base_stride = strides[ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        tensor_numel *= sizes[d];
        bool chunk_ends = d == 0
                          || (sizes[d - 1] != 1
                              && strides[d - 1]
                                     != tensor_numel * chunk_base_stride);
        if (!chunk_ends) {
            continue;
        }
        while (view_d >= 0
               && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
            new_strides[view_d] = view_numel * chunk_base_stride;
            view_numel *= new_sizes[view_d];
            view_d--;
        }
        if (view_numel != tensor_numel) {
            return false;
        }
        if (d > 0) {
            chunk_base_stride = strides[d - 1];
            tensor_numel = 1;
            view_numel = 1;
        }
    }
    return view_d == -1;
}

/* Copies sizes into `out` and resolves a -1 against the tensor's numel. */
static int
resolve_shape(const THTensor *tensor, int ndim, const int64_t *sizes,
              int64_t *out)
{
    if (check_ndim(ndim) < 0) {
        return -1;
    }
    if (ndim > 0) {
        memcpy(out, sizes, sizeof(int64_t) * ndim);
    }
    return THTensor_inferSize(ndim, out, tensor->numel);
}

THTensor *
THTensor_newView(THTensor *tensor, int ndim, const int64_t *sizes)
{
    int64_t shape[TH_MAX_DIMS], strides[TH_MAX_DIMS];
    if (resolve_shape(tensor, ndim, sizes, shape) < 0) {
        return NULL;
    }
    if (tensor->is_contiguous && tensor->numel > 0 && tensor->ndim > 0
        && tensor->strides[tensor->ndim - 1] == 1) {
        /* The common case: any shape of a contiguous tensor whose last
         * stride is 1 is a view with contiguous strides (what the rule
         * below gives; a size-1 last dim may carry another stride, which
         * PyTorch's rule scales the new strides by). */
        THTensor_contiguousStrides(ndim, shape, strides);
    }
    else if (!compute_view_strides(tensor->ndim, tensor->sizes,
                                   tensor->strides, tensor->numel, ndim,
                                   shape, strides)) {
        THError_set(TH_ERR_RUNTIME,
                    "view size is not compatible with input tensor's size "
                    "and stride (at least one dimension spans across two "
                    "contiguous subspaces). Use .reshape(...) instead.");
        return NULL;
    }
    /* resolve_shape checked that the shape has the tensor's numel */
    return make_view_of_numel(tensor, tensor->storage_offset, ndim, shape,
                              strides, tensor->numel);
}

THTensor *
THTensor_newReshape(THTensor *tensor, int ndim, const int64_t *sizes)
{
    int64_t shape[TH_MAX_DIMS], strides[TH_MAX_DIMS];
    if (resolve_shape(tensor, ndim, sizes, shape) < 0) {
        return NULL;
    }
    if (compute_view_strides(tensor->ndim, tensor->sizes, tensor->strides,
                             tensor->numel, ndim, shape, strides)) {
        return make_view_of_numel(tensor, tensor->storage_offset, ndim,
                                  shape, strides, tensor->numel);
    }
    /* No view exists: copy once into a contiguous tensor and view that. */
    THTensor *copy = THTensor_newContiguous(tensor);
    if (copy == NULL) {
        return NULL;
    }
    THTensor_contiguousStrides(ndim, shape, strides);
    THTensor *result = make_view(copy, 0, ndim, shape, strides);
    THTensor_release(copy);
    return result;
}

THTensor *
THTensor_newFlatten(THTensor *tensor, int64_t start_dim, int64_t end_dim)
{
    int64_t start, end, shape[TH_MAX_DIMS];
    if (THTensor_wrapDim(start_dim, tensor->ndim, &start) < 0
        || THTensor_wrapDim(end_dim, tensor->ndim, &end) < 0) {
        return NULL;
    }
    if (start > end) {
        THError_set(TH_ERR_RUNTIME,
                    "flatten() has invalid args: start_dim cannot come "
                    "after end_dim");
        return NULL;
    }
    if (tensor->ndim == 0) {
        shape[0] = 1;
        return THTensor_newReshape(tensor, 1, shape);
    }
    if (start == end) {
        /* Nothing to fold: the same geometry, as in PyTorch, rather than
         * the strides a reshape would recompute for size-1 dims. */
        return THTensor_newAlias(tensor);
    }
    int ndim = 0;
    for (int64_t d = 0; d < start; d++) {
        shape[ndim++] = tensor->sizes[d];
    }
    int64_t folded = 1;
    for (int64_t d = start; d <= end; d++) {
        /* only a zero-element tensor can get here with an overflow */
        if (TH_mul_overflows(folded, tensor->sizes[d], &folded)) {
            THError_set(TH_ERR_RUNTIME,
                        "flatten(): the flattened size of dims %lld to %lld "
                        "overflows int64",
                        (long long)start, (long long)end);
            return NULL;
        }
    }
    shape[ndim++] = folded;
    for (int64_t d = end + 1; d < tensor->ndim; d++) {
        shape[ndim++] = tensor->sizes[d];
    }
    return THTensor_newReshape(tensor, ndim, shape);
}

THTensor *
THTensor_newTranspose(THTensor *tensor, int64_t dim0, int64_t dim1)
{
    int64_t a, b;
    if (THTensor_wrapDim(dim0, tensor->ndim, &a) < 0
        || THTensor_wrapDim(dim1, tensor->ndim, &b) < 0) {
        return NULL;
    }
    THTensor *view = THTensor_newAlias(tensor);
    if (view == NULL || tensor->ndim == 0) {
        return view;
    }
    view->sizes[a] = tensor->sizes[b];
    view->sizes[b] = tensor->sizes[a];
    view->strides[a] = tensor->strides[b];
    view->strides[b] = tensor->strides[a];
    /* the same sizes in another order: only the contiguity can change */
    view->is_contiguous = a == b ? tensor->is_contiguous
                                 : compute_is_contiguous(view->ndim,
                                                         view->sizes,
                                                         view->strides);
    return view;
}

THTensor *
THTensor_newPermute(THTensor *tensor, int ndims, const int64_t *dims)
{
    int64_t sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS], d;
    bool seen[TH_MAX_DIMS] = {false};
    if (ndims != tensor->ndim) {
        THError_set(TH_ERR_RUNTIME,
                    "permute(sparse_coo): number of dimensions in the tensor "
                    "input does not match the length of the desired ordering "
                    "of dimensions i.e. input.dim() = %d is not equal to "
                    "len(dims) = %d",
                    tensor->ndim, ndims);
        return NULL;
    }
    for (int i = 0; i < ndims; i++) {
        if (THTensor_wrapDim(dims[i], tensor->ndim, &d) < 0) {
            return NULL;
        }
        if (seen[d]) {
            THError_set(TH_ERR_RUNTIME,
                        "permute(): duplicate dims are not allowed.");
            return NULL;
        }
        seen[d] = true;
        sizes[i] = tensor->sizes[d];
        strides[i] = tensor->strides[d];
    }
    return make_view(tensor, tensor->storage_offset, ndims, sizes, strides);
}

THTensor *
THTensor_newSqueeze(THTensor *tensor, int ndims, const int64_t *dims)
{
    int64_t sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS], d;
    bool drop[TH_MAX_DIMS] = {false};
    for (int i = 0; i < ndims; i++) {
        if (THTensor_wrapDim(dims[i], tensor->ndim, &d) < 0) {
            return NULL;
        }
        drop[d] = tensor->ndim > 0 && tensor->sizes[d] == 1;
    }
    int ndim = 0;
    for (int i = 0; i < tensor->ndim; i++) {
        bool squeezable = ndims == 0 ? tensor->sizes[i] == 1 : drop[i];
        if (!squeezable) {
            sizes[ndim] = tensor->sizes[i];
            strides[ndim] = tensor->strides[i];
            ndim++;
        }
    }
    return make_view(tensor, tensor->storage_offset, ndim, sizes, strides);
}

THTensor *
THTensor_newUnsqueeze(THTensor *tensor, int64_t dim)
{
    int64_t sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS], d;
    if (THTensor_wrapDim(dim, tensor->ndim + 1, &d) < 0) {
        return NULL;
    }
    if (check_ndim(tensor->ndim + 1) < 0) {
        return NULL;
    }
    for (int i = 0, j = 0; i <= tensor->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            strides[i] = d >= tensor->ndim
                             ? 1
                             : mul_saturating(tensor->sizes[d],
                                              tensor->strides[d]);
        }
        else {
            sizes[i] = tensor->sizes[j];
            strides[i] = tensor->strides[j];
            j++;
        }
    }
    return make_view(tensor, tensor->storage_offset, tensor->ndim + 1, sizes,
                     strides);
}

THTensor *
THTensor_newExpand(THTensor *tensor, int ndim, const int64_t *sizes)
{
    int64_t new_sizes[TH_MAX_DIMS], new_strides[TH_MAX_DIMS];
    char target[256], actual[256];
    if (check_ndim(ndim) < 0) {
        return NULL;
    }
    if (ndim < tensor->ndim) {
        THError_set(TH_ERR_RUNTIME,
                    "expand(ember.Tensor{%s}, size=%s): the number of "
                    "sizes provided (%d) must be greater or equal to the "
                    "number of dimensions in the tensor (%d)",
                    THTensor_formatSizes(actual, sizeof(actual), tensor->ndim,
                                 tensor->sizes),
                    THTensor_formatSizes(target, sizeof(target), ndim, sizes), ndim,
                    tensor->ndim);
        return NULL;
    }
    for (int d = ndim - 1; d >= 0; d--) {
        int od = d - (ndim - tensor->ndim);
        int64_t want = sizes[d];
        if (od < 0) {
            if (want < 0) {
                THError_set(TH_ERR_RUNTIME,
                            "The expanded size of the tensor (%lld) isn't "
                            "allowed in a leading, non-existing dimension %d",
                            (long long)want, d);
                return NULL;
            }
            new_sizes[d] = want;
            /* A new leading dim of size 1 is not broadcast: like PyTorch
             * (inferExpandGeometry), give it the stride a contiguous
             * outer dim would have; broadcast dims get stride 0. */
            new_strides[d] = want == 1 && d + 1 < ndim
                                 ? new_sizes[d + 1] * new_strides[d + 1]
                                 : 0;
            continue;
        }
        int64_t have = tensor->sizes[od];
        if (want == -1) {
            want = have;
        }
        if (want < 0) {
            THError_set(TH_ERR_RUNTIME,
                        "Trying to create tensor with negative dimension "
                        "%lld: %s",
                        (long long)want,
                        THTensor_formatSizes(target, sizeof(target), ndim, sizes));
            return NULL;
        }
        if (have == want) {
            new_sizes[d] = have;
            new_strides[d] = tensor->strides[od];
        }
        else if (have == 1) {
            new_sizes[d] = want;
            new_strides[d] = 0;
        }
        else {
            THError_set(TH_ERR_RUNTIME,
                        "The expanded size of the tensor (%lld) must match "
                        "the existing size (%lld) at non-singleton dimension "
                        "%d.  Target sizes: %s.  Tensor sizes: %s",
                        (long long)want, (long long)have, d,
                        THTensor_formatSizes(target, sizeof(target), ndim, sizes),
                        THTensor_formatSizes(actual, sizeof(actual), tensor->ndim,
                                     tensor->sizes));
            return NULL;
        }
    }
    return make_view(tensor, tensor->storage_offset, ndim, new_sizes,
                     new_strides);
}

THTensor *
THTensor_newNarrow(THTensor *tensor, int64_t dim, int64_t start,
                   int64_t length)
{
    int64_t d;
    if (tensor->ndim == 0) {
        THError_set(TH_ERR_RUNTIME,
                    "narrow() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    if (THTensor_wrapDim(dim, tensor->ndim, &d) < 0) {
        return NULL;
    }
    int64_t size = tensor->sizes[d];
    if (start < -size || start > size) {
        THError_set(TH_ERR_INDEX,
                    "start out of range (expected to be in range of [%lld, "
                    "%lld], but got %lld)",
                    (long long)-size, (long long)size, (long long)start);
        return NULL;
    }
    if (start < 0) {
        start += size;
    }
    if (length < 0 || start > size - length) {
        THError_set(TH_ERR_RUNTIME,
                    "start (%lld) + length (%lld) exceeds dimension size "
                    "(%lld).",
                    (long long)start, (long long)length, (long long)size);
        return NULL;
    }
    return THTensor_newSlice(tensor, d, start, start + length, 1);
}

THTensor *
THTensor_newSelect(THTensor *tensor, int64_t dim, int64_t index)
{
    int64_t d, sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS];
    if (tensor->ndim == 0) {
        THError_set(TH_ERR_INDEX,
                    "select() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    if (THTensor_wrapDim(dim, tensor->ndim, &d) < 0) {
        return NULL;
    }
    int64_t size = tensor->sizes[d];
    if (index < -size || index >= size) {
        THError_set(TH_ERR_INDEX,
                    "index %lld is out of bounds for dimension %lld with "
                    "size %lld",
                    (long long)index, (long long)d, (long long)size);
        return NULL;
    }
    if (index < 0) {
        index += size;
    }
    int ndim = 0;
    for (int i = 0; i < tensor->ndim; i++) {
        if (i != d) {
            sizes[ndim] = tensor->sizes[i];
            strides[ndim] = tensor->strides[i];
            ndim++;
        }
    }
    return make_view(tensor,
                     tensor->storage_offset + index * tensor->strides[d],
                     ndim, sizes, strides);
}

THTensor *
THTensor_newSlice(THTensor *tensor, int64_t dim, int64_t start, int64_t stop,
                  int64_t step)
{
    int64_t d;
    if (THTensor_wrapDim(dim, tensor->ndim, &d) < 0) {
        return NULL;
    }
    if (step <= 0) {
        THError_set(TH_ERR_VALUE, "slice step must be positive");
        return NULL;
    }
    int64_t size = tensor->sizes[d];
    start = start < 0 ? 0 : (start > size ? size : start);
    stop = stop < start ? start : (stop > size ? size : stop);
    THTensor *view = THTensor_newAlias(tensor);
    if (view == NULL) {
        return NULL;
    }
    /* The offset moves to `start` even for an empty slice, as in PyTorch
     * (t[5:5].storage_offset() == 5): an empty tensor reads nothing, so
     * its offset may point at or past the end of its storage. */
    view->storage_offset += start * tensor->strides[d];
    /* (stop - start + step - 1) / step would overflow for a huge step
     * (t[::sys.maxsize]); a stride * step that overflows only happens when
     * the new size is <= 1, where the stride is never used. */
    view->sizes[d] = stop > start ? (stop - start - 1) / step + 1 : 0;
    view->strides[d] = mul_saturating(tensor->strides[d], step);
    THTensor_refreshGeometry(view);
    return view;
}

THTensor *
THTensor_newAsStrided(THTensor *tensor, int ndim, const int64_t *sizes,
                      const int64_t *strides, int64_t offset)
{
    if (check_ndim(ndim) < 0
        || check_in_bounds(tensor->storage->nbytes, offset, ndim, sizes,
                           strides, THTensor_itemsize(tensor))
               < 0) {
        return NULL;
    }
    return make_view(tensor, offset, ndim, sizes, strides);
}

THTensor *
THTensor_newUnfold(THTensor *tensor, int64_t dim, int64_t size, int64_t step)
{
    int64_t d, sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS];
    if (THTensor_wrapDim(dim, tensor->ndim, &d) < 0
        || check_ndim(tensor->ndim + 1) < 0) {
        return NULL;
    }
    int64_t dim_size = tensor->ndim == 0 ? 1 : tensor->sizes[d];
    if (size < 0 || size > dim_size) {
        THError_set(TH_ERR_RUNTIME,
                    "maximum size for tensor at dimension %lld is %lld but "
                    "size is %lld",
                    (long long)d, (long long)dim_size, (long long)size);
        return NULL;
    }
    if (step <= 0) {
        THError_set(TH_ERR_RUNTIME, "step is %lld but must be > 0",
                    (long long)step);
        return NULL;
    }
    memcpy(sizes, tensor->sizes, sizeof(int64_t) * tensor->ndim);
    memcpy(strides, tensor->strides, sizeof(int64_t) * tensor->ndim);
    int ndim = tensor->ndim;
    if (ndim > 0) {
        sizes[d] = (dim_size - size) / step + 1;
        /* overflows only when sizes[d] == 1: see mul_saturating */
        strides[d] = mul_saturating(tensor->strides[d], step);
    }
    sizes[ndim] = size;
    strides[ndim] = ndim > 0 ? tensor->strides[d] : 1;
    return make_view(tensor, tensor->storage_offset, ndim + 1, sizes,
                     strides);
}

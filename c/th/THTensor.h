/*
 * THTensor.h -- a strided view of a storage: the heart of the core.
 *
 * A tensor is (storage, storage_offset, sizes, strides, dtype).  Element
 * (i0, ..., ik) lives at byte
 *     storage->data + itemsize * (storage_offset + sum_d i_d * strides[d])
 * Strides are counted in elements, as in PyTorch, not bytes as in NumPy.
 *
 * Invariants (checked by THTensor_checkInvariants in tests):
 *   - 0 <= ndim <= TH_MAX_DIMS; sizes[d] >= 0; strides[d] >= 0;
 *   - numel == product of sizes (cached);
 *   - when numel > 0, every reachable element lies inside the storage:
 *       (storage_offset + sum_d (sizes[d]-1)*strides[d] + 1) * itemsize
 *         <= storage->nbytes
 *   - is_contiguous (cached) == strides are row-major for the sizes
 *     (dims of size 1 may have any stride).
 * Negative strides are not supported (PyTorch has none either).
 *
 * Views (view, transpose, permute, narrow, select, expand, as_strided, ...)
 * are new THTensors on the same THStorage.  They also share the version
 * counter of their base (Note [Version counter]).
 *
 * Naming: a function whose name contains `new` returns an owned reference
 * (release it or return it); every other function borrows its arguments.
 *
 * Note [Version counter]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * Autograd saves tensors for backward and must notice if one of them was
 * modified in place afterwards.  Every in-place write bumps a counter; the
 * saved tensor remembers the value it saw.  A write through a view must be
 * seen from the base and vice versa, so views share one counter with their
 * base (and detach() shares it too, as in PyTorch), while clone() and
 * new tensors start their own at 0.
 */
#ifndef TH_TENSOR_H
#define TH_TENSOR_H

#include "THDtype.h"
#include "THGeneral.h"
#include "THStorage.h"

#include <stdbool.h>
#include <stdint.h>

/* The most dimensions a tensor may have (PyTorch: no fixed limit; NumPy 2:
 * 64).  Fixed-size arrays keep a tensor in one allocation. */
#define TH_MAX_DIMS 32

typedef struct THVersionCounter {
    int refcount; /* atomic */
    int64_t version;
} THVersionCounter;

typedef struct THTensor {
    int refcount; /* atomic */
    int ndim;
    THDtype dtype;
    bool is_contiguous;
    int64_t numel;
    int64_t storage_offset;
    THStorage *storage;               /* owned reference */
    THVersionCounter *version_counter; /* owned reference, shared by views */
    int64_t sizes[TH_MAX_DIMS];
    int64_t strides[TH_MAX_DIMS];
} THTensor;

/* A Python-style scalar for fill_ and friends: what the user wrote (bool,
 * int or float) is kept exactly and converted to the tensor's dtype by the
 * same cast loops copy_ uses. */
typedef struct {
    THDtype dtype; /* TH_Bool, TH_Int64 or TH_Float64 */
    union {
        bool b;
        int64_t i;
        double d;
    } value;
} THScalar;

THScalar THScalar_fromBool(bool b);
THScalar THScalar_fromInt(int64_t i);
THScalar THScalar_fromDouble(double d);
/* Fails (RuntimeError kind) when converting `value` to dtype would
 * overflow, as PyTorch's fill_ and full do: a float must lie within the
 * integral dtype's range (127.5 does not fit int8).  NaN and infinities fit
 * the floating dtypes only.  Like PyTorch, uint8 also accepts the ints
 * -255..-1, which wrap around (fill_(-1) gives 255; fill_(-1.0) fails). */
int THScalar_checkFits(THScalar value, THDtype dtype);

/* ---- creation and lifetime ---------------------------------------------- */

/* A fresh, contiguous, uninitialised tensor from the device's allocator. */
THTensor *THTensor_newEmpty(int ndim, const int64_t *sizes, THDtype dtype,
                            THDeviceType device);
/* A tensor on an existing storage (retained).  strides == NULL means
 * contiguous.  Bounds are checked against the storage; a new version
 * counter is started. */
THTensor *THTensor_newWithStorage(THStorage *storage, int64_t offset,
                                  int ndim, const int64_t *sizes,
                                  const int64_t *strides, THDtype dtype);
void THTensor_retain(THTensor *tensor);
void THTensor_release(THTensor *tensor);

/* ---- geometry ---------------------------------------------------------- */

static inline char *
THTensor_data(const THTensor *tensor)
{
    return (char *)tensor->storage->data
           + tensor->storage_offset * THDtype_itemsize(tensor->dtype);
}

static inline int64_t
THTensor_itemsize(const THTensor *tensor)
{
    return THDtype_itemsize(tensor->dtype);
}

/* Wraps a possibly negative dim into [0, ndim) (ndim 0 counts as 1, as in
 * PyTorch).  Returns -1 with an IndexError-kind error when out of range.
 * Inline: every view wraps one or two dims, and the error is out of line. */
int THTensor_wrapDimError(int64_t dim, int ndim);
static inline int
THTensor_wrapDim(int64_t dim, int ndim, int64_t *out)
{
    int64_t range = ndim > 0 ? ndim : 1;
    if (dim < -range || dim >= range) {
        *out = 0;
        return THTensor_wrapDimError(dim, ndim);
    }
    *out = dim < 0 ? dim + range : dim;
    return 0;
}
/* Writes sizes as PyTorch's messages print them, "[2, 3, 4]", into buf
 * (truncated to fit) and returns buf. */
const char *THTensor_formatSizes(char *buf, size_t buflen, int ndim,
                                 const int64_t *sizes);
/* numel of the sizes, with overflow and negative-size checks. */
int THTensor_checkedNumel(int ndim, const int64_t *sizes, int64_t *numel);
/* The bytes of a dense block of the sizes in dtype, checked like numel
 * (Note [Counts to bytes]): PyTorch's "Storage size calculation overflowed
 * with sizes=[...]" when numel * itemsize does not fit an int64. */
int THTensor_checkedNbytes(int ndim, const int64_t *sizes, THDtype dtype,
                           int64_t *nbytes);
/* Contiguous (row-major) strides for sizes. */
void THTensor_contiguousStrides(int ndim, const int64_t *sizes,
                                int64_t *strides);
/* Replaces one -1 in sizes by the size that makes numel match; checks the
 * product (PyTorch's "shape '[2, 5]' is invalid for input of size 6"). */
int THTensor_inferSize(int ndim, int64_t *sizes, int64_t numel);
/* Recomputes numel and is_contiguous after sizes/strides changed. */
void THTensor_refreshGeometry(THTensor *tensor);
/* Verifies every invariant listed at the top of this file; 0 or -1. */
int THTensor_checkInvariants(const THTensor *tensor);
/* True when two tensors view the same bytes in the same layout. */
bool THTensor_isSameView(const THTensor *a, const THTensor *b);

/* ---- views: new tensors on the same storage and version counter --------- */

THTensor *THTensor_newAlias(THTensor *tensor);
THTensor *THTensor_newView(THTensor *tensor, int ndim, const int64_t *sizes);
THTensor *THTensor_newReshape(THTensor *tensor, int ndim,
                              const int64_t *sizes);
THTensor *THTensor_newFlatten(THTensor *tensor, int64_t start_dim,
                              int64_t end_dim);
THTensor *THTensor_newTranspose(THTensor *tensor, int64_t dim0,
                                int64_t dim1);
THTensor *THTensor_newPermute(THTensor *tensor, int ndims,
                              const int64_t *dims);
/* Removes all size-1 dims (ndims == 0) or the listed ones that have size 1. */
THTensor *THTensor_newSqueeze(THTensor *tensor, int ndims,
                              const int64_t *dims);
THTensor *THTensor_newUnsqueeze(THTensor *tensor, int64_t dim);
THTensor *THTensor_newExpand(THTensor *tensor, int ndim,
                             const int64_t *sizes);
THTensor *THTensor_newNarrow(THTensor *tensor, int64_t dim, int64_t start,
                             int64_t length);
THTensor *THTensor_newSelect(THTensor *tensor, int64_t dim, int64_t index);
/* Python slice semantics on one dim: start/stop already clamped by the
 * caller to [0, size]; step >= 1. */
THTensor *THTensor_newSlice(THTensor *tensor, int64_t dim, int64_t start,
                            int64_t stop, int64_t step);
THTensor *THTensor_newAsStrided(THTensor *tensor, int ndim,
                                const int64_t *sizes,
                                const int64_t *strides, int64_t offset);
THTensor *THTensor_newUnfold(THTensor *tensor, int64_t dim, int64_t size,
                             int64_t step);

/* ---- copies ------------------------------------------------------------ */

/* Note [Preserving the layout]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * clone(), to(dtype) and the *_like factories keep the memory order of
 * their input, as PyTorch's memory_format=torch.preserve_format does: a
 * transposed tensor's clone is transposed too.  When the input is dense
 * and non-overlapping its strides are kept exactly; otherwise (a slice
 * with gaps, an expanded tensor) the new strides are dense and follow the
 * input's stride order.  contiguous() and reshape() always give row-major.
 */

/* True when the elements tile one block of memory exactly (in some dim
 * order): no gaps, and no element reached twice. */
bool THTensor_isNonOverlappingAndDense(const THTensor *tensor);
/* A fresh uninitialised tensor shaped like `tensor`, in dtype, laid out as
 * in Note [Preserving the layout]. */
THTensor *THTensor_newEmptyLike(const THTensor *tensor, THDtype dtype);
/* The same on `device` (only the layout comes from `tensor`). */
THTensor *THTensor_newEmptyLikeOn(const THTensor *tensor, THDtype dtype,
                                  THDeviceType device);
/* A new row-major tensor with the same values (and the tensor itself,
 * retained, when it already is contiguous). */
THTensor *THTensor_newContiguous(THTensor *tensor);
/* Always a new storage, same dtype and layout (Note [Preserving the
 * layout]). */
THTensor *THTensor_newClone(THTensor *tensor);
/* A copy converted to dtype, same layout (the tensor itself, retained, if
 * same dtype and `copy` is false). */
THTensor *THTensor_newCast(THTensor *tensor, THDtype dtype, bool copy);
/* Replaces *tensor (owned by the caller) by its conversion to dtype,
 * releasing the old one; nothing happens when it already has dtype.  On
 * failure *tensor is released, set to NULL and -1 returned (as it is when
 * *tensor is NULL to begin with, so a failed computation passes through). */
int THTensor_convertOwned(THTensor **tensor, THDtype dtype);

/* ---- in-place writes: each bumps the version counter ------------------- */

/* Fails (RuntimeError kind) when the tensor's memory is read-only. */
int THTensor_checkWritable(const THTensor *tensor);
void THTensor_bumpVersion(THTensor *tensor);
/* dst[...] = src broadcast to dst's shape, converting dtypes.  Overlapping
 * memory is handled (src is copied aside first). */
int THTensor_copy(THTensor *dst, THTensor *src);

/* ---- memory overlap: the checks every writing operator makes ------------- */

/* Fails (RuntimeError, PyTorch's message) when several elements of a
 * tensor that is about to be written share one address (a stride 0 over a
 * dim longer than 1, as expand() makes). */
int THTensor_checkNoInternalOverlap(const THTensor *tensor);
/* True when the byte ranges two tensors can touch intersect (a cheap,
 * conservative test: interleaved views count as overlapping). */
bool THTensor_mayOverlap(const THTensor *a, const THTensor *b);
/* True when writing `output` element by element may change an element of
 * `input` before it is read: overlapping memory, but not the very same
 * view (an elementwise op reads each element just before writing it). */
bool THTensor_overlapsPartially(const THTensor *output, const THTensor *input);
/* Fails (RuntimeError, PyTorch's message) when an operator that writes
 * `written` would read `input` from the same memory: PyTorch's
 * assert_no_overlap, which tells only for two dense tensors (for others
 * the overlap is "too hard" and it passes; such operators copy the input
 * aside instead). */
int THTensor_checkNoOverlap(const THTensor *written, const THTensor *input);
int THTensor_fill(THTensor *tensor, THScalar value);

/* ---- factories that fill a fresh contiguous tensor ----------------------
 * These do not bump the version counter: filling a tensor nobody has seen
 * yet is part of constructing it (in PyTorch, torch.arange(3)._version is
 * 0).  The random fills in THRandom.h follow the same rule. */

/* tensor[i] = start + i * step, computed in int64 when the tensor is
 * integral and both scalars are integers, else in double. */
int THTensor_arange(THTensor *tensor, THScalar start, THScalar step);
int THTensor_linspace(THTensor *tensor, double start, double end);
int THTensor_eye(THTensor *tensor);

#endif /* TH_TENSOR_H */

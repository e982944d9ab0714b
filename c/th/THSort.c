/*
 * THSort.c -- sort, topk, kthvalue, unique and unique_consecutive (of
 * elements, or of slices along a dim).
 *
 * Everything here works lane by lane: a lane is the 1-d slice of the input
 * along the sorted dim, at one position of all the other dims.  A lane is
 * loaded into a scratch array of (key, index) pairs (Note [Sort keys] in
 * THSort.h), sorted there, and the wanted part written back: values read
 * from the input at each sorted index, and the indices themselves.  Lanes
 * are independent, so large inputs split them over the worker threads.
 */
#include "THSort.h"

#include "THParallel.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t key;
    int64_t index; /* position in the lane (or in the flattened input) */
} SortItem;

/* ---- keys (Note [Sort keys]) ---------------------------------------------- */

#define TH_SIGN_BIT ((uint64_t)1 << 63)
#define TH_NAN_KEY UINT64_MAX

static inline uint64_t
key_of_int(int64_t value)
{
    return (uint64_t)value ^ TH_SIGN_BIT;
}

static inline uint64_t
key_of_double(double value)
{
    if (isnan(value)) {
        return TH_NAN_KEY;
    }
    if (value == 0) {
        value = 0.0; /* -0.0 and 0.0 compare equal, so they must tie */
    }
    uint64_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return (bits & TH_SIGN_BIT) ? ~bits : bits | TH_SIGN_BIT;
}

/* load_keys_<Name>(items, lane, stride, n): items[i] = (key of the lane's
 * element i, i), for a lane of n elements `stride` bytes apart. */
#define TH_DEFINE_LOAD_KEYS(Name, ctype, py)                                 \
    static void load_keys_##Name(SortItem *items, const char *lane,          \
                                 int64_t stride, int64_t n)                  \
    {                                                                        \
        const bool floating = THDtype_isFloating(TH_##Name);                 \
        for (int64_t i = 0; i < n; i++) {                                    \
            ctype value;                                                     \
            memcpy(&value, lane + i * stride, sizeof(value));                \
            items[i].key =                                                   \
                floating ? key_of_double((double)TH_TO_FLOAT_##Name(value))  \
                         : key_of_int((int64_t)TH_TO_FLOAT_##Name(value));   \
            items[i].index = i;                                              \
        }                                                                    \
    }
TH_FORALL_DTYPES(TH_DEFINE_LOAD_KEYS)
#undef TH_DEFINE_LOAD_KEYS

typedef void (*LoadKeysFn)(SortItem *items, const char *lane, int64_t stride,
                           int64_t n);

#define TH_LOAD_KEYS_ENTRY(Name, ctype, py) load_keys_##Name,
static const LoadKeysFn load_keys[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_LOAD_KEYS_ENTRY)
};
#undef TH_LOAD_KEYS_ENTRY

/* Two keys that stand for one value.  Each NaN is a value of its own (NaN
 * != NaN), as in PyTorch's unique. */
static inline bool
same_value(uint64_t a, uint64_t b, bool floating)
{
    return a == b && !(floating && a == TH_NAN_KEY);
}

/* ---- ordering the items ------------------------------------------------------ */

/* Items are ordered by key, then by index.  The indices are distinct, so
 * this is a total order, and sorting by it is exactly the stable sort by
 * key: whatever order the items are in when sorted (after a quickselect,
 * say), ties come out in input order. */
static inline bool
item_less(SortItem a, SortItem b)
{
    return a.key < b.key || (a.key == b.key && a.index < b.index);
}

#define TH_SORT_RUN 32 /* runs this short are insertion-sorted first */

static void
insertion_sort(SortItem *items, int64_t n)
{
    for (int64_t i = 1; i < n; i++) {
        SortItem item = items[i];
        int64_t j = i;
        while (j > 0 && item_less(item, items[j - 1])) {
            items[j] = items[j - 1];
            j--;
        }
        items[j] = item;
    }
}

/* Merges the sorted runs src[lo, mid) and src[mid, hi) into dst[lo, hi). */
static void
merge(const SortItem *src, SortItem *dst, int64_t lo, int64_t mid,
      int64_t hi)
{
    int64_t i = lo, j = mid, k = lo;
    while (i < mid && j < hi) {
        dst[k++] = item_less(src[j], src[i]) ? src[j++] : src[i++];
    }
    while (i < mid) {
        dst[k++] = src[i++];
    }
    while (j < hi) {
        dst[k++] = src[j++];
    }
}

/* Sorts items[0, n) (bottom-up merge sort); scratch has room for n. */
static void
merge_sort(SortItem *items, SortItem *scratch, int64_t n)
{
    for (int64_t lo = 0; lo < n; lo += TH_SORT_RUN) {
        insertion_sort(items + lo, n - lo < TH_SORT_RUN ? n - lo : TH_SORT_RUN);
    }
    SortItem *src = items, *dst = scratch;
    for (int64_t width = TH_SORT_RUN; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            merge(src, dst, lo, mid, hi);
        }
        SortItem *t = src;
        src = dst;
        dst = t;
    }
    if (src != items) {
        memcpy(items, src, (size_t)n * sizeof(*items));
    }
}

/* LSD radix sort on the keys, one byte per pass: stable, so it gives the
 * (key, index) order only when the items arrive in index order (a freshly
 * loaded lane).  Passes where every key has the same byte are skipped
 * (small integers need only one or two). */
static void
radix_sort(SortItem *items, SortItem *scratch, int64_t n)
{
    static const int nbytes = (int)sizeof(uint64_t);
    int64_t counts[sizeof(uint64_t)][256];
    memset(counts, 0, sizeof(counts));
    for (int64_t i = 0; i < n; i++) {
        uint64_t key = items[i].key;
        for (int b = 0; b < nbytes; b++) {
            counts[b][(key >> (8 * b)) & 0xff]++;
        }
    }
    SortItem *src = items, *dst = scratch;
    for (int b = 0; b < nbytes; b++) {
        int shift = 8 * b;
        if (counts[b][(src[0].key >> shift) & 0xff] == n) {
            continue; /* one byte value everywhere: nothing to reorder */
        }
        int64_t offsets[256];
        int64_t total = 0;
        for (int v = 0; v < 256; v++) {
            offsets[v] = total;
            total += counts[b][v];
        }
        for (int64_t i = 0; i < n; i++) {
            dst[offsets[(src[i].key >> shift) & 0xff]++] = src[i];
        }
        SortItem *t = src;
        src = dst;
        dst = t;
    }
    if (src != items) {
        memcpy(items, src, (size_t)n * sizeof(*items));
    }
}

/* Below this, a merge sort beats the radix sort's fixed cost. */
#define TH_RADIX_MIN 512

/* Sorts items that arrive in index order. */
static void
sort_fresh_items(SortItem *items, SortItem *scratch, int64_t n)
{
    if (n >= TH_RADIX_MIN) {
        radix_sort(items, scratch, n);
    }
    else {
        merge_sort(items, scratch, n);
    }
}

static inline void
swap_items(SortItem *items, int64_t i, int64_t j)
{
    SortItem t = items[i];
    items[i] = items[j];
    items[j] = t;
}

/* Quickselect: rearranges items[0, n) so items[nth] is the item a full
 * sort puts there, with every item before it smaller and every one after
 * it larger (so topk and kthvalue need not sort the whole lane). */
static void
select_nth(SortItem *items, int64_t n, int64_t nth)
{
    int64_t lo = 0, hi = n - 1;
    while (hi - lo >= TH_SORT_RUN) {
        /* median of three as the pivot, which also guards both scans */
        int64_t mid = lo + (hi - lo) / 2;
        if (item_less(items[mid], items[lo])) {
            swap_items(items, mid, lo);
        }
        if (item_less(items[hi], items[lo])) {
            swap_items(items, hi, lo);
        }
        if (item_less(items[hi], items[mid])) {
            swap_items(items, hi, mid);
        }
        SortItem pivot = items[mid];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (item_less(items[i], pivot)) {
                i++;
            }
            while (item_less(pivot, items[j])) {
                j--;
            }
            if (i <= j) {
                swap_items(items, i++, j--);
            }
        }
        /* now [lo, j] < pivot-or-equal, [i, hi] >= it, and (j, i) == it */
        if (nth <= j) {
            hi = j;
        }
        else if (nth >= i) {
            lo = i;
        }
        else {
            return;
        }
    }
    insertion_sort(items + lo, hi - lo + 1);
}

/* Copies one element of `itemsize` bytes (a typed load and store: a
 * variable-size memcpy per element would be a library call). */
static inline void
copy_item(char *dst, const char *src, int itemsize)
{
    switch (itemsize) {
    case 1: *(uint8_t *)dst = *(const uint8_t *)src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* ---- sorting lanes ------------------------------------------------------------ */

/* Where the lanes of a tensor start: `outer_*` describe every dim except
 * the sorted one (byte strides), in row-major order. */
typedef struct {
    int ndim;
    int64_t sizes[TH_MAX_DIMS];
    int64_t strides[3][TH_MAX_DIMS]; /* input, values, indices */
} LaneGeometry;

typedef struct {
    LoadKeysFn load;
    int itemsize;
    bool descending;
    const char *input;
    int64_t lane_len;
    int64_t input_stride; /* bytes between a lane's elements */
    int64_t first, count; /* the sorted positions written out */
    char *values;
    int64_t values_stride;
    char *indices;
    int64_t indices_stride;
    LaneGeometry outer;
    atomic_bool out_of_memory;
} SortJob;

/* Byte offsets of lane `lane` in the input, values and indices. */
static void
lane_offsets(const LaneGeometry *outer, int64_t lane, int64_t *offsets)
{
    offsets[0] = offsets[1] = offsets[2] = 0;
    for (int d = outer->ndim - 1; d >= 0; d--) {
        int64_t i = lane % outer->sizes[d];
        lane /= outer->sizes[d];
        for (int k = 0; k < 3; k++) {
            offsets[k] += i * outer->strides[k][d];
        }
    }
}

/* Puts the items a full sort would put at [first, first + count) there,
 * sorted: a full sort when most of the lane is wanted, else a quickselect
 * and a sort of what it leaves in front. */
static void
order_lane(SortItem *items, SortItem *scratch, int64_t n, int64_t first,
           int64_t count)
{
    int64_t end = first + count;
    if (count == 0) {
        return;
    }
    if (end > n / 2) {
        sort_fresh_items(items, scratch, n);
        return;
    }
    select_nth(items, n, end - 1);
    if (count == 1) {
        return; /* select_nth put exactly that item at first */
    }
    merge_sort(items, scratch, end);
}

static void
sort_one_lane(const SortJob *job, int64_t lane, SortItem *items,
              SortItem *scratch)
{
    int64_t offsets[3];
    lane_offsets(&job->outer, lane, offsets);
    const char *in = job->input + offsets[0];
    job->load(items, in, job->input_stride, job->lane_len);
    if (job->descending) {
        for (int64_t i = 0; i < job->lane_len; i++) {
            items[i].key = ~items[i].key;
        }
    }
    order_lane(items, scratch, job->lane_len, job->first, job->count);
    char *values = job->values + offsets[1];
    char *indices = job->indices + offsets[2];
    for (int64_t j = 0; j < job->count; j++) {
        int64_t index = items[job->first + j].index;
        copy_item(values + j * job->values_stride,
                  in + index * job->input_stride, job->itemsize);
        memcpy(indices + j * job->indices_stride, &index, sizeof(index));
    }
}

/* THParallelFn over lanes [begin, end); runs on worker threads, so an
 * allocation failure is only recorded (Note in THParallel.h). */
static void
sort_lanes(int64_t begin, int64_t end, void *arg)
{
    SortJob *job = arg;
    /* 2 * lane_len items: checked by sort_lanes_to_new */
    SortItem *items = TH_mallocArray(2 * job->lane_len, sizeof(SortItem),
                                     "sort");
    if (items == NULL) {
        atomic_store(&job->out_of_memory, true);
        return;
    }
    for (int64_t lane = begin; lane < end; lane++) {
        sort_one_lane(job, lane, items, items + job->lane_len);
    }
    free(items);
}

/* Sorts every lane of input along dim and writes sorted positions
 * [first, first + count) of each to new tensors shaped like input with
 * that dim's size replaced by count.  The caller has checked that
 * first + count <= the lane length. */
static int
sort_lanes_to_new(THTensor *input, int64_t dim, bool descending,
                  int64_t first, int64_t count, THTensor **values,
                  THTensor **indices)
{
    int64_t sizes[TH_MAX_DIMS];
    memcpy(sizes, input->sizes, sizeof(sizes));
    if (input->ndim > 0) {
        sizes[dim] = count;
    }
    else { /* a 0-d result always holds the element (PyTorch: topk(k=0)) */
        first = 0;
        count = 1;
    }
    /* Each worker needs 2 * lane_len items of scratch: refuse a lane whose
     * scratch does not fit before allocating anything (Note [Counts to
     * bytes]; a huge expanded lane, zeros(1).expand(2**62).topk(1)). */
    int64_t lane_len = input->ndim > 0 ? input->sizes[dim] : 1;
    size_t scratch_bytes;
    if (lane_len > INT64_MAX / 2
        || !TH_arrayNbytes(2 * lane_len, sizeof(SortItem), &scratch_bytes)) {
        return THError_set(TH_ERR_MEMORY,
                           "sort: a lane of %lld elements is too long for "
                           "the scratch memory of a sort",
                           (long long)lane_len);
    }
    THDeviceType device = input->storage->device;
    *values = THTensor_newEmpty(input->ndim, sizes, input->dtype, device);
    *indices = THTensor_newEmpty(input->ndim, sizes, TH_Int64, device);
    if (*values == NULL || *indices == NULL) {
        goto fail;
    }
    if ((*values)->numel == 0) {
        return 0;
    }
    THTensor *out[3] = {input, *values, *indices};
    int itemsize = (int)THTensor_itemsize(input);
    int itemsizes[3] = {itemsize, itemsize, (int)sizeof(int64_t)};
    SortJob job = {
        .load = load_keys[input->dtype],
        .itemsize = itemsize,
        .descending = descending,
        .input = THTensor_data(input),
        .lane_len = input->ndim > 0 ? input->sizes[dim] : 1,
        .input_stride = input->ndim > 0 ? input->strides[dim] * itemsize : 0,
        .first = first,
        .count = count,
        .values = THTensor_data(*values),
        .values_stride = input->ndim > 0 ? (*values)->strides[dim] * itemsize
                                         : 0,
        .indices = THTensor_data(*indices),
        .indices_stride = input->ndim > 0
                              ? (*indices)->strides[dim]
                                    * (int64_t)sizeof(int64_t)
                              : 0,
    };
    atomic_init(&job.out_of_memory, false);
    int64_t nlanes = 1;
    for (int d = 0; d < input->ndim; d++) {
        if (d == dim) {
            continue;
        }
        int k = job.outer.ndim++;
        job.outer.sizes[k] = input->sizes[d];
        for (int t = 0; t < 3; t++) {
            job.outer.strides[t][k] = out[t]->strides[d] * itemsizes[t];
        }
        nlanes *= input->sizes[d];
    }
    int64_t grain = TH_PARALLEL_GRAIN / (job.lane_len > 0 ? job.lane_len : 1);
    THParallel_for(nlanes, grain > 0 ? grain : 1, sort_lanes, &job);
    if (atomic_load(&job.out_of_memory)) {
        THError_set(TH_ERR_MEMORY, "sort: out of memory for a lane of %lld "
                                   "elements",
                    (long long)job.lane_len);
        goto fail;
    }
    return 0;
fail:
    THTensor_release(*values);
    THTensor_release(*indices);
    *values = *indices = NULL;
    return -1;
}

int
THTensor_sort(THTensor *input, int64_t dim, bool descending,
              THTensor **values, THTensor **indices)
{
    int64_t d;
    if (THTensor_wrapDim(dim, input->ndim, &d) < 0) {
        return -1;
    }
    int64_t n = input->ndim > 0 ? input->sizes[d] : 1;
    return sort_lanes_to_new(input, d, descending, 0, n, values, indices);
}

int
THTensor_topk(THTensor *input, int64_t k, int64_t dim, bool largest,
              THTensor **values, THTensor **indices)
{
    int64_t d;
    if (THTensor_wrapDim(dim, input->ndim, &d) < 0) {
        return -1;
    }
    int64_t n = input->ndim > 0 ? input->sizes[d] : 1;
    if (k < 0 || k > n) {
        return THError_set(TH_ERR_RUNTIME, "selected index k out of range");
    }
    return sort_lanes_to_new(input, d, largest, 0, k, values, indices);
}

int
THTensor_kthvalue(THTensor *input, int64_t k, int64_t dim, bool keepdim,
                  THTensor **values, THTensor **indices)
{
    int64_t d;
    if (THTensor_wrapDim(dim, input->ndim, &d) < 0) {
        return -1;
    }
    int64_t n = input->ndim > 0 ? input->sizes[d] : 1;
    if (k < 1 || k > n) {
        return THError_set(TH_ERR_RUNTIME,
                           "kthvalue(): selected number k out of range for "
                           "dimension %lld",
                           (long long)d);
    }
    if (sort_lanes_to_new(input, d, false, k - 1, 1, values, indices) < 0) {
        return -1;
    }
    if (keepdim || input->ndim == 0) {
        return 0;
    }
    THTensor *squeezed[2] = {THTensor_newSqueeze(*values, 1, &d),
                             THTensor_newSqueeze(*indices, 1, &d)};
    THTensor_release(*values);
    THTensor_release(*indices);
    *values = squeezed[0];
    *indices = squeezed[1];
    if (squeezed[0] == NULL || squeezed[1] == NULL) {
        THTensor_release(squeezed[0]);
        THTensor_release(squeezed[1]);
        *values = *indices = NULL;
        return -1;
    }
    return 0;
}

/* ---- unique ------------------------------------------------------------------- */

/* Turns (key, index) items, grouped so equal values are neighbours, into
 * unique's outputs.  `flat` is the contiguous input the indices point
 * into; `shape` is the input's, for inverse. */
static int
collect_groups(const SortItem *items, int64_t n, const THTensor *flat,
               const THTensor *shape, THTensor **values, THTensor **inverse,
               THTensor **counts)
{
    bool floating = THDtype_isFloating(flat->dtype);
    int64_t ngroups = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || !same_value(items[i - 1].key, items[i].key, floating)) {
            ngroups++;
        }
    }
    THDeviceType device = flat->storage->device;
    *values = THTensor_newEmpty(1, &ngroups, flat->dtype, device);
    if (inverse != NULL) {
        *inverse = THTensor_newEmpty(shape->ndim, shape->sizes, TH_Int64,
                                     device);
    }
    if (counts != NULL) {
        *counts = THTensor_newEmpty(1, &ngroups, TH_Int64, device);
    }
    if (*values == NULL || (inverse != NULL && *inverse == NULL)
        || (counts != NULL && *counts == NULL)) {
        THTensor_release(*values);
        *values = NULL;
        if (inverse != NULL) {
            THTensor_release(*inverse);
            *inverse = NULL;
        }
        if (counts != NULL) {
            THTensor_release(*counts);
            *counts = NULL;
        }
        return -1;
    }
    int itemsize = (int)THTensor_itemsize(flat);
    const char *in = THTensor_data(flat);
    char *out = THTensor_data(*values);
    int64_t *inverse_data =
        inverse != NULL ? (int64_t *)THTensor_data(*inverse) : NULL;
    int64_t *count_data =
        counts != NULL ? (int64_t *)THTensor_data(*counts) : NULL;
    int64_t group = -1;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || !same_value(items[i - 1].key, items[i].key, floating)) {
            group++;
            copy_item(out + group * itemsize,
                      in + items[i].index * itemsize, itemsize);
            if (count_data != NULL) {
                count_data[group] = 0;
            }
        }
        if (count_data != NULL) {
            count_data[group]++;
        }
        if (inverse_data != NULL) {
            inverse_data[items[i].index] = group;
        }
    }
    return 0;
}

static int
unique_impl(THTensor *input, bool sort, THTensor **values,
            THTensor **inverse, THTensor **counts)
{
    THTensor *flat = THTensor_newContiguous(input);
    if (flat == NULL) {
        return -1;
    }
    int64_t n = flat->numel; /* fits: flat's own bytes did */
    SortItem *items = TH_mallocArray(2 * n + 1, sizeof(SortItem), "unique");
    if (items == NULL) {
        THTensor_release(flat);
        return -1;
    }
    if (n > 0) {
        load_keys[flat->dtype](items, THTensor_data(flat),
                               THTensor_itemsize(flat), n);
    }
    if (sort) {
        sort_fresh_items(items, items + n, n);
    }
    int status =
        collect_groups(items, n, flat, input, values, inverse, counts);
    free(items);
    THTensor_release(flat);
    return status;
}

int
THTensor_unique(THTensor *input, THTensor **values, THTensor **inverse,
                THTensor **counts)
{
    return unique_impl(input, true, values, inverse, counts);
}

int
THTensor_uniqueConsecutive(THTensor *input, THTensor **values,
                           THTensor **inverse, THTensor **counts)
{
    return unique_impl(input, false, values, inverse, counts);
}

/* ---- unique along a dim ----------------------------------------------------- */

/* Sorts the rows of a rows x cols key matrix lexicographically, stably,
 * as an LSD sort over columns: the rows are re-sorted (stably) by each
 * column from the last to the first, so earlier columns decide and ties
 * keep input order.  order[i] receives the i-th row; items has room for
 * 2 * rows and tmp for rows. */
static void
sort_rows(const SortItem *keys, int64_t rows, int64_t cols, int64_t *order,
          SortItem *items, int64_t *tmp)
{
    for (int64_t i = 0; i < rows; i++) {
        order[i] = i;
    }
    for (int64_t c = cols - 1; c >= 0; c--) {
        /* index = position in the current order, so sort_fresh_items sees
         * the items in index order, as it requires */
        for (int64_t i = 0; i < rows; i++) {
            items[i].key = keys[order[i] * cols + c].key;
            items[i].index = i;
        }
        sort_fresh_items(items, items + rows, rows);
        for (int64_t i = 0; i < rows; i++) {
            tmp[i] = order[items[i].index];
        }
        memcpy(order, tmp, (size_t)rows * sizeof(*order));
    }
}

static bool
same_row(const SortItem *keys, int64_t cols, int64_t a, int64_t b,
         bool floating)
{
    for (int64_t c = 0; c < cols; c++) {
        if (!same_value(keys[a * cols + c].key, keys[b * cols + c].key,
                        floating)) {
            return false;
        }
    }
    return true;
}

/* The permutation that moves dim to the front, keeping the others in
 * order (PyTorch's moveaxis(dim, 0)), and its inverse. */
static void
front_permutation(int ndim, int64_t dim, int64_t *perm, int64_t *inverse)
{
    perm[0] = dim;
    for (int d = 0, k = 1; d < ndim; d++) {
        if (d != dim) {
            perm[k++] = d;
        }
    }
    for (int k = 0; k < ndim; k++) {
        inverse[perm[k]] = k;
    }
}

/* values = the rows of `flat` (rows x cols, contiguous) at `first_rows`,
 * shaped like `front` (dim 0 first) with ngroups rows, then put back in
 * the input's dim order. */
static THTensor *
gather_rows(THTensor *flat, const THTensor *front, const int64_t *first_rows,
            int64_t ngroups, int64_t cols, const int64_t *unpermute)
{
    int64_t sizes[TH_MAX_DIMS];
    memcpy(sizes, front->sizes, sizeof(sizes));
    sizes[0] = ngroups;
    THTensor *rows = THTensor_newEmpty(front->ndim, sizes, flat->dtype,
                                       flat->storage->device);
    if (rows == NULL) {
        return NULL;
    }
    size_t row_bytes = (size_t)(cols * THTensor_itemsize(flat));
    for (int64_t g = 0; g < ngroups && row_bytes > 0; g++) {
        memcpy(THTensor_data(rows) + (size_t)g * row_bytes,
               THTensor_data(flat) + (size_t)first_rows[g] * row_bytes,
               row_bytes);
    }
    THTensor *back = THTensor_newPermute(rows, rows->ndim, unpermute);
    THTensor_release(rows);
    THTensor *out = back ? THTensor_newContiguous(back) : NULL;
    THTensor_release(back);
    return out;
}

int
THTensor_uniqueDim(THTensor *input, int64_t dim, bool consecutive,
                   THTensor **values, THTensor **inverse, THTensor **counts)
{
    int64_t d, perm[TH_MAX_DIMS], unpermute[TH_MAX_DIMS];
    *values = NULL;
    if (inverse != NULL) {
        *inverse = NULL;
    }
    if (counts != NULL) {
        *counts = NULL;
    }
    if (input->ndim == 0) {
        return THError_set(TH_ERR_INDEX, "Dimension specified as 0 but "
                                         "tensor has no dimensions");
    }
    if (THTensor_wrapDim(dim, input->ndim, &d) < 0) {
        return -1;
    }
    int64_t rows = input->sizes[d];
    int64_t cols = rows > 0 ? input->numel / rows : 0;
    if (rows > 0 && cols == 0) {
        return THError_set(TH_ERR_RUNTIME,
                           "There are 0 sized dimensions, and they aren't "
                           "selected, so unique cannot be applied");
    }
    front_permutation(input->ndim, d, perm, unpermute);
    THTensor *front = THTensor_newPermute(input, input->ndim, perm);
    THTensor *flat = front ? THTensor_newContiguous(front) : NULL;
    /* rows * cols is flat's numel, and flat's bytes fit: so do these */
    size_t nkeys = (size_t)(rows * cols);
    SortItem *keys = NULL;
    int64_t *order = NULL;
    int status = -1;
    if (flat == NULL) {
        goto done;
    }
    keys = TH_mallocArray((int64_t)nkeys + 2 * rows + 1, sizeof(SortItem),
                          "unique");
    order = keys ? TH_mallocArray(2 * rows + 1, sizeof(int64_t), "unique")
                 : NULL;
    if (order == NULL) {
        goto done;
    }
    if (nkeys > 0) {
        load_keys[flat->dtype](keys, THTensor_data(flat),
                               THTensor_itemsize(flat), (int64_t)nkeys);
    }
    if (consecutive) {
        for (int64_t i = 0; i < rows; i++) {
            order[i] = i;
        }
    }
    else {
        sort_rows(keys, rows, cols, order, keys + nkeys, order + rows);
    }
    /* group the ordered rows; first_rows (the second half of `order`, free
     * again) records each group's first row */
    bool floating = THDtype_isFloating(flat->dtype);
    int64_t *first_rows = order + rows;
    int64_t ngroups = 0;
    for (int64_t i = 0; i < rows; i++) {
        if (i == 0 || !same_row(keys, cols, order[i - 1], order[i], floating)) {
            first_rows[ngroups++] = order[i];
        }
    }
    *values = gather_rows(flat, front, first_rows, ngroups, cols, unpermute);
    if (*values == NULL) {
        goto done;
    }
    THDeviceType device = flat->storage->device;
    if (inverse != NULL) {
        *inverse = THTensor_newEmpty(1, &rows, TH_Int64, device);
    }
    if (counts != NULL) {
        *counts = THTensor_newEmpty(1, &ngroups, TH_Int64, device);
    }
    if ((inverse != NULL && *inverse == NULL)
        || (counts != NULL && *counts == NULL)) {
        goto done;
    }
    int64_t group = -1;
    for (int64_t i = 0; i < rows; i++) {
        if (i == 0 || !same_row(keys, cols, order[i - 1], order[i], floating)) {
            group++;
            if (counts != NULL) {
                ((int64_t *)THTensor_data(*counts))[group] = 0;
            }
        }
        if (counts != NULL) {
            ((int64_t *)THTensor_data(*counts))[group]++;
        }
        if (inverse != NULL) {
            ((int64_t *)THTensor_data(*inverse))[order[i]] = group;
        }
    }
    status = 0;
done:
    if (status < 0) {
        THTensor_release(*values);
        *values = NULL;
        if (inverse != NULL) {
            THTensor_release(*inverse);
            *inverse = NULL;
        }
        if (counts != NULL) {
            THTensor_release(*counts);
            *counts = NULL;
        }
    }
    free(keys);
    free(order);
    THTensor_release(flat);
    THTensor_release(front);
    return status;
}

/*
 * Indexing.c -- t[index] and t[index] = value.
 *
 * Basic indexing is the NumPy subset that always gives a view: integers
 * (select a dim away), slices with positive steps (narrow and stride),
 * None (insert a size-1 dim) and ... (skip the remaining dims).  A tuple
 * combines them left to right.  Assignment takes the view of the index and
 * copies (or fills) into it, so it writes through to the original storage.
 *
 * Advanced indexing adds index tensors: integer tensors, bool masks, and
 * Python lists or NumPy arrays of them (see Note [Advanced indexing] in
 * THIndex.c for the result's shape).  As in PyTorch, the basic items are
 * applied first, as a view; the index tensors are then applied to that view
 * by the core, giving a copy (t[index]) or writing into it
 * (t[index] = value).  So an int among index tensors selects its dim away
 * first, as PyTorch does (NumPy would broadcast it with them instead).
 */
#include "THP.h"

/* ---- index items ------------------------------------------------------------ */

typedef enum {
    ITEM_INT,      /* selects its dim away */
    ITEM_SLICE,
    ITEM_NONE,     /* inserts a size-1 dim */
    ITEM_ELLIPSIS,
    ITEM_BOOL,     /* True/False: a new size-1 dim, indexed by [0] or [] */
    ITEM_TENSOR,   /* an index tensor or mask (advanced) */
} ItemKind;

typedef struct {
    ItemKind kind;
    PyObject *obj;    /* borrowed: the item as written */
    THTensor *tensor; /* owned; ITEM_TENSOR and ITEM_BOOL only */
} IndexItem;

/* Enough for any index that can be valid: each item either consumes one
 * of at most TH_MAX_DIMS dims or adds one. */
#define THP_MAX_INDEX_ITEMS (2 * TH_MAX_DIMS + 1)

typedef struct {
    IndexItem items[THP_MAX_INDEX_ITEMS];
    Py_ssize_t n;
    bool advanced; /* some item is an index tensor or a bool */
} ParsedIndex;

static void
parsed_index_clear(ParsedIndex *index)
{
    for (Py_ssize_t i = 0; i < index->n; i++) {
        THTensor_release(index->items[i].tensor);
    }
    index->n = 0;
}

static int
is_integer_index(PyObject *item)
{
    if (PyLong_Check(item)) {
        return !PyBool_Check(item);
    }
    if (THPVariable_Check(item)) {
        THTensor *t = THPVariable_Unpack(item);
        return t->ndim == 0 && THDtype_isIntegral(t->dtype, false);
    }
    /* NumPy integer scalars; arrays (sequences) are index tensors */
    return PyIndex_Check(item) && !PyBool_Check(item)
           && !PySequence_Check(item);
}

/* [0] for True, [] for False: t[True] is t[None][[0]]. */
static THTensor *
new_bool_positions(bool value)
{
    int64_t n = value ? 1 : 0;
    THTensor *positions = THTensor_newEmpty(1, &n, TH_Int64, TH_DEVICE_CPU);
    if (positions != NULL && value) {
        ((int64_t *)THTensor_data(positions))[0] = 0;
    }
    return positions;
}

/* A list, tuple or array used as an index, as a tensor (a new
 * reference).  An empty sequence means no positions: int64, not the
 * default float dtype ember.tensor([]) would give. */
static THTensor *
new_tensor_from_sequence(PyObject *obj)
{
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        /* a subclass's __len__ runs here, and may raise: raise it now */
        Py_ssize_t length = PySequence_Size(obj);
        if (length < 0) {
            return NULL;
        }
        if (length == 0) {
            int64_t zero = 0;
            return THTensor_newEmpty(1, &zero, TH_Int64, TH_DEVICE_CPU);
        }
    }
    PyObject *wrapped = THPVariable_FromData(obj, -1, 0);
    if (wrapped == NULL) {
        return NULL;
    }
    THTensor *tensor = THPVariable_Unpack(wrapped);
    THTensor_retain(tensor);
    Py_DECREF(wrapped);
    return tensor;
}

/* Sets item->tensor for an index tensor (or a 0-d bool, which becomes
 * ITEM_BOOL). */
static int
classify_tensor(IndexItem *item, THTensor *tensor)
{
    if (THPUtils_checkOnHost(tensor, "an index tensor") < 0) {
        THTensor_release(tensor);
        return -1;
    }
    if (tensor->ndim == 0 && tensor->dtype == TH_Bool) {
        bool value = *(const bool *)THTensor_data(tensor);
        THTensor_release(tensor);
        item->kind = ITEM_BOOL;
        item->tensor = new_bool_positions(value);
        return item->tensor == NULL ? THPUtils_setErrorFromTH_int() : 0;
    }
    if (tensor->ndim == 0 && THDtype_isIntegral(tensor->dtype, false)) {
        THTensor_release(tensor); /* a 0-d int array indexes like an int */
        item->kind = ITEM_INT;
        return 0;
    }
    item->kind = ITEM_TENSOR;
    item->tensor = tensor;
    return 0;
}

static int
parse_item(PyObject *obj, IndexItem *item)
{
    item->obj = obj;
    item->tensor = NULL;
    if (obj == Py_None) {
        item->kind = ITEM_NONE;
    }
    else if (obj == Py_Ellipsis) {
        item->kind = ITEM_ELLIPSIS;
    }
    else if (PySlice_Check(obj)) {
        item->kind = ITEM_SLICE;
    }
    else if (PyBool_Check(obj)) {
        item->kind = ITEM_BOOL;
        item->tensor = new_bool_positions(obj == Py_True);
        return item->tensor == NULL ? THPUtils_setErrorFromTH_int() : 0;
    }
    else if (is_integer_index(obj)) {
        item->kind = ITEM_INT;
    }
    else if (THPVariable_Check(obj)) {
        THTensor *tensor = THPVariable_Unpack(obj);
        THTensor_retain(tensor);
        return classify_tensor(item, tensor);
    }
    else if (!PyUnicode_Check(obj) && !PyBytes_Check(obj)
             && (PySequence_Check(obj) || PyObject_CheckBuffer(obj))) {
        THTensor *tensor = new_tensor_from_sequence(obj);
        return tensor == NULL ? -1 : classify_tensor(item, tensor);
    }
    else {
        PyErr_Format(PyExc_IndexError,
                     "only integers, slices (`:`), ellipsis (`...`), None "
                     "and long or byte Variables are valid indices (got "
                     "%.100s)",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

/* How many dims an index tensor stands at: a k-dim mask at k. */
static int
tensor_dims(const THTensor *index)
{
    bool is_mask = index->dtype == TH_Bool || index->dtype == TH_UInt8;
    return is_mask ? index->ndim : 1;
}

/* How many dims of the tensor an item consumes. */
static int
consumed_dims(const IndexItem *item)
{
    switch (item->kind) {
    case ITEM_INT:
    case ITEM_SLICE:
        return 1;
    case ITEM_TENSOR:
        return tensor_dims(item->tensor);
    default:
        return 0;
    }
}

/* Splits `index` (a tuple, or one item standing for a tuple of one)
 * into items, converting index tensors.  Returns 0 or -1 (nothing owned
 * then). */
static int
parse_index(THTensor *tensor, PyObject *index, ParsedIndex *parsed)
{
    PyObject *const *objs = &index;
    Py_ssize_t n = 1;
    parsed->n = 0;
    parsed->advanced = false;
    if (PyTuple_Check(index)) {
        objs = &PyTuple_GET_ITEM(index, 0);
        n = PyTuple_GET_SIZE(index);
    }
    else if (tensor->ndim == 0 && is_integer_index(index)) {
        /* PyTorch's hint for t[0] on a 0-d tensor (t[0,] is "too many
         * indices" below). */
        PyErr_SetString(PyExc_IndexError,
                        "invalid index of a 0-dim tensor. Use "
                        "`tensor.item()` in Python or `tensor.item<T>()` in "
                        "C++ to convert a 0-dim tensor to a number");
        return -1;
    }
    if (n > THP_MAX_INDEX_ITEMS) {
        PyErr_Format(PyExc_IndexError,
                     "too many indices for tensor of dimension %d",
                     tensor->ndim);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        IndexItem *item = &parsed->items[i];
        if (parse_item(objs[i], item) < 0) {
            parsed_index_clear(parsed);
            return -1;
        }
        parsed->n++;
        parsed->advanced = parsed->advanced || item->kind == ITEM_TENSOR
                           || item->kind == ITEM_BOOL;
    }
    return 0;
}

/* ---- the basic part: a view ------------------------------------------------- */

/* A slice bound as PySlice_AdjustIndices leaves it for a step of 1:
 * counted from the end when negative, then clamped to [0, size]. */
static int64_t
clamp_slice_bound(int64_t bound, int64_t size)
{
    if (bound < 0) {
        bound += size;
        return bound < 0 ? 0 : bound;
    }
    return bound > size ? size : bound;
}

/* t[a:b] with a and b small exact ints or None and no step (the common
 * slice): its bounds read straight from the slice, where PySlice_Unpack
 * would go through __index__ for each.  false: take the general path. */
static bool
unpack_simple_slice(PyObject *obj, int64_t size, int64_t *start,
                    int64_t *stop)
{
    PySliceObject *slice = (PySliceObject *)obj;
    int64_t a = 0, b = size;
    if (slice->step != Py_None
        || (slice->start != Py_None && !THPUtils_smallInt(slice->start, &a))
        || (slice->stop != Py_None && !THPUtils_smallInt(slice->stop, &b))) {
        return false;
    }
    *start = clamp_slice_bound(a, size);
    *stop = clamp_slice_bound(b, size);
    return true;
}

/* The view that one int, slice or None (the `position`-th item of the
 * index) makes at dim `dim` of t: a new reference, or NULL with an
 * exception set.  *dim moves past the dims the view keeps. */
static THTensor *
new_item_view(THTensor *t, int *dim, Py_ssize_t position,
              const IndexItem *item)
{
    THTensor *next;
    if (item->kind == ITEM_INT) {
        int64_t index;
        if (THPUtils_unpackLong(item->obj, "__getitem__", "index", &index)
            < 0) {
            return NULL;
        }
        int64_t size = t->sizes[*dim]; /* *dim < ndim: items were counted */
        if (index < -size || index >= size) {
            /* PyTorch names the item's position in the index, not the
             * tensor dim: t[0, 3] on a 2x3 tensor fails at "dimension 1". */
            PyErr_Format(PyExc_IndexError,
                         "index %lld is out of bounds for dimension %zd "
                         "with size %lld",
                         (long long)index, position, (long long)size);
            return NULL;
        }
        next = THTensor_newSelect(t, *dim, index);
    }
    else if (item->kind == ITEM_SLICE) {
        int64_t start, stop, step = 1;
        if (!unpack_simple_slice(item->obj, t->sizes[*dim], &start, &stop)) {
            Py_ssize_t first, last, by;
            if (PySlice_Unpack(item->obj, &first, &last, &by) < 0) {
                return NULL;
            }
            if (by <= 0) {
                PyErr_SetString(PyExc_ValueError,
                                "step must be greater than zero");
                return NULL;
            }
            PySlice_AdjustIndices((Py_ssize_t)t->sizes[*dim], &first, &last,
                                  by);
            start = first, stop = last, step = by;
        }
        next = THTensor_newSlice(t, *dim, start, stop, step);
        (*dim)++;
    }
    else { /* None, or the new dim of a bool */
        next = THTensor_newUnsqueeze(t, *dim);
        (*dim)++;
    }
    if (next == NULL) {
        THPUtils_setErrorFromTH();
    }
    return next;
}

/* Replaces *current (released) with new_item_view of it.  0 or -1. */
static int
apply_basic_item(THTensor **current, int *dim, Py_ssize_t position,
                 const IndexItem *item)
{
    THTensor *next = new_item_view(*current, dim, position, item);
    if (next == NULL) {
        return -1;
    }
    THTensor_release(*current);
    *current = next;
    return 0;
}

/* The view left by the basic items of the index (a new reference, or
 * NULL with an exception set), and in `advanced` the index tensors to
 * apply to it: one entry per leading dim of the view, NULL for a dim kept
 * whole, a k-dim mask standing for k dims (borrowed from `parsed`).
 * Returns the number of entries in *nadvanced. */
static THTensor *
apply_basic_items(THTensor *tensor, const ParsedIndex *parsed,
                  THTensor **advanced, int *nadvanced)
{
    int specified = 0, ellipses = 0;
    for (Py_ssize_t i = 0; i < parsed->n; i++) {
        specified += consumed_dims(&parsed->items[i]);
        ellipses += parsed->items[i].kind == ITEM_ELLIPSIS;
    }
    if (ellipses > 1) {
        PyErr_SetString(PyExc_IndexError,
                        "an index can only have a single ellipsis ('...')");
        return NULL;
    }
    if (specified > tensor->ndim) {
        PyErr_Format(PyExc_IndexError,
                     "too many indices for tensor of dimension %d",
                     tensor->ndim);
        return NULL;
    }
    /* at_dim[d]: the index tensor standing at dim d of the view so far.
     * Later items only touch dims at or after `dim`, so entries stay put. */
    THTensor *at_dim[THP_MAX_INDEX_ITEMS];
    /* Each item moves `dim` by at most the dims it consumes or adds, so
     * only the first ndim + n entries can be read: clear just those. */
    Py_ssize_t reach = tensor->ndim + parsed->n;
    memset(at_dim, 0, sizeof(THTensor *) * (size_t)Py_MIN(
                          reach, (Py_ssize_t)THP_MAX_INDEX_ITEMS));
    THTensor_retain(tensor); /* `current` owns one reference throughout */
    THTensor *current = tensor;
    int dim = 0;
    for (Py_ssize_t i = 0; i < parsed->n; i++) {
        const IndexItem *item = &parsed->items[i];
        if (item->kind == ITEM_ELLIPSIS) {
            dim += tensor->ndim - specified;
            continue;
        }
        if (item->kind == ITEM_TENSOR) {
            at_dim[dim] = item->tensor;
            dim += consumed_dims(item);
            continue;
        }
        if (item->kind == ITEM_BOOL) {
            at_dim[dim] = item->tensor;
        }
        if (apply_basic_item(&current, &dim, i, item) < 0) {
            THTensor_release(current);
            return NULL;
        }
    }
    int n = 0;
    for (int d = 0; d < dim; n++) {
        advanced[n] = at_dim[d];
        d += at_dim[d] == NULL ? 1 : tensor_dims(at_dim[d]);
    }
    *nadvanced = n;
    return current;
}

/* ---- __getitem__ and __setitem__ ------------------------------------------- */

/* The commonest indexes, t[i] and t[a:b], on a tensor with a dim to
 * index: the one view they make, without the general machinery. */
static bool
is_single_item(const THTensor *tensor, PyObject *index)
{
    return tensor->ndim > 0
           && (PyLong_CheckExact(index) || PySlice_Check(index));
}

static PyObject *
wrap_single_item_view(THTensor *tensor, PyObject *index)
{
    IndexItem item = {PyLong_CheckExact(index) ? ITEM_INT : ITEM_SLICE,
                      index, NULL};
    int dim = 0;
    THTensor *view = new_item_view(tensor, &dim, 0, &item);
    return view == NULL ? NULL : THPVariable_Wrap(view);
}

static PyObject *
getitem_pinned(PyObject *self, PyObject *index)
{
    PyObject *operands[2] = {self, index}, *routed;
    if (THPAutograd_maybeDispatch("__getitem__", operands, 2, &routed)) {
        return routed;
    }
    THTensor *tensor = THPVariable_Unpack(self);
    if (is_single_item(tensor, index)) {
        return wrap_single_item_view(tensor, index);
    }
    ParsedIndex parsed;
    THTensor *advanced[THP_MAX_INDEX_ITEMS];
    int nadvanced;
    if (parse_index(THPVariable_Unpack(self), index, &parsed) < 0) {
        return NULL;
    }
    THTensor *view = apply_basic_items(THPVariable_Unpack(self), &parsed,
                                       advanced, &nadvanced);
    if (view == NULL || !parsed.advanced) {
        parsed_index_clear(&parsed);
        return view == NULL ? NULL : THPVariable_Wrap(view);
    }
    THTensor *result;
    THP_RUN_WITHOUT_GIL_IF(true,
                           result = THTensor_newIndex(view, nadvanced,
                                                      advanced));
    THTensor_release(view);
    parsed_index_clear(&parsed);
    return THPVariable_Wrap(result);
}

/* The value of t[index] = value as a tensor (a new reference) or, for a
 * Python number, as a scalar (*source stays NULL).  Converted before
 * anything is written, so a bad value leaves the tensor as it was. */
static int
parse_value(PyObject *value, PyObject **source, THScalar *scalar)
{
    *source = NULL;
    if (THPVariable_Check(value)) {
        Py_INCREF(value); /* *source: released by the caller */
        *source = value;
        return 0;
    }
    if (PyBool_Check(value) || PyLong_Check(value) || PyFloat_Check(value)) {
        return THPUtils_parseScalar(value, scalar);
    }
    *source = THPVariable_FromData(value, -1, 0);
    return *source == NULL ? -1 : 0;
}

/* view[advanced] = source, or = scalar when source is NULL. */
static int
put_values(THTensor *view, THTensor *const *advanced, int nadvanced,
           PyObject *source, THScalar scalar)
{
    THTensor *values;
    if (source != NULL) {
        values = THPVariable_Unpack(source);
        THTensor_retain(values);
    }
    else {
        values = THTensor_newEmpty(0, NULL, view->dtype, TH_DEVICE_CPU);
        if (values != NULL && THTensor_fill(values, scalar) < 0) {
            THTensor_release(values);
            values = NULL;
        }
    }
    if (values == NULL) {
        return -1;
    }
    int status;
    THP_RUN_WITHOUT_GIL_IF(true, status = THTensor_indexPut(
                                     view, nadvanced, advanced, values,
                                     false));
    THTensor_release(values);
    return status;
}

static int
setitem_pinned(PyObject *self, PyObject *index, PyObject *value)
{
    PyObject *operands[3] = {self, index, value}, *routed;
    if (THPAutograd_maybeDispatch("__setitem__", operands, 3, &routed)) {
        if (routed == NULL) {
            return -1;
        }
        Py_DECREF(routed); /* the handler's None */
        return 0;
    }
    THScalar scalar;
    PyObject *source;
    if (parse_value(value, &source, &scalar) < 0) {
        return -1;
    }
    ParsedIndex parsed;
    THTensor *advanced[THP_MAX_INDEX_ITEMS];
    int nadvanced;
    THTensor *view = NULL;
    if (parse_index(THPVariable_Unpack(self), index, &parsed) == 0) {
        view = apply_basic_items(THPVariable_Unpack(self), &parsed, advanced,
                                 &nadvanced);
        if (view == NULL) {
            parsed_index_clear(&parsed);
        }
    }
    if (view == NULL) {
        Py_XDECREF(source);
        return -1;
    }
    int status;
    if (parsed.advanced) {
        status = put_values(view, advanced, nadvanced, source, scalar);
    }
    else {
        status = source != NULL
                     ? THTensor_copy(view, THPVariable_Unpack(source))
                     : THTensor_fill(view, scalar);
    }
    THTensor_release(view);
    parsed_index_clear(&parsed);
    Py_XDECREF(source);
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}

/* Note [Plain indexes need no pin frame]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A pin frame (Note [Pinned arguments] in THP.h) is needed because an
 * index item's __index__ or a sequence's items can run Python, which can
 * rebind self.data and free the THTensor being indexed.  t[i] and t[a:b]
 * with exact ints (or None) for every bound run no Python at all between
 * reading self's THTensor and making the view (the ints are read without
 * __index__, the view takes its own references to the storage and the
 * version counter), so on a CPU tensor they skip the frame, whose retain
 * and release of self's THTensor were a third of the cost of t[1:3].
 * The autograd and tracer check comes first: it may run Python (a
 * handler, the tracer's hook), but then its result is returned and the
 * tensor is never read; when it does not, the THTensor is read (and the
 * conditions checked) after it.  Anything else, and any device tensor, takes the pinned path. */

/* An exact int or None: read without running Python. */
static bool
is_plain_bound(PyObject *obj)
{
    return obj == Py_None || PyLong_CheckExact(obj);
}

static bool
runs_no_python(PyObject *index)
{
    if (PyLong_CheckExact(index)) {
        return true;
    }
    if (!PySlice_Check(index)) {
        return false;
    }
    PySliceObject *slice = (PySliceObject *)index;
    return is_plain_bound(slice->start) && is_plain_bound(slice->stop)
           && is_plain_bound(slice->step);
}

static bool
takes_unpinned_path(const THTensor *tensor, PyObject *index)
{
    return runs_no_python(index) && is_single_item(tensor, index)
           && tensor->storage->device == TH_DEVICE_CPU;
}

/* The view for Note [Plain indexes need no pin frame] (*taken true), or
 * NULL with no exception when the index needs the pinned path. */
static PyObject *
getitem_unpinned(PyObject *self, PyObject *index, bool *taken)
{
    *taken = false;
    if (!takes_unpinned_path(THPVariable_CURRENT(self), index)) {
        return NULL;
    }
    PyObject *operands[2] = {self, index}, *routed;
    if (THPAutograd_maybeDispatch("__getitem__", operands, 2, &routed)) {
        *taken = true;
        return routed;
    }
    /* Read after the check, and checked again: it looks up dicts, and a
     * lookup can run Python. */
    THTensor *tensor = THPVariable_CURRENT(self);
    if (!takes_unpinned_path(tensor, index)) {
        return NULL;
    }
    *taken = true;
    return wrap_single_item_view(tensor, index);
}

/* Both run inside a pin frame (Note [Pinned arguments] in THP.h): an
 * index item's __index__ or a sequence's items can rebind self.data.
 * Plain t[i] and t[a:b] skip it (Note [Plain indexes need no pin frame]). */
static PyObject *
THPVariable_getitem(PyObject *self, PyObject *index)
{
    bool taken;
    PyObject *view = getitem_unpinned(self, index, &taken);
    if (taken) {
        return view;
    }
    return THPPin_callBinary("__getitem__", getitem_pinned, self, index,
                             true);
}

static int
THPVariable_setitem(PyObject *self, PyObject *index, PyObject *value)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "tensors do not support item "
                        "deletion");
        return -1;
    }
    PyObject *objects[3] = {self, index, value};
    THPPinFrame frame;
    THPPin_enter(&frame);
    frame.allows_mixed_devices = true; /* t[cpu_index] = cpu_value */
    int status = THPPin_objects(&frame, objects, 3);
    if (status == 0) {
        status = setitem_pinned(self, index, value);
    }
    else if (status == 1) { /* another device: autograd first, as here */
        PyObject *result;
        if (!THPAutograd_maybeDispatch("__setitem__", objects, 3, &result)) {
            result = THPDevice_launchSlot("__setitem__", objects, 3);
        }
        status = result == NULL ? -1 : 0;
        Py_XDECREF(result);
    }
    THPPin_exit(&frame);
    return status;
}

PyMappingMethods THPVariable_as_mapping = {
    .mp_subscript = THPVariable_getitem,
    .mp_ass_subscript = THPVariable_setitem,
};

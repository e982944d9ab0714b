/*
 * Indexing.c -- t[index] and t[index] = value for basic indices.
 *
 * Basic indexing is the NumPy subset that always gives a view: integers
 * (select a dim away), slices with positive steps (narrow and stride),
 * None (insert a size-1 dim) and ... (skip the remaining dims).  A tuple
 * combines them left to right.  Assignment takes the view of the index and
 * copies (or fills) into it, so it writes through to the original storage.
 *
 * Not here: advanced indexing with integer tensors, lists or bool masks
 * (the operators issue); such indices get a clear IndexError.
 */
#include "THP.h"

/* How many tensor dims an index item consumes. */
static int
consumes_dim(PyObject *item)
{
    return item != Py_None && item != Py_Ellipsis;
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
    return PyIndex_Check(item) && !PyBool_Check(item);
}

/* Applies one index item, the `position`-th of the index tuple, at dim
 * *dim of *current, replacing *current with the new view (the old
 * reference is released).  Returns 0 or -1. */
static int
apply_index_item(THTensor **current, int *dim, Py_ssize_t position,
                 PyObject *item)
{
    THTensor *t = *current;
    THTensor *next = NULL;
    if (is_integer_index(item)) {
        int64_t index;
        if (THPUtils_unpackLong(item, "__getitem__", "index", &index) < 0) {
            return -1;
        }
        int64_t size = t->sizes[*dim]; /* *dim < ndim: items were counted */
        if (index < -size || index >= size) {
            /* PyTorch names the item's position in the index, not the
             * tensor dim: t[0, 3] on a 2x3 tensor fails at "dimension 1". */
            PyErr_Format(PyExc_IndexError,
                         "index %lld is out of bounds for dimension %zd "
                         "with size %lld",
                         (long long)index, position, (long long)size);
            return -1;
        }
        next = THTensor_newSelect(t, *dim, index);
    }
    else if (PySlice_Check(item)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(item, &start, &stop, &step) < 0) {
            return -1;
        }
        if (step <= 0) {
            PyErr_SetString(PyExc_ValueError,
                            "step must be greater than zero");
            return -1;
        }
        PySlice_AdjustIndices((Py_ssize_t)t->sizes[*dim], &start, &stop,
                              step);
        next = THTensor_newSlice(t, *dim, start, stop, step);
        (*dim)++;
    }
    else if (item == Py_None) {
        next = THTensor_newUnsqueeze(t, *dim);
        (*dim)++;
    }
    else {
        PyErr_Format(PyExc_IndexError,
                     "only integers, slices (`:`), ellipsis (`...`) and None "
                     "are valid indices in this version of ember (advanced "
                     "indexing with %s is not supported yet)",
                     Py_TYPE(item)->tp_name);
        return -1;
    }
    if (next == NULL) {
        THPUtils_setErrorFromTH();
        return -1;
    }
    THTensor_release(t);
    *current = next;
    return 0;
}

/* The view t[index]: a new THTensor reference, or NULL with an
 * exception set. */
static THTensor *
index_view(THTensor *tensor, PyObject *index)
{
    /* A lone item is indexed as a tuple of one, without building one. */
    PyObject *const *items = &index;
    Py_ssize_t n = 1;
    if (PyTuple_Check(index)) {
        items = &PyTuple_GET_ITEM(index, 0);
        n = PyTuple_GET_SIZE(index);
    }
    else if (tensor->ndim == 0 && is_integer_index(index)) {
        /* PyTorch's hint for t[0] on a 0-d tensor (t[0,] is "too many
         * indices" below). */
        PyErr_SetString(PyExc_IndexError,
                        "invalid index of a 0-dim tensor. Use "
                        "`tensor.item()` in Python or `tensor.item<T>()` in "
                        "C++ to convert a 0-dim tensor to a number");
        return NULL;
    }
    int specified = 0, ellipses = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        specified += consumes_dim(items[i]);
        ellipses += items[i] == Py_Ellipsis;
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
    THTensor_retain(tensor); /* `current` owns one reference throughout */
    THTensor *current = tensor;
    int dim = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == Py_Ellipsis) {
            dim += tensor->ndim - specified;
            continue;
        }
        if (apply_index_item(&current, &dim, i, items[i]) < 0) {
            THTensor_release(current);
            return NULL;
        }
    }
    return current;
}

static PyObject *
THPVariable_getitem(PyObject *self, PyObject *index)
{
    THTensor *view = index_view(THPVariable_Unpack(self), index);
    return view == NULL ? NULL : THPVariable_Wrap(view);
}

static int
THPVariable_setitem(PyObject *self, PyObject *index, PyObject *value)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "tensors do not support item "
                        "deletion");
        return -1;
    }
    THScalar scalar;
    PyObject *source = NULL;
    /* Convert the value before touching anything, so a bad value leaves
     * the tensor as it was. */
    if (THPVariable_Check(value)) {
        Py_INCREF(value); /* source: released below */
        source = value;
    }
    else if (PyBool_Check(value) || PyLong_Check(value)
             || PyFloat_Check(value)) {
        if (THPUtils_parseScalar(value, &scalar) < 0) {
            return -1;
        }
    }
    else {
        source = THPVariable_FromData(value, -1, 0);
        if (source == NULL) {
            return -1;
        }
    }
    THTensor *view = index_view(THPVariable_Unpack(self), index);
    if (view == NULL) {
        Py_XDECREF(source);
        return -1;
    }
    int status = source != NULL
                     ? THTensor_copy(view, THPVariable_Unpack(source))
                     : THTensor_fill(view, scalar);
    THTensor_release(view);
    Py_XDECREF(source);
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}

PyMappingMethods THPVariable_as_mapping = {
    .mp_subscript = THPVariable_getitem,
    .mp_ass_subscript = THPVariable_setitem,
};

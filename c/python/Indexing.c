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

/* Applies one index item at dim *dim of *current, replacing *current with
 * the new view (the old reference is released).  Returns 0 or -1. */
static int
apply_index_item(THTensor **current, int *dim, PyObject *item)
{
    THTensor *t = *current;
    THTensor *next = NULL;
    if (is_integer_index(item)) {
        int64_t index;
        if (THPUtils_unpackLong(item, "__getitem__", "index", &index) < 0) {
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
    PyObject *items;
    if (PyTuple_Check(index)) {
        Py_INCREF(index); /* items: released at the end */
        items = index;
    }
    else {
        items = PyTuple_Pack(1, index);
        if (items == NULL) {
            return NULL;
        }
    }
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    int specified = 0, ellipses = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(items, i);
        specified += consumes_dim(item);
        ellipses += item == Py_Ellipsis;
    }
    if (ellipses > 1) {
        PyErr_SetString(PyExc_IndexError,
                        "an index can only have a single ellipsis ('...')");
        Py_DECREF(items);
        return NULL;
    }
    if (specified > tensor->ndim) {
        PyErr_Format(PyExc_IndexError,
                     "too many indices for tensor of dimension %d",
                     tensor->ndim);
        Py_DECREF(items);
        return NULL;
    }
    THTensor_retain(tensor); /* `current` owns one reference throughout */
    THTensor *current = tensor;
    int dim = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(items, i);
        if (item == Py_Ellipsis) {
            dim += tensor->ndim - specified;
            continue;
        }
        if (apply_index_item(&current, &dim, item) < 0) {
            THTensor_release(current);
            Py_DECREF(items);
            return NULL;
        }
    }
    Py_DECREF(items);
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

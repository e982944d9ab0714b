/*
 * Size.c -- ember.Size, the type of `tensor.shape`: a tuple subclass (as
 * torch.Size is) that prints as `ember.Size([2, 3])`.
 */
#include "THP.h"

static PyObject *
THPSize_repr(PyObject *self)
{
    PyObject *as_list = PySequence_List(self);
    if (as_list == NULL) {
        return NULL;
    }
    PyObject *result = PyUnicode_FromFormat("ember.Size(%R)", as_list);
    Py_DECREF(as_list);
    return result;
}

static PyObject *
THPSize_numel(PyObject *self, PyObject *unused)
{
    (void)unused;
    int64_t numel = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self); i++) {
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(self, i));
        if (size == -1 && PyErr_Occurred()) {
            return NULL;
        }
        numel *= size;
    }
    return PyLong_FromLongLong(numel);
}

/* An ember.Size with the items of a plain tuple; steals `tuple`. */
static PyObject *
size_from_tuple(PyObject *tuple)
{
    if (tuple == NULL || !PyTuple_Check(tuple)) {
        return tuple; /* an error, or a result that is no tuple: pass on */
    }
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    PyObject *self = THPSizeType.tp_alloc(&THPSizeType, n);
    if (self != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyTuple_GET_ITEM(tuple, i);
            Py_INCREF(item); /* stolen by PyTuple_SET_ITEM */
            PyTuple_SET_ITEM(self, i, item);
        }
    }
    Py_DECREF(tuple);
    return self;
}

/* Size(iterable of ints): like tuple(), but every item must be an int. */
static PyObject *
THPSize_pynew(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *tuple = PyTuple_Type.tp_new(type, args, kwargs);
    if (tuple == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (!PyLong_Check(item)) {
            PyErr_Format(PyExc_TypeError,
                         "ember.Size() takes an iterable of 'int' (item %zd "
                         "is '%s')",
                         i, Py_TYPE(item)->tp_name);
            Py_DECREF(tuple);
            return NULL;
        }
    }
    return tuple;
}

/* Slicing and concatenation give Sizes, as with torch.Size. */
static PyObject *
THPSize_subscript(PyObject *self, PyObject *key)
{
    PyObject *result = PyTuple_Type.tp_as_mapping->mp_subscript(self, key);
    return PySlice_Check(key) ? size_from_tuple(result) : result;
}

static PyObject *
THPSize_concat(PyObject *self, PyObject *other)
{
    return size_from_tuple(PyTuple_Type.tp_as_sequence->sq_concat(self,
                                                                  other));
}

static PyMappingMethods THPSize_as_mapping = {
    .mp_subscript = THPSize_subscript,
};

static PySequenceMethods THPSize_as_sequence = {
    .sq_concat = THPSize_concat,
};

static PyMethodDef THPSize_methods[] = {
    {"numel", THPSize_numel, METH_NOARGS, "The product of the sizes."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject THPSizeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.Size",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_TUPLE_SUBCLASS,
    .tp_doc = "The shape of a tensor: a tuple of ints.",
    .tp_repr = THPSize_repr,
    .tp_as_sequence = &THPSize_as_sequence,
    .tp_as_mapping = &THPSize_as_mapping,
    .tp_methods = THPSize_methods,
    .tp_new = THPSize_pynew,
};

PyObject *
THPSize_New(int ndim, const int64_t *sizes)
{
    PyObject *self = THPSizeType.tp_alloc(&THPSizeType, ndim);
    if (self == NULL) {
        return NULL;
    }
    for (int i = 0; i < ndim; i++) {
        PyObject *size = PyLong_FromLongLong(sizes[i]);
        if (size == NULL) {
            Py_DECREF(self);
            return NULL;
        }
        PyTuple_SET_ITEM(self, i, size); /* steals `size` */
    }
    return self;
}

int
THPSize_InitModule(PyObject *module)
{
    THPSizeType.tp_base = &PyTuple_Type;
    if (PyType_Ready(&THPSizeType) < 0) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "Size", (PyObject *)&THPSizeType);
}

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
    .tp_methods = THPSize_methods,
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

/*
 * Dtype.c -- ember.dtype objects (ember.float32, ...) and the default
 * floating dtype.  One immortal singleton per THDtype, made at import from
 * the dtype X-macro (Note [Dtype X-macro]).
 */
#include "THP.h"

/* Strong references, made at import and kept for the life of the process. */
static PyObject *dtype_objects[TH_NUM_DTYPES];
static THDtype default_float = TH_Float32;

static PyObject *
THPDtype_repr(PyObject *self)
{
    return PyUnicode_FromFormat("ember.%s",
                                THDtype_name(((THPDtype *)self)->dtype));
}

static PyObject *
THPDtype_is_floating_point(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(THDtype_isFloating(((THPDtype *)self)->dtype));
}

static PyObject *
THPDtype_is_signed(PyObject *self, void *closure)
{
    (void)closure;
    THDtype dtype = ((THPDtype *)self)->dtype;
    return PyBool_FromLong(dtype != TH_Bool && dtype != TH_UInt8);
}

static PyObject *
THPDtype_itemsize(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(THDtype_itemsize(((THPDtype *)self)->dtype));
}

static PyObject *
THPDtype_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    /* Pickle by name: ember.float32 is found again as an attribute. */
    return PyUnicode_FromString(THDtype_name(((THPDtype *)self)->dtype));
}

static PyGetSetDef THPDtype_getset[] = {
    {"is_floating_point", THPDtype_is_floating_point, NULL, NULL, NULL},
    {"is_signed", THPDtype_is_signed, NULL, NULL, NULL},
    {"itemsize", THPDtype_itemsize, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef THPDtype_methods[] = {
    {"__reduce__", THPDtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject THPDtypeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.dtype",
    .tp_basicsize = sizeof(THPDtype),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The element type of a tensor, e.g. ember.float32.",
    .tp_repr = THPDtype_repr,
    .tp_getset = THPDtype_getset,
    .tp_methods = THPDtype_methods,
};

PyObject *
THPDtype_Get(THDtype dtype)
{
    return dtype_objects[dtype];
}

int
THPDtype_Parse(PyObject *obj, THDtype *out)
{
    if (Py_IS_TYPE(obj, &THPDtypeType)) {
        *out = ((THPDtype *)obj)->dtype;
        return 0;
    }
    /* Python's own types name the widest dtype of their kind. */
    if (obj == (PyObject *)&PyFloat_Type) {
        *out = TH_Float64;
        return 0;
    }
    if (obj == (PyObject *)&PyLong_Type) {
        *out = TH_Int64;
        return 0;
    }
    if (obj == (PyObject *)&PyBool_Type) {
        *out = TH_Bool;
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "dtype must be an ember.dtype (e.g. ember.float32), not %s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

THDtype
THPDtype_defaultFloat(void)
{
    return default_float;
}

static PyObject *
THPDtype_get_default_dtype(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *result = THPDtype_Get(default_float);
    Py_INCREF(result); /* a new reference to the immortal singleton */
    return result;
}

static PyObject *
THPDtype_set_default_dtype(PyObject *module, PyObject *arg)
{
    (void)module;
    THDtype dtype;
    if (THPDtype_Parse(arg, &dtype) < 0) {
        return NULL;
    }
    if (!THDtype_isFloating(dtype)) {
        PyErr_Format(PyExc_TypeError,
                     "only floating-point types are supported as the "
                     "default type (got ember.%s)",
                     THDtype_name(dtype));
        return NULL;
    }
    default_float = dtype;
    Py_RETURN_NONE;
}

static PyMethodDef THPDtype_module_methods[] = {
    {"get_default_dtype", THPDtype_get_default_dtype, METH_NOARGS,
     "The dtype of new floating tensors (ember.float32 unless changed)."},
    {"set_default_dtype", THPDtype_set_default_dtype, METH_O,
     "Sets the dtype of new floating tensors (float32 or float64)."},
    {NULL, NULL, 0, NULL},
};

int
THPDtype_InitModule(PyObject *module)
{
    if (PyType_Ready(&THPDtypeType) < 0) {
        return -1;
    }
    for (int i = 0; i < TH_NUM_DTYPES; i++) {
        THPDtype *obj = PyObject_New(THPDtype, &THPDtypeType);
        if (obj == NULL) {
            return -1;
        }
        obj->dtype = (THDtype)i;
        dtype_objects[i] = (PyObject *)obj; /* keeps the new reference */
        /* PyModule_AddObjectRef takes its own new reference. */
        if (PyModule_AddObjectRef(module, THDtype_name((THDtype)i),
                                  dtype_objects[i])
            < 0) {
            return -1;
        }
    }
    if (PyModule_AddObjectRef(module, "dtype", (PyObject *)&THPDtypeType)
        < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, THPDtype_module_methods);
}

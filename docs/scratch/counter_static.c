/*
 * counter_static.c -- the smallest extension type, the classic way:
 * single-phase init and a static type (chapter 0 of the walkthrough).
 *
 *   >>> import counter_static
 *   >>> c = counter_static.Counter()
 *   >>> c.increment(); c.increment()
 *   >>> c.value
 *   2
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* The instance: a PyObject header, then our fields. */
typedef struct {
    PyObject_HEAD
    long value;
} CounterObject;

static PyObject *
Counter_increment(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ((CounterObject *)self)->value += 1;
    Py_RETURN_NONE;
}

static PyMethodDef Counter_methods[] = {
    {"increment", Counter_increment, METH_NOARGS, "Add one to value."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Counter_members[] = {
    {"value", T_LONG, offsetof(CounterObject, value), READONLY, "The count."},
    {NULL, 0, 0, 0, NULL},
};

/* A static type: one C global, shared by every interpreter of the process.
 * tp_new and tp_alloc come from object: PyType_GenericNew zero-fills. */
static PyTypeObject CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "counter_static.Counter",
    .tp_basicsize = sizeof(CounterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A counter (static type).",
    .tp_new = PyType_GenericNew,
    .tp_methods = Counter_methods,
    .tp_members = Counter_members,
};

static struct PyModuleDef counter_static_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "counter_static",
    .m_doc = "A static Counter type, single-phase init.",
    .m_size = -1, /* no per-module state; cannot be re-initialised */
};

/* Single-phase init: import calls this and gets the finished module. */
PyMODINIT_FUNC
PyInit_counter_static(void)
{
    if (PyType_Ready(&CounterType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&counter_static_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Counter", (PyObject *)&CounterType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

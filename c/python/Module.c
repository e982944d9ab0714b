/*
 * Module.c -- ember._C: creates the module and lets each file add its
 * types and functions.
 */
#include "THP.h"

/* ---- threads: ember.set_num_threads / get_num_threads ---------------------- */

static PyObject *
THPParallel_setNumThreads(PyObject *module, PyObject *arg)
{
    (void)module;
    int64_t n;
    if (THPUtils_unpackLong(arg, "set_num_threads", "int", &n) < 0) {
        return NULL;
    }
    if (n < 1 || n > TH_PARALLEL_MAX_THREADS) {
        PyErr_Format(PyExc_ValueError,
                     "set_num_threads: expected 1 to %d threads, got %lld",
                     TH_PARALLEL_MAX_THREADS, (long long)n);
        return NULL;
    }
    if (THParallel_setNumThreads((int)n) < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_RETURN_NONE;
}

static PyObject *
THPParallel_getNumThreads(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLong(THParallel_getNumThreads());
}

PyMethodDef THPParallel_methods[] = {
    {"set_num_threads", THPParallel_setNumThreads, METH_O,
     "Sets how many threads large kernels use (1 = the calling thread only)."},
    {"get_num_threads", THPParallel_getNumThreads, METH_NOARGS,
     "How many threads large kernels use."},
    {NULL, NULL, 0, NULL},
};

/* Adds each operator family's functions to the module and records their
 * public names in _C._public_functions, which ember/__init__.py re-exports
 * (see Note [Function and method from one implementation] in THP.h). */
static int
add_operator_functions(PyObject *module)
{
#define THP_OP_FAMILY_FUNCTIONS(Family, family) THP##Family##_functions,
    PyMethodDef *tables[] = {THP_FORALL_OP_FAMILIES(THP_OP_FAMILY_FUNCTIONS)
                             THPParallel_methods};
#undef THP_OP_FAMILY_FUNCTIONS
    PyObject *names = PyList_New(0);
    if (names == NULL) {
        return -1;
    }
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        int is_operator_table = tables[t] != THPParallel_methods;
        if ((is_operator_table
                 ? THPAutograd_addOpFunctions(module, tables[t])
                 : PyModule_AddFunctions(module, tables[t]))
            < 0) {
            Py_DECREF(names);
            return -1;
        }
        for (PyMethodDef *m = tables[t]; m->ml_name != NULL; m++) {
            if (m->ml_name[0] == '_') {
                continue;
            }
            PyObject *name = PyUnicode_FromString(m->ml_name);
            if (name == NULL || PyList_Append(names, name) < 0) {
                Py_XDECREF(name);
                Py_DECREF(names);
                return -1;
            }
            Py_DECREF(name);
        }
    }
    PyObject *tuple = PyList_AsTuple(names);
    Py_DECREF(names);
    if (tuple == NULL) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "_public_functions", tuple);
    Py_DECREF(tuple);
    return rc;
}

static struct PyModuleDef ember_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ember._C",
    .m_doc = "ember's C core: tensors, storages, allocators.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__C(void)
{
    PyObject *module = PyModule_Create(&ember_module);
    if (module == NULL) {
        return NULL;
    }
    /* Join the kernel threads at exit, so leak checkers see none running. */
    if (Py_AtExit(THParallel_shutdown) < 0) {
        Py_DECREF(module);
        PyErr_SetString(PyExc_RuntimeError, "ember: no room for an atexit hook");
        return NULL;
    }
    if (THPAutograd_InitModule(module) < 0  /* first: the others add ops */
        || THPDtype_InitModule(module) < 0 || THPSize_InitModule(module) < 0
        || THPStorage_InitModule(module) < 0
        || THPVariable_InitModule(module) < 0
        || THPAllocator_InitModule(module) < 0
        || THPNumpy_InitModule(module) < 0
        || THPReturnTypes_InitModule(module) < 0
        || THPJitVM_InitModule(module) < 0
        || THPFused_InitModule(module) < 0
        || THPAutograd_addPinnedFunctions(module, THPCreation_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPNumpy_methods) < 0
        || PyModule_AddFunctions(module, THPAllocator_methods) < 0
        || add_operator_functions(module) < 0
        || PyModule_AddIntConstant(module, "_max_dims", TH_MAX_DIMS) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

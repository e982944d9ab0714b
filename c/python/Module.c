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

/* Note [Module init]: ember._C uses multi-phase initialization (PEP 489) so
 * that it can say, in slots, what it supports.  It keeps process-wide state
 * (static types, the allocator registry, the tracer hook, the kernel
 * threads, THError's per-thread record), none of it per module, so:
 *   - exec runs once per process; a second exec (the module dropped from
 *     sys.modules and imported again) raises ImportError rather than
 *     initialise the shared state twice;
 *   - sub-interpreters may not import it (Py_mod_multiple_interpreters,
 *     3.12+);
 *   - it needs the GIL (Py_mod_gil, 3.13+): its state, the registry, the
 *     version counters and the Python-allocator bridge assume the GIL
 *     serializes every Python-side call, so under a free-threaded build the
 *     interpreter must re-enable the GIL when it loads ember. */
static int
ember_module_exec(PyObject *module)
{
    static int initialized;
    if (initialized) {
        PyErr_SetString(PyExc_ImportError,
                        "ember._C keeps process-wide state and can be "
                        "initialised once per process (it was dropped "
                        "from sys.modules and imported again)");
        return -1;
    }
    /* Join the kernel threads at exit, so leak checkers see none running. */
    if (Py_AtExit(THParallel_shutdown) < 0) {
        PyErr_SetString(PyExc_RuntimeError, "ember: no room for an atexit hook");
        return -1;
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
        || THPGenerator_InitModule(module) < 0
        || PyModule_AddFunctions(module, THPRandom_module_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPCreation_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPNumpy_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPConv_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPPool_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPNorm_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPAttention_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPRNN_methods) < 0
        || THPAutograd_addPinnedFunctions(module, THPOptim_methods) < 0
        || PyModule_AddFunctions(module, THPAllocator_methods) < 0
        || PyModule_AddFunctions(module, THPDevice_methods) < 0
        || add_operator_functions(module) < 0
        || PyModule_AddIntConstant(module, "_max_dims", TH_MAX_DIMS) < 0) {
        return -1;
    }
    initialized = 1;
    return 0;
}

static PyModuleDef_Slot ember_module_slots[] = {
    {Py_mod_exec, ember_module_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef ember_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ember._C",
    .m_doc = "ember's C core: tensors, storages, allocators.",
    .m_size = 0, /* no per-module state: see Note [Module init] */
    .m_slots = ember_module_slots,
};

PyMODINIT_FUNC
PyInit__C(void)
{
    return PyModuleDef_Init(&ember_module);
}

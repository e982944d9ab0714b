/*
 * Module.c -- ember._C: creates the module and lets each file add its
 * types and functions.
 */
#include "THP.h"

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
    if (THPDtype_InitModule(module) < 0 || THPSize_InitModule(module) < 0
        || THPStorage_InitModule(module) < 0
        || THPVariable_InitModule(module) < 0
        || THPAllocator_InitModule(module) < 0
        || THPNumpy_InitModule(module) < 0
        || PyModule_AddFunctions(module, THPCreation_methods) < 0
        || PyModule_AddFunctions(module, THPNumpy_methods) < 0
        || PyModule_AddFunctions(module, THPAllocator_methods) < 0
        || PyModule_AddIntConstant(module, "_max_dims", TH_MAX_DIMS) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

/*
 * ReturnTypes.c -- ember.return_types: the named (values, indices) tuples
 * that max(dim), min(dim), sort, topk and kthvalue return.
 *
 * Note [Named result tuples]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * PyTorch returns torch.return_types.sort(values=..., indices=...): a tuple
 * that also has .values and .indices.  ember makes one struct-sequence type
 * per operator at module init (THPReturnTypes_InitModule), keeps them for
 * the life of the process, and publishes them as _C.return_types, a dict
 * that ember/__init__.py turns into the module ember.return_types.
 */
#include "THP.h"

#include <string.h>

static PyStructSequence_Field values_indices_fields[] = {
    {"values", "the selected values"},
    {"indices", "their positions along the dim"},
    {NULL, NULL},
};

#define THP_RESULT_DESC(KIND, name) \
    {"ember.return_types." name, NULL, values_indices_fields, 2},
static PyStructSequence_Desc result_descs[THP_NUM_RESULT_TYPES] = {
    THP_FORALL_RESULT_TYPES(THP_RESULT_DESC)
};
#undef THP_RESULT_DESC

static PyTypeObject *result_types[THP_NUM_RESULT_TYPES]; /* owned */

PyObject *
THPReturnTypes_pack(THPResultType kind, PyObject *values, PyObject *indices)
{
    PyObject *result = values == NULL || indices == NULL
                           ? NULL
                           : PyStructSequence_New(result_types[kind]);
    if (result == NULL) {
        Py_XDECREF(values);
        Py_XDECREF(indices);
        return NULL;
    }
    PyStructSequence_SET_ITEM(result, 0, values);  /* steals values */
    PyStructSequence_SET_ITEM(result, 1, indices); /* steals indices */
    return result;
}

PyObject *
THPReturnTypes_packTensors(THPResultType kind, THTensor *values,
                           THTensor *indices)
{
    return THPReturnTypes_pack(kind, THPVariable_Wrap(values),
                               THPVariable_Wrap(indices));
}

int
THPReturnTypes_InitModule(PyObject *module)
{
    PyObject *by_name = PyDict_New();
    if (by_name == NULL) {
        return -1;
    }
    for (int kind = 0; kind < THP_NUM_RESULT_TYPES; kind++) {
        result_types[kind] = PyStructSequence_NewType(&result_descs[kind]);
        /* "ember.return_types.sort" -> "sort" */
        const char *name = strrchr(result_descs[kind].name, '.') + 1;
        if (result_types[kind] == NULL
            || PyDict_SetItemString(by_name, name,
                                    (PyObject *)result_types[kind]) < 0) {
            Py_DECREF(by_name);
            return -1;
        }
    }
    int rc = PyModule_AddObjectRef(module, "return_types", by_name);
    Py_DECREF(by_name);
    return rc;
}

/*
 * counter_heap.c -- the same Counter, the modern way: multi-phase init
 * (PEP 489) and a heap type made from a spec (chapter 0 of the walkthrough).
 * Each module object gets a Counter type of its own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

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

/* Every instance of a heap type holds a reference to its type (3.8+), so
 * the GC must see it (3.9+) ... */
static int
Counter_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return 0;
}

/* ... and dealloc must drop it, after the instance's memory is freed. */
static void
Counter_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyType_Slot Counter_slots[] = {
    {Py_tp_doc, "A counter (heap type)."},
    {Py_tp_traverse, Counter_traverse},
    {Py_tp_dealloc, Counter_dealloc},
    {Py_tp_methods, Counter_methods},
    {Py_tp_members, Counter_members},
    {0, NULL},
};

/* A spec, not a type: PyType_FromModuleAndSpec builds a new type object
 * from it each time.  No tp_new slot: the base's (object's) is inherited. */
static PyType_Spec Counter_spec = {
    .name = "counter_heap.Counter",
    .basicsize = sizeof(CounterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Counter_slots,
};

/* Phase two: fill in the module object that import created. */
static int
counter_heap_exec(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &Counter_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "Counter", type);
    Py_DECREF(type);
    return rc;
}

static PyModuleDef_Slot counter_heap_slots[] = {
    {Py_mod_exec, counter_heap_exec},
#ifdef Py_mod_multiple_interpreters /* 3.12+ */
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#ifdef Py_mod_gil /* 3.13+ */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef counter_heap_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "counter_heap",
    .m_doc = "A heap Counter type, multi-phase init.",
    .m_size = 0, /* no C state: the type lives in the module's dict */
    .m_slots = counter_heap_slots,
};

/* Phase one: return the definition; import creates and executes it. */
PyMODINIT_FUNC
PyInit_counter_heap(void)
{
    return PyModuleDef_Init(&counter_heap_module);
}

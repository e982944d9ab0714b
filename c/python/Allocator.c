/*
 * Allocator.c -- allocators written in Python, and ember.memory's C half.
 *
 * A Python allocator is any object with malloc(nbytes) -> int address and
 * free(address).  set_allocator(obj) wraps it in a THAllocator whose
 * context is the object (one strong reference, dropped by
 * release_context when the last storage it backs is gone: see Note
 * [Allocator lifetime] in THAllocator.h).  Every call into it takes the
 * GIL, since a kernel may free memory with the GIL released.
 *
 * The built-in C allocators are shown to Python as ember.memory.CAllocator
 * objects, whose raw_malloc/raw_free let a Python allocator delegate to
 * them (raw: the asking allocator already keeps the statistics).
 */
#include "THP.h"

/* ---- the bridge: THAllocator functions that call Python --------------------- */

/* Note [Calling a Python allocator]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * python_malloc and python_free run Python code from deep inside the core,
 * possibly from a thread that released the GIL.  Four rules:
 *   - the THAllocator is kept alive by the caller for the whole call
 *     (Note [Registry references] in THAllocator.h), and the Python object
 *     by a reference of our own, so malloc may uninstall itself;
 *   - Python never runs with an exception set.  An exception pending when
 *     malloc is entered means an earlier allocation of the same operator
 *     failed (sort, topk and unique allocate two results before checking
 *     either): this one fails too without calling Python, and the first
 *     exception stays the operator's exception.  free() runs from
 *     deallocators, so it saves and restores a pending exception instead;
 *   - an exception raised by malloc stays set, and the core error
 *     TH_ERR_EXTERNAL points at it: THPUtils_setErrorFromTH then leaves it
 *     as the operator's exception;
 *   - an address is checked before the core trusts it: a positive int,
 *     aligned to TH_PY_ALLOCATOR_ALIGNMENT.  A refused block is handed back
 *     to the allocator's free, so its bookkeeping stays balanced. */

/* What malloc must align to: alignof(max_align_t), what C's malloc
 * guarantees, and enough for every ember dtype and the kernels' loads. */
#define TH_PY_ALLOCATOR_ALIGNMENT 16

/* The pending exception (or NULL), taken out of the thread state. */
static PyObject *
take_pending_exception(void)
{
    return PyErr_GetRaisedException(); /* THP.h's shim on 3.11 */
}

/* Makes `exception` (stolen; may be NULL: then whatever is pending now
 * stays) the pending one again. */
static void
restore_pending_exception(PyObject *exception)
{
    if (exception != NULL) {
        PyErr_SetRaisedException(exception);
    }
}

/* allocator.free(address_obj), reporting a failure as unraisable (it runs
 * where no exception may escape); any pending exception survives it. */
static void
call_python_free(PyObject *allocator, PyObject *address_obj)
{
    PyObject *pending = take_pending_exception();
    PyObject *result = PyObject_CallMethod(allocator, "free", "O",
                                           address_obj);
    if (result == NULL) {
        PyErr_WriteUnraisable(allocator);
    }
    Py_XDECREF(result);
    restore_pending_exception(pending);
}

/* The block address in malloc's result, or NULL with an exception set
 * (and the result handed back to free when it was an unusable int). */
static void *
checked_address(PyObject *allocator, PyObject *result, size_t nbytes)
{
    if (!PyLong_Check(result)) {
        PyErr_Format(PyExc_TypeError,
                     "the Python allocator's malloc must return an int "
                     "address, got %s",
                     Py_TYPE(result)->tp_name);
        return NULL;
    }
    int overflow;
    long long signed_value = PyLong_AsLongLongAndOverflow(result, &overflow);
    if (signed_value == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (overflow < 0 || (overflow == 0 && signed_value < 0)) {
        PyErr_Format(PyExc_ValueError,
                     "the Python allocator's malloc returned a negative "
                     "address (%R) for %zu bytes",
                     result, nbytes);
        call_python_free(allocator, result);
        return NULL;
    }
    void *ptr = PyLong_AsVoidPtr(result); /* OverflowError past 2**64 */
    if (ptr == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_MemoryError,
                         "the Python allocator returned address 0 for %zu "
                         "bytes",
                         nbytes);
        }
        return NULL;
    }
    if ((uintptr_t)ptr % TH_PY_ALLOCATOR_ALIGNMENT != 0) {
        PyErr_Format(PyExc_ValueError,
                     "the Python allocator's malloc returned address %p for "
                     "%zu bytes, which is not aligned to %d bytes: ember "
                     "needs every block aligned to %d bytes (what C's malloc "
                     "guarantees)",
                     ptr, nbytes, TH_PY_ALLOCATOR_ALIGNMENT,
                     TH_PY_ALLOCATOR_ALIGNMENT);
        call_python_free(allocator, result);
        return NULL;
    }
    return ptr;
}

static void *
python_malloc(void *context, size_t nbytes)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    void *ptr = NULL;
    if (!PyErr_Occurred()) {
        PyObject *allocator = context;
        Py_INCREF(allocator); /* ours, for the call: it may uninstall itself */
        PyObject *result = PyObject_CallMethod(allocator, "malloc", "n",
                                               (Py_ssize_t)nbytes);
        if (result != NULL) {
            ptr = checked_address(allocator, result, nbytes);
            Py_DECREF(result);
        }
        Py_DECREF(allocator);
    }
    if (ptr == NULL) {
        /* The Python exception stays set; the core error only points at
         * it (see THPUtils_setErrorFromTH). */
        THError_set(TH_ERR_EXTERNAL, "Python allocator failed");
    }
    PyGILState_Release(gil);
    return ptr;
}

static void
python_free(void *context, void *ptr, size_t nbytes)
{
    (void)nbytes;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *allocator = context;
    Py_INCREF(allocator); /* ours, for the call */
    PyObject *pending = take_pending_exception();
    PyObject *address_obj = PyLong_FromVoidPtr(ptr);
    if (address_obj == NULL) {
        PyErr_WriteUnraisable(allocator);
    }
    else {
        call_python_free(allocator, address_obj);
        Py_DECREF(address_obj);
    }
    restore_pending_exception(pending);
    Py_DECREF(allocator);
    PyGILState_Release(gil);
}

static void
python_release_context(void *context)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF((PyObject *)context); /* the reference taken in set_allocator */
    PyGILState_Release(gil);
}

PyObject *
THPAllocator_pythonObject(const THAllocator *allocator)
{
    return allocator->malloc == python_malloc ? allocator->context : NULL;
}

/* ---- ember.memory.CAllocator: a C allocator seen from Python ------------------ */

typedef struct {
    PyObject_HEAD
    THAllocator *allocator; /* owned reference */
} THPCAllocator;

/* Note [Raw blocks]
 * ~~~~~~~~~~~~~~~~~
 * raw_malloc/raw_free hand C memory to Python code, which can pass any int
 * back.  A C allocator's free trusts its argument (a wrong or repeated
 * address corrupts the heap or aborts), so every block raw_malloc handed
 * out is remembered here, address -> the THAllocator it came from, and
 * raw_free accepts only those, each once.  Module-lifetime dict. */
static PyObject *raw_blocks;

static void
THPCAllocator_dealloc(PyObject *self)
{
    THAllocator_release(((THPCAllocator *)self)->allocator);
    PyObject_Free(self);
}

static PyObject *
THPCAllocator_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<ember.memory.CAllocator '%s'>",
                                ((THPCAllocator *)self)->allocator->name);
}

static PyObject *
THPCAllocator_raw_malloc(PyObject *self, PyObject *arg)
{
    THAllocator *allocator = ((THPCAllocator *)self)->allocator;
    Py_ssize_t nbytes = PyLong_AsSsize_t(arg);
    if (nbytes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (nbytes <= 0 || nbytes > TH_MAX_NBYTES) {
        PyErr_Format(PyExc_ValueError,
                     "raw_malloc: nbytes must be in [1, %lld], got %zd",
                     (long long)TH_MAX_NBYTES, nbytes);
        return NULL;
    }
    void *ptr = allocator->malloc(allocator->context, (size_t)nbytes);
    if (ptr == NULL) {
        return THPUtils_setErrorFromTH();
    }
    PyObject *address = PyLong_FromVoidPtr(ptr);
    PyObject *owner = PyLong_FromVoidPtr(allocator);
    if (address == NULL || owner == NULL
        || PyDict_SetItem(raw_blocks, address, owner) < 0) {
        allocator->free(allocator->context, ptr, (size_t)nbytes);
        Py_CLEAR(address);
    }
    Py_XDECREF(owner);
    return address;
}

static PyObject *
THPCAllocator_raw_free(PyObject *self, PyObject *const *args,
                       Py_ssize_t nargs)
{
    THAllocator *allocator = ((THPCAllocator *)self)->allocator;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError,
                        "raw_free(address, nbytes=0) takes 1 or 2 arguments");
        return NULL;
    }
    /* Every argument is converted (which may run __index__) before the
     * block is looked up and freed. */
    void *ptr = PyLong_AsVoidPtr(args[0]);
    if (ptr == NULL && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t nbytes = nargs == 2 ? PyLong_AsSsize_t(args[1]) : 0;
    if (nbytes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (ptr == NULL) {
        Py_RETURN_NONE; /* free(NULL) is a no-op, as in C */
    }
    PyObject *address = PyLong_FromVoidPtr(ptr);
    if (address == NULL) {
        return NULL;
    }
    PyObject *owner = PyDict_GetItemWithError(raw_blocks, address); /* borrowed */
    if (owner == NULL || PyLong_AsVoidPtr(owner) != (void *)allocator) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError,
                         "raw_free: address %p was not returned by this "
                         "allocator's raw_malloc, or was already freed",
                         ptr);
        }
        Py_DECREF(address);
        return NULL;
    }
    int deleted = PyDict_DelItem(raw_blocks, address);
    Py_DECREF(address);
    if (deleted < 0) {
        return NULL;
    }
    allocator->free(allocator->context, ptr, (size_t)nbytes);
    Py_RETURN_NONE;
}

static PyObject *
stats_to_dict(THAllocatorStats stats)
{
    return Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}",
        "allocated_bytes", (long long)stats.allocated_bytes,
        "peak_allocated_bytes", (long long)stats.peak_allocated_bytes,
        "live_blocks", (long long)stats.live_blocks,
        "num_allocs", (long long)stats.num_allocs,
        "num_frees", (long long)stats.num_frees,
        "cached_bytes", (long long)stats.cached_bytes,
        "cached_blocks", (long long)stats.cached_blocks,
        "cache_hits", (long long)stats.cache_hits,
        "cache_misses", (long long)stats.cache_misses);
}

static PyObject *
THPCAllocator_stats(PyObject *self, PyObject *unused)
{
    (void)unused;
    return stats_to_dict(THAllocator_stats(((THPCAllocator *)self)->allocator));
}

static PyObject *
THPCAllocator_name(PyObject *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(((THPCAllocator *)self)->allocator->name);
}

static PyMethodDef THPCAllocator_methods[] = {
    {"raw_malloc", THPCAllocator_raw_malloc, METH_O,
     "raw_malloc(nbytes) -> address, not counted in statistics"},
    {"raw_free", (PyCFunction)(void (*)(void))THPCAllocator_raw_free,
     METH_FASTCALL, "raw_free(address, nbytes=0)"},
    {"stats", THPCAllocator_stats, METH_NOARGS,
     "This allocator's own statistics."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef THPCAllocator_getset[] = {
    {"name", THPCAllocator_name, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject THPCAllocatorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.memory.CAllocator",
    .tp_basicsize = sizeof(THPCAllocator),
    .tp_dealloc = THPCAllocator_dealloc,
    .tp_repr = THPCAllocator_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An allocator implemented in C (e.g. the default CPU one).",
    .tp_methods = THPCAllocator_methods,
    .tp_getset = THPCAllocator_getset,
};

/* The Python object standing for a THAllocator: the Python allocator
 * object itself, or a CAllocator wrapper.  New reference. */
static PyObject *
allocator_to_python(THAllocator *allocator)
{
    if (allocator == NULL) {
        Py_RETURN_NONE;
    }
    if (allocator->malloc == python_malloc) {
        Py_INCREF((PyObject *)allocator->context); /* returned */
        return allocator->context;
    }
    THPCAllocator *wrapper = PyObject_New(THPCAllocator, &THPCAllocatorType);
    if (wrapper == NULL) {
        return NULL;
    }
    THAllocator_retain(allocator);
    wrapper->allocator = allocator;
    return (PyObject *)wrapper;
}

/* The THAllocator for a Python object: a new reference.  A CAllocator
 * gives its own; anything else must have malloc and free. */
static THAllocator *
allocator_from_python(PyObject *obj, THDeviceType device)
{
    if (Py_IS_TYPE(obj, &THPCAllocatorType)) {
        THAllocator *allocator = ((THPCAllocator *)obj)->allocator;
        if (allocator->device != device) {
            PyErr_SetString(PyExc_ValueError,
                            "this allocator belongs to another device");
            return NULL;
        }
        THAllocator_retain(allocator);
        return allocator;
    }
    for (int i = 0; i < 2; i++) {
        const char *method = i == 0 ? "malloc" : "free";
        PyObject *attr = PyObject_GetAttrString(obj, method);
        if (attr == NULL || !PyCallable_Check(attr)) {
            Py_XDECREF(attr);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "an allocator needs callable malloc(nbytes) and "
                         "free(address) methods; %s has no callable %s",
                         Py_TYPE(obj)->tp_name, method);
            return NULL;
        }
        Py_DECREF(attr);
    }
    PyObject *name = PyObject_Repr(obj);
    if (name == NULL) {
        return NULL;
    }
    const char *name_utf8 = PyUnicode_AsUTF8(name);
    if (name_utf8 == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    THAllocator *allocator =
        THAllocator_new(python_malloc, python_free, python_release_context,
                        obj, name_utf8, device);
    Py_DECREF(name);
    if (allocator == NULL) {
        THPUtils_setErrorFromTH();
        return NULL;
    }
    Py_INCREF(obj); /* the allocator's context; dropped by release_context */
    return allocator;
}

/* ---- module functions --------------------------------------------------------- */

static int
parse_device_arg(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t index,
                 THDeviceType *device)
{
    return THPDevice_Parse(nargs > index ? args[index] : NULL, device);
}

static PyObject *
THPModule_memory_stats(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargs)
{
    (void)module;
    THDeviceType device;
    if (parse_device_arg(args, nargs, 0, &device) < 0) {
        return NULL;
    }
    return stats_to_dict(THAllocator_deviceStats(device));
}

static PyObject *
THPModule_reset_peak_memory_stats(PyObject *module, PyObject *const *args,
                                  Py_ssize_t nargs)
{
    (void)module;
    THDeviceType device;
    if (parse_device_arg(args, nargs, 0, &device) < 0) {
        return NULL;
    }
    THAllocator_resetPeak(device);
    Py_RETURN_NONE;
}

/* The Python object for the allocator installed for `device`. */
static PyObject *
installed_allocator_to_python(THDeviceType device)
{
    THAllocator *installed = THAllocator_acquire(device);
    PyObject *result = allocator_to_python(installed);
    THAllocator_release(installed);
    return result;
}

static PyObject *
THPModule_get_allocator(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargs)
{
    (void)module;
    THDeviceType device;
    if (parse_device_arg(args, nargs, 0, &device) < 0) {
        return NULL;
    }
    return installed_allocator_to_python(device);
}

/* _set_allocator(obj, device=None) -> the previous allocator */
static PyObject *
THPModule_set_allocator(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargs)
{
    (void)module;
    THDeviceType device;
    if (nargs < 1 || parse_device_arg(args, nargs, 1, &device) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError,
                            "set_allocator(allocator, device='cpu')");
        }
        return NULL;
    }
    THAllocator *previous;
    if (args[0] == Py_None && device != TH_DEVICE_CPU) {
        /* None empties a device's slot (the CPU always keeps one): what
         * use_allocator restores when the device had none. */
        previous = THAllocator_uninstall(device);
    }
    else {
        THAllocator *allocator = allocator_from_python(args[0], device);
        if (allocator == NULL) {
            return NULL;
        }
        previous = THAllocator_exchange(allocator);
        THAllocator_release(allocator); /* the registry holds its own now */
    }
    /* The result is built from the registry's old reference, which we own
     * after the swap: building it may run Python (the GC), which may call
     * set_allocator itself, so the object returned is the allocator this
     * call replaced. */
    PyObject *previous_obj = allocator_to_python(previous);
    if (previous_obj == NULL && previous != NULL) {
        /* Put it back: a failed call changes nothing. */
        THAllocator_release(THAllocator_exchange(previous));
    }
    THAllocator_release(previous); /* the registry's old reference */
    return previous_obj;
}

static PyObject *
THPModule_empty_cache(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    /* munmap of large blocks takes a while: let other threads run */
    Py_BEGIN_ALLOW_THREADS
    THAllocator_emptyCache();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* _set_cache_limit(nbytes) -> the previous limit */
static PyObject *
THPModule_set_cache_limit(PyObject *module, PyObject *arg)
{
    (void)module;
    long long nbytes = PyLong_AsLongLong(arg);
    if (nbytes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int64_t previous = THAllocator_setCacheLimit((int64_t)nbytes);
    if (previous < 0) {
        return THPUtils_setErrorFromTH();
    }
    return PyLong_FromLongLong((long long)previous);
}

static PyObject *
THPModule_get_cache_limit(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLongLong((long long)THAllocator_getCacheLimit());
}

static PyObject *
THPModule_block_capacity(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_ssize_t nbytes = PyLong_AsSsize_t(arg);
    if (nbytes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (nbytes <= 0 || nbytes > TH_MAX_NBYTES) {
        PyErr_Format(PyExc_ValueError,
                     "block_capacity: nbytes must be in [1, %lld], got %zd",
                     (long long)TH_MAX_NBYTES, nbytes);
        return NULL;
    }
    return PyLong_FromSize_t(THAllocator_blockCapacity((size_t)nbytes));
}

PyMethodDef THPAllocator_methods[] = {
    {"_empty_cache", THPModule_empty_cache, METH_NOARGS, NULL},
    {"_set_cache_limit", THPModule_set_cache_limit, METH_O, NULL},
    {"_get_cache_limit", THPModule_get_cache_limit, METH_NOARGS, NULL},
    {"_block_capacity", THPModule_block_capacity, METH_O, NULL},
    {"_memory_stats", (PyCFunction)(void (*)(void))THPModule_memory_stats,
     METH_FASTCALL, NULL},
    {"_reset_peak_memory_stats",
     (PyCFunction)(void (*)(void))THPModule_reset_peak_memory_stats,
     METH_FASTCALL, NULL},
    {"_get_allocator", (PyCFunction)(void (*)(void))THPModule_get_allocator,
     METH_FASTCALL, NULL},
    {"_set_allocator", (PyCFunction)(void (*)(void))THPModule_set_allocator,
     METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

int
THPAllocator_InitModule(PyObject *module)
{
    if (PyType_Ready(&THPCAllocatorType) < 0) {
        return -1;
    }
    raw_blocks = PyDict_New();
    if (raw_blocks == NULL) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "CAllocator",
                                 (PyObject *)&THPCAllocatorType);
}

/*
 * Variable.c -- ember._C._TensorBase, the C half of ember.Tensor.
 *
 * See Note [THPVariable layout] in THP.h.  Ownership chain:
 *     THPVariable --1 ref--> THTensor --1 ref--> THStorage --> bytes
 * This file has the type object and its slots: lifetime (tp_dealloc), the
 * cyclic GC (tp_traverse/tp_clear), attributes (tp_getset), conversions to
 * Python numbers, len/iter, and the methods that read a tensor.  Views and
 * copies are in VariableViews.c, indexing in Indexing.c, NumPy and DLPack
 * in Numpy.c.
 */
#include "THP.h"

#include <string.h>

PyTypeObject *THPVariableClass = NULL;
PyObject *THPDevice_cpu = NULL;

/* ---- lifetime ------------------------------------------------------------ */

/* Note [A free list of tensor objects]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A view's Python object costs more than the view itself: tp_alloc (the
 * allocator, zero-filling, linking into the GC) and tp_free take ~300
 * instructions of a ~1500-instruction t.transpose(0, 1).  So, as CPython
 * keeps freed floats, tuples and frames, the memory of a freed ember.Tensor
 * is kept on a short free list and handed to the next one:
 *
 *   - only exact ember.Tensor objects (THPVariableClass), freed by
 *     THPVariable_subclass_dealloc, whose instance dict is gone and which
 *     the GC never finalized (PyObject_GC_IsFinalized: a reused object
 *     must look new to the GC's finalizer bookkeeping);
 *   - reuse does what PyType_GenericAlloc does besides allocating: zero
 *     the object, PyObject_Init (type reference, refcount), GC track.  The
 *     words before the object (the GC links and, on CPython 3.11, the
 *     managed dict's two pointers, NULL once the dict is cleared) are as
 *     a fresh allocation leaves them; the GC's allocation count is neither
 *     raised by reuse nor lowered by keeping, as neither calls into it;
 *   - CPython 3.11 only (3.12 and 3.13 changed the words before the
 *     object and 3.13 initialises inline attribute values in tp_alloc):
 *     other versions allocate and free as before.  Off under AddressSanitizer
 *     (a use after free must still be caught) and in free-threaded builds;
 *   - guarded by the GIL (objects are only made and freed holding it);
 *     bounded (THP_OBJECT_FREE_LIST objects), so leak-refs' block counts
 *     settle after its warm-up runs; the kept blocks stay reachable from
 *     the list until exit.
 */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 \
    && !defined(Py_GIL_DISABLED) && !defined(__SANITIZE_ADDRESS__)
#define THP_OBJECT_FREE_LIST 16
#endif

#ifdef THP_OBJECT_FREE_LIST
static PyObject *free_objects[THP_OBJECT_FREE_LIST];
static int free_object_count;
#endif

/* A new tensor object of `type` from the free list, or NULL when there
 * is none (the caller then uses tp_alloc). */
static PyObject *
reuse_object(PyTypeObject *type)
{
#ifdef THP_OBJECT_FREE_LIST
    if (type == THPVariableClass && free_object_count > 0) {
        PyObject *obj = free_objects[--free_object_count];
        memset(obj, 0, (size_t)type->tp_basicsize);
        PyObject_Init(obj, type); /* takes a reference to the heap type */
        PyObject_GC_Track(obj);
        return obj;
    }
#endif
    (void)type;
    return NULL;
}

/* Keeps the memory of a dying tensor object (untracked, its dict cleared
 * and its fields released) for reuse_object; false when it may not. */
static bool
keep_object(PyObject *obj, bool dict_cleared)
{
#ifdef THP_OBJECT_FREE_LIST
    if (dict_cleared && Py_TYPE(obj) == THPVariableClass
        && free_object_count < THP_OBJECT_FREE_LIST
        && !PyObject_GC_IsFinalized(obj)) {
        free_objects[free_object_count++] = obj;
        return true;
    }
#endif
    (void)obj;
    (void)dict_cleared;
    return false;
}

/* See THP.h; shared by THPVariable_Wrap, ember.Tensor(...) and
 * _C._make_subclass (nn.Parameter). */
PyObject *
THPVariable_NewWithType(PyTypeObject *type, THTensor *tensor)
{
    /* Note [A free list of tensor objects]; else tp_alloc, which also
     * zero-fills and, for a GC type, tracks the object. */
    THPVariable *self = (THPVariable *)reuse_object(type);
    if (self == NULL) {
        self = (THPVariable *)type->tp_alloc(type, 0);
    }
    if (self == NULL) {
        THTensor_release(tensor);
        return NULL;
    }
    self->cdata = tensor; /* the reference we were given */
    return (PyObject *)self;
}

PyObject *
THPVariable_Wrap(THTensor *tensor)
{
    if (tensor == NULL) {
        return THPUtils_setErrorFromTH();
    }
    return THPVariable_NewWithType(
        THPVariableClass != NULL ? THPVariableClass : &THPVariableType, tensor);
}

/* Note [Tensors from a Python allocator and the GC]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A Python allocator that keeps tensors it allocated (say, in a list) makes
 * a cycle through C: allocator -> list -> tensor -> THTensor -> THStorage
 * -> THAllocator -> allocator.  The last edge is the THAllocator's one
 * reference to its Python object.  The GC may be shown an edge only by an
 * object that alone owns it, so a tensor visits the allocator only while
 * the chain is exclusive: its THTensor has one reference (the tensor's),
 * the storage one (the THTensor's), and the THAllocator one (the
 * storage's: uninstalled, and backing no other storage).  Such a cycle is
 * then garbage the GC can see.  Before clearing anything, the GC runs
 * every finalizer in the garbage (PEP 442): THPVariable_finalize gives the
 * memory back through the allocator's free while the allocator is still
 * whole, which drops the THAllocator, its reference, and so the cycle.
 * Two tensors from one allocator in one cycle share that edge: neither
 * may show it, and the cycle stays (as it does in PyTorch, whose
 * allocators are C++). */
static PyObject *
exclusive_python_allocator(const THTensor *t)
{
    if (t == NULL || __atomic_load_n(&t->refcount, __ATOMIC_ACQUIRE) != 1) {
        return NULL;
    }
    const THStorage *storage = t->storage;
    if (__atomic_load_n(&storage->refcount, __ATOMIC_ACQUIRE) != 1
        || storage->allocator == NULL
        || __atomic_load_n(&storage->allocator->refcount, __ATOMIC_ACQUIRE)
               != 1) {
        return NULL;
    }
    return THPAllocator_pythonObject(storage->allocator);
}

static int
THPVariable_traverse(PyObject *self, visitproc visit, void *arg)
{
    THPVariable *var = (THPVariable *)self;
    Py_VISIT(var->grad);
    Py_VISIT(var->grad_fn);
    Py_VISIT(var->backward_hooks);
    Py_VISIT(var->autograd_meta);
    Py_VISIT(exclusive_python_allocator(var->cdata));
    return 0;
}

/* See Note [Tensors from a Python allocator and the GC]: frees the memory
 * of an exclusively owned Python-allocator block while the allocator is
 * whole.  The tensor keeps an empty tensor of its dtype (a finalized
 * object may still be looked at, by a weakref callback say). */
static void
THPVariable_finalize(PyObject *self)
{
    THPVariable *var = (THPVariable *)self;
    if (exclusive_python_allocator(var->cdata) == NULL) {
        return;
    }
    int64_t no_elements = 0;
    THTensor *empty = THTensor_newEmpty(1, &no_elements, var->cdata->dtype,
                                        var->cdata->storage->device);
    if (empty == NULL) {
        THError_clear(); /* keep the memory; plain dealloc frees it later */
        return;
    }
    THTensor *previous = var->cdata;
    var->cdata = empty;          /* install first, as in set_data */
    THTensor_release(previous);  /* python_free keeps pending exceptions */
}

static int
THPVariable_clear(PyObject *self)
{
    THPVariable *var = (THPVariable *)self;
    Py_CLEAR(var->grad);
    Py_CLEAR(var->grad_fn);
    Py_CLEAR(var->backward_hooks);
    Py_CLEAR(var->autograd_meta);
    return 0;
}

/* For the base type and, through CPython's subtype_dealloc, for
 * ember.Tensor: subtype_dealloc clears the instance __dict__, then calls
 * this, then drops its reference to the heap type. */
static void
THPVariable_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    /* A chain of tensors (each the .grad of the last) deallocates
     * recursively: the trashcan defers the deep part so the C stack does
     * not overflow.  (For ember.Tensor, CPython's subtype_dealloc already
     * runs one around this; the macro is a no-op then.) */
    Py_TRASHCAN_BEGIN(self, THPVariable_dealloc)
    if (((THPVariable *)self)->weakreflist != NULL) {
        PyObject_ClearWeakRefs(self);
    }
    THPVariable_clear(self);
    THTensor_release(((THPVariable *)self)->cdata);
    Py_TYPE(self)->tp_free(self);
    Py_TRASHCAN_END
}

/* Note [ember.Tensor's own dealloc]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * ember.Tensor is a Python subclass, so CPython gives it subtype_dealloc:
 * a generic walk (finalizer call with resurrection checks, slots of every
 * Python base, the instance dict) that cost a fifth of a view's time.
 * Like PyTorch's THPVariable_subclass_dealloc, we install our own when
 * ember.Tensor adds nothing to _TensorBase but the instance dict (no
 * __slots__, no __del__).  It skips the finalizer: THPVariable_finalize
 * only hands a Python allocator's block back before the GC clears a cycle
 * (Note [Tensors from a Python allocator and the GC]), and releasing the
 * THTensor here does the same.  Subclasses of ember.Tensor (nn.Parameter)
 * keep subtype_dealloc, which ends by calling this as their base's dealloc
 * and, the base being a heap type, leaves the type's reference to it. */
static void
THPVariable_subclass_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_TRASHCAN_BEGIN(self, THPVariable_subclass_dealloc)
    if (((THPVariable *)self)->weakreflist != NULL) {
        PyObject_ClearWeakRefs(self);
    }
    bool dict_cleared = false; /* Note [A free list of tensor objects] */
#if PY_VERSION_HEX >= 0x030D0000
    PyObject_ClearManagedDict(self);
#else
    /* 3.11/3.12: the dict pointer (a dict is made first from the inline
     * attribute values, if any: that path may fail, and clears errors).
     * A pending exception is set aside around it; usually there is none,
     * and the save and restore (a normalisation on 3.11) are skipped. */
    PyObject *pending = PyErr_Occurred() ? PyErr_GetRaisedException() : NULL;
    PyObject **dict = _PyObject_GetDictPtr(self);
    if (dict != NULL) {
        Py_CLEAR(*dict);
        dict_cleared = true;
    }
    if (pending != NULL) {
        PyErr_SetRaisedException(pending);
    }
#endif
    THPVariable_clear(self);
    THTensor_release(((THPVariable *)self)->cdata);
    if (!keep_object(self, dict_cleared)) {
        type->tp_free(self);
    }
    /* Also for an instance of a further subclass: since ember.Tensor is a
     * heap type, that subclass's subtype_dealloc leaves this to us. */
    Py_DECREF(type);
    Py_TRASHCAN_END
}

/* Whether `type` (a Python subclass of _TensorBase) adds nothing but the
 * instance dict, so THPVariable_subclass_dealloc can free its instances. */
static bool
adds_only_a_dict(PyTypeObject *type)
{
    return (type->tp_flags & Py_TPFLAGS_HEAPTYPE)
           && type->tp_base == &THPVariableType
           && type->tp_basicsize == THPVariableType.tp_basicsize
           && type->tp_itemsize == 0
           && type->tp_weaklistoffset == THPVariableType.tp_weaklistoffset
           && type->tp_finalize == THPVariableType.tp_finalize
           && type->tp_del == NULL
           && (type->tp_flags & Py_TPFLAGS_MANAGED_DICT);
}

/* The THTensor for ember.Tensor(...): Tensor(data) copies data, and
 * Tensor(*sizes) is uninitialised, both in the default float dtype (the
 * legacy torch.Tensor constructor).  New reference or NULL. */
static THTensor *
tensor_for_constructor(PyObject *args)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs == 1 && !PyLong_Check(PyTuple_GET_ITEM(args, 0))) {
        PyObject *copy = THPVariable_FromData(PyTuple_GET_ITEM(args, 0),
                                              THPDtype_defaultFloat(), 0);
        if (copy == NULL) {
            return NULL;
        }
        THTensor *tensor = THPVariable_Unpack(copy);
        THTensor_retain(tensor); /* outlives `copy`, dropped next */
        Py_DECREF(copy);
        return tensor;
    }
    int64_t sizes[TH_MAX_DIMS];
    int ndim = THPUtils_parseSizes("Tensor", &PyTuple_GET_ITEM(args, 0),
                                   nargs, sizes);
    if (ndim < 0) {
        return NULL;
    }
    if (nargs == 0) {
        sizes[0] = 0;
        ndim = 1;
    }
    THTensor *tensor = THTensor_newEmpty(ndim, sizes,
                                         THPDtype_defaultFloat(),
                                         TH_DEVICE_CPU);
    if (tensor == NULL) {
        THPUtils_setErrorFromTH();
    }
    return tensor;
}

static PyObject *
THPVariable_pynew(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (type == &THPVariableType) {
        PyErr_SetString(PyExc_TypeError,
                        "Cannot directly construct _TensorBase; subclass it "
                        "and then construct that");
        return NULL;
    }
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        PyErr_SetString(PyExc_TypeError,
                        "Tensor() takes no keyword arguments; use "
                        "ember.tensor(data, dtype=...) instead");
        return NULL;
    }
    THTensor *tensor = tensor_for_constructor(args);
    return tensor == NULL ? NULL : THPVariable_NewWithType(type, tensor);
}

static Py_hash_t
THPVariable_hash(PyObject *self)
{
    /* Tensors hash by identity, as in PyTorch: == is elementwise. */
    Py_hash_t hash = (Py_hash_t)((uintptr_t)self >> 4);
    return hash == -1 ? -2 : hash;
}

/* ---- attributes ------------------------------------------------------------ */

#define SELF_TENSOR (((THPVariable *)self)->cdata)

static PyObject *
THPVariable_get_shape(PyObject *self, void *closure)
{
    (void)closure;
    return THPSize_New(SELF_TENSOR->ndim, SELF_TENSOR->sizes);
}

static PyObject *
THPVariable_get_dtype(PyObject *self, void *closure)
{
    (void)closure;
    PyObject *dtype = THPDtype_Get(SELF_TENSOR->dtype);
    Py_INCREF(dtype); /* returned: a new reference to the singleton */
    return dtype;
}

static PyObject *
THPVariable_get_device(PyObject *self, void *closure)
{
    (void)closure;
    return THPDevice_Get(SELF_TENSOR->storage->device);
}

static PyObject *
THPVariable_get_ndim(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(SELF_TENSOR->ndim);
}

static PyObject *
THPVariable_get_nbytes(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(SELF_TENSOR->numel
                               * THTensor_itemsize(SELF_TENSOR));
}

static PyObject *
THPVariable_get_itemsize(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(THTensor_itemsize(SELF_TENSOR));
}

static PyObject *
THPVariable_get_version(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(SELF_TENSOR->version_counter->version);
}

static PyObject *
THPVariable_get_is_cuda(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(SELF_TENSOR->storage->device == TH_DEVICE_CUDA);
}

static PyObject *
THPVariable_get_T(PyObject *self, void *closure)
{
    (void)closure;
    PyObject *routed;
    if (THPAutograd_maybeDispatch("T", &self, 1, &routed)) {
        return routed;
    }
    int64_t dims[TH_MAX_DIMS];
    int ndim = SELF_TENSOR->ndim;
    for (int d = 0; d < ndim; d++) {
        dims[d] = ndim - 1 - d;
    }
    return THPVariable_Wrap(THTensor_newPermute(SELF_TENSOR, ndim, dims));
}

static PyObject *
THPVariable_get_requires_grad(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((THPVariable *)self)->requires_grad);
}

/* Sets the flag after PyTorch's checks.  `from_method` is requires_grad_(),
 * which, unlike the attribute, lets a non-leaf keep requires_grad=True. */
static int
set_requires_grad_flag(THPVariable *var, int requires, int from_method)
{
    if (var->grad_fn != NULL && var->grad_fn != Py_None
        && !(from_method && requires)) {
        PyErr_SetString(PyExc_RuntimeError,
                        requires
                            ? "you can only change requires_grad flags of "
                              "leaf variables."
                            : "you can only change requires_grad flags of "
                              "leaf variables. If you want to use a computed "
                              "variable in a subgraph that doesn't require "
                              "differentiation use var_no_grad = "
                              "var.detach().");
        return -1;
    }
    if (requires && !THDtype_isFloating(var->cdata->dtype)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "only Tensors of floating point dtype can require "
                        "gradients");
        return -1;
    }
    var->requires_grad = (char)requires;
    return 0;
}

static int
THPVariable_set_requires_grad(PyObject *self, PyObject *value, void *closure)
{
    (void)closure;
    /* PyTorch raises RuntimeError here (TypeError from requires_grad_). */
    if (value == NULL || !PyBool_Check(value)) {
        PyErr_SetString(PyExc_RuntimeError, "requires_grad must be a bool");
        return -1;
    }
    return set_requires_grad_flag((THPVariable *)self, value == Py_True, 0);
}

static PyObject *
THPVariable_get_output_nr(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(((THPVariable *)self)->output_nr);
}

static PyObject *
THPVariable_get_is_leaf(PyObject *self, void *closure)
{
    (void)closure;
    PyObject *grad_fn = ((THPVariable *)self)->grad_fn;
    return PyBool_FromLong(grad_fn == NULL || grad_fn == Py_None);
}

/* Getter and setter of a plain PyObject * field that reads None when
 * NULL; `offset` is the field's offset in THPVariable. */
static PyObject *
get_object_field(PyObject *self, void *offset)
{
    PyObject *value = *(PyObject **)((char *)self + (size_t)offset);
    if (value == NULL) {
        Py_RETURN_NONE;
    }
    Py_INCREF(value); /* returned: a new reference */
    return value;
}

static int
set_object_field(PyObject *self, PyObject *value, void *offset)
{
    PyObject **slot = (PyObject **)((char *)self + (size_t)offset);
    if (value == Py_None) {
        value = NULL;
    }
    Py_XINCREF(value); /* the field's reference */
    Py_XSETREF(*slot, value);
    return 0;
}

/* The sizes as a Python list, printed "[3, 1]" in PyTorch's messages. */
static PyObject *
sizes_to_list(const THTensor *t)
{
    PyObject *list = PyList_New(t->ndim);
    for (int d = 0; list != NULL && d < t->ndim; d++) {
        PyObject *size = PyLong_FromLongLong(t->sizes[d]);
        if (size == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, d, size); /* steals `size` */
    }
    return list;
}

/* PyTorch's checks of `tensor.grad = grad`, with both tensors owned by the
 * caller (the messages' lists are built by calls that can run Python).
 * Returns 0 or -1 with RuntimeError. */
static int
check_assigned_grad(THTensor *grad, THTensor *tensor)
{
    if (grad == tensor) {
        PyErr_SetString(PyExc_RuntimeError,
                        "can't assign Variable as its own grad");
        return -1;
    }
    if (grad->dtype != tensor->dtype) {
        /* PyTorch's words: the C++ type name, then the ScalarType's. */
        PyErr_Format(PyExc_RuntimeError,
                     "attempting to assign a gradient with dtype '%s' "
                     "to a tensor with grad_dtype '%s'. The gradient "
                     "must match the tensor's grad_dtype (defaults to "
                     "the tensor's dtype).",
                     THDtype_cppTypeName(grad->dtype),
                     THDtype_scalarTypeName(tensor->dtype));
        return -1;
    }
    if (grad->ndim != tensor->ndim
        || memcmp(grad->sizes, tensor->sizes,
                  sizeof(int64_t) * tensor->ndim)
               != 0) {
        PyObject *grad_sizes = sizes_to_list(grad);
        PyObject *sizes = sizes_to_list(tensor);
        if (grad_sizes != NULL && sizes != NULL) {
            PyErr_Format(PyExc_RuntimeError,
                         "attempting to assign a gradient of size '%S' "
                         "to a tensor of size '%S'. Please ensure that "
                         "the gradient and the tensor are the same size",
                         grad_sizes, sizes);
        }
        Py_XDECREF(grad_sizes);
        Py_XDECREF(sizes);
        return -1;
    }
    return 0;
}

static int
THPVariable_set_grad(PyObject *self, PyObject *value, void *closure)
{
    if (value != NULL && value != Py_None) {
        if (!THPVariable_Check(value)) {
            PyErr_Format(PyExc_TypeError,
                         "assigned grad expected to be a Tensor or None but "
                         "got grad of type %s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        THTensor *grad = THPVariable_CURRENT(value);
        THTensor *tensor = SELF_TENSOR;
        THTensor_retain(grad);   /* ours for the checks */
        THTensor_retain(tensor); /* ours for the checks */
        int checked = check_assigned_grad(grad, tensor);
        THTensor_release(grad);
        THTensor_release(tensor);
        if (checked < 0) {
            return -1;
        }
    }
    return set_object_field(self, value == NULL ? Py_None : value, closure);
}

static PyObject *
THPVariable_get_data(PyObject *self, void *closure)
{
    (void)closure;
    /* .data: same memory, no autograd history, and its own version counter
     * so writes through it are invisible to autograd (PyTorch's rule). */
    THTensor *t = SELF_TENSOR;
    return THPVariable_Wrap(THTensor_newWithStorage(
        t->storage, t->storage_offset, t->ndim, t->sizes, t->strides,
        t->dtype));
}

int
THPVariable_rebind(PyObject *self, THTensor *replacement)
{
    THTensor *old = SELF_TENSOR;
    /* Inside an operator, both stay alive until it returns: it may hold
     * either (Note [Pinned arguments] in THP.h). */
    if (THPPin_keepAlive(old) < 0) {
        return -1;
    }
    if (THPPin_keepAlive(replacement) < 0) {
        return -1; /* `old` stays installed; the frame drops its extra ref */
    }
    THTensor_retain(replacement); /* self's reference */
    /* Install first: releasing `old` can run Python (a Python allocator's
     * free, a deleter) that must see a live tensor here. */
    SELF_TENSOR = replacement;
    THTensor_release(old);
    return 0;
}

static int
THPVariable_set_data(PyObject *self, PyObject *value, void *closure)
{
    (void)closure;
    if (value == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Deleting tensor data is not allowed. Delete tensor "
                        "instead!");
        return -1;
    }
    if (!THPVariable_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "Variable data has to be a tensor, but got %s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    /* Another device is fine, as in PyTorch (dense CPU and CUDA tensors
     * are "compatible shallow-copy types"): Module.to('cuda') moves each
     * parameter this way.  An entry point already running on the old
     * tensor keeps it (Note [Pinned arguments] in THP.h). */
    THTensor *replacement = THPVariable_CURRENT(value);
    if (((THPVariable *)self)->requires_grad
        && !THDtype_isFloating(replacement->dtype)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "data set to a tensor that requires gradients must "
                        "be floating point or complex dtype");
        return -1;
    }
    return THPVariable_rebind(self, replacement);
}

#define FIELD_OFFSET(name) ((void *)offsetof(THPVariable, name))

static PyGetSetDef THPVariable_getset[] = {
    {"shape", THPVariable_get_shape, NULL, "The sizes, as an ember.Size.",
     NULL},
    {"dtype", THPVariable_get_dtype, NULL, "The element type.", NULL},
    {"device", THPVariable_get_device, NULL, "Where the data lives.", NULL},
    {"ndim", THPVariable_get_ndim, NULL, "Number of dimensions.", NULL},
    {"nbytes", THPVariable_get_nbytes, NULL,
     "Bytes of the elements (numel * itemsize).", NULL},
    {"itemsize", THPVariable_get_itemsize, NULL, "Bytes per element.", NULL},
    {"_version", THPVariable_get_version, NULL,
     "The version counter (see Note [Version counter]).", NULL},
    {"is_cuda", THPVariable_get_is_cuda, NULL, NULL, NULL},
    {"T", THPVariable_get_T, NULL, "The dims in reverse order.", NULL},
    {"requires_grad", THPVariable_get_requires_grad,
     THPVariable_set_requires_grad, "Whether autograd records ops on it.",
     NULL},
    {"output_nr", THPVariable_get_output_nr, NULL,
     "Which output of grad_fn this tensor is.", NULL},
    {"is_leaf", THPVariable_get_is_leaf, NULL,
     "True unless made by an op autograd recorded.", NULL},
    {"grad", get_object_field, THPVariable_set_grad,
     "The accumulated gradient, or None.", FIELD_OFFSET(grad)},
    {"grad_fn", get_object_field, set_object_field,
     "The autograd node that made this tensor, or None.",
     FIELD_OFFSET(grad_fn)},
    {"_backward_hooks", get_object_field, set_object_field, NULL,
     FIELD_OFFSET(backward_hooks)},
    {"_autograd_meta", get_object_field, set_object_field, NULL,
     FIELD_OFFSET(autograd_meta)},
    {"data", THPVariable_get_data, THPVariable_set_data,
     "The same memory, detached from autograd.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- reading methods ------------------------------------------------------- */

static const char *const dim_arg[] = {"dim"};

/* size(dim=None) and stride(dim=None) share their parsing. */
static PyObject *
sizes_or_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, const char *fname, const int64_t *values)
{
    PyObject *dim_obj;
    THTensor *t = SELF_TENSOR;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, dim_arg, 1, 1,
                           &dim_obj)
        < 0) {
        return NULL;
    }
    if (dim_obj == NULL || dim_obj == Py_None) {
        if (values == t->sizes) {
            return THPSize_New(t->ndim, values);
        }
        PyObject *tuple = PyTuple_New(t->ndim);
        for (int d = 0; tuple != NULL && d < t->ndim; d++) {
            PyObject *v = PyLong_FromLongLong(values[d]);
            if (v == NULL) {
                Py_CLEAR(tuple);
                break;
            }
            PyTuple_SET_ITEM(tuple, d, v); /* steals `v` */
        }
        return tuple;
    }
    int64_t dim, wrapped;
    if (THPUtils_unpackLong(dim_obj, fname, "dim", &dim) < 0) {
        return NULL;
    }
    if (t->ndim == 0) {
        PyErr_Format(PyExc_IndexError,
                     "Dimension specified as %lld but tensor has no "
                     "dimensions",
                     (long long)dim);
        return NULL;
    }
    if (THTensor_wrapDim(dim, t->ndim, &wrapped) < 0) {
        return THPUtils_setErrorFromTH();
    }
    return PyLong_FromLongLong(values[wrapped]);
}

static PyObject *
THPVariable_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    return sizes_or_one(self, args, nargs, kwnames, "size",
                        SELF_TENSOR->sizes);
}

static PyObject *
THPVariable_stride(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    return sizes_or_one(self, args, nargs, kwnames, "stride",
                        SELF_TENSOR->strides);
}

static PyObject *
THPVariable_storage_offset(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLongLong(SELF_TENSOR->storage_offset);
}

static PyObject *
THPVariable_dim(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(SELF_TENSOR->ndim);
}

static PyObject *
THPVariable_numel(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLongLong(SELF_TENSOR->numel);
}

static PyObject *
THPVariable_is_contiguous(PyObject *self, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"memory_format"};
    PyObject *memory_format;
    if (THPUtils_parseArgs("is_contiguous", args, nargs, kwnames, names, 1,
                           1, &memory_format)
        < 0) {
        return NULL;
    }
    return PyBool_FromLong(SELF_TENSOR->is_contiguous);
}

static PyObject *
THPVariable_is_floating_point(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(THDtype_isFloating(SELF_TENSOR->dtype));
}

static PyObject *
THPVariable_data_ptr(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr(SELF_TENSOR->storage->data == NULL
                                  ? NULL
                                  : THTensor_data(SELF_TENSOR));
}

static PyObject *
THPVariable_untyped_storage(PyObject *self, PyObject *unused)
{
    (void)unused;
    return THPStorage_New(SELF_TENSOR->storage);
}

static PyObject *
THPVariable_element_size(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLongLong(THTensor_itemsize(SELF_TENSOR));
}

static PyObject *
THPVariable_item(PyObject *self, PyObject *unused)
{
    PyObject *traced;
    if (THPTracer_maybeTrace("item", &self, 1, &traced)) {
        return traced; /* the tracer warns: the value is baked in */
    }
    (void)unused;
    THTensor *t = SELF_TENSOR;
    if (t->numel != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "a Tensor with %lld elements cannot be converted to "
                     "Scalar",
                     (long long)t->numel);
        return NULL;
    }
    return THPUtils_scalarToPython(THTensor_data(t), t->dtype);
}

/* Nested lists of Python scalars for dims [dim, ndim), starting at `data`. */
static PyObject *
tolist_recursive(const THTensor *t, int dim, const char *data)
{
    if (dim == t->ndim) {
        return THPUtils_scalarToPython(data, t->dtype);
    }
    Py_ssize_t size = (Py_ssize_t)t->sizes[dim];
    int64_t step = t->strides[dim] * THTensor_itemsize(t);
    PyObject *list = PyList_New(size);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *item = tolist_recursive(t, dim + 1, data + i * step);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item); /* steals `item` */
    }
    return list;
}

static PyObject *
THPVariable_tolist(PyObject *self, PyObject *unused)
{
    (void)unused;
    /* Owned: each new Python number may run the GC, and a finalizer may
     * set self.data while we are still reading the old memory. */
    THTensor *t = SELF_TENSOR;
    THTensor_retain(t);
    /* Empty storages have no pointer; nothing is read anyway. */
    const char *data = t->numel == 0 && t->storage->data == NULL
                           ? (const char *)""
                           : THTensor_data(t);
    PyObject *list = tolist_recursive(t, 0, data);
    THTensor_release(t);
    return list;
}

static PyObject *
THPVariable_requires_grad_(PyObject *self, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"requires_grad"};
    PyObject *flag;
    if (THPUtils_parseArgs("requires_grad_", args, nargs, kwnames, names, 1,
                           1, &flag)
        < 0) {
        return NULL;
    }
    if (flag != NULL && !PyBool_Check(flag)) {
        PyErr_Format(PyExc_TypeError,
                     "requires_grad_(): argument 'requires_grad' (position "
                     "1) must be bool, not %s",
                     Py_TYPE(flag)->tp_name);
        return NULL;
    }
    if (set_requires_grad_flag((THPVariable *)self, flag != Py_False, 1)
        < 0) {
        return NULL;
    }
    Py_INCREF(self); /* returned: a new reference to self */
    return self;
}

/* In-place changes of a tensor's geometry (unsqueeze_, t_, resize_, ...,
 * python/ember/_function_forms.py) rebind the object to a new view and
 * count as writes: a node that saved the old geometry must refuse it.
 * _bump_version(since) first lifts the counter to `since`: a tensor
 * rebound onto a new storage (a resize_ that grows) has a new counter,
 * which must still read past the old one's version. */
static PyObject *
THPVariable_bump_version(PyObject *self, PyObject *const *args,
                         Py_ssize_t nargs)
{
    int64_t since = 0;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError,
                        "_bump_version() takes at most one argument");
        return NULL;
    }
    if (nargs == 1 && THPUtils_unpackLong(args[0], "_bump_version", "since",
                                          &since)
                          < 0) {
        return NULL;
    }
    THTensor *tensor = SELF_TENSOR;
    if (__atomic_load_n(&tensor->version_counter->version, __ATOMIC_RELAXED)
        < since) {
        __atomic_store_n(&tensor->version_counter->version, since,
                         __ATOMIC_RELAXED);
    }
    THTensor_bumpVersion(tensor);
    Py_RETURN_NONE;
}

static PyMethodDef THPVariable_methods[] = {
    {"size", (PyCFunction)(void (*)(void))THPVariable_size,
     METH_FASTCALL | METH_KEYWORDS, "size(dim=None)"},
    {"stride", (PyCFunction)(void (*)(void))THPVariable_stride,
     METH_FASTCALL | METH_KEYWORDS, "stride(dim=None), in elements"},
    {"storage_offset", THPVariable_storage_offset, METH_NOARGS,
     "Offset of element 0 in the storage, in elements."},
    {"dim", THPVariable_dim, METH_NOARGS, "Number of dimensions."},
    {"ndimension", THPVariable_dim, METH_NOARGS, "Alias of dim()."},
    {"numel", THPVariable_numel, METH_NOARGS, "Number of elements."},
    {"nelement", THPVariable_numel, METH_NOARGS, "Alias of numel()."},
    {"is_contiguous", (PyCFunction)(void (*)(void))THPVariable_is_contiguous,
     METH_FASTCALL | METH_KEYWORDS, "Row-major and dense?"},
    {"is_floating_point", THPVariable_is_floating_point, METH_NOARGS, NULL},
    {"data_ptr", THPVariable_data_ptr, METH_NOARGS,
     "Address of element 0."},
    {"untyped_storage", THPVariable_untyped_storage, METH_NOARGS,
     "The storage this tensor views."},
    {"element_size", THPVariable_element_size, METH_NOARGS,
     "Bytes per element."},
    {"item", THPVariable_item, METH_NOARGS,
     "The value of a one-element tensor as a Python number."},
    {"tolist", THPVariable_tolist, METH_NOARGS,
     "The values as nested Python lists."},
    {"requires_grad_", (PyCFunction)(void (*)(void))THPVariable_requires_grad_,
     METH_FASTCALL | METH_KEYWORDS, "Sets requires_grad in place."},
    {"_bump_version", (PyCFunction)(void (*)(void))THPVariable_bump_version,
     METH_FASTCALL, "Counts an in-place change of the geometry as a write."},
    {NULL, NULL, 0, NULL},
};

/* ---- Python number protocol, len and iteration ----------------------------- */

/* The number protocol reads an element outside any pin frame, so it sends
 * device tensors to their launcher itself (Note [One dispatch point] in
 * Device.c): 1 with *result set (NULL on error), or 0 on the CPU. */
static int
launch_if_on_device(const char *dunder, PyObject *self, PyObject **result)
{
    if (SELF_TENSOR->storage->device == TH_DEVICE_CPU) {
        return 0;
    }
    *result = THPDevice_launchSlot(dunder, &self, 1);
    return 1;
}

/* The single element of a one-element tensor as a Python scalar. */
static PyObject *
single_element(PyObject *self)
{
    THTensor *t = SELF_TENSOR;
    if (t->numel != 1) {
        PyErr_SetString(PyExc_ValueError,
                        "only one element tensors can be converted to "
                        "Python scalars");
        return NULL;
    }
    return THPUtils_scalarToPython(THTensor_data(t), t->dtype);
}

static PyObject *
THPVariable_float(PyObject *self)
{
    PyObject *traced;
    if (THPTracer_maybeTrace("__float__", &self, 1, &traced)) {
        return traced;
    }
    if (launch_if_on_device("__float__", self, &traced)) {
        return traced;
    }
    PyObject *item = single_element(self);
    if (item == NULL) {
        return NULL;
    }
    PyObject *result = PyNumber_Float(item);
    Py_DECREF(item);
    return result;
}

static PyObject *
THPVariable_int(PyObject *self)
{
    PyObject *traced;
    if (THPTracer_maybeTrace("__int__", &self, 1, &traced)) {
        return traced;
    }
    if (launch_if_on_device("__int__", self, &traced)) {
        return traced;
    }
    PyObject *item = single_element(self);
    if (item == NULL) {
        return NULL;
    }
    PyObject *result = PyNumber_Long(item);
    Py_DECREF(item);
    return result;
}

static PyObject *
THPVariable_index(PyObject *self)
{
    PyObject *traced;
    if (THPTracer_maybeTrace("__index__", &self, 1, &traced)) {
        return traced;
    }
    if (launch_if_on_device("__index__", self, &traced)) {
        return traced;
    }
    THTensor *t = SELF_TENSOR;
    if (t->numel != 1 || !THDtype_isIntegral(t->dtype, true)) {
        PyErr_SetString(PyExc_TypeError,
                        "only integer tensors of a single element can be "
                        "converted to an index");
        return NULL;
    }
    return THPVariable_int(self);
}

static int
THPVariable_bool(PyObject *self)
{
    PyObject *traced;
    if (THPTracer_maybeTrace("__bool__", &self, 1, &traced)
        || launch_if_on_device("__bool__", self, &traced)) {
        int truth = traced == NULL ? -1 : PyObject_IsTrue(traced);
        Py_XDECREF(traced);
        return truth;
    }
    THTensor *t = SELF_TENSOR;
    if (t->numel != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "Boolean value of Tensor with %s is ambiguous",
                     t->numel == 0 ? "no values" : "more than one value");
        return -1;
    }
    PyObject *item = THPUtils_scalarToPython(THTensor_data(t), t->dtype);
    if (item == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(item);
    Py_DECREF(item);
    return truth;
}

static PyNumberMethods THPVariable_as_number = {
    .nb_bool = THPVariable_bool,
    .nb_int = THPVariable_int,
    .nb_float = THPVariable_float,
    .nb_index = THPVariable_index,
};

static Py_ssize_t
THPVariable_length(PyObject *self)
{
    if (SELF_TENSOR->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)SELF_TENSOR->sizes[0];
}

/* Iteration yields t[0], t[1], ...: views along dim 0. */
typedef struct {
    PyObject_HEAD
    PyObject *tensor; /* owned */
    int64_t next;
} THPVariableIterator;

/* The iterator holds a tensor, which may hold the iterator back (as an
 * attribute): a possible cycle, so it takes part in the GC too. */
static int
THPVariableIterator_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((THPVariableIterator *)self)->tensor);
    return 0;
}

static int
THPVariableIterator_clear(PyObject *self)
{
    Py_CLEAR(((THPVariableIterator *)self)->tensor);
    return 0;
}

static void
THPVariableIterator_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    THPVariableIterator_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
THPVariableIterator_next(PyObject *self)
{
    THPVariableIterator *it = (THPVariableIterator *)self;
    if (it->tensor == NULL) {
        return NULL; /* cleared by the GC: exhausted */
    }
    /* Read afresh each step: the tensor's data may have been replaced
     * (t.data = ...) by one of another rank or size since the last. */
    THTensor *t = THPVariable_Unpack(it->tensor);
    if (t->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
        return NULL;
    }
    if (it->next >= t->sizes[0]) {
        return NULL; /* StopIteration */
    }
    return THPVariable_Wrap(THTensor_newSelect(t, 0, it->next++));
}

static PyTypeObject THPVariableIteratorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._C._TensorIterator",
    .tp_basicsize = sizeof(THPVariableIterator),
    .tp_dealloc = THPVariableIterator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = THPVariableIterator_traverse,
    .tp_clear = THPVariableIterator_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = THPVariableIterator_next,
};

static PyObject *
THPVariable_iter(PyObject *self)
{
    if (SELF_TENSOR->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
        return NULL;
    }
    PyObject *routed;
    if (THPAutograd_maybeDispatch("__iter__", &self, 1, &routed)) {
        return routed; /* autograd iterates over unbind(0) */
    }
    THPVariableIterator *it =
        PyObject_GC_New(THPVariableIterator, &THPVariableIteratorType);
    if (it == NULL) {
        return NULL;
    }
    Py_INCREF(self); /* it->tensor */
    it->tensor = self;
    it->next = 0;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PySequenceMethods THPVariable_as_sequence = {
    .sq_length = THPVariable_length,
};

/* ---- the type ---------------------------------------------------------------- */

PyTypeObject THPVariableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._C._TensorBase",
    .tp_basicsize = sizeof(THPVariable),
    .tp_dealloc = THPVariable_dealloc,
    .tp_as_number = &THPVariable_as_number,
    .tp_as_sequence = &THPVariable_as_sequence,
    .tp_as_mapping = &THPVariable_as_mapping,
    .tp_hash = THPVariable_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C base of ember.Tensor.",
    .tp_weaklistoffset = offsetof(THPVariable, weakreflist),
    .tp_traverse = THPVariable_traverse,
    .tp_clear = THPVariable_clear,
    .tp_finalize = THPVariable_finalize,
    .tp_iter = THPVariable_iter,
    .tp_getset = THPVariable_getset,
    .tp_new = THPVariable_pynew,
};

/* The operator methods (views, copies and every operator family) become
 * THPOps, which route to autograd when needed (Note [The autograd
 * boundary] in Autograd.c).  Added after PyType_Ready; a name defined
 * twice is an error. */
static int
add_operator_methods(void)
{
#define THP_OP_FAMILY_METHODS(Family, family) THPVariable_##family##_methods,
    PyMethodDef *tables[] = {THPVariable_view_methods,
                             THP_FORALL_OP_FAMILIES(THP_OP_FAMILY_METHODS)};
#undef THP_OP_FAMILY_METHODS
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        if (THPAutograd_addOpMethods(&THPVariableType, tables[t]) < 0) {
            return -1;
        }
    }
    /* The plain methods (size(), item(), numpy(), ...) are no operators,
     * but they read tensors too: pinned (Note [Pinned arguments]). */
    PyMethodDef *plain[] = {THPVariable_methods, THPVariable_numpy_methods};
    for (size_t t = 0; t < sizeof(plain) / sizeof(plain[0]); t++) {
        if (THPAutograd_addPinnedMethods(&THPVariableType, plain[t]) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *
THPVariable_set_python_types(PyObject *module, PyObject *const *args,
                             Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyType_Check(args[0])
        || !PyType_IsSubtype((PyTypeObject *)args[0], &THPVariableType)) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_python_types(tensor_class, cpu_device, "
                        "cuda_device): tensor_class must subclass "
                        "_TensorBase");
        return NULL;
    }
    if (adds_only_a_dict((PyTypeObject *)args[0])) {
        ((PyTypeObject *)args[0])->tp_dealloc = THPVariable_subclass_dealloc;
    }
    /* Module-lifetime strong references to the registered objects. */
    Py_INCREF(args[0]);
    Py_XSETREF(THPVariableClass, (PyTypeObject *)args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(THPDevice_cpu, args[1]);
    Py_INCREF(args[2]);
    Py_XSETREF(THPDevice_cuda, args[2]);
    Py_RETURN_NONE;
}

static PyMethodDef THPVariable_module_methods[] = {
    {"_set_python_types",
     (PyCFunction)(void (*)(void))THPVariable_set_python_types,
     METH_FASTCALL, "Registers ember.Tensor, ember.device('cpu') and "
     "ember.device('cuda', 0)."},
    {NULL, NULL, 0, NULL},
};

int
THPVariable_InitModule(PyObject *module)
{
    THPPointwise_initTypeSlots(&THPVariableType, &THPVariable_as_number);
    THPLinalg_initTypeSlots(&THPVariable_as_number);
    if (PyType_Ready(&THPVariableType) < 0
        || PyType_Ready(&THPVariableIteratorType) < 0
        || add_operator_methods() < 0) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "_TensorBase",
                              (PyObject *)&THPVariableType)
        < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, THPVariable_module_methods);
}

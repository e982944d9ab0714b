/*
 * Autograd.c -- the boundary between the C operators and Python autograd.
 *
 * Note [The autograd boundary]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Autograd is written in Python (python/ember/autograd/): PyTorch's
 * "VariableType" layer.  The operators stay in C, so something must decide,
 * on every call, whether autograd has to see it.  That is this file:
 *
 *   - Every operator (each entry of the family tables and of the view
 *     methods) is published as a THPOp: a callable that checks, before the C
 *     implementation runs, whether grad mode is on AND some tensor argument
 *     (or a tensor inside a list/tuple argument) requires grad.
 *   - If not (the common case: inference, optimizer updates, every op in
 *     no_grad), it calls the C implementation directly.  The check is a
 *     thread-local load and a scan of the arguments: no Python frame, no
 *     allocation.
 *   - If so, it calls the Python handler registered for the op's name in
 *     _C._autograd_handlers, with the same arguments and with grad mode
 *     switched OFF for the duration (so the handler's own call of the op
 *     takes the C path).  The handler computes the result and records the
 *     graph node.  A handler of None marks an op without a derivative
 *     (comparisons, argmax, ...): the C path runs and the result does not
 *     require grad.  An op with no entry at all raises NotImplementedError,
 *     never a silently gradient-free result.
 *
 * Number slots (a + b), __getitem__/__setitem__ and iteration are not table
 * entries; they ask THPAutograd_maybeDispatch by their dunder name.
 */
#include "THP.h"

#include <string.h>

THP_TLS_INITIAL_EXEC _Thread_local int THPAutograd_gradEnabled = 1;

/* op name -> handler (callable) or None; filled by ember.autograd. */
static PyObject *autograd_handlers = NULL;
/* Names of every THPOp, for the test that all of them are registered. */
static PyObject *op_names = NULL;

/* ---- the tracer and autocast hooks ------------------------------------------------
 *
 * Note [The tracer hook]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * ember.jit.trace records the ops of one eager run.  While it runs, this
 * thread's tracer slot holds a Python callable (a strong reference, set
 * and cleared by _C._set_tracer), and every entry point that autograd sees
 * (THPOps, number slots, indexing) plus the tensor -> Python conversions
 * (__bool__, item, int, float, index) hands its call to the hook instead:
 *
 *     hook(what, args, kwnames)
 *
 * where `what` is the THPOp itself or the slot's dunder name.  The hook is
 * switched off while it runs, so it computes the real result by calling the
 * op again (autograd included) and records one node per traced call.
 *
 * Note [The autocast hook]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * ember.amp.autocast runs some ops in lower precision (PyTorch's autocast
 * dispatch key).  Its policies map op names ("matmul", "__matmul__", ...)
 * to how their inputs are cast; they are set once (_C._set_autocast_policies)
 * and shared by all threads.  Inside `with autocast():` this thread's
 * autocast slot holds a hook (_C._set_autocast_hook), and an op that has a
 * policy becomes
 *
 *     hook(what, policy, args, kwnames)
 *
 * with the hook off while it runs: it casts the tensor arguments (autograd
 * records the casts, so gradients flow back in the inputs' dtypes) and
 * calls the op again.  Ops without a policy pay one dict lookup.  The
 * tracer comes first: a traced run records the op as called, and autocast
 * applies when the tracer calls it. */
typedef struct {
    PyObject *hook;           /* owned, or NULL when off */
    unsigned long generation; /* bumped by every set: a running hook sees it */
} HookSlot;

static THP_TLS_INITIAL_EXEC _Thread_local HookSlot tracer_slot = {NULL, 0};
static THP_TLS_INITIAL_EXEC _Thread_local HookSlot autocast_slot = {NULL, 0};
/* op name -> policy; NULL until ember.amp sets it. */
static PyObject *autocast_policies = NULL;

/* hook(what, [policy,] args, kwnames) with the slot's hook switched off. */
static PyObject *
call_hook(HookSlot *slot, PyObject *what, PyObject *policy,
          PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *hook = slot->hook; /* our reference, held by the slot */
    Py_ssize_t n = PyVectorcall_NARGS(nargsf)
                   + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject *arg_tuple = PyTuple_New(n);
    if (arg_tuple == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(arg_tuple, i, Py_NewRef(args[i]));
    }
    PyObject *kw = kwnames == NULL ? Py_None : kwnames;
    /* The slot's reference moves to `hook` and comes back after, unless
     * the hook set the slot itself: then that choice stands and the old
     * reference is ours to drop. */
    unsigned long generation = slot->generation;
    slot->hook = NULL;
    PyObject *result =
        policy == NULL
            ? PyObject_CallFunctionObjArgs(hook, what, arg_tuple, kw, NULL)
            : PyObject_CallFunctionObjArgs(hook, what, policy, arg_tuple, kw,
                                           NULL);
    if (slot->generation == generation) {
        slot->hook = hook;
    }
    else {
        Py_DECREF(hook);
    }
    Py_DECREF(arg_tuple);
    return result;
}

/* Installs `hook` (None: off) in a slot of this thread. */
static PyObject *
set_hook(HookSlot *slot, PyObject *hook, const char *setter)
{
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a callable or None",
                     setter);
        return NULL;
    }
    PyObject *old = slot->hook;
    slot->hook = hook == Py_None ? NULL : Py_NewRef(hook);
    slot->generation++;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

PyObject *
THPTracer_call(PyObject *what, PyObject *const *args, size_t nargsf,
               PyObject *kwnames)
{
    return call_hook(&tracer_slot, what, NULL, args, nargsf, kwnames);
}

int
THPTracer_maybeTrace(const char *name, PyObject *const *args,
                     Py_ssize_t nargs, PyObject **result)
{
    if (tracer_slot.hook == NULL) {
        return 0;
    }
    PyObject *key = PyUnicode_FromString(name);
    *result = key == NULL ? NULL
                          : THPTracer_call(key, args, (size_t)nargs, NULL);
    Py_XDECREF(key);
    return 1;
}

/* 0 when autocast is off or `name` has no policy; else 1 with *result
 * set to the hook's result (NULL with an exception on error). */
static int
autocast_maybe_call(PyObject *name, PyObject *what, PyObject *const *args,
                    size_t nargsf, PyObject *kwnames, PyObject **result)
{
    if (autocast_slot.hook == NULL || autocast_policies == NULL) {
        return 0;
    }
    PyObject *policy = PyDict_GetItemWithError(autocast_policies, name);
    if (policy == NULL) {
        *result = NULL;
        return PyErr_Occurred() != NULL;
    }
    Py_INCREF(policy); /* the hook may run code that changes the dict */
    *result = call_hook(&autocast_slot, what, policy, args, nargsf, kwnames);
    Py_DECREF(policy);
    return 1;
}

/* ---- the check ---------------------------------------------------------------- */

static inline int
tensor_requires_grad(PyObject *obj)
{
    return THPVariable_Check(obj) && ((THPVariable *)obj)->requires_grad;
}

int
THPAutograd_anyRequiresGrad(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *arg = args[i];
        if (THPPin_holdsNoTensor(arg)) {
            continue; /* sizes, dims, scalars, slices: the common case */
        }
        if (tensor_requires_grad(arg)) {
            return 1;
        }
        /* cat([a, b]), stack((a, b)) take tensors in lists; subclasses too
         * (a namedtuple, a list subclass), which the kernels accept. */
        if (PyList_Check(arg) || PyTuple_Check(arg)) {
            PyObject **items = PySequence_Fast_ITEMS(arg);
            for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(arg); k++) {
                if (tensor_requires_grad(items[k])) {
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* ---- calling a handler ------------------------------------------------------------ */

/* handler(*args, **kwargs) with grad mode off while it runs. */
static PyObject *
call_handler(PyObject *handler, PyObject *const *args, size_t nargsf,
             PyObject *kwnames)
{
    int was_enabled = THPAutograd_gradEnabled;
    THPAutograd_gradEnabled = 0;
    Py_INCREF(handler); /* the dict entry may be replaced during the call */
    PyObject *result = PyObject_Vectorcall(handler, args, nargsf, kwnames);
    Py_DECREF(handler);
    THPAutograd_gradEnabled = was_enabled;
    return result;
}

/* Borrowed handler for `name`, Py_None for "no derivative", or NULL with
 * NotImplementedError. */
static PyObject *
find_handler(PyObject *name)
{
    PyObject *handler = PyDict_GetItemWithError(autograd_handlers, name);
    if (handler == NULL && !PyErr_Occurred()) {
        PyErr_Format(PyExc_NotImplementedError,
                     "the derivative for '%U' is not implemented", name);
    }
    return handler;
}

/* Borrowed handler key for a slot's name: interned once per name and kept
 * for the life of the process (the names are string literals, so their
 * addresses identify them). */
static PyObject *
slot_key(const char *name)
{
    static struct {
        const char *name;
        PyObject *key;
    } keys[64];
    static int nkeys = 0;
    for (int i = 0; i < nkeys; i++) {
        if (keys[i].name == name) {
            return keys[i].key;
        }
    }
    if (nkeys == (int)(sizeof(keys) / sizeof(keys[0]))) {
        PyErr_SetString(PyExc_SystemError, "too many autograd slot names");
        return NULL;
    }
    PyObject *key = PyUnicode_InternFromString(name);
    if (key != NULL) {
        keys[nkeys].name = name;
        keys[nkeys].key = key; /* the table's reference, never released */
        nkeys++;
    }
    return key;
}

int
THPAutograd_maybeDispatch(const char *name, PyObject *const *args,
                          Py_ssize_t nargs, PyObject **result)
{
    if (THPTracer_maybeTrace(name, args, nargs, result)) {
        return 1;
    }
    int autocasting = autocast_slot.hook != NULL;
    if (!autocasting && !THPAutograd_needsDispatch(args, nargs, NULL)) {
        return 0;
    }
    PyObject *key = slot_key(name);
    if (key == NULL) {
        *result = NULL;
        return 1;
    }
    if (autocasting && autocast_maybe_call(key, key, args, (size_t)nargs, NULL,
                                           result)) {
        return 1;
    }
    if (!THPAutograd_needsDispatch(args, nargs, NULL)) {
        return 0;
    }
    PyObject *handler = find_handler(key);
    if (handler == Py_None) {
        return 0;
    }
    *result = handler == NULL ? NULL
                              : call_handler(handler, args, (size_t)nargs,
                                             NULL);
    return 1;
}

/* ---- THPOp: an operator entry point that knows about autograd -------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyMethodDef *def;  /* the C implementation */
    PyObject *name;    /* owned, interned: the handler key */
    PyObject *method_key; /* owned "Tensor.<name>" for methods, else NULL */
    PyObject *module;  /* borrowed, the functions' `self`; NULL for methods */
    PyTypeObject *objclass; /* borrowed, the methods' type; NULL for functions */
    THPDeviceRule device_rule; /* Note [One dispatch point] in Device.c */
} THPOp;

static PyObject *
wrong_arguments(THPOp *op, const char *what)
{
    PyErr_Format(PyExc_TypeError, "%U() %s", op->name, what);
    return NULL;
}

/* METH_VARARGS: the arguments as a tuple (and a dict of keywords). */
static PyObject *
call_varargs(THPOp *op, PyObject *self, PyObject *const *args,
             Py_ssize_t nargs, PyObject *kwnames)
{
    int takes_keywords = (op->def->ml_flags & METH_KEYWORDS) != 0;
    if (!takes_keywords && kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        return wrong_arguments(op, "takes no keyword arguments");
    }
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    }
    PyObject *kwargs = NULL;
    for (Py_ssize_t i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames);
         i++) {
        if ((kwargs == NULL && (kwargs = PyDict_New()) == NULL)
            || PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i),
                              args[nargs + i])
                   < 0) {
            Py_DECREF(tuple);
            Py_XDECREF(kwargs);
            return NULL;
        }
    }
    PyObject *result =
        takes_keywords
            ? ((PyCFunctionWithKeywords)(void (*)(void))op->def->ml_meth)(
                self, tuple, kwargs)
            : op->def->ml_meth(self, tuple);
    Py_DECREF(tuple);
    Py_XDECREF(kwargs);
    return result;
}

/* Calls the C implementation per its calling convention.  `self` is the
 * tensor for methods, the module for functions. */
static PyObject *
call_impl(THPOp *op, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    PyMethodDef *def = op->def;
    int has_kwargs = kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0;
    switch (def->ml_flags & (METH_VARARGS | METH_FASTCALL | METH_NOARGS
                             | METH_O | METH_KEYWORDS)) {
    case METH_FASTCALL | METH_KEYWORDS:
        return ((_PyCFunctionFastWithKeywords)(void (*)(void))def->ml_meth)(
            self, args, nargs, kwnames);
    case METH_FASTCALL:
        if (has_kwargs) {
            return wrong_arguments(op, "takes no keyword arguments");
        }
        return ((_PyCFunctionFast)(void (*)(void))def->ml_meth)(self, args,
                                                               nargs);
    case METH_O:
        if (has_kwargs || nargs != 1) {
            return wrong_arguments(op, "takes exactly one argument");
        }
        return def->ml_meth(self, args[0]);
    case METH_NOARGS:
        if (has_kwargs || nargs != 0) {
            return wrong_arguments(op, "takes no arguments");
        }
        return def->ml_meth(self, NULL);
    case METH_VARARGS:
    case METH_VARARGS | METH_KEYWORDS:
        return call_varargs(op, self, args, nargs, kwnames);
    default:
        PyErr_Format(PyExc_SystemError, "%U: unsupported calling convention",
                     op->name);
        return NULL;
    }
}

/* call_impl inside a pin frame (Note [Pinned arguments] in THP.h): the
 * implementation sees its tensor arguments owned, and lists as tuples.
 * `self` is args[0] for methods (skip = 1). */
static PyObject *
call_pinned(THPOp *op, PyObject *self, PyObject *const *args,
            Py_ssize_t nargs, PyObject *kwnames, Py_ssize_t skip)
{
    Py_ssize_t n = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    THPPinFrame frame;
    THPPin_enter(&frame);
    frame.allows_mixed_devices = op->device_rule != THP_DEVICE_SAME;
    PyObject *const *pinned;
    PyObject *result = NULL;
    int placement = THPPin_args(&frame, args, n, &pinned);
    if (placement == 0
        || (placement == 1 && op->device_rule == THP_DEVICE_ANY)) {
        result = call_impl(op, skip ? pinned[0] : self, pinned + skip,
                           nargs - skip, kwnames);
    }
    else if (placement == 1) {
        /* Methods pass self as the first argument (skip == 1). */
        result = THPDevice_launch(skip ? op->method_key : op->name,
                                  skip ? pinned[0] : NULL, pinned + skip,
                                  nargs - skip, kwnames);
    }
    THPPin_exit(&frame);
    return result;
}

/* A method whose arguments differ from the function's (t.where(cond, y)
 * vs ember.where(cond, x, y)) registers its own handler as
 * "Tensor.<name>"; every other op shares one handler for both forms. */
static PyObject *
find_op_handler(THPOp *op)
{
    if (op->method_key != NULL) {
        PyObject *handler = PyDict_GetItemWithError(autograd_handlers,
                                                    op->method_key);
        if (handler != NULL || PyErr_Occurred()) {
            return handler;
        }
    }
    return find_handler(op->name);
}

/* Note [Methods whose only tensor is self]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * t.view(2, 3), t.transpose(0, 1), t.add(1.0): the commonest calls have
 * one tensor, `self`, and only ints, floats, None or slices besides.  The
 * general path scans the arguments twice, once asking whether one requires
 * grad (THPAutograd_anyRequiresGrad) and once for tensors to pin
 * (THPPin_args); one scan (THPPin_onlySelfIsTensor) answers both here:
 * only self can require grad, and only self is pinned. */
static PyObject *
call_self_only(THPOp *op, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    THPPinFrame frame;
    THPPin_enter(&frame);
    PyObject *result;
    if (THPPin_self(&frame, args[0]) == 0
        || op->device_rule == THP_DEVICE_ANY) {
        result = call_impl(op, args[0], args + 1, nargs - 1, kwnames);
    }
    else {
        result = THPDevice_launch(op->method_key, args[0], args + 1,
                                  nargs - 1, kwnames);
    }
    THPPin_exit(&frame);
    return result;
}

static PyObject *
dispatch_or_call(THPOp *op, PyObject *self, PyObject *const *args,
                 size_t nargsf, PyObject *kwnames, Py_ssize_t skip)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (tracer_slot.hook != NULL) {
        return THPTracer_call((PyObject *)op, args, nargsf, kwnames);
    }
    PyObject *result;
    if (autocast_maybe_call(op->name, (PyObject *)op, args, nargsf, kwnames,
                            &result)) {
        return result;
    }
    Py_ssize_t n = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    bool self_only = skip == 1 && THPPin_onlySelfIsTensor(args, n);
    bool needs_grad =
        THPAutograd_gradEnabled
        && (self_only ? ((THPVariable *)self)->requires_grad
                      : THPAutograd_anyRequiresGrad(args, n));
    if (needs_grad) {
        PyObject *handler = find_op_handler(op);
        if (handler == NULL) {
            return NULL;
        }
        if (handler != Py_None) {
            return call_handler(handler, args, nargsf, kwnames);
        }
    }
    return self_only ? call_self_only(op, args, nargs, kwnames)
                     : call_pinned(op, self, args, nargs, kwnames, skip);
}

static PyObject *
op_function_vectorcall(PyObject *callable, PyObject *const *args,
                       size_t nargsf, PyObject *kwnames)
{
    THPOp *op = (THPOp *)callable;
    return dispatch_or_call(op, op->module, args, nargsf, kwnames, 0);
}

/* An unbound method's first argument must be a tensor.  0 or -1. */
static int
check_method_self(THPOp *op, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !THPVariable_Check(args[0])) {
        PyErr_Format(PyExc_TypeError,
                     "descriptor '%U' for '_TensorBase' objects needs a "
                     "tensor as its first argument, not %s",
                     op->name,
                     nargs < 1 ? "nothing" : Py_TYPE(args[0])->tp_name);
        return -1;
    }
    return 0;
}

/* Methods are called unbound, with the tensor first: CPython's LOAD_METHOD
 * does that for types flagged Py_TPFLAGS_METHOD_DESCRIPTOR, so t.add(b)
 * creates no bound-method object. */
static PyObject *
op_method_vectorcall(PyObject *callable, PyObject *const *args,
                     size_t nargsf, PyObject *kwnames)
{
    THPOp *op = (THPOp *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (check_method_self(op, args, nargs) < 0) {
        return NULL;
    }
    return dispatch_or_call(op, args[0], args, nargsf, kwnames, 1);
}

static PyObject *
op_method_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    THPOp *op = (THPOp *)self;
    if (!PyObject_TypeCheck(obj, op->objclass)) { /* CPython's message */
        PyErr_Format(PyExc_TypeError,
                     "descriptor '%U' for '%s' objects doesn't apply to a "
                     "'%s' object",
                     op->name, op->objclass->tp_name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PyMethod_New(self, obj);
}

static void
op_dealloc(PyObject *self)
{
    Py_XDECREF(((THPOp *)self)->name);
    Py_XDECREF(((THPOp *)self)->method_key);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *
op_repr(PyObject *self)
{
    THPOp *op = (THPOp *)self;
    return op->module == NULL
               ? PyUnicode_FromFormat(
                   "<method '%U' of 'ember._C._TensorBase' objects>", op->name)
               : PyUnicode_FromFormat("<built-in function %U>", op->name);
}

static PyObject *
op_get_name(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(((THPOp *)self)->name);
}

static PyObject *
op_get_doc(PyObject *self, void *closure)
{
    (void)closure;
    const char *doc = ((THPOp *)self)->def->ml_doc;
    if (doc == NULL) {
        Py_RETURN_NONE;
    }
    return PyUnicode_FromString(doc);
}

/* builtin functions' __self__: the module. */
static PyObject *
op_get_self(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(((THPOp *)self)->module);
}

static PyObject *
op_get_module(PyObject *self, void *closure)
{
    (void)closure;
    return PyModule_GetNameObject(((THPOp *)self)->module);
}

/* method descriptors' __objclass__: the type defining them. */
static PyObject *
op_get_objclass(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef((PyObject *)((THPOp *)self)->objclass);
}

/* Pickled (and copied) by reference, as CPython's builtin functions and
 * method descriptors are: a function by its name, looked up in __module__;
 * a method as getattr(objclass, name). */
static PyObject *
op_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    THPOp *op = (THPOp *)self;
    if (op->module != NULL) {
        return Py_NewRef(op->name);
    }
    PyObject *getattr = PyDict_GetItemString(PyEval_GetBuiltins(), "getattr");
    if (getattr == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "builtins.getattr not found");
        return NULL;
    }
    return Py_BuildValue("O(OO)", getattr, (PyObject *)op->objclass, op->name);
}

static PyMethodDef op_methods[] = {
    {"__reduce__", op_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef op_function_getset[] = {
    {"__name__", op_get_name, NULL, NULL, NULL},
    {"__qualname__", op_get_name, NULL, NULL, NULL},
    {"__doc__", op_get_doc, NULL, NULL, NULL},
    {"__self__", op_get_self, NULL, NULL, NULL},
    {"__module__", op_get_module, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef op_method_getset[] = {
    {"__name__", op_get_name, NULL, NULL, NULL},
    {"__qualname__", op_get_name, NULL, NULL, NULL},
    {"__doc__", op_get_doc, NULL, NULL, NULL},
    {"__objclass__", op_get_objclass, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject THPOpFunctionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._C.builtin_op",
    .tp_basicsize = sizeof(THPOp),
    .tp_dealloc = op_dealloc,
    .tp_vectorcall_offset = offsetof(THPOp, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = op_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "An ember operator: the C kernel, or autograd's handler when "
              "an input requires grad (Note [The autograd boundary]).",
    .tp_methods = op_methods,
    .tp_getset = op_function_getset,
};

static PyTypeObject THPOpMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._C.op_method",
    .tp_basicsize = sizeof(THPOp),
    .tp_dealloc = op_dealloc,
    .tp_vectorcall_offset = offsetof(THPOp, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = op_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "An ember tensor method (see ember._C.builtin_op).",
    .tp_methods = op_methods,
    .tp_getset = op_method_getset,
    .tp_descr_get = op_method_get,
};

/* Note [Factories with nothing to pin]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * empty(4), zeros(2, 3), arange(10): a module-level pinned function
 * called with only ints, floats, None or slices and no keywords has no
 * tensor to pin and none to unpack, and its result is a new tensor it
 * owns; its frame would only be pushed and popped (a sixth of the cost of
 * empty(4)).  So such a call runs its C implementation directly.  Python
 * code it runs (a Python allocator's malloc) sees the frames of the calls
 * around it, as it would anyway.  Its kernels fill the new tensor with
 * the GIL held (THP_RUN_WITHOUT_GIL_IF needs a frame), as the factories
 * do in any case.  A keyword (dtype=, generator=, out=) or any other
 * argument takes the pinned path. */
static bool
holds_nothing_to_pin(PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        return false;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (!THPPin_holdsNoTensor(args[i])) {
            return false;
        }
    }
    return true;
}

/* A C function that is not an operator (a factory, size(), numpy()) runs
 * inside a pin frame too (unless Note [Factories with nothing to pin]),
 * but is neither traced nor differentiated. */
static PyObject *
pinned_function_vectorcall(PyObject *callable, PyObject *const *args,
                           size_t nargsf, PyObject *kwnames)
{
    THPOp *op = (THPOp *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (holds_nothing_to_pin(args, nargs, kwnames)) {
        return call_impl(op, op->module, args, nargs, kwnames);
    }
    return call_pinned(op, op->module, args, nargs, kwnames, 0);
}

static PyObject *
pinned_method_vectorcall(PyObject *callable, PyObject *const *args,
                         size_t nargsf, PyObject *kwnames)
{
    THPOp *op = (THPOp *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (check_method_self(op, args, nargs) < 0) {
        return NULL;
    }
    return call_pinned(op, args[0], args, nargs, kwnames, 1);
}

/* A function of `module`, or (module NULL) a method of `objclass`; an
 * operator when `is_operator`, else only pinned. */
static PyObject *
new_op(PyMethodDef *def, PyObject *module, PyTypeObject *objclass,
       bool is_operator)
{
    THPOp *op = PyObject_New(THPOp, module == NULL ? &THPOpMethodType
                                                   : &THPOpFunctionType);
    if (op == NULL) {
        return NULL;
    }
    op->def = def;
    op->module = module;
    op->objclass = objclass;
    op->method_key = NULL;
    op->device_rule = THPDevice_ruleOf(def->ml_name);
    if (is_operator) {
        op->vectorcall = module == NULL ? op_method_vectorcall
                                        : op_function_vectorcall;
    }
    else {
        op->vectorcall = module == NULL ? pinned_method_vectorcall
                                        : pinned_function_vectorcall;
    }
    op->name = PyUnicode_InternFromString(def->ml_name);
    if (op->name == NULL
        || (is_operator && PySet_Add(op_names, op->name) < 0)) {
        Py_DECREF(op);
        return NULL;
    }
    if (module == NULL) {
        op->method_key = PyUnicode_FromFormat("Tensor.%s", def->ml_name);
        if (op->method_key == NULL) {
            Py_DECREF(op);
            return NULL;
        }
        PyUnicode_InternInPlace(&op->method_key);
    }
    return (PyObject *)op;
}

/* Publishes each entry of `table` as a THPOp in `dict` (a module's or a
 * type's), refusing a name already there. */
static int
add_ops(PyObject *dict, PyMethodDef *table, PyObject *module,
        PyTypeObject *objclass, bool is_operator)
{
    for (PyMethodDef *def = table; def->ml_name != NULL; def++) {
        if (PyDict_GetItemString(dict, def->ml_name) != NULL) {
            PyErr_Format(PyExc_SystemError, "operator %s defined twice",
                         def->ml_name);
            return -1;
        }
        PyObject *op = new_op(def, module, objclass, is_operator);
        if (op == NULL) {
            return -1;
        }
        int rc = PyDict_SetItemString(dict, def->ml_name, op);
        Py_DECREF(op);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

int
THPAutograd_addOpFunctions(PyObject *module, PyMethodDef *table)
{
    return add_ops(PyModule_GetDict(module), table, module, NULL, true);
}

int
THPAutograd_addOpMethods(PyTypeObject *type, PyMethodDef *table)
{
    if (add_ops(type->tp_dict, table, NULL, type, true) < 0) {
        return -1;
    }
    PyType_Modified(type);
    return 0;
}

int
THPAutograd_addPinnedFunctions(PyObject *module, PyMethodDef *table)
{
    return add_ops(PyModule_GetDict(module), table, module, NULL, false);
}

int
THPAutograd_addPinnedMethods(PyTypeObject *type, PyMethodDef *table)
{
    if (add_ops(type->tp_dict, table, NULL, type, false) < 0) {
        return -1;
    }
    PyType_Modified(type);
    return 0;
}

/* ---- module functions ------------------------------------------------------------- */

static PyObject *
THPModule_isGradEnabled(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(THPAutograd_gradEnabled);
}

static PyObject *
THPModule_setGradEnabled(PyObject *module, PyObject *flag)
{
    (void)module;
    if (!PyBool_Check(flag)) {
        PyErr_Format(PyExc_TypeError,
                     "set_grad_enabled(): argument 'mode' must be bool, not "
                     "%s",
                     Py_TYPE(flag)->tp_name);
        return NULL;
    }
    THPAutograd_gradEnabled = flag == Py_True;
    Py_RETURN_NONE;
}

/* _set_tracer(hook or None): Note [The tracer hook]. */
static PyObject *
THPModule_setTracer(PyObject *module, PyObject *hook)
{
    (void)module;
    return set_hook(&tracer_slot, hook, "_set_tracer");
}

/* _set_autocast_hook(hook or None): Note [The autocast hook]. */
static PyObject *
THPModule_setAutocastHook(PyObject *module, PyObject *hook)
{
    (void)module;
    return set_hook(&autocast_slot, hook, "_set_autocast_hook");
}

/* _set_autocast_policies(dict): Note [The autocast hook].  A copy is
 * kept, so later changes to the caller's dict do not reach the ops. */
static PyObject *
THPModule_setAutocastPolicies(PyObject *module, PyObject *policies)
{
    (void)module;
    if (!PyDict_Check(policies)) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_autocast_policies: expected a dict");
        return NULL;
    }
    PyObject *copy = PyDict_Copy(policies);
    if (copy == NULL) {
        return NULL;
    }
    Py_XSETREF(autocast_policies, copy);
    Py_RETURN_NONE;
}

/* _set_history(tensor, grad_fn, output_nr): `tensor` is output `output_nr`
 * of node `grad_fn` (None: make it a leaf again).  One call instead of
 * three attribute writes on the recording path. */
static PyObject *
THPModule_setHistory(PyObject *module, PyObject *const *args,
                     Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !THPVariable_Check(args[0]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_history(tensor, grad_fn, output_nr)");
        return NULL;
    }
    THPVariable *var = (THPVariable *)args[0];
    long output_nr = PyLong_AsLong(args[2]);
    if ((output_nr == -1 && PyErr_Occurred()) || output_nr < 0
        || output_nr > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "_set_history: bad output_nr");
        return NULL;
    }
    PyObject *grad_fn = args[1] == Py_None ? NULL : args[1];
    Py_XINCREF(grad_fn); /* the tensor's reference to its node */
    Py_XSETREF(var->grad_fn, grad_fn);
    var->output_nr = (int)output_nr;
    if (grad_fn != NULL) {
        var->requires_grad = 1;
    }
    Py_RETURN_NONE;
}

/* _make_subclass(cls, data, requires_grad=False): an instance of `cls` (a
 * subclass of ember.Tensor, e.g. nn.Parameter) sharing data's memory and
 * version counter, with no history. */
static PyObject *
THPModule_makeSubclass(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 2 || nargs > 3 || !PyType_Check(args[0])
        || !PyType_IsSubtype((PyTypeObject *)args[0], &THPVariableType)
        || !THPVariable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "_make_subclass(cls, data, requires_grad=False): cls "
                        "must subclass ember.Tensor and data be a tensor");
        return NULL;
    }
    int requires_grad = nargs == 3 ? PyObject_IsTrue(args[2]) : 0;
    if (requires_grad < 0) {
        return NULL;
    }
    THTensor *source = THPVariable_Unpack(args[1]);
    if (requires_grad && !THDtype_isFloating(source->dtype)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Only Tensors of floating point and complex dtype "
                        "can require gradients");
        return NULL;
    }
    THTensor *alias = THTensor_newAlias(source);
    if (alias == NULL) {
        return THPUtils_setErrorFromTH();
    }
    PyObject *self = THPVariable_NewWithType((PyTypeObject *)args[0], alias);
    if (self != NULL) {
        ((THPVariable *)self)->requires_grad = (char)requires_grad;
    }
    return self;
}

/* _owns_its_memory(t): no other tensor (view, alias, NumPy export) shares
 * t's storage, so the engine may adopt t as a .grad without copying. */
static PyObject *
THPModule_ownsItsMemory(PyObject *module, PyObject *obj)
{
    (void)module;
    if (!THPVariable_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "_owns_its_memory(tensor)");
        return NULL;
    }
    THTensor *t = THPVariable_Unpack(obj);
    return PyBool_FromLong(t->refcount == 1 && t->storage->refcount == 1);
}

/* The graph edge of one input (Note [The graph] in autograd/graph.py):
 * (grad_fn, output_nr), (tensor, 0) for a leaf requiring grad, or None. */
static PyObject *
edge_of(PyObject *obj)
{
    if (!THPVariable_Check(obj)) {
        Py_RETURN_NONE;
    }
    THPVariable *var = (THPVariable *)obj;
    if (var->grad_fn == NULL && !var->requires_grad) {
        Py_RETURN_NONE;
    }
    PyObject *target = var->grad_fn != NULL ? var->grad_fn : obj;
    PyObject *nr = PyLong_FromLong(var->grad_fn != NULL ? var->output_nr : 0);
    if (nr == NULL) {
        return NULL;
    }
    PyObject *edge = PyTuple_Pack(2, target, nr);
    Py_DECREF(nr);
    return edge;
}

/* _edges(*inputs): the tuple of their edges, the recording path's hot
 * loop in C. */
static PyObject *
THPModule_edges(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    PyObject *edges = PyTuple_New(nargs);
    if (edges == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *edge = edge_of(args[i]);
        if (edge == NULL) {
            Py_DECREF(edges);
            return NULL;
        }
        PyTuple_SET_ITEM(edges, i, edge); /* stolen */
    }
    return edges;
}

/* _versions(*values): each tensor's version counter, None for values
 * without one; objects whose type defines `_version` (SavedOutput) are
 * asked for it. */
static PyObject *
THPModule_versions(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    static PyObject *version_name = NULL; /* interned, kept for the process */
    if (version_name == NULL
        && (version_name = PyUnicode_InternFromString("_version")) == NULL) {
        return NULL;
    }
    PyObject *versions = PyTuple_New(nargs);
    if (versions == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *value = args[i], *version;
        if (THPVariable_Check(value)) {
            version = PyLong_FromLongLong(
                THPVariable_Unpack(value)->version_counter->version);
        }
        else if (value == Py_None || PyFloat_Check(value)
                 || PyLong_Check(value) || PyTuple_Check(value)) {
            version = Py_NewRef(Py_None);
        }
        else if (_PyType_Lookup(Py_TYPE(value), version_name) == NULL) {
            version = Py_NewRef(Py_None); /* no such attribute: no version */
        }
        else {
            version = PyObject_GetAttr(value, version_name);
        }
        if (version == NULL) {
            Py_DECREF(versions);
            return NULL;
        }
        PyTuple_SET_ITEM(versions, i, version); /* stolen */
    }
    return versions;
}

static PyObject *
THPModule_opNames(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PySequence_List(op_names);
}

static PyMethodDef THPAutograd_methods[] = {
    {"is_grad_enabled", THPModule_isGradEnabled, METH_NOARGS,
     "Whether operators record the autograd graph (thread-local)."},
    {"_set_grad_enabled", THPModule_setGradEnabled, METH_O, NULL},
    {"_set_tracer", THPModule_setTracer, METH_O,
     "Sets (or clears, with None) this thread's tracer hook."},
    {"_set_autocast_hook", THPModule_setAutocastHook, METH_O,
     "Sets (or clears, with None) this thread's autocast hook."},
    {"_set_autocast_policies", THPModule_setAutocastPolicies, METH_O,
     "Sets the autocast policy of each op name (a dict)."},
    {"_set_history", (PyCFunction)(void (*)(void))THPModule_setHistory,
     METH_FASTCALL, NULL},
    {"_make_subclass", (PyCFunction)(void (*)(void))THPModule_makeSubclass,
     METH_FASTCALL, NULL},
    {"_edges", (PyCFunction)(void (*)(void))THPModule_edges, METH_FASTCALL,
     "The graph edges of the inputs of an op being recorded."},
    {"_versions", (PyCFunction)(void (*)(void))THPModule_versions,
     METH_FASTCALL, "The version counters of values being saved."},
    {"_owns_its_memory", THPModule_ownsItsMemory, METH_O, NULL},
    {"_pin_depth", THPPin_depth, METH_NOARGS,
     "How many pin frames this thread has open (Note [Pinned arguments])."},
    {"_op_names", THPModule_opNames, METH_NOARGS,
     "The names of every operator entry point (functions and methods)."},
    {NULL, NULL, 0, NULL},
};

int
THPAutograd_InitModule(PyObject *module)
{
    if (PyType_Ready(&THPOpFunctionType) < 0
        || PyType_Ready(&THPOpMethodType) < 0) {
        return -1;
    }
    autograd_handlers = PyDict_New();
    op_names = PySet_New(NULL);
    if (autograd_handlers == NULL || op_names == NULL
        || PyModule_AddObjectRef(module, "_autograd_handlers",
                                 autograd_handlers)
               < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, THPAutograd_methods);
}

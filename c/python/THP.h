/*
 * THP.h -- the Python layer's shared declarations (the `ember._C` module).
 *
 * Layering: c/python/ turns Python objects into TH core calls and TH
 * errors into Python exceptions.  It owns every Py_INCREF/Py_DECREF; each
 * one that is not obvious says which reference it is.  See
 * docs/architecture.md.
 *
 * Conventions (CPython's): a function returning PyObject * returns a new
 * reference or NULL with an exception set; one returning int returns 0 or
 * -1 with an exception set.  The first comment line of each says so when it
 * is not a new reference.
 */
#ifndef THP_H
#define THP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "TH.h"

/* Note [One exception object]: CPython 3.12 replaced the (type, value,
 * traceback) triple of PyErr_Fetch/PyErr_Restore/PyErr_NormalizeException
 * (deprecated since) by one normalized exception object, its traceback
 * attached: PyErr_GetRaisedException() takes the pending exception (a new
 * reference, or NULL), PyErr_SetRaisedException(exc) steals it back (NULL
 * clears).  ember uses only the new pair; on 3.11 it is built here, once,
 * from the old calls (as pythoncapi-compat does). */
#if PY_VERSION_HEX < 0x030C0000
static inline PyObject *
PyErr_GetRaisedException(void)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (value != NULL && traceback != NULL) {
        (void)PyException_SetTraceback(value, traceback);
    }
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
}

static inline void
PyErr_SetRaisedException(PyObject *exc)
{
    if (exc == NULL) {
        PyErr_Clear();
        return;
    }
    PyObject *type = Py_NewRef((PyObject *)Py_TYPE(exc));
    PyErr_Restore(type, exc, PyException_GetTraceback(exc));
}
#endif

/* ---- THPVariable: the tensor object --------------------------------------
 *
 * Note [THPVariable layout]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~
 * PyObject_HEAD (refcount + type) followed by one owned THTensor and the
 * Python-side autograd state.  The C type is `ember._C._TensorBase`; the
 * public `ember.Tensor` is a Python subclass of it, registered at import
 * (ember._C._set_python_types), and every tensor C creates is an instance
 * of that subclass.  The Python fields can form reference cycles (a hook
 * whose closure refers to its tensor: tensor -> backward_hooks -> hook ->
 * tensor; the autograd graph itself has none), so the type takes part in
 * the cyclic GC: tp_traverse visits each field below and tp_clear drops
 * each.
 */
typedef struct {
    PyObject_HEAD
    THTensor *cdata;        /* owned; never NULL once initialised */
    PyObject *grad;         /* owned or NULL: the accumulated gradient */
    PyObject *grad_fn;      /* owned or NULL: the node that made this */
    PyObject *backward_hooks; /* owned or NULL: hooks from register_hook */
    PyObject *autograd_meta;  /* owned or NULL: the base, for a view */
    PyObject *weakreflist;  /* weak references to this tensor, or NULL */
    int output_nr;          /* which output of grad_fn this tensor is */
    char requires_grad;
} THPVariable;

extern PyTypeObject THPVariableType;
/* The registered Python subclass (ember.Tensor); a strong reference. */
extern PyTypeObject *THPVariableClass;

/* Called on every argument of every operator, so the common answers come
 * first: the two tensor types by identity, then any object smaller than a
 * THPVariable (ints, floats, tuples, None, slices), which no subtype of
 * _TensorBase can be, since a subtype's instances extend its base's
 * layout.  Only what is left walks the MRO. */
static inline int
THPVariable_Check(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type == THPVariableClass || type == &THPVariableType) {
        return 1;
    }
    if (type->tp_basicsize < (Py_ssize_t)sizeof(THPVariable)) {
        return 0;
    }
    return PyType_IsSubtype(type, &THPVariableType);
}

/* Makes `self` hold `replacement` (retained) instead of its THTensor: the
 * one way to change a THPVariable's cdata (t.data = x, set_, resize_).
 * 0 or -1. */
int THPVariable_rebind(PyObject *self, THTensor *replacement);
/* Wraps a tensor in a new ember.Tensor.  Steals the reference to `tensor`
 * (released on failure too).  NULL tensor (a failed core call) gives NULL
 * with the core's error translated. */
PyObject *THPVariable_Wrap(THTensor *tensor);
/* A new instance of `type` (a subclass of _TensorBase, e.g. nn.Parameter)
 * owning `tensor`.  Steals the reference to `tensor`, on failure too. */
PyObject *THPVariable_NewWithType(PyTypeObject *type, THTensor *tensor);

/* ---- THPStorage ------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    THStorage *cdata;         /* owned */
    Py_ssize_t buffer_exports; /* live Py_buffer views of this storage */
    Py_ssize_t buffer_shape[1];
} THPStorage;

extern PyTypeObject THPStorageType;
/* Wraps a storage (retained, not stolen). */
PyObject *THPStorage_New(THStorage *storage);

/* ---- dtypes, sizes, devices ------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    THDtype dtype;
} THPDtype;

extern PyTypeObject THPDtypeType;
/* Borrowed reference to the singleton dtype object. */
PyObject *THPDtype_Get(THDtype dtype);
/* Parses a dtype argument: an ember dtype or Python's bool/int/float.
 * Returns 0, or -1 with TypeError. */
int THPDtype_Parse(PyObject *obj, THDtype *out);
THDtype THPDtype_defaultFloat(void);
int THPDtype_InitModule(PyObject *module);

extern PyTypeObject THPSizeType;
/* A new ember.Size (a tuple subclass) of the given sizes. */
PyObject *THPSize_New(int ndim, const int64_t *sizes);
int THPSize_InitModule(PyObject *module);

/* ---- devices (Device.c) ------------------------------------------------------ */

/* The ember.device('cpu') and ember.device('cuda', 0) singletons registered
 * by the Python package (module-lifetime references). */
extern PyObject *THPDevice_cpu;
extern PyObject *THPDevice_cuda;
/* The ember.device for a device type, as a new reference. */
PyObject *THPDevice_Get(THDeviceType device);
/* Accepts None (the CPU), "cpu", "cuda", "cuda:0", an int (a CUDA index)
 * or an ember.device.  The core has one CUDA device, so an index other than
 * 0 raises PyTorch's "invalid device ordinal".  Parsing initializes
 * nothing. */
int THPDevice_Parse(PyObject *obj, THDeviceType *out);
/* Before allocating on `device`: 0 when an allocator is installed for it
 * (after running its initializer when none was), else -1 with the error
 * that says what is missing (CuPy, the driver, a GPU). */
int THPDevice_ensureAllocator(THDeviceType device);

/* How an entry point treats tensors on other devices (Note [One dispatch
 * point] in Device.c). */
typedef enum {
    THP_DEVICE_SAME,  /* one device (CPU scalars aside); off the CPU, the
                         device's launcher runs the call */
    THP_DEVICE_MIXED, /* tensors may sit on several devices (copy_) */
    THP_DEVICE_ANY,   /* its C implementation runs on any device: it reads
                         metadata only, or handles the device itself */
} THPDeviceRule;
THPDeviceRule THPDevice_ruleOf(const char *name);
/* Runs name(self, *args, **kwargs) through the CUDA launcher: the call
 * launcher(name, args_tuple, kwargs_dict), self first in args_tuple when
 * not NULL; kwnames as in vectorcall.  Without a launcher, the device's
 * initializer runs first; then the error says why there is none. */
PyObject *THPDevice_launch(PyObject *name, PyObject *self,
                           PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames);
/* The same for a call known by its C name: a module function such as a
 * factory (ember.zeros(..., device='cuda')), arguments as it got them. */
PyObject *THPDevice_launchNamed(const char *fname, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames);
/* The same for a Python number-protocol slot: launcher('__add__', (a, b),
 * {}) for a + b, operands in the order the slot got them. */
PyObject *THPDevice_launchSlot(const char *dunder, PyObject *const *operands,
                               Py_ssize_t n);
extern PyMethodDef THPDevice_methods[];

/* ---- errors and argument parsing (Utils.c) --------------------------------- */

/* Sets the Python exception matching the core's last error and returns
 * NULL.  A Python exception raised by a plugged-in Python component (a
 * Python allocator) takes precedence. */
PyObject *THPUtils_setErrorFromTH(void);
/* The same for int-returning functions: returns -1. */
int THPUtils_setErrorFromTH_int(void);
/* PyTorch's RuntimeError for an out= tensor of another dtype than the
 * one its operator stores, "Expected out tensor to have dtype float, but
 * got double instead" (C++ type names); returns -1. */
int THPUtils_setOutDtypeError(THDtype expected, THDtype got);
/* An out= argument: *out is its THTensor (borrowed), or NULL when `obj`
 * is NULL or None; -1 with PyTorch's TypeError when it is no tensor. */
int THPUtils_parseOut(const char *fname, PyObject *obj, THTensor **out);

/* Fills `out[i]` with borrowed references to the arguments named
 * names[i] (NULL when absent) from a vectorcall argument list.  At most
 * `max_positional` may come by position.  Returns 0 or -1 (TypeError). */
int THPUtils_parseArgs(const char *fname, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames,
                       const char *const *names, int nnames,
                       int max_positional, PyObject **out);
/* The value of an exact int of at most one CPython digit (|v| < 2**30:
 * every size, dim and index in practice), read from the object with no
 * call and no error to check; false for anything else, which takes the
 * general path (PyLong_AsLongLongAndOverflow, or __index__). */
static inline bool
THPUtils_smallInt(PyObject *obj, int64_t *value)
{
    if (!PyLong_CheckExact(obj)) {
        return false;
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (!PyUnstable_Long_IsCompact((PyLongObject *)obj)) {
        return false;
    }
    *value = PyUnstable_Long_CompactValue((PyLongObject *)obj);
#else
    /* 3.11: the sign is ob_size's, the magnitude digit 0 (0 for zero). */
    Py_ssize_t ndigits = Py_SIZE(obj);
    if (ndigits < -1 || ndigits > 1) {
        return false;
    }
    *value = ndigits * (int64_t)((PyLongObject *)obj)->ob_digit[0];
#endif
    return true;
}
/* Reads an int64 that must be a Python int (or have __index__). */
int THPUtils_unpackLong(PyObject *obj, const char *fname, const char *what,
                        int64_t *out);
/* Reads a list of sizes given either as separate int arguments or as one
 * sequence: view(2, 3) and view((2, 3)).  Returns ndim or -1. */
int THPUtils_parseSizes(const char *fname, PyObject *const *args,
                        Py_ssize_t nargs, int64_t *sizes);
/* The same for one object that must be a sequence of ints. */
int THPUtils_parseSizeSequence(const char *fname, PyObject *seq,
                               int64_t *sizes);
/* Parses a Python bool/int/float (or 0-d/1-element ember tensor, or NumPy
 * scalar) into a THScalar.  Returns 0 or -1 (TypeError). */
int THPUtils_parseScalar(PyObject *obj, THScalar *out);
/* 0 when `t` lives on the CPU, else -1 with a RuntimeError naming it
 * (`what`): for the few places that read a tensor argument's values
 * outside the dispatch (Note [One dispatch point] in Device.c), e.g. a
 * tensor nested deeper than pinning looks. */
int THPUtils_checkOnHost(const THTensor *t, const char *what);
/* Converts one element at `data` to a Python bool/int/float. */
PyObject *THPUtils_scalarToPython(const char *data, THDtype dtype);
/* PyMem_Malloc for `count` items of `itemsize` bytes, with the size
 * checked (Note [Counts to bytes]); NULL with MemoryError.  PyMem_Free it. */
void *THPUtils_mallocArray(int64_t count, size_t itemsize);

/* ---- module pieces ---------------------------------------------------------- */

int THPVariable_InitModule(PyObject *module);
int THPStorage_InitModule(PyObject *module);
int THPAllocator_InitModule(PyObject *module);
/* The Python object of an allocator written in Python (borrowed: the
 * THAllocator's own reference), or NULL for any other allocator. */
PyObject *THPAllocator_pythonObject(const THAllocator *allocator);
int THPNumpy_InitModule(PyObject *module);
/* ember._C.FusedKernel and its helpers (Fused.c). */
int THPFused_InitModule(PyObject *module);

/* ---- random numbers (Random.c) ---------------------------------------------- */

/* ember.Generator: a Python object wrapping a THGenerator. */
extern PyTypeObject THPGeneratorType;
/* Reads a generator= argument: NULL or None gives the default generator,
 * an ember.Generator its own (borrowed: valid while the caller holds the
 * argument).  0, or -1 with TypeError. */
int THPGenerator_parse(const char *fname, PyObject *obj, THGenerator **out);
/* Adds ember._C.Generator and ember._C.default_generator. */
int THPGenerator_InitModule(PyObject *module);
/* manual_seed, initial_seed, seed: on the default generator. */
extern PyMethodDef THPRandom_module_methods[];

/* Method tables each file contributes to the module. */
extern PyMethodDef THPCreation_methods[];
extern PyMethodDef THPNumpy_methods[];
/* The layer kernels, private functions for ember.nn.functional:
 * convolution (Conv.c), pooling (Pool.c), batch norm (Norm.c), the
 * recurrent layers' time loops (RNN.c). */
extern PyMethodDef THPConv_methods[];
extern PyMethodDef THPPool_methods[];
extern PyMethodDef THPNorm_methods[];
/* Blockwise scaled dot product attention (Attention.c). */
extern PyMethodDef THPAttention_methods[];
extern PyMethodDef THPRNN_methods[];
/* One-pass optimizer updates (Optim.c). */
extern PyMethodDef THPOptim_methods[];
/* Helpers of their pinned entry points (Conv.c).  checkArgs: exactly
 * `expected` positional arguments, the first `ntensors` tensors (argument
 * `optional` may be None); 0 or -1 (TypeError). */
int THPLayer_checkArgs(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, Py_ssize_t expected, int ntensors,
                       int optional);
/* A new uninitialised 4-D tensor, or NULL with the core's error. */
THTensor *THPLayer_new4d(int64_t a, int64_t b, int64_t c, int64_t d, THDtype dtype);
/* A tuple of `count` new ember.Tensors (None for NULL).  Steals every
 * tensor, on failure too; NULL with the error set. */
PyObject *THPLayer_wrapTuple(int count, THTensor **tensors);
/* After a kernel returned `status`: the tuple of the `count` results when
 * it is 0 (as wrapTuple), else releases them (NULL entries skipped) and
 * returns NULL with the core's error. */
PyObject *THPLayer_finish(int status, int count, THTensor **results);
/* Runs the kernel `call` (0 or -1) without the GIL; on failure releases
 * `result` and returns NULL from the enclosing function with the error. */
#define THPLayer_RUN_KERNEL(result, call)                                  \
    do {                                                                   \
        int status_;                                                       \
        THP_RUN_WITHOUT_GIL_IF(true, status_ = (call));                    \
        if (status_ < 0) {                                                 \
            THTensor_release(result);                                      \
            return THPUtils_setErrorFromTH();                              \
        }                                                                  \
    } while (0)
extern PyMethodDef THPAllocator_methods[];

/* Tensor methods implemented outside Variable.c (NULL-terminated). */
extern PyMethodDef THPVariable_view_methods[];
extern PyMethodDef THPVariable_numpy_methods[];
extern PyMappingMethods THPVariable_as_mapping;

/* ---- operators ---------------------------------------------------------------
 *
 * Note [Function and method from one implementation]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Each operator is written once, as
 *
 *     static PyObject *name_impl(PyObject *input, PyObject *const *args,
 *                                Py_ssize_t nargs, PyObject *kwnames);
 *
 * where args/nargs/kwnames are the vectorcall arguments after `input`.
 * THP_DEFINE_OP(name) derives the two entry points from it:
 * THPFunction_name, the module function ember.name(input, ...), and
 * THPMethod_name, the tensor method input.name(...).  Neither adds a
 * Python frame: both are METH_FASTCALL | METH_KEYWORDS C functions.  The
 * function form checks that `input` is a tensor before the impl runs.
 *
 * Each operator family lives in its own file and contributes two
 * NULL-terminated tables, THP<Family>_functions (added to ember._C and
 * re-exported by ember/__init__.py from _C._public_functions) and
 * THPVariable_<family>_methods (merged into the tensor type's methods by
 * Variable.c).
 */
/* The input check of the function form, for hand-written entry points:
 * args[0] (borrowed) when it is a tensor, else NULL with a TypeError. */
PyObject *THPUtils_checkOpInput(const char *fname, PyObject *const *args,
                                Py_ssize_t nargs);
typedef PyObject *(*THPOpImpl)(PyObject *input, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames);
/* The function form: finds `input` (first positional, or the keyword
 * input=), checks it is a tensor and calls impl with the rest. */
PyObject *THPUtils_callOpFunction(const char *fname, THPOpImpl impl,
                                  PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames);

#define THP_DEFINE_OP(name)                                                  \
    static PyObject *THPFunction_##name(PyObject *module,                    \
                                        PyObject *const *args,               \
                                        Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                        \
        (void)module;                                                        \
        return THPUtils_callOpFunction(#name, name##_impl, args, nargs,      \
                                       kwnames);                             \
    }                                                                        \
    static PyObject *THPMethod_##name(PyObject *self, PyObject *const *args, \
                                      Py_ssize_t nargs, PyObject *kwnames)   \
    {                                                                        \
        return name##_impl(self, args, nargs, kwnames);                      \
    }

#define THP_FASTCALL_KW(fn) (PyCFunction)(void (*)(void))(fn)
/* Table entries for an operator defined with THP_DEFINE_OP; `pyname` is the
 * Python name (it can differ from `name`: "__and__", "add_", ...). */
#define THP_FUNCTION_ENTRY(pyname, name, doc)                                \
    {pyname, THP_FASTCALL_KW(THPFunction_##name),                            \
     METH_FASTCALL | METH_KEYWORDS, doc}
#define THP_METHOD_ENTRY(pyname, name, doc)                                  \
    {pyname, THP_FASTCALL_KW(THPMethod_##name),                              \
     METH_FASTCALL | METH_KEYWORDS, doc}

/* The operator families (one .c file each). */
#define THP_FORALL_OP_FAMILIES(_) \
    _(Pointwise, pointwise)       \
    _(Unary, unary)               \
    _(Reduce, reduce)             \
    _(Linalg, linalg)             \
    _(IndexOps, index_ops)        \
    _(Shape, shape)               \
    _(Random, random)

#define THP_DECLARE_OP_FAMILY(Family, family)                                \
    extern PyMethodDef THP##Family##_functions[];                            \
    extern PyMethodDef THPVariable_##family##_methods[];
THP_FORALL_OP_FAMILIES(THP_DECLARE_OP_FAMILY)
#undef THP_DECLARE_OP_FAMILY

/* Type slots owned by operator families: Pointwise fills the arithmetic,
 * bitwise and comparison slots, Linalg the matrix-multiply ones. */
void THPPointwise_initTypeSlots(PyTypeObject *type, PyNumberMethods *number);
void THPLinalg_initTypeSlots(PyNumberMethods *number);

/* ember.return_types (ReturnTypes.c, Note [Named result tuples]). */
#define THP_FORALL_RESULT_TYPES(_) \
    _(MAX, "max")                   \
    _(MIN, "min")                   \
    _(SORT, "sort")                 \
    _(TOPK, "topk")                 \
    _(KTHVALUE, "kthvalue")         \
    _(CUMMAX, "cummax")             \
    _(CUMMIN, "cummin")

typedef enum {
#define THP_RESULT_ENUM(KIND, name) THP_RESULT_##KIND,
    THP_FORALL_RESULT_TYPES(THP_RESULT_ENUM)
#undef THP_RESULT_ENUM
    THP_NUM_RESULT_TYPES
} THPResultType;

int THPReturnTypes_InitModule(PyObject *module);
/* A new (values, indices) named tuple; steals both references (either may
 * be NULL after a failed wrap: then the other is released and NULL
 * returned). */
PyObject *THPReturnTypes_pack(THPResultType kind, PyObject *values,
                              PyObject *indices);
/* The same from two core tensors (stolen). */
PyObject *THPReturnTypes_packTensors(THPResultType kind, THTensor *values,
                                     THTensor *indices);

/* ---- the autograd boundary (Autograd.c) --------------------------------------
 * See Note [The autograd boundary] there. */
/* initial-exec, as THPPin_top: read on every call, and the default model
 * for a shared object's thread-locals costs a __tls_get_addr call. */
#define THP_TLS_INITIAL_EXEC __attribute__((tls_model("initial-exec")))
extern THP_TLS_INITIAL_EXEC _Thread_local int THPAutograd_gradEnabled;
/* Whether one of args[0..n) is a tensor requiring grad, or a list/tuple
 * holding one. */
int THPAutograd_anyRequiresGrad(PyObject *const *args, Py_ssize_t n);
/* The whole check: grad mode on and an argument requires grad.  `args` is a
 * vectorcall argument array (keyword values after the positionals). */
static inline int
THPAutograd_needsDispatch(PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    if (!THPAutograd_gradEnabled) {
        return 0;
    }
    Py_ssize_t n = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    return THPAutograd_anyRequiresGrad(args, n);
}
/* ember.jit.trace's hook: Note [The tracer hook] in Autograd.c. */
/* hook(what, args, kwnames) with the hook off while it runs. */
PyObject *THPTracer_call(PyObject *what, PyObject *const *args, size_t nargsf,
                         PyObject *kwnames);
/* Returns 0 when no tracer is set, else 1 with *result set to the hook's
 * result for the entry point `name` (NULL with an exception on error). */
int THPTracer_maybeTrace(const char *name, PyObject *const *args,
                         Py_ssize_t nargs, PyObject **result);
/* For entry points that are not THPOps (number slots, indexing): returns 0
 * when the C path should run, else 1 with *result set to the handler's
 * result (NULL with an exception on error). */
int THPAutograd_maybeDispatch(const char *name, PyObject *const *args,
                              Py_ssize_t nargs, PyObject **result);
/* Publish an operator table as THPOps: module functions or tensor methods. */
int THPAutograd_addOpFunctions(PyObject *module, PyMethodDef *table);
int THPAutograd_addOpMethods(PyTypeObject *type, PyMethodDef *table);
/* Publish a table of C functions that take tensors but are not operators
 * (factories, size(), numpy()): each runs in a pin frame (Note [Pinned
 * arguments]), and autograd and the tracer do not see it. */
int THPAutograd_addPinnedFunctions(PyObject *module, PyMethodDef *table);
int THPAutograd_addPinnedMethods(PyTypeObject *type, PyMethodDef *table);
int THPAutograd_InitModule(PyObject *module);

/* ---- ember.jit's bytecode VM (JitVM.c) ----------------------------------------
 * ember._C.Code and _C._jit_opcodes(); see Note [The register VM] there. */
extern PyTypeObject THPJitCodeType;
int THPJitVM_InitModule(PyObject *module);

/* The threading knobs (ember.set_num_threads and friends), Module.c. */
extern PyMethodDef THPParallel_methods[];

/* ---- pin frames (Pin.c) -----------------------------------------------------
 *
 * Note [Pinned arguments]
 * ~~~~~~~~~~~~~~~~~~~~~~~
 * The rule: a borrowed pointer dies at any call that can run Python, and a
 * kernel that runs without the GIL owns everything it touches.
 *
 * THPVariable_Unpack(obj) is a borrowed pointer: `obj` owns its THTensor
 * only until somebody runs `obj.data = other`, which can happen inside any
 * call that runs Python -- an argument's __index__ or __float__, a
 * sequence's items, a Python allocator's malloc -- or on another thread
 * while a kernel runs without the GIL.  Likewise the items of a list
 * argument die when Python code clears the list.
 *
 * So every entry point that takes tensors runs inside a pin frame, as
 * PyTorch's kernels hold at::Tensor, an owning handle:
 *
 *   - on entry (THPPin_args) each tensor argument's THTensor is retained,
 *     and so are tensors inside tuple arguments; a list argument is first
 *     replaced by a private copy (a new list no Python code can reach), so
 *     clearing the caller's list cannot free the items in use;
 *   - until the call returns, THPVariable_Unpack of a pinned argument gives
 *     that THTensor: the whole call sees one consistent set of tensors, as
 *     a PyTorch kernel sees the at::Tensors it was called with, even when
 *     a later argument's __index__ rebinds an earlier one's .data;
 *   - while a frame is open on this thread, `t.data = x` and the other
 *     rebinding setters hand the old and the new THTensor to the outermost
 *     frame (THPPin_keepAlive) instead of releasing them, so a THTensor *
 *     unpacked at any moment of the call stays valid until the call ends;
 *   - kernels release the GIL (THP_RUN_WITHOUT_GIL_IF) only inside a frame:
 *     another thread's `t.data = x` then drops the Python object's
 *     reference, never the last one;
 *   - THPPin_exit releases all of it, after the frame is off the stack.
 *
 * Entry points: every THPOp (Autograd.c call_pinned), the number slots,
 * indexing, iteration and the other C functions that take tensors.  An
 * entry point opens its own frame even when it has no tensor arguments to
 * pin if it unpacks tensors: Unpack consults only the innermost frame, so
 * Python code that runs inside an operator (an allocator, a callback) and
 * calls back into C sees live tensors, not the operator's pins.  Code that
 * reads a tensor's fields without calling Python in between (attribute
 * getters, t.data = x) reads cdata directly. */
#define THP_PIN_INLINE 8
typedef struct THPPinFrame {
    struct THPPinFrame *outer;  /* the frame this call runs inside, or NULL */
    /* objects[i] (borrowed: the caller's argument, or an item of a tuple
     * the caller or this frame holds) was pinned with kept[i]. */
    PyObject **objects;
    Py_ssize_t pinned_count, objects_capacity, cursor;
    THTensor **kept;            /* owned references, released on exit */
    Py_ssize_t kept_count, kept_capacity;
    PyObject **args;            /* owned copy of the arguments, or NULL */
    Py_ssize_t nargs;
    /* Note [One dispatch point] in Device.c: one bit per THDeviceType of
     * the pinned tensors that are not CPU scalars (0-dim), one for the
     * CPU scalars apart; and whether the entry point accepts tensors on
     * several devices (copy_, to, indexing: set before pinning). */
    unsigned devices;
    bool has_cpu_scalar;
    bool allows_mixed_devices;
    PyObject *inline_objects[THP_PIN_INLINE];
    THTensor *inline_kept[THP_PIN_INLINE];
    PyObject *inline_args[THP_PIN_INLINE];
} THPPinFrame;

/* This thread's innermost open frame, or NULL. */
extern _Thread_local THPPinFrame *THPPin_top;

/* Opens `frame` (on the caller's stack); always pair with THPPin_exit. */
void THPPin_enter(THPPinFrame *frame);
/* Pins the tensors among args[0..n) (tensors, and tensors inside tuples
 * and lists); *pinned_args is the array to use from now on: `args`
 * itself, or a copy owned by the frame in which every list is a private
 * copy of it.  Then says where the call runs (Note [One dispatch point]
 * in Device.c): 0 on the CPU (the caller runs its C implementation), 1 on
 * another device (the caller must hand the call to THPDevice_launch and
 * never run a CPU kernel), or -1 with an exception (PyTorch's error for
 * tensors on several devices, or no memory). */
int THPPin_args(THPPinFrame *frame, PyObject *const *args, Py_ssize_t n,
                PyObject *const **pinned_args);
/* The arguments that are never pinned and are the most common ones (the
 * sizes and dims of views, the scalars of arithmetic, the key of t[a:b]:
 * pinning leaves a slice's bounds alone, as it does any object that is
 * not a tensor, tuple or list): skipped at once.  None of them can
 * require grad either. */
static inline bool
THPPin_holdsNoTensor(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    return type == &PyLong_Type || type == &PyFloat_Type || obj == Py_None
           || type == &PySlice_Type;
}
/* Whether args[0] is an ember.Tensor and nothing after it is pinned:
 * t.view(2, 3), t.transpose(0, 1), t[1:3], t.add(1.0). */
static inline bool
THPPin_onlySelfIsTensor(PyObject *const *args, Py_ssize_t n)
{
    if (n == 0 || !Py_IS_TYPE(args[0], THPVariableClass)) {
        return false;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        if (args[i] == NULL || !THPPin_holdsNoTensor(args[i])) {
            return false;
        }
    }
    return true;
}
/* Pins `self`, the one tensor of the call (THPPin_onlySelfIsTensor), in
 * a frame that has pinned nothing yet: what THPPin_args does for such
 * arguments.  Returns 0 (CPU) or 1 (another device), as THPPin_args. */
int THPPin_self(THPPinFrame *frame, PyObject *self);
/* The same without copying lists (so their items are not pinned); NULL
 * entries are skipped.  0, 1 or -1 as THPPin_args. */
int THPPin_objects(THPPinFrame *frame, PyObject *const *objects,
                   Py_ssize_t n);
/* Hands the outermost open frame a reference to `tensor` (retained here);
 * a no-op outside any frame.  0 or -1 (MemoryError). */
int THPPin_keepAlive(THTensor *tensor);
void THPPin_exit(THPPinFrame *frame);
/* fn(a, b) inside a frame that pins a and b (and tensors in tuples); on
 * device tensors, autograd's handler for `name` (when it applies) or the
 * device's launcher runs `name` (a's method) instead.
 * allows_mixed_devices: as the frame's field (a CPU index into a CUDA
 * tensor is fine, a CPU operand of a CUDA matmul is not). */
PyObject *THPPin_callBinary(const char *name, binaryfunc fn, PyObject *a,
                            PyObject *b, bool allows_mixed_devices);
/* Where the call whose tensors `frame` pinned runs: 0, 1 or -1 as
 * THPPin_args (Note [One dispatch point] in Device.c). */
int THPDevice_placement(THPPinFrame *frame);
/* _C._pin_depth() */
PyObject *THPPin_depth(PyObject *module, PyObject *unused);

/* Runs `statement` without the GIL when `condition` holds and a pin frame
 * owns the arguments (Note [Pinned arguments]); else with the GIL. */
#define THP_RUN_WITHOUT_GIL_IF(condition, statement)                        \
    do {                                                                    \
        if ((condition) && THPPin_top != NULL) {                            \
            Py_BEGIN_ALLOW_THREADS                                          \
            statement;                                                      \
            Py_END_ALLOW_THREADS                                            \
        }                                                                   \
        else {                                                              \
            statement;                                                      \
        }                                                                   \
    } while (0)

/* Helpers shared by the tensor files. */
/* obj's THTensor now, without the frame lookup: for the attribute code
 * that reads or rebinds it without running Python in between. */
#define THPVariable_CURRENT(obj) (((THPVariable *)(obj))->cdata)

/* The pinned THTensor of `obj` in `frame`, else obj's own. */
THTensor *THPPin_lookup(THPPinFrame *frame, PyObject *obj);

/* Borrowed.  Inside an entry point's pin frame, a pinned argument gives
 * the THTensor it had when the call began, valid until the call returns,
 * whatever Python code runs meanwhile (Note [Pinned arguments]); anything
 * else is valid only until the next call that can run Python. */
static inline THTensor *
THPVariable_Unpack(PyObject *obj)
{
    THPPinFrame *frame = THPPin_top;
    if (frame != NULL && frame->pinned_count > 0) {
        /* Usually `self`, the first pin: found without the search. */
        return frame->objects[0] == obj ? frame->kept[0]
                                        : THPPin_lookup(frame, obj);
    }
    return ((THPVariable *)obj)->cdata;
}

/* New tensor from Python data (nested sequences, buffers, scalars); the
 * engine of ember.tensor.  dtype < 0 means infer. */
PyObject *THPVariable_FromData(PyObject *data, int dtype,
                               int requires_grad);
/* A THTensor over a PEP 3118 buffer, sharing its memory; new reference. */
THTensor *THPNumpy_tensorFromBuffer(PyObject *obj);

#endif /* THP_H */

/*
 * Creation.c -- the factories: ember.tensor(data), empty, zeros, ones,
 * full, arange, linspace, eye, the *_like forms, and the random ones: rand,
 * randn, randint, randperm (generator= parsed by Random.c).
 *
 * ember.tensor walks nested Python sequences twice: once to find the shape
 * and the dtype (bool < int < float, as PyTorch infers), once to store the
 * values into a fresh contiguous tensor; both walks read an owned tuple
 * snapshot of the lists (Note [Snapshot of nested data]).  NumPy arrays
 * and other buffers take the zero-copy path of Numpy.c and are then copied
 * once.
 */
#include "THP.h"

#include <math.h>

/* ---- ember.tensor ----------------------------------------------------------- */

/* What the first pass learns about the data. */
typedef struct {
    int ndim;
    int64_t sizes[TH_MAX_DIMS];
    THDtype inferred; /* the widest kind of scalar seen */
    int saw_any;      /* any scalar at all */
} DataShape;

static int
is_sequence(PyObject *obj)
{
    return PyList_Check(obj) || PyTuple_Check(obj);
}

/* The dtype of a NumPy scalar (np.float64(1.5), np.int8(3), np.bool_(1))
 * or 0-d array, read from the 0-d buffer it exports, so that this file
 * needs no NumPy headers.  1 with *kind set when `obj` is one of a dtype
 * ember has; 0 (no error set) when it is not. */
static int
buffer_scalar_kind(PyObject *obj, THDtype *kind)
{
    Py_buffer view;
    if (!PyObject_CheckBuffer(obj) || PyBytes_Check(obj)
        || PyByteArray_Check(obj)) {
        return 0;
    }
    if (PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear(); /* not a readable buffer: not a NumPy scalar */
        return 0;
    }
    int found = view.ndim == 0
                && THDtype_fromBufferFormat(view.format, (int)view.itemsize,
                                            kind)
                       == 0;
    if (!found) {
        THError_clear(); /* e.g. float16: the generic paths below */
    }
    PyBuffer_Release(&view);
    return found;
}

/* A leaf value's kind: TH_Bool, TH_Int64, the default float dtype, or a
 * NumPy scalar's or 0-d tensor's own dtype (as torch.tensor infers it); -1
 * (TypeError) for something that is no number. */
static int
scalar_kind(PyObject *obj, THDtype *kind)
{
    if (PyBool_Check(obj)) {
        *kind = TH_Bool;
    }
    else if (PyLong_Check(obj)) {
        *kind = TH_Int64;
    }
    else if (PyFloat_CheckExact(obj)) {
        *kind = THPDtype_defaultFloat();
    }
    else if (THPVariable_Check(obj)
             && THPVariable_Unpack(obj)->numel == 1
             && THPVariable_Unpack(obj)->ndim == 0) {
        *kind = THPVariable_Unpack(obj)->dtype;
    }
    else if (buffer_scalar_kind(obj, kind)) {
        /* np.float64 (a float subclass) must not reach PyFloat_Check */
    }
    else if (PyFloat_Check(obj)) {
        *kind = THPDtype_defaultFloat();
    }
    else if (PyIndex_Check(obj)) {
        *kind = TH_Int64; /* NumPy integers */
    }
    else if (PyNumber_Check(obj) && !PyComplex_Check(obj)
             && Py_TYPE(obj)->tp_as_number->nb_float != NULL) {
        *kind = THPDtype_defaultFloat(); /* NumPy floats, Fractions, ... */
    }
    else {
        PyErr_Format(PyExc_TypeError,
                     "can't convert an object of type '%s' to a tensor "
                     "element (expected bool, int, float or nested "
                     "lists/tuples of them)",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

static void
widen(DataShape *shape, THDtype kind)
{
    if (!shape->saw_any) {
        shape->inferred = kind;
        shape->saw_any = 1;
    }
    else {
        shape->inferred = THDtype_promote(shape->inferred, kind);
    }
}

/* Note [Snapshot of nested data]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * ember.tensor reads the nested lists twice: the shape pass, then the fill
 * pass.  Converting a leaf runs Python (__index__, __float__, a buffer
 * export), and that code may grow, shrink or replace any list of the data
 * between the passes or inside the fill pass, so a shape learnt in the
 * first pass, or a borrowed item array, would no longer describe the
 * lists: the fill would write past the tensor or read freed items.  So the
 * data is first copied into nested tuples that this call owns (no Python
 * runs while copying), and both passes read only the copy: the tensor
 * holds the values as they were when ember.tensor was called.  Leaves are
 * shared, not copied; a leaf that is a tensor is re-read by value. */

/* An owned copy of `obj` in which every list or tuple down to depth
 * TH_MAX_DIMS is a fresh tuple (deeper ones can only be a ragged-data
 * error, reported by the shape pass, so they are kept as they are). */
static PyObject *
snapshot_nested(PyObject *obj, int depth)
{
    if (!is_sequence(obj) || depth > TH_MAX_DIMS) {
        Py_INCREF(obj);
        return obj;
    }
    /* list or tuple, subclasses included: their items, read directly */
    Py_ssize_t n = PyList_Check(obj) ? PyList_GET_SIZE(obj)
                                     : PyTuple_GET_SIZE(obj);
    PyObject *copy = PyTuple_New(n);
    if (copy == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* borrowed, but nothing in this loop runs Python code */
        PyObject *item = PyList_Check(obj) ? PyList_GET_ITEM(obj, i)
                                           : PyTuple_GET_ITEM(obj, i);
        PyObject *item_copy = snapshot_nested(item, depth + 1);
        if (item_copy == NULL) {
            Py_DECREF(copy);
            return NULL;
        }
        PyTuple_SET_ITEM(copy, i, item_copy); /* steals item_copy */
    }
    return copy;
}

/* The shape is taken from the first element at each depth; every other
 * element is then checked against it (ragged input is an error). */
static int
infer_shape(PyObject *data, DataShape *shape)
{
    PyObject *obj = data;
    shape->ndim = 0;
    while (is_sequence(obj)) {
        if (shape->ndim == TH_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError,
                         "too many dimensions: ember tensors have at most "
                         "%d",
                         TH_MAX_DIMS);
            return -1;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        shape->sizes[shape->ndim++] = n;
        if (n == 0) {
            break;
        }
        obj = PySequence_Fast_ITEMS(obj)[0]; /* borrowed */
    }
    return 0;
}

/* Checks that `obj` at depth `dim` matches the shape, and widens the dtype
 * by each leaf. */
static int
check_and_scan(PyObject *obj, int dim, DataShape *shape)
{
    if (dim == shape->ndim) {
        THDtype kind;
        if (is_sequence(obj)) {
            PyErr_Format(PyExc_ValueError,
                         "expected a number at dim %d, got a sequence of "
                         "length %zd (the nested lists are ragged)",
                         dim, PySequence_Fast_GET_SIZE(obj));
            return -1;
        }
        if (scalar_kind(obj, &kind) < 0) {
            return -1;
        }
        widen(shape, kind);
        return 0;
    }
    if (!is_sequence(obj)) {
        PyErr_Format(PyExc_ValueError,
                     "expected sequence of length %lld at dim %d (got a "
                     "scalar of type %s)",
                     (long long)shape->sizes[dim], dim,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    if (n != shape->sizes[dim]) {
        PyErr_Format(PyExc_ValueError,
                     "expected sequence of length %lld at dim %d (got %zd)",
                     (long long)shape->sizes[dim], dim, n);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(obj); /* borrowed */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (check_and_scan(items[i], dim + 1, shape) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Stores one Python number into `out` as dtype. */
#define THP_STORE_CASE(Name, ctype, py)                   \
    case TH_##Name:                                       \
        if (scalar.dtype == TH_Float64) {                 \
            *(ctype *)out = TH_FROM_FLOAT_##Name(scalar.value.d); \
        }                                                 \
        else if (scalar.dtype == TH_Int64) {              \
            *(ctype *)out = TH_FROM_FLOAT_##Name(scalar.value.i); \
        }                                                 \
        else {                                            \
            *(ctype *)out = TH_FROM_FLOAT_##Name(scalar.value.b); \
        }                                                 \
        return 0;

static int
store_scalar(PyObject *obj, THDtype dtype, char *out)
{
    THScalar scalar;
    if (PyFloat_CheckExact(obj)) {
        scalar = THScalar_fromDouble(PyFloat_AS_DOUBLE(obj)); /* fast path */
    }
    else if (THPUtils_parseScalar(obj, &scalar) < 0) {
        return -1;
    }
    if (THScalar_checkFits(scalar, dtype) < 0) {
        THPUtils_setErrorFromTH();
        return -1;
    }
    switch (dtype) {
        TH_FORALL_DTYPES(THP_STORE_CASE)
    default:
        break;
    }
    PyErr_SetString(PyExc_SystemError, "invalid dtype");
    return -1;
}
#undef THP_STORE_CASE

/* Second pass: stores every leaf, in row-major order, at *cursor. */
static int
fill_values(PyObject *obj, int dim, int ndim, THDtype dtype, char **cursor,
            int itemsize)
{
    if (dim == ndim) {
        if (store_scalar(obj, dtype, *cursor) < 0) {
            return -1;
        }
        *cursor += itemsize;
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    PyObject **items = PySequence_Fast_ITEMS(obj); /* borrowed */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fill_values(items[i], dim + 1, ndim, dtype, cursor, itemsize)
            < 0) {
            return -1;
        }
    }
    return 0;
}

/* A copy of a tensor (or of a buffer's tensor view) as dtype. */
static PyObject *
copy_as(THTensor *source, int dtype)
{
    THDtype target = dtype < 0 ? source->dtype : (THDtype)dtype;
    return THPVariable_Wrap(THTensor_newCast(source, target, true));
}

static PyObject *
set_requires_grad(PyObject *result, int requires_grad)
{
    if (result != NULL && requires_grad
        && PyObject_SetAttrString(result, "requires_grad", Py_True) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *tensor_from_snapshot(PyObject *data, int dtype,
                                      int requires_grad);

PyObject *
THPVariable_FromData(PyObject *data, int dtype, int requires_grad)
{
    if (THPVariable_Check(data)) {
        return set_requires_grad(copy_as(THPVariable_Unpack(data), dtype),
                                 requires_grad);
    }
    if (PyObject_CheckBuffer(data) && !PyBytes_Check(data)
        && !PyByteArray_Check(data) && !PyUnicode_Check(data)) {
        THTensor *view = THPNumpy_tensorFromBuffer(data);
        if (view == NULL) {
            return NULL;
        }
        /* Like torch.tensor(array), the copy keeps the array's memory
         * order (Note [Preserving the layout]). */
        PyObject *result = copy_as(view, dtype);
        THTensor_release(view);
        return set_requires_grad(result, requires_grad);
    }
    if (PyUnicode_Check(data) || PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError,
                     "can't convert %s to a tensor: only numbers and nested "
                     "lists/tuples of numbers are accepted",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (!is_sequence(data) && PySequence_Check(data)) {
        /* range(...) and other sequences: read them as a list once. */
        PyObject *as_list = PySequence_List(data);
        if (as_list == NULL) {
            return NULL;
        }
        PyObject *result = THPVariable_FromData(as_list, dtype,
                                                requires_grad);
        Py_DECREF(as_list);
        return result;
    }
    /* Both passes read an owned snapshot (Note [Snapshot of nested data]) */
    PyObject *snapshot = snapshot_nested(data, 0);
    if (snapshot == NULL) {
        return NULL;
    }
    PyObject *result = tensor_from_snapshot(snapshot, dtype, requires_grad);
    Py_DECREF(snapshot);
    return result;
}

/* ember.tensor of nested tuples that nothing else can change. */
static PyObject *
tensor_from_snapshot(PyObject *data, int dtype, int requires_grad)
{
    DataShape shape = {.saw_any = 0};
    if (infer_shape(data, &shape) < 0
        || check_and_scan(data, 0, &shape) < 0) {
        return NULL;
    }
    THDtype target;
    if (dtype >= 0) {
        target = (THDtype)dtype;
    }
    else {
        target = shape.saw_any ? shape.inferred : THPDtype_defaultFloat();
    }
    THTensor *tensor = THTensor_newEmpty(shape.ndim, shape.sizes, target,
                                         TH_DEVICE_CPU);
    if (tensor == NULL) {
        return THPUtils_setErrorFromTH();
    }
    if (tensor->numel > 0) {
        char *cursor = THTensor_data(tensor);
        if (fill_values(data, 0, shape.ndim, target, &cursor,
                        THDtype_itemsize(target))
            < 0) {
            THTensor_release(tensor);
            return NULL;
        }
    }
    return set_requires_grad(THPVariable_Wrap(tensor), requires_grad);
}

/* Common keyword arguments of the factories. */
typedef struct {
    int dtype; /* -1: not given */
    int requires_grad;
    THDeviceType device; /* the CPU when not given */
    bool device_given;
} FactoryOptions;

/* Reads dtype=, device=, requires_grad= (and ignores layout=,
 * pin_memory= when they have their default). */
static int
parse_options(PyObject *dtype_obj, PyObject *device_obj,
              PyObject *requires_grad_obj, FactoryOptions *options)
{
    THDtype dtype;
    options->dtype = -1;
    options->requires_grad = 0;
    options->device_given = device_obj != NULL && device_obj != Py_None;
    if (dtype_obj != NULL && dtype_obj != Py_None) {
        if (THPDtype_Parse(dtype_obj, &dtype) < 0) {
            return -1;
        }
        options->dtype = (int)dtype;
    }
    if (THPDevice_Parse(device_obj, &options->device) < 0) {
        return -1;
    }
    if (requires_grad_obj != NULL) {
        options->requires_grad = PyObject_IsTrue(requires_grad_obj);
        if (options->requires_grad < 0) {
            return -1;
        }
    }
    return 0;
}

/* Note [Factories on a device]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A factory asked for a device tensor (device='cuda') takes its memory from
 * the device's allocator.  empty() and empty_like() need nothing else; every
 * other factory fills its result with a kernel, so the device's launcher
 * runs the whole call, as made (Note [One dispatch point] in Device.c):
 * THPDevice_launchNamed. */

static PyObject *
THPModule_tensor(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"data", "dtype", "device",
                                        "requires_grad", "pin_memory"};
    PyObject *objs[5];
    FactoryOptions options;
    if (THPUtils_parseArgs("tensor", args, nargs, kwnames, names, 5, 1, objs)
            < 0
        || parse_options(objs[1], objs[2], objs[3], &options) < 0) {
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "tensor() missing required argument 'data'");
        return NULL;
    }
    if (options.device != TH_DEVICE_CPU) {
        return THPDevice_launchNamed("tensor", args, nargs, kwnames);
    }
    return THPVariable_FromData(objs[0], options.dtype,
                                options.requires_grad);
}

/* ---- shaped factories: empty, zeros, ones, full, rand, randn ------------- */

typedef enum {
    FILL_NOTHING,
    FILL_VALUE,
    FILL_UNIFORM,
    FILL_NORMAL,
} FillKind;

/* A fresh tensor of the given shape and options, filled by `kind`. */
static PyObject *
fill_new(THTensor *tensor, FillKind kind, THScalar value, THGenerator *gen,
         int requires_grad);

static PyObject *
make_filled(int ndim, const int64_t *sizes, THDtype dtype, FillKind kind,
            THScalar value, THGenerator *gen, int requires_grad,
            THDeviceType device)
{
    return fill_new(THTensor_newEmpty(ndim, sizes, dtype, device), kind,
                    value, gen, requires_grad);
}

/* Fills a fresh tensor (stolen; NULL means its creation failed) and wraps
 * it.  `gen` is used by the random fills only. */
static PyObject *
fill_new(THTensor *tensor, FillKind kind, THScalar value, THGenerator *gen,
         int requires_grad)
{
    if (tensor == NULL) {
        return THPUtils_setErrorFromTH();
    }
    int status = 0;
    switch (kind) {
    case FILL_NOTHING: break;
    case FILL_VALUE: status = THTensor_fill(tensor, value); break;
    case FILL_UNIFORM:
        status = THTensor_uniform(tensor, gen, 0.0, 1.0);
        break;
    case FILL_NORMAL:
        status = THTensor_normal(tensor, gen, 0.0, 1.0);
        break;
    }
    if (status < 0) {
        THTensor_release(tensor);
        return THPUtils_setErrorFromTH();
    }
    /* Filling is part of construction, not a modification: a new tensor
     * starts at version 0, as in PyTorch (torch.zeros(2)._version == 0). */
    tensor->version_counter->version = 0;
    return set_requires_grad(THPVariable_Wrap(tensor), requires_grad);
}

/* f(*size, dtype=None, device=None, requires_grad=False, ...) */
static PyObject *
sized_factory(const char *fname, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, FillKind kind, THScalar value)
{
    static const char *const names[] = {"size",   "dtype",  "device",
                                        "requires_grad", "layout",
                                        "pin_memory", "out", "generator",
                                        "memory_format"};
    PyObject *objs[9];
    int64_t sizes[TH_MAX_DIMS];
    int ndim;
    FactoryOptions options;
    THGenerator *gen;
    /* The sizes are variadic, so only keywords go through the parser:
     * their values follow the positionals in the vectorcall array. */
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) {
        memset(objs, 0, sizeof(objs)); /* empty(4): no keyword to parse */
    }
    else if (THPUtils_parseArgs(fname, args + nargs, 0, kwnames, names, 9,
                                0, objs)
             < 0) {
        return NULL;
    }
    if (objs[6] != NULL) {
        PyErr_Format(PyExc_TypeError, "%s(): out= is not supported yet",
                     fname);
        return NULL;
    }
    if (kind != FILL_UNIFORM && kind != FILL_NORMAL && objs[7] != NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() got an unexpected keyword argument 'generator'",
                     fname);
        return NULL;
    }
    if (objs[0] != NULL) {
        if (nargs > 0) {
            PyErr_Format(PyExc_TypeError,
                         "%s() got multiple values for argument 'size'",
                         fname);
            return NULL;
        }
        ndim = THPUtils_parseSizeSequence(fname, objs[0], sizes);
    }
    else {
        ndim = THPUtils_parseSizes(fname, args, nargs, sizes);
    }
    gen = NULL; /* only the random fills use one */
    if (ndim < 0 || parse_options(objs[1], objs[2], objs[3], &options) < 0
        || ((kind == FILL_UNIFORM || kind == FILL_NORMAL)
            && THPGenerator_parse(fname, objs[7], &gen) < 0)) {
        return NULL;
    }
    if (options.device != TH_DEVICE_CPU) {
        if (kind != FILL_NOTHING) {
            return THPDevice_launchNamed(fname, args, nargs, kwnames);
        }
        if (THPDevice_ensureAllocator(options.device) < 0) {
            return NULL;
        }
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype
                                       : THPDtype_defaultFloat();
    return make_filled(ndim, sizes, dtype, kind, value, gen,
                       options.requires_grad, options.device);
}

#define THP_DEFINE_SIZED_FACTORY(name, kind, value)                        \
    static PyObject *THPModule_##name(PyObject *module,                    \
                                      PyObject *const *args,               \
                                      Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                      \
        (void)module;                                                      \
        return sized_factory(#name, args, nargs, kwnames, kind, value);    \
    }
THP_DEFINE_SIZED_FACTORY(empty, FILL_NOTHING, THScalar_fromInt(0))
THP_DEFINE_SIZED_FACTORY(zeros, FILL_VALUE, THScalar_fromInt(0))
THP_DEFINE_SIZED_FACTORY(ones, FILL_VALUE, THScalar_fromInt(1))
THP_DEFINE_SIZED_FACTORY(rand, FILL_UNIFORM, THScalar_fromInt(0))
THP_DEFINE_SIZED_FACTORY(randn, FILL_NORMAL, THScalar_fromInt(0))
#undef THP_DEFINE_SIZED_FACTORY

/* The dtype a fill value implies when none is given (PyTorch's full()). */
static THDtype
dtype_of_scalar(THScalar value)
{
    if (value.dtype == TH_Float64) {
        return THPDtype_defaultFloat();
    }
    return value.dtype; /* TH_Bool or TH_Int64 */
}

static PyObject *
THPModule_full(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"size", "fill_value", "dtype",
                                        "device", "requires_grad"};
    PyObject *objs[5];
    int64_t sizes[TH_MAX_DIMS];
    FactoryOptions options;
    THScalar value;
    if (THPUtils_parseArgs("full", args, nargs, kwnames, names, 5, 2, objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL || objs[1] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "full() missing required arguments 'size' and "
                        "'fill_value'");
        return NULL;
    }
    int ndim = THPUtils_parseSizeSequence("full", objs[0], sizes);
    if (ndim < 0 || THPUtils_parseScalar(objs[1], &value) < 0
        || parse_options(objs[2], objs[3], objs[4], &options) < 0) {
        return NULL;
    }
    if (options.device != TH_DEVICE_CPU) {
        return THPDevice_launchNamed("full", args, nargs, kwnames);
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype
                                       : dtype_of_scalar(value);
    return make_filled(ndim, sizes, dtype, FILL_VALUE, value, NULL,
                       options.requires_grad, TH_DEVICE_CPU);
}

/* empty_like, zeros_like, ones_like, rand_like, randn_like, full_like */
static PyObject *
like_factory(const char *fname, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, FillKind kind, THScalar value,
             int takes_value)
{
    static const char *const names[] = {"input", "fill_value", "dtype",
                                        "device", "requires_grad",
                                        "memory_format", "layout",
                                        "generator"};
    PyObject *objs[8];
    FactoryOptions options;
    THGenerator *gen;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 8,
                           takes_value ? 2 : 1, objs)
        < 0) {
        return NULL;
    }
    if (kind != FILL_UNIFORM && kind != FILL_NORMAL && objs[7] != NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() got an unexpected keyword argument 'generator'",
                     fname);
        return NULL;
    }
    if (!takes_value && objs[1] != NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() got an unexpected keyword argument 'fill_value'",
                     fname);
        return NULL;
    }
    if (objs[0] == NULL || !THPVariable_Check(objs[0])) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'input' must be Tensor", fname);
        return NULL;
    }
    if (takes_value) {
        if (objs[1] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() missing required argument 'fill_value'",
                         fname);
            return NULL;
        }
        if (THPUtils_parseScalar(objs[1], &value) < 0) {
            return NULL;
        }
    }
    if (parse_options(objs[2], objs[3], objs[4], &options) < 0
        || THPGenerator_parse(fname, objs[7], &gen) < 0) {
        return NULL;
    }
    THTensor *like = THPVariable_Unpack(objs[0]);
    THDeviceType device = options.device_given ? options.device
                                               : like->storage->device;
    if (device != TH_DEVICE_CPU) {
        if (kind != FILL_NOTHING) {
            return THPDevice_launchNamed(fname, args, nargs, kwnames);
        }
        if (THPDevice_ensureAllocator(device) < 0) {
            return NULL;
        }
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype
                                       : like->dtype;
    /* The *_like factories keep the layout of `like` (Note [Preserving
     * the layout] in THTensor.h), on the device asked for. */
    return fill_new(THTensor_newEmptyLikeOn(like, dtype, device), kind, value,
                    gen, options.requires_grad);
}

#define THP_DEFINE_LIKE_FACTORY(name, kind, value, takes_value)            \
    static PyObject *THPModule_##name(PyObject *module,                    \
                                      PyObject *const *args,               \
                                      Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                      \
        (void)module;                                                      \
        return like_factory(#name, args, nargs, kwnames, kind, value,      \
                            takes_value);                                  \
    }
THP_DEFINE_LIKE_FACTORY(empty_like, FILL_NOTHING, THScalar_fromInt(0), 0)
THP_DEFINE_LIKE_FACTORY(zeros_like, FILL_VALUE, THScalar_fromInt(0), 0)
THP_DEFINE_LIKE_FACTORY(ones_like, FILL_VALUE, THScalar_fromInt(1), 0)
THP_DEFINE_LIKE_FACTORY(rand_like, FILL_UNIFORM, THScalar_fromInt(0), 0)
THP_DEFINE_LIKE_FACTORY(randn_like, FILL_NORMAL, THScalar_fromInt(0), 0)
THP_DEFINE_LIKE_FACTORY(full_like, FILL_VALUE, THScalar_fromInt(0), 1)
#undef THP_DEFINE_LIKE_FACTORY

/* ---- ranges ------------------------------------------------------------------ */

static double
scalar_to_double(THScalar s)
{
    switch (s.dtype) {
    case TH_Bool: return s.value.b;
    case TH_Int64: return (double)s.value.i;
    default: return s.value.d;
    }
}

static const char inconsistent_step[] =
    "upper bound and lower bound inconsistent with step sign";

/* The filled arange tensor of `size` elements. */
static PyObject *
arange_new(int64_t size, THDtype dtype, THScalar start, THScalar step,
           FactoryOptions options)
{
    THTensor *tensor = THTensor_newEmpty(1, &size, dtype, TH_DEVICE_CPU);
    if (tensor == NULL || THTensor_arange(tensor, start, step) < 0) {
        THTensor_release(tensor);
        return THPUtils_setErrorFromTH();
    }
    return set_requires_grad(THPVariable_Wrap(tensor), options.requires_grad);
}

static int64_t
scalar_to_int(THScalar s)
{
    return s.dtype == TH_Bool ? (int64_t)s.value.b : s.value.i;
}

/* arange of int (or bool) bounds and step: the count is exact, computed
 * in uint64 (end - start may not fit an int64, and a double loses the
 * last digits: arange(-2**63, 10, 2**62) has 3 elements, not 2). */
static PyObject *
arange_of_ints(THScalar start, THScalar end, THScalar step,
               FactoryOptions options)
{
    int64_t first = scalar_to_int(start), last = scalar_to_int(end);
    int64_t stride = scalar_to_int(step);
    if (stride == 0) {
        PyErr_SetString(PyExc_RuntimeError, "step must be nonzero");
        return NULL;
    }
    if ((stride > 0 && last < first) || (stride < 0 && last > first)) {
        PyErr_SetString(PyExc_RuntimeError, inconsistent_step);
        return NULL;
    }
    uint64_t span = stride > 0 ? (uint64_t)last - (uint64_t)first
                               : (uint64_t)first - (uint64_t)last;
    uint64_t distance = stride > 0 ? (uint64_t)stride : -(uint64_t)stride;
    uint64_t count = span / distance + (span % distance != 0);
    if (count > (uint64_t)INT64_MAX) {
        PyErr_SetString(PyExc_RuntimeError,
                        "arange: too many elements requested");
        return NULL;
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype : TH_Int64;
    return arange_new((int64_t)count, dtype, start, step, options);
}

static PyObject *
THPModule_arange(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"start", "end", "step", "dtype",
                                        "device", "requires_grad"};
    PyObject *objs[6];
    FactoryOptions options;
    THScalar start = THScalar_fromInt(0), end, step = THScalar_fromInt(1);
    if (THPUtils_parseArgs("arange", args, nargs, kwnames, names, 6, 3, objs)
            < 0
        || parse_options(objs[3], objs[4], objs[5], &options) < 0) {
        return NULL;
    }
    if (options.device != TH_DEVICE_CPU) {
        return THPDevice_launchNamed("arange", args, nargs, kwnames);
    }
    /* arange(end) puts the one positional into `end`. */
    PyObject *start_obj = objs[0], *end_obj = objs[1];
    if (end_obj == NULL) {
        end_obj = start_obj;
        start_obj = NULL;
    }
    if (end_obj == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "arange() missing required argument 'end'");
        return NULL;
    }
    if ((start_obj != NULL && THPUtils_parseScalar(start_obj, &start) < 0)
        || THPUtils_parseScalar(end_obj, &end) < 0
        || (objs[2] != NULL && THPUtils_parseScalar(objs[2], &step) < 0)) {
        return NULL;
    }
    bool all_ints = start.dtype != TH_Float64 && end.dtype != TH_Float64
                    && step.dtype != TH_Float64;
    if (all_ints) {
        return arange_of_ints(start, end, step, options);
    }
    double dstart = scalar_to_double(start), dend = scalar_to_double(end);
    double dstep = scalar_to_double(step);
    if (dstep == 0.0) {
        PyErr_SetString(PyExc_RuntimeError, "step must be nonzero");
        return NULL;
    }
    if (!isfinite(dstart) || !isfinite(dend)) {
        /* PyErr_Format has no %g: format the bounds first. */
        char range[96];
        snprintf(range, sizeof(range), "%g -> %g", dstart, dend);
        PyErr_Format(PyExc_RuntimeError, "unsupported range: %s", range);
        return NULL;
    }
    if ((dstep > 0 && dend < dstart) || (dstep < 0 && dend > dstart)) {
        PyErr_SetString(PyExc_RuntimeError, inconsistent_step);
        return NULL;
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype
                                       : THPDtype_defaultFloat();
    double count = ceil((dend - dstart) / dstep);
    if (!(count < 9.0e15)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "arange: too many elements requested");
        return NULL;
    }
    return arange_new((int64_t)count, dtype, start, step, options);
}

static PyObject *
THPModule_linspace(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"start", "end", "steps", "dtype",
                                        "device", "requires_grad"};
    PyObject *objs[6];
    FactoryOptions options;
    THScalar start, end;
    int64_t steps;
    if (THPUtils_parseArgs("linspace", args, nargs, kwnames, names, 6, 3,
                           objs)
            < 0
        || parse_options(objs[3], objs[4], objs[5], &options) < 0) {
        return NULL;
    }
    if (options.device != TH_DEVICE_CPU) {
        return THPDevice_launchNamed("linspace", args, nargs, kwnames);
    }
    if (objs[0] == NULL || objs[1] == NULL || objs[2] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "linspace() missing required arguments: start, end "
                        "and steps");
        return NULL;
    }
    if (THPUtils_parseScalar(objs[0], &start) < 0
        || THPUtils_parseScalar(objs[1], &end) < 0
        || THPUtils_unpackLong(objs[2], "linspace", "steps", &steps) < 0) {
        return NULL;
    }
    if (steps < 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "number of steps must be non-negative");
        return NULL;
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype
                                       : THPDtype_defaultFloat();
    /* Like PyTorch, both ends must fit the dtype (an int64 linspace to inf
     * is an error, not INT64_MIN); the values between them then do too. */
    if (THScalar_checkFits(start, dtype) < 0
        || THScalar_checkFits(end, dtype) < 0) {
        return THPUtils_setErrorFromTH();
    }
    THTensor *tensor = THTensor_newEmpty(1, &steps, dtype, TH_DEVICE_CPU);
    if (tensor == NULL
        || THTensor_linspace(tensor, scalar_to_double(start),
                             scalar_to_double(end))
               < 0) {
        THTensor_release(tensor);
        return THPUtils_setErrorFromTH();
    }
    return set_requires_grad(THPVariable_Wrap(tensor), options.requires_grad);
}

static PyObject *
THPModule_eye(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"n", "m", "dtype", "device",
                                        "requires_grad"};
    PyObject *objs[5];
    FactoryOptions options;
    int64_t sizes[2];
    if (THPUtils_parseArgs("eye", args, nargs, kwnames, names, 5, 2, objs)
            < 0
        || parse_options(objs[2], objs[3], objs[4], &options) < 0) {
        return NULL;
    }
    if (options.device != TH_DEVICE_CPU) {
        return THPDevice_launchNamed("eye", args, nargs, kwnames);
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "eye() missing required argument "
                        "'n'");
        return NULL;
    }
    if (THPUtils_unpackLong(objs[0], "eye", "n", &sizes[0]) < 0) {
        return NULL;
    }
    sizes[1] = sizes[0];
    if (objs[1] != NULL && objs[1] != Py_None
        && THPUtils_unpackLong(objs[1], "eye", "m", &sizes[1]) < 0) {
        return NULL;
    }
    if (sizes[0] < 0 || sizes[1] < 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s must be greater or equal to 0, got %lld",
                     sizes[0] < 0 ? "n" : "m",
                     (long long)(sizes[0] < 0 ? sizes[0] : sizes[1]));
        return NULL;
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype
                                       : THPDtype_defaultFloat();
    THTensor *tensor = THTensor_newEmpty(2, sizes, dtype, TH_DEVICE_CPU);
    if (tensor == NULL || THTensor_eye(tensor) < 0) {
        THTensor_release(tensor);
        return THPUtils_setErrorFromTH();
    }
    return set_requires_grad(THPVariable_Wrap(tensor), options.requires_grad);
}

/* ---- random numbers ---------------------------------------------------------- */

/* The (low, high) of randint and randint_like, from the argument slots
 * `bounds` = {low, high}: when only one came by position and high= was not
 * given, that one is high (randint(10, (3,)) draws from [0, 10)). */
static int
parse_low_high(const char *fname, PyObject **bounds, bool one_positional,
               int64_t *low, int64_t *high)
{
    if (one_positional && bounds[1] == NULL) {
        bounds[1] = bounds[0];
        bounds[0] = NULL;
    }
    if (bounds[1] == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() missing required argument 'high'", fname);
        return -1;
    }
    *low = 0;
    if (bounds[0] != NULL
        && THPUtils_unpackLong(bounds[0], fname, "low", low) < 0) {
        return -1;
    }
    return THPUtils_unpackLong(bounds[1], fname, "high", high);
}

/* A fresh tensor (stolen; NULL: its creation failed) of integers drawn
 * from [low, high), wrapped. */
static PyObject *
randint_new(THTensor *tensor, THGenerator *gen, int64_t low, int64_t high,
            int requires_grad)
{
    if (tensor == NULL || THTensor_randint(tensor, gen, low, high) < 0) {
        THTensor_release(tensor);
        return THPUtils_setErrorFromTH();
    }
    return set_requires_grad(THPVariable_Wrap(tensor), requires_grad);
}

/* randint(high, size) or randint(low, high, size), dtype int64 by
 * default. */
static PyObject *
THPModule_randint(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"low", "high", "size", "dtype",
                                        "device", "requires_grad",
                                        "generator", "layout", "out"};
    PyObject *objs[9];
    FactoryOptions options;
    THGenerator *gen;
    int64_t low, high, sizes[TH_MAX_DIMS];
    if (THPUtils_parseArgs("randint", args, nargs, kwnames, names, 9, 3,
                           objs)
            < 0
        || parse_options(objs[3], objs[4], objs[5], &options) < 0
        || THPGenerator_parse("randint", objs[6], &gen) < 0) {
        return NULL;
    }
    if (options.device != TH_DEVICE_CPU) {
        return THPDevice_launchNamed("randint", args, nargs, kwnames);
    }
    if (objs[8] != NULL) {
        PyErr_SetString(PyExc_TypeError, "randint(): out= is not supported "
                                         "yet");
        return NULL;
    }
    /* Two positionals mean (high, size), unless size= came by keyword:
     * randint(-4, -2, size=(3,)) is (low, high). */
    if (nargs == 2 && objs[2] == NULL) {
        objs[2] = objs[1];
        objs[1] = NULL;
    }
    if (objs[2] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "randint() missing required argument 'size'");
        return NULL;
    }
    if (parse_low_high("randint", objs, objs[0] != NULL && objs[1] == NULL,
                       &low, &high)
        < 0) {
        return NULL;
    }
    int ndim = THPUtils_parseSizeSequence("randint", objs[2], sizes);
    if (ndim < 0) {
        return NULL;
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype : TH_Int64;
    return randint_new(THTensor_newEmpty(ndim, sizes, dtype, TH_DEVICE_CPU),
                       gen, low, high, options.requires_grad);
}

/* randint_like(input, high) or randint_like(input, low, high): shaped
 * and laid out like input, input's dtype by default. */
static PyObject *
THPModule_randint_like(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"input", "low", "high", "dtype",
                                        "device", "requires_grad",
                                        "generator", "layout",
                                        "memory_format"};
    PyObject *objs[9];
    FactoryOptions options;
    THGenerator *gen;
    int64_t low, high;
    if (THPUtils_parseArgs("randint_like", args, nargs, kwnames, names, 9, 3,
                           objs)
            < 0
        || parse_options(objs[3], objs[4], objs[5], &options) < 0
        || THPGenerator_parse("randint_like", objs[6], &gen) < 0) {
        return NULL;
    }
    if (options.device_given && options.device != TH_DEVICE_CPU) {
        return THPDevice_launchNamed("randint_like", args, nargs, kwnames);
    }
    if (objs[0] == NULL || !THPVariable_Check(objs[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "randint_like(): argument 'input' must be Tensor");
        return NULL;
    }
    if (parse_low_high("randint_like", objs + 1, nargs == 2, &low, &high)
        < 0) {
        return NULL;
    }
    THTensor *like = THPVariable_Unpack(objs[0]);
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype
                                       : like->dtype;
    return randint_new(THTensor_newEmptyLike(like, dtype), gen, low, high,
                       options.requires_grad);
}

/* randperm(n, *, generator=None, dtype=ember.int64, ...) */
static PyObject *
THPModule_randperm(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"n", "generator", "dtype", "device",
                                        "requires_grad", "layout",
                                        "pin_memory", "out"};
    PyObject *objs[8];
    FactoryOptions options;
    THGenerator *gen;
    int64_t n;
    if (THPUtils_parseArgs("randperm", args, nargs, kwnames, names, 8, 1,
                           objs)
            < 0
        || parse_options(objs[2], objs[3], objs[4], &options) < 0
        || THPGenerator_parse("randperm", objs[1], &gen) < 0) {
        return NULL;
    }
    if (options.device != TH_DEVICE_CPU) {
        return THPDevice_launchNamed("randperm", args, nargs, kwnames);
    }
    if (objs[7] != NULL) {
        PyErr_SetString(PyExc_TypeError, "randperm(): out= is not supported "
                                         "yet");
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "randperm() missing required argument 'n'");
        return NULL;
    }
    if (THPUtils_unpackLong(objs[0], "randperm", "n", &n) < 0) {
        return NULL;
    }
    THDtype dtype = options.dtype >= 0 ? (THDtype)options.dtype : TH_Int64;
    return set_requires_grad(
        THPVariable_Wrap(THTensor_newRandperm(n, dtype, gen)),
        options.requires_grad);
}

#define FACTORY(name, doc)                                              \
    {#name, (PyCFunction)(void (*)(void))THPModule_##name,            \
     METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef THPCreation_methods[] = {
    FACTORY(tensor, "tensor(data, dtype=None, device=None, "
                    "requires_grad=False): a new tensor holding a copy of "
                    "data"),
    FACTORY(empty, "empty(*size, dtype=None): uninitialised memory"),
    FACTORY(zeros, "zeros(*size, dtype=None)"),
    FACTORY(ones, "ones(*size, dtype=None)"),
    FACTORY(full, "full(size, fill_value, dtype=None)"),
    FACTORY(rand, "rand(*size): uniform on [0, 1)"),
    FACTORY(randn, "randn(*size): standard normal"),
    FACTORY(randint, "randint(low=0, high, size, *, generator=None, "
                     "dtype=ember.int64)"),
    FACTORY(randint_like, "randint_like(input, low=0, high, *, "
                          "generator=None, dtype=None)"),
    FACTORY(randperm, "randperm(n, *, generator=None, dtype=ember.int64): "
                      "a random permutation of 0..n-1"),
    FACTORY(empty_like, NULL),
    FACTORY(zeros_like, NULL),
    FACTORY(ones_like, NULL),
    FACTORY(rand_like, NULL),
    FACTORY(randn_like, NULL),
    FACTORY(full_like, NULL),
    FACTORY(arange, "arange(start=0, end, step=1)"),
    FACTORY(linspace, "linspace(start, end, steps)"),
    FACTORY(eye, "eye(n, m=None)"),
    {NULL, NULL, 0, NULL},
};

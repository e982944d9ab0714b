/*
 * VariableViews.c -- tensor methods that make views (same storage, same
 * version counter) and the methods that copy or convert.
 *
 * Each wrapper only parses its arguments and calls the core function of
 * the same name; THPVariable_Wrap turns a NULL result into the core's
 * error.  See THTensor.h for what each view means.
 */
#include "THP.h"

#define SELF_TENSOR THPVariable_Unpack(self) /* pinned: Note [Pinned arguments] */
#define FASTCALL_KW(fn) (PyCFunction)(void (*)(void))(fn), \
                        METH_FASTCALL | METH_KEYWORDS

/* transpose(0, 1), narrow(0, 1, 2): every argument given by position as a
 * small exact int, read in place (no parser, no __index__, no Python code
 * run).  false: some argument needs the full parser below. */
static inline bool
read_small_ints(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                int nnames, int64_t *values)
{
    if (nargs != nnames || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
        return false;
    }
    for (int i = 0; i < nnames; i++) {
        if (!THPUtils_smallInt(args[i], &values[i])) {
            return false;
        }
    }
    return true;
}

/* Parses the named int arguments; absent ones keep their default. */
static int
parse_ints(const char *fname, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames, const char *const *names, int nnames,
           int nrequired, int64_t *values)
{
    PyObject *objs[4];
    if (read_small_ints(args, nargs, kwnames, nnames, values)) {
        return 0;
    }
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, nnames,
                           nnames, objs)
        < 0) {
        return -1;
    }
    for (int i = 0; i < nnames; i++) {
        if (objs[i] == NULL) {
            if (i < nrequired) {
                PyErr_Format(PyExc_TypeError,
                             "%s() missing required argument '%s'", fname,
                             names[i]);
                return -1;
            }
            continue;
        }
        if (THPUtils_unpackLong(objs[i], fname, names[i], &values[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Positional sizes (view(2, 3) or view((2, 3))) or a `size=` keyword. */
static int
parse_shape_args(const char *fname, const char *kwname, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames, int64_t *sizes)
{
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyObject *obj;
        const char *const names[] = {kwname};
        if (nargs > 0
            || THPUtils_parseArgs(fname, args, nargs, kwnames, names, 1, 0,
                                  &obj)
                   < 0) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_TypeError,
                             "%s() got both positional and keyword sizes",
                             fname);
            }
            return -1;
        }
        return THPUtils_parseSizeSequence(fname, obj, sizes);
    }
    return THPUtils_parseSizes(fname, args, nargs, sizes);
}

static PyObject *
THPVariable_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    int64_t sizes[TH_MAX_DIMS];
    int ndim = parse_shape_args("view", "size", args, nargs, kwnames, sizes);
    if (ndim < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newView(SELF_TENSOR, ndim, sizes));
}

static PyObject *
THPVariable_reshape(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    int64_t sizes[TH_MAX_DIMS];
    int ndim = parse_shape_args("reshape", "shape", args, nargs, kwnames,
                                sizes);
    if (ndim < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newReshape(SELF_TENSOR, ndim, sizes));
}

/* view_as(other), reshape_as(other), expand_as(other) */
static THTensor *
other_tensor(PyObject *other, const char *fname)
{
    if (!THPVariable_Check(other)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'other' must be Tensor, not %s", fname,
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    return THPVariable_Unpack(other);
}

static PyObject *
THPVariable_view_as(PyObject *self, PyObject *other)
{
    THTensor *o = other_tensor(other, "view_as");
    return o == NULL ? NULL
                     : THPVariable_Wrap(THTensor_newView(SELF_TENSOR, o->ndim,
                                                         o->sizes));
}

static PyObject *
THPVariable_reshape_as(PyObject *self, PyObject *other)
{
    THTensor *o = other_tensor(other, "reshape_as");
    return o == NULL ? NULL
                     : THPVariable_Wrap(THTensor_newReshape(
                           SELF_TENSOR, o->ndim, o->sizes));
}

static PyObject *
THPVariable_expand_as(PyObject *self, PyObject *other)
{
    THTensor *o = other_tensor(other, "expand_as");
    return o == NULL ? NULL
                     : THPVariable_Wrap(THTensor_newExpand(
                           SELF_TENSOR, o->ndim, o->sizes));
}

static PyObject *
THPVariable_flatten(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    static const char *const names[] = {"start_dim", "end_dim"};
    int64_t dims[2] = {0, -1};
    if (parse_ints("flatten", args, nargs, kwnames, names, 2, 0, dims) < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newFlatten(SELF_TENSOR, dims[0],
                                                dims[1]));
}

static PyObject *
THPVariable_transpose(PyObject *self, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"dim0", "dim1"};
    int64_t dims[2];
    if (parse_ints("transpose", args, nargs, kwnames, names, 2, 2, dims)
        < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newTranspose(SELF_TENSOR, dims[0],
                                                  dims[1]));
}

static PyObject *
THPVariable_t(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (SELF_TENSOR->ndim > 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "t() expects a tensor with <= 2 dimensions, but self is "
                     "%dD",
                     SELF_TENSOR->ndim);
        return NULL;
    }
    if (SELF_TENSOR->ndim < 2) {
        return THPVariable_Wrap(THTensor_newAlias(SELF_TENSOR));
    }
    return THPVariable_Wrap(THTensor_newTranspose(SELF_TENSOR, 0, 1));
}

static PyObject *
THPVariable_permute(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    int64_t dims[TH_MAX_DIMS];
    int ndims = parse_shape_args("permute", "dims", args, nargs, kwnames,
                                 dims);
    if (ndims < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newPermute(SELF_TENSOR, ndims, dims));
}

static PyObject *
THPVariable_squeeze(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    static const char *const names[] = {"dim"};
    PyObject *dim_obj;
    int64_t dims[TH_MAX_DIMS];
    int ndims = 0;
    if (THPUtils_parseArgs("squeeze", args, nargs, kwnames, names, 1, 1,
                           &dim_obj)
        < 0) {
        return NULL;
    }
    if (dim_obj != NULL && dim_obj != Py_None) {
        if (PyTuple_Check(dim_obj) || PyList_Check(dim_obj)) {
            ndims = THPUtils_parseSizeSequence("squeeze", dim_obj, dims);
        }
        else {
            ndims = THPUtils_unpackLong(dim_obj, "squeeze", "dim", dims) < 0
                        ? -1
                        : 1;
        }
        if (ndims < 0) {
            return NULL;
        }
        if (ndims == 0) {
            /* squeeze(dim=()) squeezes nothing: an alias. */
            return THPVariable_Wrap(THTensor_newAlias(SELF_TENSOR));
        }
    }
    return THPVariable_Wrap(THTensor_newSqueeze(SELF_TENSOR, ndims, dims));
}

static PyObject *
THPVariable_unsqueeze(PyObject *self, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"dim"};
    int64_t dim;
    if (parse_ints("unsqueeze", args, nargs, kwnames, names, 1, 1, &dim)
        < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newUnsqueeze(SELF_TENSOR, dim));
}

static PyObject *
THPVariable_expand(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    int64_t sizes[TH_MAX_DIMS];
    int ndim = parse_shape_args("expand", "size", args, nargs, kwnames,
                                sizes);
    if (ndim < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newExpand(SELF_TENSOR, ndim, sizes));
}

static PyObject *
THPVariable_narrow(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    static const char *const names[] = {"dim", "start", "length"};
    int64_t v[3];
    if (parse_ints("narrow", args, nargs, kwnames, names, 3, 3, v) < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newNarrow(SELF_TENSOR, v[0], v[1],
                                               v[2]));
}

static PyObject *
THPVariable_select(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index"};
    int64_t v[2];
    if (parse_ints("select", args, nargs, kwnames, names, 2, 2, v) < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newSelect(SELF_TENSOR, v[0], v[1]));
}

static PyObject *
THPVariable_unfold(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    static const char *const names[] = {"dimension", "size", "step"};
    int64_t v[3];
    if (parse_ints("unfold", args, nargs, kwnames, names, 3, 3, v) < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newUnfold(SELF_TENSOR, v[0], v[1],
                                               v[2]));
}

static PyObject *
THPVariable_as_strided(PyObject *self, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"size", "stride", "storage_offset"};
    PyObject *objs[3];
    int64_t sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS];
    int64_t offset = SELF_TENSOR->storage_offset;
    if (THPUtils_parseArgs("as_strided", args, nargs, kwnames, names, 3, 3,
                           objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL || objs[1] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "as_strided() missing required arguments 'size' "
                        "and 'stride'");
        return NULL;
    }
    int ndim = THPUtils_parseSizeSequence("as_strided", objs[0], sizes);
    if (ndim < 0) {
        return NULL;
    }
    int nstrides = THPUtils_parseSizeSequence("as_strided", objs[1], strides);
    if (nstrides < 0) {
        return NULL;
    }
    if (nstrides != ndim) {
        PyErr_Format(PyExc_RuntimeError,
                     "mismatch in length of strides and shape (%d vs %d)",
                     nstrides, ndim);
        return NULL;
    }
    if (objs[2] != NULL && objs[2] != Py_None
        && THPUtils_unpackLong(objs[2], "as_strided", "storage_offset",
                               &offset)
               < 0) {
        return NULL;
    }
    return THPVariable_Wrap(
        THTensor_newAsStrided(SELF_TENSOR, ndim, sizes, strides, offset));
}

static PyObject *
THPVariable_contiguous(PyObject *self, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"memory_format"};
    PyObject *memory_format;
    if (THPUtils_parseArgs("contiguous", args, nargs, kwnames, names, 1, 1,
                           &memory_format)
        < 0) {
        return NULL;
    }
    if (SELF_TENSOR->is_contiguous) {
        Py_INCREF(self); /* returned: self, as PyTorch does */
        return self;
    }
    return THPVariable_Wrap(THTensor_newContiguous(SELF_TENSOR));
}

static PyObject *
THPVariable_clone(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"memory_format"};
    PyObject *memory_format;
    if (THPUtils_parseArgs("clone", args, nargs, kwnames, names, 1, 0,
                           &memory_format)
        < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newClone(SELF_TENSOR));
}

static PyObject *
THPVariable_detach(PyObject *self, PyObject *unused)
{
    (void)unused;
    return THPVariable_Wrap(THTensor_newAlias(SELF_TENSOR));
}

static PyObject *
THPVariable_detach_(PyObject *self, PyObject *unused)
{
    (void)unused;
    THPVariable *var = (THPVariable *)self;
    var->requires_grad = 0;
    Py_CLEAR(var->grad_fn);
    Py_INCREF(self); /* returned: self */
    return self;
}

/* ---- copies and conversions -------------------------------------------------- */

static PyObject *
THPVariable_copy_(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"src", "non_blocking"};
    PyObject *objs[2];
    if (THPUtils_parseArgs("copy_", args, nargs, kwnames, names, 2, 2, objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL || !THPVariable_Check(objs[0])) {
        PyErr_Format(PyExc_TypeError,
                     "copy_(): argument 'src' must be Tensor, not %s",
                     objs[0] == NULL ? "nothing" : Py_TYPE(objs[0])->tp_name);
        return NULL;
    }
    if (THTensor_copy(SELF_TENSOR, THPVariable_Unpack(objs[0])) < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_INCREF(self); /* returned: self */
    return self;
}

static PyObject *
THPVariable_fill_(PyObject *self, PyObject *value)
{
    THScalar scalar;
    if (THPVariable_Check(value) && THPVariable_Unpack(value)->ndim != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "fill_ only supports 0-dimension value tensor but got "
                     "tensor with %d dimensions.",
                     THPVariable_Unpack(value)->ndim);
        return NULL;
    }
    if (THPUtils_parseScalar(value, &scalar) < 0) {
        return NULL;
    }
    if (THTensor_fill(SELF_TENSOR, scalar) < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_INCREF(self); /* returned: self */
    return self;
}

static PyObject *
THPVariable_zero_(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (THTensor_fill(SELF_TENSOR, THScalar_fromInt(0)) < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_INCREF(self); /* returned: self */
    return self;
}

/* self converted to dtype: self itself when nothing changes and no copy was
 * asked for (PyTorch's rule for .to() and .float()). */
static PyObject *
convert_to(PyObject *self, THDtype dtype, int copy)
{
    if (SELF_TENSOR->dtype == dtype && !copy) {
        Py_INCREF(self); /* returned: self */
        return self;
    }
    return THPVariable_Wrap(THTensor_newCast(SELF_TENSOR, dtype, true));
}

/* to(dtype), to(device), to(device, dtype), to(other), with keywords
 * dtype=, device=, copy=, non_blocking=. */
static PyObject *
THPVariable_to(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const char *const names[] = {"a", "b", "dtype", "device", "copy",
                                        "non_blocking"};
    PyObject *objs[6];
    THDtype dtype = SELF_TENSOR->dtype;
    THDeviceType device = SELF_TENSOR->storage->device;
    if (THPUtils_parseArgs("to", args, nargs, kwnames, names, 6, 2, objs)
        < 0) {
        return NULL;
    }
    for (int i = 0; i < 2; i++) {
        PyObject *arg = objs[i];
        if (arg == NULL) {
            continue;
        }
        if (THPVariable_Check(arg)) {
            dtype = THPVariable_Unpack(arg)->dtype;
            device = THPVariable_Unpack(arg)->storage->device;
        }
        else if (Py_IS_TYPE(arg, &THPDtypeType)) {
            dtype = ((THPDtype *)arg)->dtype;
        }
        else if (THPDevice_Parse(arg, &device) < 0) {
            return NULL;
        }
    }
    if (objs[2] != NULL && objs[2] != Py_None
        && THPDtype_Parse(objs[2], &dtype) < 0) {
        return NULL;
    }
    if (objs[3] != NULL && THPDevice_Parse(objs[3], &device) < 0) {
        return NULL;
    }
    int copy = objs[4] != NULL ? PyObject_IsTrue(objs[4]) : 0;
    if (copy < 0) {
        return NULL;
    }
    THDeviceType source = SELF_TENSOR->storage->device;
    if (source == TH_DEVICE_CPU && device == TH_DEVICE_CPU) {
        return convert_to(self, dtype, copy);
    }
    if (source == device && SELF_TENSOR->dtype == dtype && !copy) {
        return Py_NewRef(self); /* nothing to move, as PyTorch */
    }
    /* A copy touching device memory: the device's launcher plans it (Note
     * [One dispatch point] in Device.c); to() itself runs on any device. */
    PyObject *name = PyUnicode_InternFromString("Tensor.to");
    PyObject *result = name == NULL
                           ? NULL
                           : THPDevice_launch(name, self, args, nargs,
                                              kwnames);
    Py_XDECREF(name);
    return result;
}

/* float(), double(), ...: one tiny wrapper per target dtype. */
#define THP_DEFINE_CAST_METHOD(method, Name)                             \
    static PyObject *THPVariable_##method(PyObject *self, PyObject *unused) \
    {                                                                    \
        (void)unused;                                                    \
        return convert_to(self, TH_##Name, 0);                           \
    }
#define THP_FORALL_CAST_METHODS(_)                  \
    _(bool, Bool)                                   \
    _(byte, UInt8)                                  \
    _(char, Int8)                                   \
    _(short, Int16)                                 \
    _(int, Int32)                                   \
    _(long, Int64)                                  \
    _(float, Float32)                               \
    _(double, Float64)                              \
    _(half, Float16)                                \
    _(bfloat16, BFloat16)
THP_FORALL_CAST_METHODS(THP_DEFINE_CAST_METHOD)
#undef THP_DEFINE_CAST_METHOD

#define THP_CAST_METHOD_ENTRY(method, Name)                              \
    {#method, THPVariable_##method, METH_NOARGS,                         \
     "self converted to ember." #Name " (self if it already is)"},

PyMethodDef THPVariable_view_methods[] = {
    {"view", FASTCALL_KW(THPVariable_view), "A view with another shape."},
    {"view_as", THPVariable_view_as, METH_O, NULL},
    {"reshape", FASTCALL_KW(THPVariable_reshape),
     "A view with another shape, or a copy when no view exists."},
    {"reshape_as", THPVariable_reshape_as, METH_O, NULL},
    {"flatten", FASTCALL_KW(THPVariable_flatten), NULL},
    {"transpose", FASTCALL_KW(THPVariable_transpose), NULL},
    {"t", THPVariable_t, METH_NOARGS, "Transpose of a <= 2-d tensor."},
    {"permute", FASTCALL_KW(THPVariable_permute), NULL},
    {"squeeze", FASTCALL_KW(THPVariable_squeeze), NULL},
    {"unsqueeze", FASTCALL_KW(THPVariable_unsqueeze), NULL},
    {"expand", FASTCALL_KW(THPVariable_expand), NULL},
    {"expand_as", THPVariable_expand_as, METH_O, NULL},
    {"narrow", FASTCALL_KW(THPVariable_narrow), NULL},
    {"select", FASTCALL_KW(THPVariable_select), NULL},
    {"unfold", FASTCALL_KW(THPVariable_unfold), NULL},
    {"as_strided", FASTCALL_KW(THPVariable_as_strided), NULL},
    {"contiguous", FASTCALL_KW(THPVariable_contiguous), NULL},
    {"clone", FASTCALL_KW(THPVariable_clone), NULL},
    {"detach", THPVariable_detach, METH_NOARGS,
     "The same memory and version counter, without autograd history."},
    {"detach_", THPVariable_detach_, METH_NOARGS, NULL},
    {"copy_", FASTCALL_KW(THPVariable_copy_),
     "Copies src into self (broadcasting, converting dtypes)."},
    {"fill_", THPVariable_fill_, METH_O, NULL},
    {"zero_", THPVariable_zero_, METH_NOARGS, NULL},
    {"to", FASTCALL_KW(THPVariable_to), NULL},
    THP_FORALL_CAST_METHODS(THP_CAST_METHOD_ENTRY)
    {NULL, NULL, 0, NULL},
};

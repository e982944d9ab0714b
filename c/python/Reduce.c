/*
 * Reduce.c -- reductions (sum, mean, max, var, norm, ...), softmax and scans.
 * See Note [Function and method from one implementation] in THP.h.
 *
 * Each wrapper parses PyTorch's signature, calls one THReduce.h function
 * (with the GIL released for large inputs: the kernels never touch Python,
 * and a Python allocator takes the GIL back itself) and wraps the result,
 * copying it into `out=` when one is given.
 */
#include "THP.h"

/* Runs `stmt` without the GIL when the input is large enough for the
 * kernel time to matter (Note [Pinned arguments] in THP.h). */
#define THP_MAYBE_WITHOUT_GIL(numel, stmt) \
    THP_RUN_WITHOUT_GIL_IF((numel) >= TH_PARALLEL_GRAIN, stmt)

/* ---- argument parsing --------------------------------------------------- */

/* Parses `dim`: absent or None (every dim), an int, or a tuple/list of
 * ints.  Returns the number of dims (0 = every dim) or -1. */
static int
parse_dim_list(const char *fname, PyObject *obj, int64_t *dims)
{
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        if (n > TH_MAX_DIMS) {
            PyErr_Format(PyExc_IndexError, "%s(): too many dims (%zd)", fname,
                         n);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(obj, i); /* borrowed */
            if (PyBool_Check(item)
                || THPUtils_unpackLong(item, fname, "dim", &dims[i]) < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_Format(PyExc_TypeError,
                                 "%s(): argument 'dim' must be tuple of ints, "
                                 "but found element of type bool at pos %zd",
                                 fname, i);
                }
                return -1;
            }
        }
        return (int)n;
    }
    if (PyBool_Check(obj) || PyFloat_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'dim' must be int or tuple of ints, not "
                     "%s",
                     fname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    return THPUtils_unpackLong(obj, fname, "dim", &dims[0]) < 0 ? -1 : 1;
}

/* The dims as a mask over the input's dims. */
static int
parse_dim_mask(const char *fname, PyObject *obj, const THTensor *input,
               bool *mask)
{
    int64_t dims[TH_MAX_DIMS];
    int ndims = parse_dim_list(fname, obj, dims);
    if (ndims < 0) {
        return -1;
    }
    if (THReduce_dimMask(input, ndims, dims, mask) < 0) {
        THPUtils_setErrorFromTH();
        return -1;
    }
    return 0;
}

/* A single, required int dim. */
static int
parse_one_dim(const char *fname, PyObject *obj, int64_t *dim)
{
    if (obj == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() missing 1 required positional arguments: \"dim\"",
                     fname);
        return -1;
    }
    if (PyBool_Check(obj) || PyFloat_Check(obj) || obj == Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'dim' must be int, not %s", fname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return THPUtils_unpackLong(obj, fname, "dim", dim);
}

static int
parse_bool(const char *fname, const char *what, PyObject *obj, bool *out)
{
    if (obj == NULL) {
        return 0; /* keeps the default */
    }
    if (!PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be bool, not %s", fname, what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = obj == Py_True;
    return 0;
}

/* dtype=None or a dtype; -1 for None/absent. */
static int
parse_optional_dtype(PyObject *obj, int *dtype)
{
    *dtype = -1;
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    THDtype parsed;
    if (THPDtype_Parse(obj, &parsed) < 0) {
        return -1;
    }
    *dtype = (int)parsed;
    return 0;
}

/* Note [out= dtype of the reductions]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * An out= of another dtype than the result's is, as in PyTorch, one of:
 *   - the dtype the op computes in: sum, prod, cumsum, cumprod (and mean
 *     into a floating out) read out's dtype as their dtype= (so a float
 *     sum into an int64 out truncates each element first, as PyTorch
 *     does); a dtype= that differs from out's is an error;
 *   - var and std convert the input to a floating out's dtype first;
 *   - all and any store bool, or uint8 computed on the input converted
 *     to uint8 (0.5 is then false);
 *   - a dtype the result converts into: logsumexp (a floating out);
 *   - an error: amax, amin, norm, logcumsumexp, searchsorted, bucketize,
 *     histc store their own dtype only.
 * Each op names its rule (an OutDtypeRule), which runs once the arguments
 * are parsed, before the kernel, and raises in PyTorch's words; the
 * result then goes through wrap_or_copy_out, which checks the shape and
 * copies (converting) into out. */

/* Checks out's dtype for an op on `self`; *dtype is dtype= (-1 absent),
 * which the rule may set to the dtype to compute in.  0 or -1. */
typedef int (*OutDtypeRule)(const char *fname, const THTensor *self,
                            THDtype out, int *dtype);

static int
out_sets_dtype(const char *fname, const THTensor *self, THDtype out,
               int *dtype)
{
    (void)fname, (void)self;
    if (*dtype >= 0 && *dtype != (int)out) {
        return THPUtils_setOutDtypeError((THDtype)*dtype, out);
    }
    *dtype = (int)out;
    return 0;
}

static int
cannot_cast_error(THDtype result, THDtype out)
{
    PyErr_Format(PyExc_RuntimeError,
                 "result type %s can't be cast to the desired output type %s",
                 THDtype_scalarTypeName(result), THDtype_scalarTypeName(out));
    return -1;
}

/* PyTorch's mean into out= is sum(dtype=out's dtype) divided in place, so
 * an integral out fails in the division, whose result is the default
 * float dtype.  A non-floating input without dtype= is left to the core's
 * own error. */
static int
out_of_mean(const char *fname, const THTensor *self, THDtype out,
            int *dtype)
{
    if (*dtype < 0 && !THDtype_isFloating(self->dtype)) {
        return 0;
    }
    if (*dtype < 0 && !THDtype_isFloating(out)) {
        return cannot_cast_error(THPDtype_defaultFloat(), out);
    }
    return out_sets_dtype(fname, self, out, dtype);
}

/* PyTorch's var/std convert the input to a floating out's dtype and
 * compute in it; an integral out is castable only from an integral input,
 * which the core refuses. */
static int
out_of_var(const char *fname, const THTensor *self, THDtype out, int *dtype)
{
    (void)fname;
    if (!THDtype_isFloating(self->dtype)) {
        return 0;
    }
    if (!THPointwise_canCast(self->dtype, out)) {
        return cannot_cast_error(self->dtype, out);
    }
    *dtype = (int)out;
    return 0;
}

static int
out_floating(const char *fname, const THTensor *self, THDtype out,
             int *dtype)
{
    (void)self, (void)dtype;
    if (!THDtype_isFloating(out)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Expected floating point type for result tensor, "
                     "but got: %s",
                     fname, THDtype_scalarTypeName(out));
        return -1;
    }
    return 0;
}

/* all/any store bool, or uint8 (PyTorch's uint8 compatibility), computed
 * on the input converted to uint8 first when out is uint8. */
static int
out_bool_or_uint8(const char *fname, const THTensor *self, THDtype out,
                  int *dtype)
{
    (void)self;
    if (out != TH_Bool && out != TH_UInt8) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s only supports bool tensor for result, got: %s",
                     fname, THDtype_scalarTypeName(out));
        return -1;
    }
    if (out == TH_UInt8) {
        *dtype = TH_UInt8;
    }
    return 0;
}

static int
out_matches_input(const char *fname, const THTensor *self, THDtype out,
                  int *dtype)
{
    (void)fname, (void)dtype;
    if (out != self->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "Expected the dtype for input and out to match, but got "
                     "%s for input's dtype and %s for out's dtype.",
                     THDtype_scalarTypeName(self->dtype),
                     THDtype_scalarTypeName(out));
        return -1;
    }
    return 0;
}

/* norm's result has its dtype= or else the input's; a non-floating input
 * is left to the core's own error, which PyTorch raises first. */
static int
out_is_norm_dtype(const char *fname, const THTensor *self, THDtype out,
                  int *dtype)
{
    (void)fname;
    if (!THDtype_isFloating(self->dtype)) {
        return 0;
    }
    THDtype expected = *dtype >= 0 ? (THDtype)*dtype : self->dtype;
    return out == expected ? 0 : THPUtils_setOutDtypeError(expected, out);
}

static int
out_of_logcumsumexp(const char *fname, const THTensor *self, THDtype out,
                    int *dtype)
{
    (void)fname, (void)dtype;
    if (out != self->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "expected scalar_type %s but found %s",
                     THDtype_scalarTypeName(self->dtype),
                     THDtype_scalarTypeName(out));
        return -1;
    }
    return 0;
}

/* *dtype: the positions' dtype, int32 with out_int32=True, else int64. */
static int
out_of_searchsorted(const char *fname, const THTensor *self, THDtype out,
                    int *dtype)
{
    (void)fname, (void)self;
    if (out != (THDtype)*dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "torch.searchsorted(): output tensor's dtype is wrong, "
                     "it can only be Int(int32) or Long(int64) depending on "
                     "whether out_int32 flag is True, but we got output "
                     "tensor's dtype %s and out_int32 flag is %s",
                     THDtype_scalarTypeName(out),
                     *dtype == TH_Int32 ? "True" : "False");
        return -1;
    }
    return 0;
}

static int
out_of_histc(const char *fname, const THTensor *self, THDtype out,
             int *dtype)
{
    (void)fname, (void)dtype;
    if (out != self->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "torch.histogram: input tensor and hist tensor should "
                     "have the same dtype, but got input %s and hist %s",
                     THDtype_cppTypeName(self->dtype),
                     THDtype_cppTypeName(out));
        return -1;
    }
    return 0;
}

/* Checks out= (NULL/None: absent) with `rule` (Note [out= dtype of the
 * reductions]); a TypeError when it is no tensor. */
static int
check_out(const char *fname, OutDtypeRule rule, const THTensor *self,
          PyObject *out, int *dtype)
{
    THTensor *target;
    if (THPUtils_parseOut(fname, out, &target) < 0) {
        return -1;
    }
    return target == NULL ? 0 : rule(fname, self, target->dtype, dtype);
}

/* Wraps `result` (stolen; NULL means the core failed), or copies it into
 * `out` (checked by check_out) when one was given, converting to its
 * dtype, and returns that.  An out of another shape is an error and is
 * left untouched. */
static PyObject *
wrap_or_copy_out(const char *fname, THTensor *result, PyObject *out)
{
    if (result == NULL || out == NULL || out == Py_None) {
        return THPVariable_Wrap(result);
    }
    THTensor *target = THPVariable_Unpack(out);
    bool same_shape = target->ndim == result->ndim;
    for (int d = 0; same_shape && d < result->ndim; d++) {
        same_shape = target->sizes[d] == result->sizes[d];
    }
    int status = -1;
    if (!same_shape) {
        PyObject *want = THPSize_New(result->ndim, result->sizes);
        PyObject *got = THPSize_New(target->ndim, target->sizes);
        if (want != NULL && got != NULL) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): expected out tensor of shape %R, but got %R",
                         fname, want, got);
        }
        Py_XDECREF(want);
        Py_XDECREF(got);
    }
    else if (THTensor_copy(target, result) < 0) {
        THPUtils_setErrorFromTH();
    }
    else {
        status = 0;
    }
    THTensor_release(result);
    return status < 0 ? NULL : Py_NewRef(out);
}

/* The arguments most reductions share: (dim=None, keepdim=False, *,
 * dtype=None, out=None), of which each op takes a subset. */
typedef struct {
    bool mask[TH_MAX_DIMS];
    bool keepdim;
    int dtype;
    PyObject *out; /* borrowed or NULL */
} ReduceArgs;

enum { ARG_DIM, ARG_KEEPDIM, ARG_DTYPE, ARG_OUT, NARGS };

static int
parse_reduce_args(const char *fname, PyObject *input, PyObject *const *args,
                  Py_ssize_t nargs, PyObject *kwnames, bool takes_dtype,
                  ReduceArgs *ra)
{
    static const char *const names[NARGS] = {"dim", "keepdim", "dtype", "out"};
    static const char *const names_without_dtype[NARGS - 1] = {
        "dim", "keepdim", "out"};
    PyObject *objs[NARGS];
    if (THPUtils_parseArgs(fname, args, nargs, kwnames,
                           takes_dtype ? names : names_without_dtype,
                           takes_dtype ? NARGS : NARGS - 1, 2, objs)
        < 0) {
        return -1;
    }
    if (!takes_dtype) {
        objs[ARG_OUT] = objs[ARG_DTYPE];
        objs[ARG_DTYPE] = NULL;
    }
    ra->keepdim = false;
    ra->out = objs[ARG_OUT];
    if (parse_dim_mask(fname, objs[ARG_DIM], THPVariable_Unpack(input),
                       ra->mask)
            < 0
        || parse_bool(fname, "keepdim", objs[ARG_KEEPDIM], &ra->keepdim) < 0
        || parse_optional_dtype(objs[ARG_DTYPE], &ra->dtype) < 0) {
        return -1;
    }
    return 0;
}

/* ---- sum, mean, prod, amax, amin, all, any, logsumexp ------------------- */

typedef THTensor *(*MaskedReduceFn)(THTensor *input, const bool *mask,
                                    bool keepdim, int dtype);

static PyObject *
masked_reduce(const char *fname, MaskedReduceFn fn, bool takes_dtype,
              OutDtypeRule out_rule, PyObject *input, PyObject *const *args,
              Py_ssize_t nargs, PyObject *kwnames)
{
    ReduceArgs ra;
    THTensor *self = THPVariable_Unpack(input);
    if (parse_reduce_args(fname, input, args, nargs, kwnames, takes_dtype,
                          &ra)
            < 0
        || check_out(fname, out_rule, self, ra.out, &ra.dtype) < 0) {
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel,
                          result = fn(self, ra.mask, ra.keepdim, ra.dtype));
    return wrap_or_copy_out(fname, result, ra.out);
}

static THTensor *
amax_fn(THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    (void)dtype;
    return THTensor_newAmax(input, mask, keepdim, true, "amax");
}

static THTensor *
amin_fn(THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    (void)dtype;
    return THTensor_newAmax(input, mask, keepdim, false, "amin");
}

/* all or any of `input` converted to `dtype` first (-1: as it is). */
static THTensor *
new_all_or_any(THTensor *(*fn)(THTensor *, const bool *, bool),
               THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    THTensor *operand = THTensor_newCast(
        input, dtype >= 0 ? (THDtype)dtype : input->dtype, false);
    if (operand == NULL) {
        return NULL;
    }
    THTensor *result = fn(operand, mask, keepdim);
    THTensor_release(operand);
    return result;
}

static THTensor *
all_fn(THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    return new_all_or_any(THTensor_newAll, input, mask, keepdim, dtype);
}

static THTensor *
any_fn(THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    return new_all_or_any(THTensor_newAny, input, mask, keepdim, dtype);
}

static THTensor *
logsumexp_fn(THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    (void)dtype;
    return THTensor_newLogsumexp(input, mask, keepdim,
                                 THPDtype_defaultFloat());
}

static PyObject *
sum_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return masked_reduce("sum", THTensor_newSum, true, out_sets_dtype,
                         input, args, nargs, kwnames);
}

static PyObject *
mean_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    return masked_reduce("mean", THTensor_newMean, true, out_of_mean,
                         input, args, nargs, kwnames);
}

/* prod takes one int dim (or none), as PyTorch's. */
static PyObject *
prod_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    if (nargs > 0 && (PyTuple_Check(args[0]) || PyList_Check(args[0]))) {
        PyErr_SetString(PyExc_TypeError,
                        "prod(): argument 'dim' must be int, not tuple");
        return NULL;
    }
    return masked_reduce("prod", THTensor_newProd, true, out_sets_dtype,
                         input, args, nargs, kwnames);
}

static PyObject *
amax_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    return masked_reduce("amax", amax_fn, false, out_matches_input, input,
                         args, nargs, kwnames);
}

static PyObject *
amin_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    return masked_reduce("amin", amin_fn, false, out_matches_input, input,
                         args, nargs, kwnames);
}

static PyObject *
all_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return masked_reduce("all", all_fn, false, out_bool_or_uint8, input,
                         args, nargs, kwnames);
}

static PyObject *
any_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return masked_reduce("any", any_fn, false, out_bool_or_uint8, input,
                         args, nargs, kwnames);
}

/* logsumexp's dim is required. */
static PyObject *
logsumexp_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    bool has_dim = nargs > 0;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw && !has_dim; k++) {
        has_dim = PyUnicode_CompareWithASCIIString(
                      PyTuple_GET_ITEM(kwnames, k), "dim")
                  == 0;
        if (has_dim && args[nargs + k] == Py_None) {
            PyErr_SetString(PyExc_TypeError,
                            "logsumexp(): argument 'dim' must be tuple of "
                            "ints, not NoneType");
            return NULL;
        }
    }
    if (!has_dim) {
        PyErr_SetString(PyExc_TypeError,
                        "logsumexp() missing 1 required positional "
                        "arguments: \"dim\"");
        return NULL;
    }
    return masked_reduce("logsumexp", logsumexp_fn, false, out_floating,
                         input, args, nargs, kwnames);
}

static PyObject *
count_nonzero_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    static const char *const names[] = {"dim"};
    PyObject *dim_obj;
    bool mask[TH_MAX_DIMS];
    THTensor *self = THPVariable_Unpack(input);
    if (THPUtils_parseArgs("count_nonzero", args, nargs, kwnames, names, 1, 1,
                           &dim_obj)
            < 0
        || parse_dim_mask("count_nonzero", dim_obj, self, mask) < 0) {
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel,
                          result = THTensor_newCountNonzero(self, mask));
    return THPVariable_Wrap(result);
}

/* ---- max, min, argmax, argmin ------------------------------------------- */


/* max(), max(dim, keepdim=False) and max(other), the elementwise maximum
 * (served by the `maximum` method). */
static PyObject *
max_or_min(bool is_max, PyObject *input, PyObject *const *args,
           Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"dim", "keepdim"};
    const char *fname = is_max ? "max" : "min";
    PyObject *objs[2];
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 2, 2, objs)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (objs[0] != NULL && THPVariable_Check(objs[0]) && objs[1] == NULL) {
        return PyObject_CallMethod(input, is_max ? "maximum" : "minimum", "O",
                                   objs[0]);
    }
    if (objs[0] == NULL) {
        if (objs[1] != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): keepdim given without dim", fname);
            return NULL;
        }
        bool mask[TH_MAX_DIMS];
        THReduce_dimMask(self, 0, NULL, mask);
        THTensor *result;
        THP_MAYBE_WITHOUT_GIL(self->numel,
                              result = THTensor_newAmax(self, mask, false,
                                                        is_max, fname));
        return THPVariable_Wrap(result);
    }
    int64_t dim;
    bool keepdim = false;
    if (parse_one_dim(fname, objs[0], &dim) < 0
        || parse_bool(fname, "keepdim", objs[1], &keepdim) < 0) {
        return NULL;
    }
    THTensor *values;
    THTensor *indices;
    int status;
    THP_MAYBE_WITHOUT_GIL(self->numel,
                          status = THTensor_maxDim(self, dim, keepdim, is_max,
                                                   &values, &indices));
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    return THPReturnTypes_packTensors(is_max ? THP_RESULT_MAX : THP_RESULT_MIN,
                                      values, indices);
}

static PyObject *
max_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return max_or_min(true, input, args, nargs, kwnames);
}

static PyObject *
min_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return max_or_min(false, input, args, nargs, kwnames);
}

static PyObject *
argmax_or_argmin(bool is_max, PyObject *input, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"dim", "keepdim"};
    const char *fname = is_max ? "argmax" : "argmin";
    PyObject *objs[2];
    int64_t dim = 0;
    bool keepdim = false;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 2, 2, objs)
        < 0) {
        return NULL;
    }
    bool flatten = objs[0] == NULL || objs[0] == Py_None;
    if ((!flatten && parse_one_dim(fname, objs[0], &dim) < 0)
        || parse_bool(fname, "keepdim", objs[1], &keepdim) < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel,
                          result = THTensor_newArgmax(
                              self, flatten ? NULL : &dim, keepdim, is_max));
    if (result != NULL && flatten && keepdim) {
        /* PyTorch keeps every dim as size 1 */
        int64_t ones[TH_MAX_DIMS];
        for (int d = 0; d < self->ndim; d++) {
            ones[d] = 1;
        }
        THTensor *view = THTensor_newView(result, self->ndim, ones);
        THTensor_release(result);
        result = view;
    }
    return THPVariable_Wrap(result);
}

static PyObject *
argmax_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    return argmax_or_argmin(true, input, args, nargs, kwnames);
}

static PyObject *
argmin_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    return argmax_or_argmin(false, input, args, nargs, kwnames);
}

/* ---- var, std, var_mean, std_mean --------------------------------------- */

/* var(dim=None, *, correction=1, keepdim=False), plus PyTorch's older forms
 * var(unbiased) and var(dim, unbiased, keepdim). */
typedef struct {
    bool mask[TH_MAX_DIMS];
    double correction;
    bool keepdim;
    PyObject *out;
} VarArgs;

static int
parse_var_args(const char *fname, PyObject *input, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, VarArgs *va)
{
    static const char *const names[] = {"dim", "unbiased", "keepdim",
                                        "correction", "out"};
    PyObject *objs[5];
    if (nargs >= 1 && PyBool_Check(args[0])) { /* var(unbiased) */
        if (nargs > 1) {
            PyErr_Format(PyExc_TypeError,
                         "%s() received an invalid combination of arguments",
                         fname);
            return -1;
        }
        objs[0] = NULL;
        const char *const unbiased_name[] = {"unbiased"};
        if (THPUtils_parseArgs(fname, args, nargs, NULL, unbiased_name, 1, 1,
                               &objs[1])
            < 0) {
            return -1;
        }
        objs[2] = objs[3] = objs[4] = NULL;
        if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
            PyErr_Format(PyExc_TypeError,
                         "%s(unbiased) takes no keyword arguments", fname);
            return -1;
        }
    }
    else if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 5, 3,
                                objs)
             < 0) {
        return -1;
    }
    bool unbiased = true;
    va->keepdim = false;
    va->out = objs[4];
    if (parse_dim_mask(fname, objs[0], THPVariable_Unpack(input), va->mask)
            < 0
        || parse_bool(fname, "unbiased", objs[1], &unbiased) < 0
        || parse_bool(fname, "keepdim", objs[2], &va->keepdim) < 0) {
        return -1;
    }
    va->correction = unbiased ? 1 : 0;
    if (objs[3] != NULL && objs[3] != Py_None) {
        if (objs[1] != NULL) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): can't specify both unbiased and correction",
                         fname);
            return -1;
        }
        va->correction = PyFloat_AsDouble(objs[3]);
        if (va->correction == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;
}

/* var or std of `self` computed in `dtype` (-1: self's own). */
static THTensor *
new_var_in(THTensor *self, int dtype, const VarArgs *va, bool take_sqrt)
{
    THTensor *operand = THTensor_newCast(
        self, dtype >= 0 ? (THDtype)dtype : self->dtype, false);
    if (operand == NULL) {
        return NULL;
    }
    THTensor *result = THTensor_newVar(operand, va->mask, va->correction,
                                       va->keepdim, take_sqrt);
    THTensor_release(operand);
    return result;
}

static PyObject *
var_or_std(const char *fname, bool take_sqrt, PyObject *input,
           PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    VarArgs va;
    THTensor *self = THPVariable_Unpack(input);
    int dtype = -1;
    if (parse_var_args(fname, input, args, nargs, kwnames, &va) < 0
        || check_out(fname, out_of_var, self, va.out, &dtype) < 0) {
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel,
                          result = new_var_in(self, dtype, &va, take_sqrt));
    return wrap_or_copy_out(fname, result, va.out);
}

static PyObject *
var_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return var_or_std("var", false, input, args, nargs, kwnames);
}

static PyObject *
std_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return var_or_std("std", true, input, args, nargs, kwnames);
}

/* var_mean/std_mean: a plain (var, mean) tuple, as PyTorch's. */
static PyObject *
var_or_std_mean(const char *fname, bool take_sqrt, PyObject *input,
                PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    VarArgs va;
    if (parse_var_args(fname, input, args, nargs, kwnames, &va) < 0) {
        return NULL;
    }
    if (va.out != NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() got an unexpected keyword argument 'out'", fname);
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *var;
    THTensor *mean = NULL;
    THP_MAYBE_WITHOUT_GIL(
        self->numel,
        var = THTensor_newVar(self, va.mask, va.correction, va.keepdim,
                              take_sqrt);
        mean = var == NULL ? NULL
                           : THTensor_newMean(self, va.mask, va.keepdim, -1));
    if (mean == NULL && var != NULL) {
        THTensor_release(var);
        var = NULL;
    }
    PyObject *v = THPVariable_Wrap(var);
    if (v == NULL) {
        return NULL;
    }
    PyObject *m = THPVariable_Wrap(mean);
    if (m == NULL) {
        Py_DECREF(v);
        return NULL;
    }
    PyObject *tuple = PyTuple_Pack(2, v, m);
    Py_DECREF(v);
    Py_DECREF(m);
    return tuple;
}

static PyObject *
var_mean_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    return var_or_std_mean("var_mean", false, input, args, nargs, kwnames);
}

static PyObject *
std_mean_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    return var_or_std_mean("std_mean", true, input, args, nargs, kwnames);
}

/* ---- norm --------------------------------------------------------------- */

/* p: None or 'fro' (2), or a number (inf allowed). */
static int
parse_norm_order(PyObject *obj, double *p)
{
    *p = 2;
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        if (PyUnicode_CompareWithASCIIString(obj, "fro") == 0) {
            return 0;
        }
        PyErr_Format(PyExc_RuntimeError,
                     "norm(): p=%R is not supported (ember has the vector "
                     "norms and 'fro')",
                     obj);
        return -1;
    }
    if (PyBool_Check(obj) || !PyNumber_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "norm(): argument 'p' must be a number or 'fro', not %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *p = PyFloat_AsDouble(obj);
    return *p == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *
norm_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    static const char *const names[] = {"p", "dim", "keepdim", "out",
                                        "dtype"};
    PyObject *objs[5];
    THTensor *self = THPVariable_Unpack(input);
    double p;
    bool mask[TH_MAX_DIMS];
    bool keepdim = false;
    int dtype;
    if (THPUtils_parseArgs("norm", args, nargs, kwnames, names, 5, 5, objs)
            < 0
        || parse_norm_order(objs[0], &p) < 0
        || parse_dim_mask("norm", objs[1], self, mask) < 0
        || parse_bool("norm", "keepdim", objs[2], &keepdim) < 0
        || parse_optional_dtype(objs[4], &dtype) < 0
        || check_out("norm", out_is_norm_dtype, self, objs[3], &dtype) < 0) {
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel, result = THTensor_newNorm(
                                           self, p, mask, keepdim, dtype));
    return wrap_or_copy_out("norm", result, objs[3]);
}

/* ---- softmax, log_softmax, cumsum, cumprod ------------------------------ */

static PyObject *
softmax_common(const char *fname, bool log_softmax, PyObject *input,
               PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"dim", "dtype"};
    PyObject *objs[2];
    int64_t dim;
    int dtype;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 2, 2, objs) < 0
        || parse_one_dim(fname, objs[0], &dim) < 0
        || parse_optional_dtype(objs[1], &dtype) < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THDtype computed = dtype >= 0 ? (THDtype)dtype : self->dtype;
    if (!THDtype_isFloating(computed)) {
        /* PyTorch's exception type; the core reports a RuntimeError (the
         * parent class), having no NotImplementedError kind */
        int rank = self->ndim > 0 ? self->ndim : 1;
        bool last_dim = dim == -1 || dim == rank - 1;
        PyErr_Format(PyExc_NotImplementedError,
                     "\"%s_%skernel_impl\" not implemented for '%s'", fname,
                     last_dim ? "lastdim_" : "",
                     THDtype_scalarTypeName(computed));
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel, result = THTensor_newSoftmax(
                                           self, dim, log_softmax, dtype));
    return THPVariable_Wrap(result);
}

static PyObject *
softmax_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    return softmax_common("softmax", false, input, args, nargs, kwnames);
}

static PyObject *
log_softmax_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    return softmax_common("log_softmax", true, input, args, nargs, kwnames);
}

typedef THTensor *(*ScanFn)(THTensor *input, int64_t dim, int dtype);

static PyObject *
scan_common(const char *fname, ScanFn fn, PyObject *input,
            PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"dim", "dtype", "out"};
    PyObject *objs[3];
    int64_t dim;
    int dtype;
    THTensor *self = THPVariable_Unpack(input);
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 3, 1, objs) < 0
        || parse_one_dim(fname, objs[0], &dim) < 0
        || parse_optional_dtype(objs[1], &dtype) < 0
        || check_out(fname, out_sets_dtype, self, objs[2], &dtype) < 0) {
        return NULL;
    }
    if (dtype == TH_Bool) {
        /* PyTorch's exception type (as in softmax_common) */
        PyErr_Format(PyExc_NotImplementedError,
                     "\"%s_out_cpu\" not implemented for 'Bool'", fname);
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel, result = fn(self, dim, dtype));
    return wrap_or_copy_out(fname, result, objs[2]);
}

static PyObject *
cumsum_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    return scan_common("cumsum", THTensor_newCumsum, input, args, nargs,
                       kwnames);
}

static PyObject *
cumprod_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    return scan_common("cumprod", THTensor_newCumprod, input, args, nargs,
                       kwnames);
}

/* ---- logcumsumexp, cummax, cummin --------------------------------------- */

static PyObject *
logcumsumexp_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"dim", "out"};
    PyObject *objs[2];
    int64_t dim;
    THTensor *self = THPVariable_Unpack(input);
    int no_dtype = -1;
    if (THPUtils_parseArgs("logcumsumexp", args, nargs, kwnames, names, 2, 1,
                           objs)
            < 0
        || parse_one_dim("logcumsumexp", objs[0], &dim) < 0
        || check_out("logcumsumexp", out_of_logcumsumexp, self, objs[1],
                     &no_dtype)
               < 0) {
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel,
                          result = THTensor_newLogcumsumexp(self, dim));
    return wrap_or_copy_out("logcumsumexp", result, objs[1]);
}

static PyObject *
cum_extremum(const char *fname, bool is_max, PyObject *input,
             PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"dim"};
    PyObject *objs[1];
    int64_t dim;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 1, 1, objs) < 0
        || parse_one_dim(fname, objs[0], &dim) < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *values, *indices;
    int status;
    THP_MAYBE_WITHOUT_GIL(self->numel,
                          status = THTensor_cumExtremum(self, dim, is_max,
                                                        &values, &indices));
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    return THPReturnTypes_packTensors(
        is_max ? THP_RESULT_CUMMAX : THP_RESULT_CUMMIN, values, indices);
}

static PyObject *
cummax_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    return cum_extremum("cummax", true, input, args, nargs, kwnames);
}

static PyObject *
cummin_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    return cum_extremum("cummin", false, input, args, nargs, kwnames);
}

/* ---- searchsorted, bucketize, bincount, histc ------------------------- */

/* right= and side= together (PyTorch's rules: side wins, but may not
 * contradict an explicit right=True). */
static int
parse_side(PyObject *side_obj, PyObject *right_obj, bool *right)
{
    if (parse_bool("searchsorted", "right", right_obj, right) < 0) {
        return -1;
    }
    if (side_obj == NULL || side_obj == Py_None) {
        return 0;
    }
    if (!PyUnicode_Check(side_obj)) {
        PyErr_Format(PyExc_TypeError,
                     "searchsorted(): argument 'side' must be str, not %s",
                     Py_TYPE(side_obj)->tp_name);
        return -1;
    }
    bool side_right = PyUnicode_CompareWithASCIIString(side_obj, "right") == 0;
    if (!side_right && PyUnicode_CompareWithASCIIString(side_obj, "left") != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "torch.searchsorted(): side can only be 'left' or "
                     "'right' but got %U",
                     side_obj);
        return -1;
    }
    if (*right && !side_right) {
        PyErr_SetString(PyExc_RuntimeError,
                        "torch.searchsorted(): side and right can't be set "
                        "to opposites, got side of left while right was "
                        "True");
        return -1;
    }
    *right = side_right;
    return 0;
}

/* A tensor argument, or NULL for None/absent when `optional`. */
static int
parse_tensor_arg(const char *fname, const char *what, PyObject *obj,
                 bool optional, PyObject **out)
{
    *out = NULL;
    if ((obj == NULL || obj == Py_None) && optional) {
        return 0;
    }
    if (obj == NULL || !THPVariable_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be Tensor, "
                                      "not %s",
                     fname, what, obj ? Py_TYPE(obj)->tp_name : "nothing");
        return -1;
    }
    *out = obj;
    return 0;
}

/* searchsorted's `input`: a tensor, or a number searched as a 0-dim
 * tensor of its own dtype (a new reference either way). */
static PyObject *
values_as_tensor(PyObject *obj)
{
    if (obj != NULL && THPVariable_Check(obj)) {
        return Py_NewRef(obj);
    }
    THScalar number;
    if (obj == NULL || PyUnicode_Check(obj)
        || THPUtils_parseScalar(obj, &number) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "searchsorted(): argument 'input' must be Tensor or "
                     "Number, not %s",
                     obj ? Py_TYPE(obj)->tp_name : "nothing");
        return NULL;
    }
    THTensor *t = THTensor_newEmpty(0, NULL, number.dtype, TH_DEVICE_CPU);
    if (t != NULL && THTensor_fill(t, number) < 0) {
        THTensor_release(t);
        t = NULL;
    }
    return THPVariable_Wrap(t);
}

static PyObject *
run_searchsorted(PyObject *sorted_obj, PyObject *values_obj, bool right,
                 PyObject *sorter_obj, bool out_int32, PyObject *out)
{
    THTensor *sorted = THPVariable_Unpack(sorted_obj);
    THTensor *values = THPVariable_Unpack(values_obj);
    THTensor *sorter = sorter_obj ? THPVariable_Unpack(sorter_obj) : NULL;
    int positions_dtype = out_int32 ? TH_Int32 : TH_Int64;
    if (check_out("searchsorted", out_of_searchsorted, values, out,
                  &positions_dtype)
        < 0) {
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(values->numel,
                          result = THTensor_newSearchsorted(
                              sorted, values, right, sorter, out_int32));
    return wrap_or_copy_out("searchsorted", result, out);
}

/* searchsorted(sorted_sequence, input, *, out_int32=False, right=False,
 * side=None, sorter=None, out=None) */
static PyObject *
searchsorted_impl(PyObject *sorted_obj, PyObject *const *args,
                  Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"input", "out_int32", "right",
                                        "side", "sorter", "out"};
    PyObject *objs[6];
    bool out_int32 = false, right = false;
    PyObject *sorter_obj;
    if (THPUtils_parseArgs("searchsorted", args, nargs, kwnames, names, 6, 1,
                           objs)
            < 0
        || parse_bool("searchsorted", "out_int32", objs[1], &out_int32) < 0
        || parse_side(objs[3], objs[2], &right) < 0
        || parse_tensor_arg("searchsorted", "sorter", objs[4], true,
                            &sorter_obj)
               < 0) {
        return NULL;
    }
    PyObject *values_obj = values_as_tensor(objs[0]);
    if (values_obj == NULL) {
        return NULL;
    }
    PyObject *result = run_searchsorted(sorted_obj, values_obj, right,
                                        sorter_obj, out_int32, objs[5]);
    Py_DECREF(values_obj);
    return result;
}

/* bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
 * searchsorted(boundaries, input) with 1-D boundaries. */
static PyObject *
bucketize_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const char *const names[] = {"boundaries", "out_int32", "right",
                                        "out"};
    PyObject *objs[4];
    bool out_int32 = false, right = false;
    PyObject *boundaries;
    if (THPUtils_parseArgs("bucketize", args, nargs, kwnames, names, 4, 1,
                           objs)
            < 0
        || parse_bool("bucketize", "out_int32", objs[1], &out_int32) < 0
        || parse_bool("bucketize", "right", objs[2], &right) < 0
        || parse_tensor_arg("bucketize", "boundaries", objs[0], false,
                            &boundaries)
               < 0) {
        return NULL;
    }
    int ndim = THPVariable_Unpack(boundaries)->ndim;
    if (ndim != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "boundaries tensor must be 1 dimension, but got dim(%d)",
                     ndim);
        return NULL;
    }
    return run_searchsorted(boundaries, input, right, NULL, out_int32,
                            objs[3]);
}

/* bincount(input, weights=None, minlength=0) */
static PyObject *
bincount_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    static const char *const names[] = {"weights", "minlength"};
    PyObject *objs[2];
    int64_t minlength = 0;
    PyObject *weights_obj;
    if (THPUtils_parseArgs("bincount", args, nargs, kwnames, names, 2, 2,
                           objs)
            < 0
        || parse_tensor_arg("bincount", "weights", objs[0], true,
                            &weights_obj)
               < 0
        || (objs[1] != NULL
            && THPUtils_unpackLong(objs[1], "bincount", "minlength",
                                   &minlength)
                   < 0)) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *weights = weights_obj ? THPVariable_Unpack(weights_obj) : NULL;
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel, result = THTensor_newBincount(
                                           self, weights, minlength));
    return THPVariable_Wrap(result);
}

static int
parse_number(const char *fname, const char *what, PyObject *obj,
             double *out)
{
    if (obj == NULL) {
        return 0; /* keeps the default */
    }
    if (PyUnicode_Check(obj) || !PyNumber_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be Number, not %s", fname,
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(obj);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* histc(input, bins=100, min=0, max=0, *, out=None) */
static PyObject *
histc_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    static const char *const names[] = {"bins", "min", "max", "out"};
    PyObject *objs[4];
    int64_t bins = 100;
    double min = 0, max = 0;
    if (THPUtils_parseArgs("histc", args, nargs, kwnames, names, 4, 3, objs)
            < 0
        || (objs[0] != NULL
            && THPUtils_unpackLong(objs[0], "histc", "bins", &bins) < 0)
        || parse_number("histc", "min", objs[1], &min) < 0
        || parse_number("histc", "max", objs[2], &max) < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    int no_dtype = -1;
    if (check_out("histc", out_of_histc, self, objs[3], &no_dtype) < 0) {
        return NULL;
    }
    THTensor *result;
    THP_MAYBE_WITHOUT_GIL(self->numel,
                          result = THTensor_newHistc(self, bins, min, max));
    return wrap_or_copy_out("histc", result, objs[3]);
}

/* ---- tables ------------------------------------------------------------- */

#define THP_REDUCE_OPS(_)                                                    \
    _(sum, "Sum of the elements, over all or the given dims.")               \
    _(mean, "Mean of the elements (floating dtypes).")                       \
    _(prod, "Product of the elements.")                                      \
    _(max, "Largest element; with dim: (values, indices); with a tensor: "   \
           "the elementwise maximum.")                                       \
    _(min, "Smallest element; with dim: (values, indices); with a tensor: "  \
           "the elementwise minimum.")                                       \
    _(amax, "Largest elements over the given dims.")                         \
    _(amin, "Smallest elements over the given dims.")                        \
    _(argmax, "Index of the first largest element.")                         \
    _(argmin, "Index of the first smallest element.")                        \
    _(var, "Variance (correction=1: unbiased).")                             \
    _(std, "Standard deviation (correction=1: unbiased).")                   \
    _(norm, "Vector p-norm (p=2 by default, 'fro' is 2).")                   \
    _(logsumexp, "log(sum(exp(x))) computed without overflow.")              \
    _(all, "True when every element is non-zero.")                           \
    _(any, "True when some element is non-zero.")                            \
    _(count_nonzero, "Number of non-zero elements.")                         \
    _(softmax, "exp(x) / sum(exp(x)) along dim, computed stably.")           \
    _(log_softmax, "log(softmax(x)) along dim, computed stably.")            \
    _(cumsum, "Running sum along dim.")                                      \
    _(cumprod, "Running product along dim.")                                 \
    _(logcumsumexp, "Running log(sum(exp(x))) along dim.")                   \
    _(cummax, "Running maximum along dim: (values, indices).")               \
    _(cummin, "Running minimum along dim: (values, indices).")               \
    _(bincount, "Counts (or summed weights) of each non-negative integer.")  \
    _(histc, "Histogram of equal-width bins over [min, max].")

#define THP_REDUCE_FUNCTION_ONLY_OPS(_)                                      \
    _(var_mean, "(var, mean) in one call.")                                  \
    _(std_mean, "(std, mean) in one call.")                                  \
    _(searchsorted, "Insertion indices of input in sorted_sequence.")        \
    _(bucketize, "Indices of the buckets of boundaries input falls in.")

#define THP_REDUCE_DEFINE(name, doc) THP_DEFINE_OP(name)
THP_REDUCE_OPS(THP_REDUCE_DEFINE)

/* The function half of THP_DEFINE_OP, for ops PyTorch has no method for. */
#define THP_REDUCE_DEFINE_FUNCTION(name, doc)                                \
    static PyObject *THPFunction_##name(PyObject *module,                    \
                                        PyObject *const *args,               \
                                        Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                        \
        (void)module;                                                        \
        if (THPUtils_checkOpInput(#name, args, nargs) == NULL) {             \
            return NULL;                                                     \
        }                                                                    \
        return name##_impl(args[0], args + 1, nargs - 1, kwnames);           \
    }
THP_REDUCE_FUNCTION_ONLY_OPS(THP_REDUCE_DEFINE_FUNCTION)

#define THP_REDUCE_FUNCTION(name, doc) THP_FUNCTION_ENTRY(#name, name, doc),
#define THP_REDUCE_METHOD(name, doc) THP_METHOD_ENTRY(#name, name, doc),

PyMethodDef THPReduce_functions[] = {
    THP_REDUCE_OPS(THP_REDUCE_FUNCTION)
    THP_REDUCE_FUNCTION_ONLY_OPS(THP_REDUCE_FUNCTION)
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_reduce_methods[] = {
    THP_REDUCE_OPS(THP_REDUCE_METHOD)
    {NULL, NULL, 0, NULL},
};

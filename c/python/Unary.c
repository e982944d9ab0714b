/*
 * Unary.c -- elementwise unary math (exp, log, sin, ..., activations, isnan,
 * nan_to_num).  See Note [Function and method from one implementation] in
 * THP.h; the kernels and dtype rules are in c/th/THUnary.c.
 *
 * _trigamma is digamma's derivative (PyTorch's polygamma(1, x)), and
 * _gelu_derivative / _gelu_tanh_derivative are gelu's, for autograd.  Every op has the signature name(input, *, out=None) except
 *   round(input, *, decimals=0, out=None)
 *   gelu(input, *, approximate='none', out=None)
 *   nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None)
 * and the in-place name_(...) takes the same arguments minus out.  All of
 * them go through one parser and one call into the core.
 */
#include "THP.h"

/* Ops with a plain signature; each gets a function and a method. */
#define THP_FORALL_PLAIN_UNARY(_)                                             \
    _(exp) _(exp2) _(expm1) _(log) _(log2) _(log10) _(log1p) _(sqrt)         \
    _(rsqrt) _(reciprocal) _(sin) _(cos) _(tan) _(asin) _(acos) _(atan)      \
    _(asinh) _(acosh) _(atanh)                                                \
    _(sinh) _(cosh) _(tanh) _(sigmoid) _(erf) _(erfc) _(silu) _(frac)        \
    _(floor) _(ceil) _(trunc) _(relu) _(square) _(isnan) _(isinf)            \
    _(isfinite) _(isposinf) _(isneginf) _(lgamma) _(digamma) _(erfinv)      \
    _(sinc) _(_trigamma) _(_gelu_derivative) _(_gelu_tanh_derivative)

/* The ops with extra arguments (parsed by parse_extra_args). */
#define THP_FORALL_SPECIAL_UNARY(_) _(round) _(gelu) _(nan_to_num)

/* The ops PyTorch also has as in-place name_ (no predicates, gelu, silu). */
#define THP_FORALL_INPLACE_UNARY(_)                                           \
    _(exp) _(exp2) _(expm1) _(log) _(log2) _(log10) _(log1p) _(sqrt)         \
    _(rsqrt) _(reciprocal) _(sin) _(cos) _(tan) _(asin) _(acos) _(atan)      \
    _(asinh) _(acosh) _(atanh)                                                \
    _(sinh) _(cosh) _(tanh) _(sigmoid) _(erf) _(erfc) _(frac) _(floor)       \
    _(ceil) _(trunc) _(relu) _(square) _(round) _(nan_to_num) _(lgamma)     \
    _(digamma) _(erfinv) _(sinc)

/* ---- argument parsing --------------------------------------------------- */

/* The argument names after `input`, "out" last (absent for in-place). */
static int
argument_names(THUnaryOp op, const char *const **names, int *max_positional)
{
    static const char *const plain[] = {"out"};
    static const char *const round_names[] = {"decimals", "out"};
    static const char *const gelu_names[] = {"approximate", "out"};
    static const char *const nan_to_num_names[] = {"nan", "posinf", "neginf",
                                                   "out"};
    *max_positional = 0;
    switch (op) {
    case TH_UNARY_round:
        *names = round_names;
        return 2;
    case TH_UNARY_gelu:
        *names = gelu_names;
        return 2;
    case TH_UNARY_nan_to_num:
        *names = nan_to_num_names;
        *max_positional = 3;
        return 4;
    default:
        *names = plain;
        return 1;
    }
}

/* A Python bool, int or float (or anything with __float__ but a string). */
static int
parse_double(PyObject *obj, const char *fname, const char *what,
             double *out)
{
    if (PyUnicode_Check(obj) || !PyNumber_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be float, not %.100s", fname,
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(obj);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* Reads round's decimals (which picks the core op round_decimals),
 * gelu's approximate (gelu or gelu_tanh) and nan_to_num's values. */
static int
parse_extra_args(THUnaryOp *op, PyObject *const *values, THUnaryArgs *args)
{
    const char *fname = THUnary_name(*op);
    if (*op == TH_UNARY_round && values[0] != NULL) {
        if (PyBool_Check(values[0])) {
            PyErr_SetString(PyExc_TypeError,
                            "round(): argument 'decimals' must be int, not "
                            "bool");
            return -1;
        }
        if (THPUtils_unpackLong(values[0], fname, "decimals",
                                &args->decimals)
            < 0) {
            return -1;
        }
        /* PyTorch: passing decimals at all, even 0, selects this form */
        *op = TH_UNARY_round_decimals;
    }
    if (*op == TH_UNARY_gelu && values[0] != NULL) {
        if (!PyUnicode_Check(values[0])) {
            PyErr_Format(PyExc_TypeError,
                         "gelu(): argument 'approximate' must be str, not "
                         "%.100s",
                         Py_TYPE(values[0])->tp_name);
            return -1;
        }
        if (PyUnicode_CompareWithASCIIString(values[0], "tanh") == 0) {
            *op = TH_UNARY_gelu_tanh;
        }
        else if (PyUnicode_CompareWithASCIIString(values[0], "none") != 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "approximate argument must be either none or "
                            "tanh.");
            return -1;
        }
    }
    if (*op == TH_UNARY_nan_to_num) {
        args->has_posinf = values[1] != NULL && values[1] != Py_None;
        args->has_neginf = values[2] != NULL && values[2] != Py_None;
        if ((values[0] != NULL
             && parse_double(values[0], fname, "nan", &args->nan) < 0)
            || (args->has_posinf
                && parse_double(values[1], fname, "posinf", &args->posinf)
                       < 0)
            || (args->has_neginf
                && parse_double(values[2], fname, "neginf", &args->neginf)
                       < 0)) {
            return -1;
        }
    }
    return 0;
}

/* ---- the one implementation -------------------------------------------- */

/* Runs the core call with the GIL released when the tensor is large
 * enough to go parallel (the core touches no Python object; a Python
 * allocator takes the GIL itself). */
static THTensor *
call_core(THUnaryOp op, THTensor *input, THTensor *out,
          const THUnaryArgs *args, int *status)
{
    THTensor *result = NULL;
    bool release_gil = input->numel >= TH_PARALLEL_GRAIN;
    PyThreadState *saved = release_gil ? PyEval_SaveThread() : NULL;
    if (out != NULL) {
        *status = THTensor_unaryOut(op, out, input, args);
    }
    else {
        result = THTensor_newUnary(op, input, args);
        *status = result == NULL ? -1 : 0;
    }
    if (release_gil) {
        PyEval_RestoreThread(saved);
    }
    return result;
}

/* op(self, ...) for the function, the method and (inplace) the name_
 * method.  Returns the new tensor, or `out` / `self` (new references). */
static PyObject *
unary_dispatch(THUnaryOp op, PyObject *self, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, bool inplace)
{
    const char *const *names;
    int max_positional;
    int nnames = argument_names(op, &names, &max_positional);
    if (inplace) {
        nnames--; /* no out= */
    }
    PyObject *values[4];
    if (THPUtils_parseArgs(THUnary_name(op), args, nargs, kwnames, names,
                           nnames, max_positional, values)
        < 0) {
        return NULL;
    }
    THUnaryArgs core_args = THUnaryArgs_default(THPDtype_defaultFloat());
    if (parse_extra_args(&op, values, &core_args) < 0) {
        return NULL;
    }
    PyObject *out = inplace ? self : values[nnames - 1];
    if (out == Py_None) {
        out = NULL;
    }
    if (out != NULL && !THPVariable_Check(out)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'out' must be Tensor, not %.100s",
                     THUnary_name(op), Py_TYPE(out)->tp_name);
        return NULL;
    }
    int status;
    THTensor *result =
        call_core(op, THPVariable_Unpack(self),
                  out == NULL ? NULL : THPVariable_Unpack(out), &core_args,
                  &status);
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    if (out != NULL) {
        Py_INCREF(out); /* the returned reference */
        return out;
    }
    return THPVariable_Wrap(result);
}

/* name_impl and name__impl for every op, then THP_DEFINE_OP's two entry
 * points for each. */
#define THP_DEFINE_UNARY(name)                                                \
    static PyObject *name##_impl(PyObject *input, PyObject *const *args,     \
                                 Py_ssize_t nargs, PyObject *kwnames)        \
    {                                                                        \
        return unary_dispatch(TH_UNARY_##name, input, args, nargs, kwnames,  \
                              false);                                        \
    }                                                                        \
    THP_DEFINE_OP(name)
#define THP_DEFINE_UNARY_INPLACE(name)                                        \
    static PyObject *name##__impl(PyObject *input, PyObject *const *args,    \
                                  Py_ssize_t nargs, PyObject *kwnames)       \
    {                                                                        \
        return unary_dispatch(TH_UNARY_##name, input, args, nargs, kwnames,  \
                              true);                                         \
    }                                                                        \
    THP_DEFINE_OP(name##_)

THP_FORALL_PLAIN_UNARY(THP_DEFINE_UNARY)
THP_FORALL_SPECIAL_UNARY(THP_DEFINE_UNARY)
THP_FORALL_INPLACE_UNARY(THP_DEFINE_UNARY_INPLACE)

/* ---- tables ------------------------------------------------------------- */

#define THP_UNARY_FUNCTION(name) THP_FUNCTION_ENTRY(#name, name, NULL),
#define THP_UNARY_INPLACE_FUNCTION(name) \
    THP_FUNCTION_ENTRY(#name "_", name##_, NULL),
#define THP_UNARY_METHOD(name) THP_METHOD_ENTRY(#name, name, NULL),
#define THP_UNARY_INPLACE_METHOD(name) \
    THP_METHOD_ENTRY(#name "_", name##_, NULL),

PyMethodDef THPUnary_functions[] = {
    THP_FORALL_PLAIN_UNARY(THP_UNARY_FUNCTION)
    THP_FORALL_SPECIAL_UNARY(THP_UNARY_FUNCTION)
    THP_FORALL_INPLACE_UNARY(THP_UNARY_INPLACE_FUNCTION)
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_unary_methods[] = {
    THP_FORALL_PLAIN_UNARY(THP_UNARY_METHOD)
    THP_FORALL_SPECIAL_UNARY(THP_UNARY_METHOD)
    THP_FORALL_INPLACE_UNARY(THP_UNARY_INPLACE_METHOD)
    {NULL, NULL, 0, NULL},
};

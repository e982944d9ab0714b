/*
 * Utils.c -- the one place core errors become Python exceptions, and the
 * small argument parsers every wrapper uses.
 */
#include "THP.h"

PyObject *
THPUtils_setErrorFromTH(void)
{
    THErrorKind kind = THError_kind();
    if (kind == TH_ERR_EXTERNAL && PyErr_Occurred()) {
        THError_clear(); /* the Python exception already says it all */
        return NULL;
    }
    PyObject *type;
    switch (kind) {
    case TH_ERR_VALUE: type = PyExc_ValueError; break;
    case TH_ERR_TYPE: type = PyExc_TypeError; break;
    case TH_ERR_INDEX: type = PyExc_IndexError; break;
    case TH_ERR_MEMORY: type = PyExc_MemoryError; break;
    default: type = PyExc_RuntimeError; break;
    }
    if (kind == TH_ERR_NONE) {
        PyErr_SetString(PyExc_SystemError,
                        "ember core failed without an error message");
    }
    else {
        PyErr_SetString(type, THError_message());
    }
    THError_clear();
    return NULL;
}

int
THPUtils_setErrorFromTH_int(void)
{
    THPUtils_setErrorFromTH();
    return -1;
}

int
THPUtils_setOutDtypeError(THDtype expected, THDtype got)
{
    PyErr_Format(PyExc_RuntimeError,
                 "Expected out tensor to have dtype %s, but got %s instead",
                 THDtype_cppTypeName(expected), THDtype_cppTypeName(got));
    return -1;
}

int
THPUtils_parseOut(const char *fname, PyObject *obj, THTensor **out)
{
    *out = NULL;
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    if (!THPVariable_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'out' must be Tensor, not %.100s", fname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = THPVariable_Unpack(obj);
    return 0;
}

int
THPUtils_parseArgs(const char *fname, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames,
                   const char *const *names, int nnames, int max_positional,
                   PyObject **out)
{
    for (int i = 0; i < nnames; i++) {
        out[i] = NULL;
    }
    if (nargs > max_positional) {
        PyErr_Format(PyExc_TypeError,
                     "%s() takes at most %d positional argument%s (%zd "
                     "given)",
                     fname, max_positional, max_positional == 1 ? "" : "s",
                     nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        out[i] = args[i];
    }
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k); /* borrowed */
        int slot = -1;
        for (int i = 0; i < nnames; i++) {
            if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0) {
                slot = i;
                break;
            }
        }
        if (slot < 0) {
            PyErr_Format(PyExc_TypeError,
                         "%s() got an unexpected keyword argument '%U'",
                         fname, key);
            return -1;
        }
        if (out[slot] != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() got multiple values for argument '%s'", fname,
                         names[slot]);
            return -1;
        }
        out[slot] = args[nargs + k];
    }
    return 0;
}

/* The value of a non-int `obj` through __index__ (which may run Python),
 * after refusing what PyTorch refuses.  0, or -1 with an exception. */
static int
index_value(PyObject *obj, const char *fname, const char *what,
            long long *value, int *overflow)
{
    /* bool is an int subclass, but PyTorch refuses it where sizes go:
     * accept it like Python does for indices. */
    if (!PyLong_Check(obj) && !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be int, not %s", fname, what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (THPVariable_Check(obj)) {
        THTensor *t = THPVariable_Unpack(obj);
        if (t->numel != 1 || !THDtype_isIntegral(t->dtype, false)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' must be int, not a tensor of "
                         "%lld elements of dtype %s",
                         fname, what, (long long)t->numel,
                         THDtype_name(t->dtype));
            return -1;
        }
    }
    PyObject *index = PyNumber_Index(obj);
    if (index == NULL) {
        return -1;
    }
    *value = PyLong_AsLongLongAndOverflow(index, overflow);
    Py_DECREF(index);
    return 0;
}

int
THPUtils_unpackLong(PyObject *obj, const char *fname, const char *what,
                    int64_t *out)
{
    int overflow = 0;
    long long value;
    if (THPUtils_smallInt(obj, out)) {
        return 0;
    }
    if (PyLong_CheckExact(obj)) { /* the common case: nothing to refuse or run */
        value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    }
    else if (index_value(obj, fname, what, &value, &overflow) < 0) {
        return -1;
    }
    if (overflow) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Overflow when unpacking long for argument '%s'",
                     fname, what);
        return -1;
    }
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = value;
    return 0;
}

/* One dim of a size, the `position`-th: an int or an object with
 * __index__ (a float or a bool is refused, as by PyTorch).  0 or -1. */
static int
parse_size_item(const char *fname, PyObject *item, Py_ssize_t position,
                int64_t *size)
{
    /* A small exact int (the common case) is read in place. */
    if (THPUtils_smallInt(item, size)) {
        return 0;
    }
    if (!PyLong_CheckExact(item) && (PyFloat_Check(item) || PyBool_Check(item))) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'size' must be tuple of ints, but "
                     "found element of type %s at pos %zd",
                     fname, Py_TYPE(item)->tp_name, position);
        return -1;
    }
    return THPUtils_unpackLong(item, fname, "size", size);
}

int
THPUtils_parseSizeSequence(const char *fname, PyObject *seq, int64_t *sizes)
{
    if (!PyTuple_Check(seq) && !PyList_Check(seq)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'size' must be tuple of ints, not %s",
                     fname, Py_TYPE(seq)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > TH_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): ember tensors have at most %d dimensions, got "
                     "%zd",
                     fname, TH_MAX_DIMS, n);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq); /* borrowed */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_size_item(fname, items[i], i, &sizes[i]) < 0) {
            return -1;
        }
    }
    return (int)n;
}

int
THPUtils_parseSizes(const char *fname, PyObject *const *args,
                    Py_ssize_t nargs, int64_t *sizes)
{
    if (nargs == 1 && (PyTuple_Check(args[0]) || PyList_Check(args[0]))) {
        return THPUtils_parseSizeSequence(fname, args[0], sizes);
    }
    if (nargs > TH_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): ember tensors have at most %d dimensions, got "
                     "%zd",
                     fname, TH_MAX_DIMS, nargs);
        return -1;
    }
    /* Separate arguments: view(2, 3).  Reuse the sequence parser on a
     * tuple-like view of args without building a tuple. */
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (parse_size_item(fname, args[i], i, &sizes[i]) < 0) {
            return -1;
        }
    }
    return (int)nargs;
}

int
THPUtils_parseScalar(PyObject *obj, THScalar *out)
{
    if (PyBool_Check(obj)) {
        *out = THScalar_fromBool(obj == Py_True);
        return 0;
    }
    if (PyLong_Check(obj)) {
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (overflow) { /* PyTorch's error for an int Scalar argument */
            PyErr_SetString(PyExc_OverflowError, "int too big to convert");
            return -1;
        }
        *out = THScalar_fromInt(value);
        return 0;
    }
    if (PyFloat_Check(obj)) {
        *out = THScalar_fromDouble(PyFloat_AS_DOUBLE(obj));
        return 0;
    }
    if (THPVariable_Check(obj)) {
        THTensor *t = THPVariable_Unpack(obj);
        if (t->numel != 1) {
            PyErr_Format(PyExc_RuntimeError,
                         "a Tensor with %lld elements cannot be converted "
                         "to Scalar",
                         (long long)t->numel);
            return -1;
        }
        if (THPUtils_checkOnHost(t, "a Scalar argument") < 0) {
            return -1;
        }
        PyObject *item = THPUtils_scalarToPython(THTensor_data(t), t->dtype);
        if (item == NULL) {
            return -1;
        }
        int status = THPUtils_parseScalar(item, out);
        Py_DECREF(item);
        return status;
    }
    /* NumPy scalars and other numbers: integers by __index__, the rest by
     * __float__. */
    if (PyIndex_Check(obj)) {
        PyObject *index = PyNumber_Index(obj);
        if (index == NULL) {
            return -1;
        }
        int status = THPUtils_parseScalar(index, out);
        Py_DECREF(index);
        return status;
    }
    if (PyNumber_Check(obj) && Py_TYPE(obj)->tp_as_number->nb_float) {
        double value = PyFloat_AsDouble(obj);
        if (value == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        *out = THScalar_fromDouble(value);
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "expected a number (bool, int or float), got %s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

#define THP_SCALAR_TO_PYTHON(Name, ctype, py)                              \
    case TH_##Name: {                                                      \
        ctype value;                                                       \
        memcpy(&value, data, sizeof(value));                               \
        if (dtype == TH_Bool) {                                            \
            return PyBool_FromLong(TH_TO_FLOAT_##Name(value) != 0);        \
        }                                                                  \
        if (THDtype_isFloating(dtype)) {                                   \
            return PyFloat_FromDouble((double)TH_TO_FLOAT_##Name(value));  \
        }                                                                  \
        return PyLong_FromLongLong((long long)TH_TO_FLOAT_##Name(value));  \
    }

PyObject *
THPUtils_scalarToPython(const char *data, THDtype dtype)
{
    switch (dtype) {
        TH_FORALL_DTYPES(THP_SCALAR_TO_PYTHON)
    default:
        break;
    }
    PyErr_SetString(PyExc_SystemError, "invalid dtype");
    return NULL;
}
#undef THP_SCALAR_TO_PYTHON

int
THPUtils_checkOnHost(const THTensor *t, const char *what)
{
    if (t->storage->device == TH_DEVICE_CPU) {
        return 0;
    }
    PyErr_Format(PyExc_RuntimeError,
                 "%s must be a CPU tensor here, but it is on cuda:0: its "
                 "memory cannot be read on the host (copy it with .cpu() "
                 "first)",
                 what);
    return -1;
}

static PyObject *
check_op_input(const char *fname, PyObject *input)
{
    if (!THPVariable_Check(input)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'input' (position 1) must be Tensor, "
                     "not %.100s",
                     fname, Py_TYPE(input)->tp_name);
        return NULL;
    }
    return input;
}

/* The rare call ember.op(input=t, ...): moves `input` out of the keywords
 * (vectorcall keeps keyword values after the positionals, named by
 * kwnames) and calls impl with the others. */
static PyObject *
call_with_input_keyword(const char *fname, THPOpImpl impl,
                        PyObject *const *args, PyObject *kwnames)
{
    enum { MAX_KEYWORDS = 16 };
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    Py_ssize_t at = -1;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k),
                                             "input") == 0) {
            at = k;
        }
    }
    if (at < 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s() missing required argument 'input' (pos 1)", fname);
        return NULL;
    }
    if (nkw > MAX_KEYWORDS) {
        PyErr_Format(PyExc_TypeError, "%s() got too many keyword arguments",
                     fname);
        return NULL;
    }
    PyObject *input = check_op_input(fname, args[at]);
    if (input == NULL) {
        return NULL;
    }
    PyObject *rest[MAX_KEYWORDS]; /* borrowed */
    PyObject *rest_names = PyTuple_New(nkw - 1);
    if (rest_names == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0, j = 0; k < nkw; k++) {
        if (k != at) {
            rest[j] = args[k];
            PyObject *name = PyTuple_GET_ITEM(kwnames, k);
            PyTuple_SET_ITEM(rest_names, j, Py_NewRef(name));
            j++;
        }
    }
    PyObject *result = impl(input, rest, 0, nkw > 1 ? rest_names : NULL);
    Py_DECREF(rest_names);
    return result;
}

PyObject *
THPUtils_checkOpInput(const char *fname, PyObject *const *args,
                      Py_ssize_t nargs)
{
    if (nargs < 1) {
        PyErr_Format(PyExc_TypeError,
                     "%s() missing required argument 'input' (pos 1)", fname);
        return NULL;
    }
    return check_op_input(fname, args[0]);
}

PyObject *
THPUtils_callOpFunction(const char *fname, THPOpImpl impl,
                        PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    if (nargs < 1) {
        return call_with_input_keyword(fname, impl, args, kwnames);
    }
    if (check_op_input(fname, args[0]) == NULL) {
        return NULL;
    }
    return impl(args[0], args + 1, nargs - 1, kwnames);
}

void *
THPUtils_mallocArray(int64_t count, size_t itemsize)
{
    size_t nbytes;
    void *block = TH_arrayNbytes(count, itemsize, &nbytes)
                      ? PyMem_Malloc(nbytes > 0 ? nbytes : 1)
                      : NULL;
    if (block == NULL) {
        PyErr_NoMemory();
    }
    return block;
}

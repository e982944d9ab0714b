/*
 * IndexOps.c -- indexing operators (index_select, gather, scatter,
 * index_add, index_fill, index_copy, masked_fill, masked_select, nonzero,
 * argwhere, take, put, index_put): argument parsing around the kernels of
 * THIndex.c.
 * See Note [Function and method from one implementation] in THP.h.
 *
 * Each out-of-place operator that PyTorch defines by its in-place twin
 * (scatter, index_add, masked_fill, ...) runs the twin on a clone.
 */
#include "THP.h"

/* In-place operators that PyTorch has as tensor methods only
 * (t.scatter_(...), no torch.scatter_). */
#define THP_DEFINE_METHOD_ONLY(name)                                         \
    static PyObject *THPMethod_##name(PyObject *self, PyObject *const *args, \
                                      Py_ssize_t nargs, PyObject *kwnames)   \
    {                                                                        \
        return name##_impl(self, args, nargs, kwnames);                      \
    }

/* ---- argument helpers ---------------------------------------------------------- */

static int
require_args(const char *fname, PyObject *const *objs,
             const char *const *names, int nrequired)
{
    for (int i = 0; i < nrequired; i++) {
        if (objs[i] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() missing required argument '%s' (pos %d)",
                         fname, names[i], i + 2);
            return -1;
        }
    }
    return 0;
}

/* The tensor in argument `name` (borrowed), or NULL with TypeError. */
static THTensor *
tensor_arg(const char *fname, const char *name, int position, PyObject *obj)
{
    if (!THPVariable_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' (position %d) must be Tensor, not "
                     "%.100s",
                     fname, name, position, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return THPVariable_Unpack(obj);
}

/* A fill value: a number, or a 0-d tensor (PyTorch refuses other
 * tensors, even of one element). */
static int
fill_value_arg(const char *fname, PyObject *obj, THScalar *value)
{
    if (THPVariable_Check(obj) && THPVariable_Unpack(obj)->ndim != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s only supports a 0-dimensional value tensor, but got "
                     "tensor with %d dimension(s).",
                     fname, THPVariable_Unpack(obj)->ndim);
        return -1;
    }
    return THPUtils_parseScalar(obj, value);
}

static int
bool_arg(const char *fname, const char *name, PyObject *obj, bool *out)
{
    if (obj == NULL) {
        return 0;
    }
    if (!PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be bool, not "
                     "%.100s",
                     fname, name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = obj == Py_True;
    return 0;
}

/* Kernels on large tensors run without the GIL (the core never touches
 * Python; a Python allocator takes the GIL itself). */
#define THP_LARGE(numel) ((numel) >= TH_PARALLEL_GRAIN)
#define THP_RUN_MAYBE_WITHOUT_GIL(large, statement) \
    THP_RUN_WITHOUT_GIL_IF(large, statement)

/* Note [out= of the gathers]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * index_select, gather, take, masked_select and nonzero store their own
 * dtype only (the input's; int64 for nonzero's positions): an out= of
 * another dtype is a RuntimeError, as in PyTorch, in each operator's own
 * PyTorch words.  It is checked with the arguments, before the kernel
 * runs and before out's shape, which PyTorch checks only later (it would
 * resize out; ember raises instead, once the result's shape is known). */
typedef int (*OutDtypeError)(THDtype result, THDtype out);

static int
same_scalar_type_error(const char *fname)
{
    PyErr_Format(PyExc_RuntimeError,
                 "%s(): self and result must have the same scalar type",
                 fname);
    return -1;
}

static int
index_select_dtype_error(THDtype result, THDtype out)
{
    (void)result, (void)out;
    return same_scalar_type_error("index_select");
}

static int
masked_select_dtype_error(THDtype result, THDtype out)
{
    (void)result, (void)out;
    return same_scalar_type_error("masked_select");
}

static int
take_dtype_error(THDtype result, THDtype out)
{
    PyErr_Format(PyExc_RuntimeError,
                 "take(): self and out expected to have the same dtype, but "
                 "got self.dtype = %s and out.dtype = %s",
                 THDtype_scalarTypeName(result), THDtype_scalarTypeName(out));
    return -1;
}

static int
nonzero_dtype_error(THDtype result, THDtype out)
{
    /* sic: PyTorch's message has no space before the second type */
    PyErr_Format(PyExc_RuntimeError,
                 "nonzero: Expected out tensor to have scalar type %s but "
                 "got scalar type%s",
                 THDtype_scalarTypeName(result), THDtype_scalarTypeName(out));
    return -1;
}

/* Checks out= (NULL/None: absent) against a result of `dtype`, raising
 * `dtype_error` on a mismatch (Note [out= of the gathers]). */
static int
check_out_dtype(const char *fname, PyObject *out, THDtype dtype,
                OutDtypeError dtype_error)
{
    THTensor *target;
    if (THPUtils_parseOut(fname, out, &target) < 0) {
        return -1;
    }
    return target == NULL || target->dtype == dtype
               ? 0
               : dtype_error(dtype, target->dtype);
}

/* Hands a fresh result back, or copies it into out= (its dtype checked
 * by check_out_dtype) when one was given.  Steals `result` (NULL: the
 * core's error).  An out= of another shape is an error and is left as it
 * was. */
static PyObject *
finish_with_out(const char *fname, THTensor *result, PyObject *out)
{
    if (result == NULL) {
        return THPUtils_setErrorFromTH();
    }
    if (out == NULL || out == Py_None) {
        return THPVariable_Wrap(result);
    }
    THTensor *dst = THPVariable_Unpack(out);
    if (dst->ndim != result->ndim
        || memcmp(dst->sizes, result->sizes,
                  sizeof(int64_t) * (size_t)dst->ndim)
               != 0) {
        PyObject *want = THPSize_New(result->ndim, result->sizes);
        PyObject *got = THPSize_New(dst->ndim, dst->sizes);
        if (want != NULL && got != NULL) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): expected out tensor of shape %S, but got %S "
                         "(ember does not resize out= tensors)",
                         fname, want, got);
        }
        Py_XDECREF(want);
        Py_XDECREF(got);
    }
    else if (THTensor_copy(dst, result) < 0) {
        THPUtils_setErrorFromTH();
    }
    else {
        THTensor_release(result);
        Py_INCREF(out); /* the returned reference */
        return out;
    }
    THTensor_release(result);
    return NULL;
}

/* A writable copy of `input` for an out-of-place twin of an in-place op,
 * shaped `ndim`/`sizes` (input broadcast to them), with a version counter
 * of its own that starts at 0 as for any new tensor. */
static THTensor *
new_result_copy(THTensor *input, int ndim, const int64_t *sizes)
{
    THTensor *wide = THTensor_newExpand(input, ndim, sizes);
    if (wide == NULL) {
        return NULL;
    }
    THTensor *copy = THTensor_newClone(wide);
    THTensor_release(wide);
    return copy;
}

static THTensor *
new_result_clone(THTensor *input)
{
    return new_result_copy(input, input->ndim, input->sizes);
}

/* Wraps the result of an out-of-place op that ran in place on `result`
 * (which it steals); status < 0: the core's error. */
static PyObject *
finish_copy(THTensor *result, int status)
{
    if (status < 0) {
        THTensor_release(result);
        return THPUtils_setErrorFromTH();
    }
    /* The in-place step bumped the copy's own counter: a new tensor
     * starts at version 0 (Note [Version counter]). */
    result->version_counter->version = 0;
    return THPVariable_Wrap(result);
}

/* Returns self (a new reference) after an in-place op. */
static PyObject *
finish_inplace(PyObject *self, int status)
{
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_INCREF(self); /* the returned reference */
    return self;
}

/* Note [Parse before the clone]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * scatter, scatter_add, index_add, index_fill, index_copy, put and
 * index_put share one body
 * with their in-place twins, which writes into a target.  The out-of-place
 * form's target is a clone of the input, made only after every argument
 * has been parsed and checked: a bad argument costs no copy of a large
 * input, and the parsing (which runs Python) never races the clone. */
typedef struct {
    THTensor *input; /* borrowed: the tensor the op was called on */
    bool inplace;
    THTensor *target; /* input itself, or an owned clone; NULL until chosen */
} IndexOpTarget;

/* Chooses the target once the arguments are good; -1 with an exception. */
static int
choose_target(IndexOpTarget *t)
{
    t->target = t->inplace ? t->input : new_result_clone(t->input);
    return t->target == NULL ? THPUtils_setErrorFromTH_int() : 0;
}

/* What the op returns: self in place, else the clone; status < 0 means
 * the body failed with an exception set. */
static PyObject *
finish_target(PyObject *self, IndexOpTarget *t, int status)
{
    if (t->inplace) {
        if (status < 0) {
            return NULL;
        }
        Py_INCREF(self); /* the returned reference */
        return self;
    }
    if (status < 0) {
        THTensor_release(t->target); /* NULL when never chosen */
        return NULL;
    }
    return finish_copy(t->target, 0);
}

/* The in-place and out-of-place impls of an op whose body is
 * name##_into(IndexOpTarget *, args, nargs, kwnames). */
#define THP_TARGET_IMPLS(name, inplace_name)                                \
    static PyObject *inplace_name##_impl(PyObject *input,                   \
                                         PyObject *const *args,             \
                                         Py_ssize_t nargs,                  \
                                         PyObject *kwnames)                 \
    {                                                                       \
        IndexOpTarget t = {THPVariable_Unpack(input), true, NULL};          \
        return finish_target(input, &t,                                     \
                             name##_into(&t, args, nargs, kwnames));        \
    }                                                                       \
    static PyObject *name##_impl(PyObject *input, PyObject *const *args,    \
                                 Py_ssize_t nargs, PyObject *kwnames)       \
    {                                                                       \
        IndexOpTarget t = {THPVariable_Unpack(input), false, NULL};         \
        return finish_target(input, &t,                                     \
                             name##_into(&t, args, nargs, kwnames));        \
    }

/* ---- index_select, gather, take -------------------------------------------------- */

static PyObject *
index_select_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index", "out"};
    PyObject *objs[3];
    int64_t dim;
    THTensor *index;
    if (THPUtils_parseArgs("index_select", args, nargs, kwnames, names, 3, 2,
                           objs)
            < 0
        || require_args("index_select", objs, names, 2) < 0
        || THPUtils_unpackLong(objs[0], "index_select", "dim", &dim) < 0
        || (index = tensor_arg("index_select", "index", 3, objs[1]))
               == NULL
        || check_out_dtype("index_select", objs[2],
                           THPVariable_Unpack(input)->dtype,
                           index_select_dtype_error)
               < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *result;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(self->numel + index->numel),
                              result = THTensor_newIndexSelect(self, dim,
                                                               index));
    return finish_with_out("index_select", result, objs[2]);
}
THP_DEFINE_OP(index_select)

static PyObject *
gather_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index", "sparse_grad", "out"};
    PyObject *objs[4];
    int64_t dim;
    bool sparse_grad = false;
    THTensor *index;
    if (THPUtils_parseArgs("gather", args, nargs, kwnames, names, 4, 2, objs)
            < 0
        || require_args("gather", objs, names, 2) < 0
        || THPUtils_unpackLong(objs[0], "gather", "dim", &dim) < 0
        || (index = tensor_arg("gather", "index", 3, objs[1])) == NULL
        || bool_arg("gather", "sparse_grad", objs[2], &sparse_grad) < 0
        || check_out_dtype("gather", objs[3], THPVariable_Unpack(input)->dtype,
                           THPUtils_setOutDtypeError)
               < 0) {
        return NULL;
    }
    THTensor *result;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(index->numel),
                              result = THTensor_newGather(
                                  THPVariable_Unpack(input), dim, index));
    return finish_with_out("gather", result, objs[3]);
}
THP_DEFINE_OP(gather)

static PyObject *
take_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    static const char *const names[] = {"index", "out"};
    PyObject *objs[2];
    THTensor *index;
    if (THPUtils_parseArgs("take", args, nargs, kwnames, names, 2, 1, objs)
            < 0
        || require_args("take", objs, names, 1) < 0
        || (index = tensor_arg("take", "index", 2, objs[0])) == NULL
        || check_out_dtype("take", objs[1], THPVariable_Unpack(input)->dtype,
                           take_dtype_error)
               < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *result;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(self->numel + index->numel),
                              result = THTensor_newTake(self, index));
    return finish_with_out("take", result, objs[1]);
}
THP_DEFINE_OP(take)

/* ---- scatter and scatter_add ---------------------------------------------------- */

static int
parse_reduce(PyObject *obj, THScatterReduce *reduce)
{
    *reduce = TH_SCATTER_ASSIGN;
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        if (PyUnicode_CompareWithASCIIString(obj, "add") == 0) {
            *reduce = TH_SCATTER_ADD;
            return 0;
        }
        if (PyUnicode_CompareWithASCIIString(obj, "multiply") == 0) {
            *reduce = TH_SCATTER_MULTIPLY;
            return 0;
        }
    }
    PyErr_SetString(PyExc_RuntimeError,
                    "reduce argument must be either add or multiply.");
    return -1;
}

/* scatter(input, dim, index, src | value, *, reduce=None), into the
 * target (Note [Parse before the clone]). */
static int
scatter_into(IndexOpTarget *t, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index", "src", "value",
                                        "reduce"};
    PyObject *objs[5];
    int64_t dim;
    THTensor *index;
    THScatterReduce reduce;
    if (THPUtils_parseArgs("scatter", args, nargs, kwnames, names, 5, 3,
                           objs)
            < 0
        || require_args("scatter", objs, names, 2) < 0
        || THPUtils_unpackLong(objs[0], "scatter", "dim", &dim) < 0
        || (index = tensor_arg("scatter", "index", 3, objs[1])) == NULL
        || parse_reduce(objs[4], &reduce) < 0) {
        return -1;
    }
    /* A third positional argument is src when it is a tensor. */
    if (objs[2] != NULL && !THPVariable_Check(objs[2]) && objs[3] == NULL
        && nargs == 3) {
        objs[3] = objs[2];
        objs[2] = NULL;
    }
    if ((objs[2] == NULL) == (objs[3] == NULL)) {
        PyErr_SetString(PyExc_TypeError,
                        "scatter() needs exactly one of 'src' (a Tensor) or "
                        "'value' (a number)");
        return -1;
    }
    int status;
    THTensor *src = NULL;
    THScalar value;
    if (objs[2] != NULL
            ? (src = tensor_arg("scatter", "src", 4, objs[2])) == NULL
            : THPUtils_parseScalar(objs[3], &value) < 0) {
        return -1;
    }
    if (choose_target(t) < 0) { /* Note [Parse before the clone] */
        return -1;
    }
    if (src != NULL) {
        THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(index->numel),
                                  status = THTensor_scatter(t->target, dim,
                                                            index, src,
                                                            reduce));
    }
    else {
        THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(index->numel),
                                  status = THTensor_scatterValue(
                                      t->target, dim, index, value, reduce));
    }
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}


THP_TARGET_IMPLS(scatter, scatter_)
THP_DEFINE_METHOD_ONLY(scatter_)
THP_DEFINE_OP(scatter)

/* The arguments (dim, index, <tensor>) of scatter_add and index_copy;
 * names[2] is the tensor's name.  0, or -1 with a TypeError. */
static int
parse_dim_index_tensor(const char *fname, const char *const *names,
                       PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, int64_t *dim, THTensor **index,
                       THTensor **tensor)
{
    PyObject *objs[3];
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 3, 3, objs) < 0
        || require_args(fname, objs, names, 3) < 0
        || THPUtils_unpackLong(objs[0], fname, "dim", dim) < 0
        || (*index = tensor_arg(fname, "index", 3, objs[1])) == NULL
        || (*tensor = tensor_arg(fname, names[2], 4, objs[2])) == NULL) {
        return -1;
    }
    return 0;
}

static int
scatter_add_into(IndexOpTarget *t, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index", "src"};
    int64_t dim;
    THTensor *index, *src;
    if (parse_dim_index_tensor("scatter_add", names, args, nargs, kwnames,
                               &dim, &index, &src)
        < 0) {
        return -1;
    }
    if (choose_target(t) < 0) { /* Note [Parse before the clone] */
        return -1;
    }
    int status;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(index->numel),
                              status = THTensor_scatter(t->target, dim, index,
                                                        src,
                                                        TH_SCATTER_ADD));
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}


THP_TARGET_IMPLS(scatter_add, scatter_add_)
THP_DEFINE_METHOD_ONLY(scatter_add_)
THP_DEFINE_OP(scatter_add)

/* ---- scatter_reduce ------------------------------------------------------------- */

static int
parse_reduction(PyObject *obj, THScatterReduce *reduce)
{
    static const struct {
        const char *name;
        THScatterReduce reduce;
    } reductions[] = {
        {"sum", TH_SCATTER_ADD},    {"prod", TH_SCATTER_MULTIPLY},
        {"mean", TH_SCATTER_MEAN},  {"amax", TH_SCATTER_AMAX},
        {"amin", TH_SCATTER_AMIN},
    };
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "scatter_reduce(): argument 'reduce' must be str, not "
                     "%.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    for (size_t k = 0; k < sizeof(reductions) / sizeof(reductions[0]); k++) {
        if (PyUnicode_CompareWithASCIIString(obj, reductions[k].name) == 0) {
            *reduce = reductions[k].reduce;
            return 0;
        }
    }
    PyErr_Format(PyExc_RuntimeError,
                 "reduce argument must be either sum, prod, mean, amax or "
                 "amin, got %U",
                 obj);
    return -1;
}

/* scatter_reduce(input, dim, index, src, reduce, *, include_self=True),
 * into the target (Note [Parse before the clone]). */
static int
scatter_reduce_into(IndexOpTarget *t, PyObject *const *args,
                    Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index", "src", "reduce",
                                        "include_self"};
    PyObject *objs[5];
    int64_t dim;
    THTensor *index, *src;
    THScatterReduce reduce;
    int include_self = 1;
    if (THPUtils_parseArgs("scatter_reduce", args, nargs, kwnames, names, 5,
                           4, objs)
            < 0
        || require_args("scatter_reduce", objs, names, 4) < 0
        || THPUtils_unpackLong(objs[0], "scatter_reduce", "dim", &dim) < 0
        || (index = tensor_arg("scatter_reduce", "index", 3, objs[1])) == NULL
        || (src = tensor_arg("scatter_reduce", "src", 4, objs[2])) == NULL
        || parse_reduction(objs[3], &reduce) < 0
        || (objs[4] != NULL && (include_self = PyObject_IsTrue(objs[4])) < 0)) {
        return -1;
    }
    if (choose_target(t) < 0) { /* Note [Parse before the clone] */
        return -1;
    }
    int status;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(index->numel),
                              status = THTensor_scatterReduce(
                                  t->target, dim, index, src, reduce,
                                  include_self != 0));
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}

THP_TARGET_IMPLS(scatter_reduce, scatter_reduce_)
THP_DEFINE_METHOD_ONLY(scatter_reduce_)
THP_DEFINE_OP(scatter_reduce)

/* ---- index_add, index_fill ------------------------------------------------------ */

static int
index_add_into(IndexOpTarget *t, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index", "source", "alpha"};
    PyObject *objs[4];
    int64_t dim;
    THTensor *index, *source;
    THScalar alpha = THScalar_fromInt(1);
    if (THPUtils_parseArgs("index_add", args, nargs, kwnames, names, 4, 3,
                           objs)
            < 0
        || require_args("index_add", objs, names, 3) < 0
        || THPUtils_unpackLong(objs[0], "index_add", "dim", &dim) < 0
        || (index = tensor_arg("index_add", "index", 3, objs[1])) == NULL
        || (source = tensor_arg("index_add", "source", 4, objs[2])) == NULL
        || (objs[3] != NULL && THPUtils_parseScalar(objs[3], &alpha) < 0)) {
        return -1;
    }
    if (choose_target(t) < 0) { /* Note [Parse before the clone] */
        return -1;
    }
    int status;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(source->numel),
                              status = THTensor_indexAdd(t->target, dim, index,
                                                         source, alpha));
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}


THP_TARGET_IMPLS(index_add, index_add_)
THP_DEFINE_METHOD_ONLY(index_add_)
THP_DEFINE_OP(index_add)

static int
index_fill_into(IndexOpTarget *t, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index", "value"};
    PyObject *objs[3];
    int64_t dim;
    THTensor *index;
    THScalar value;
    if (THPUtils_parseArgs("index_fill", args, nargs, kwnames, names, 3, 3,
                           objs)
            < 0
        || require_args("index_fill", objs, names, 3) < 0
        || THPUtils_unpackLong(objs[0], "index_fill", "dim", &dim) < 0
        || (index = tensor_arg("index_fill", "index", 3, objs[1])) == NULL
        || fill_value_arg("index_fill_", objs[2], &value) < 0) {
        return -1;
    }
    if (choose_target(t) < 0) { /* Note [Parse before the clone] */
        return -1;
    }
    return THTensor_indexFill(t->target, dim, index, value) < 0
               ? THPUtils_setErrorFromTH_int()
               : 0;
}


THP_TARGET_IMPLS(index_fill, index_fill_)
THP_DEFINE_METHOD_ONLY(index_fill_)
THP_DEFINE_OP(index_fill)

/* ---- index_copy, put ---------------------------------------------------------- */

static int
index_copy_into(IndexOpTarget *t, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    static const char *const names[] = {"dim", "index", "source"};
    int64_t dim;
    THTensor *index, *source;
    if (parse_dim_index_tensor("index_copy", names, args, nargs, kwnames,
                               &dim, &index, &source)
        < 0) {
        return -1;
    }
    if (choose_target(t) < 0) { /* Note [Parse before the clone] */
        return -1;
    }
    int status;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(source->numel),
                              status = THTensor_indexCopy(t->target, dim,
                                                          index, source));
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}


THP_TARGET_IMPLS(index_copy, index_copy_)
THP_DEFINE_METHOD_ONLY(index_copy_)
THP_DEFINE_OP(index_copy)

static int
put_into(IndexOpTarget *t, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    static const char *const names[] = {"index", "source", "accumulate"};
    PyObject *objs[3];
    THTensor *index, *source;
    bool accumulate = false;
    if (THPUtils_parseArgs("put_", args, nargs, kwnames, names, 3, 3, objs)
            < 0
        || require_args("put_", objs, names, 2) < 0
        || (index = tensor_arg("put_", "index", 2, objs[0])) == NULL
        || (source = tensor_arg("put_", "source", 3, objs[1])) == NULL
        || bool_arg("put_", "accumulate", objs[2], &accumulate) < 0) {
        return -1;
    }
    if (choose_target(t) < 0) { /* Note [Parse before the clone] */
        return -1;
    }
    int status;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(index->numel),
                              status = THTensor_put(t->target, index, source,
                                                    accumulate));
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}


THP_TARGET_IMPLS(put, put_)
THP_DEFINE_METHOD_ONLY(put_)
THP_DEFINE_OP(put)

/* ---- masks ------------------------------------------------------------------------- */

static int
parse_masked_fill(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames, THTensor **mask, THScalar *value)
{
    static const char *const names[] = {"mask", "value"};
    PyObject *objs[2];
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 2, 2, objs)
            < 0
        || require_args(fname, objs, names, 2) < 0
        || (*mask = tensor_arg(fname, "mask", 2, objs[0])) == NULL
        || fill_value_arg("masked_fill_", objs[1], value) < 0) {
        return -1;
    }
    return 0;
}

static PyObject *
masked_fill__impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    THTensor *mask;
    THScalar value;
    if (parse_masked_fill("masked_fill_", args, nargs, kwnames, &mask,
                          &value)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    int status;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(self->numel),
                              status = THTensor_maskedFill(self, mask,
                                                           value));
    return finish_inplace(input, status);
}
THP_DEFINE_METHOD_ONLY(masked_fill_)

static PyObject *
masked_fill_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    THTensor *mask;
    THScalar value;
    if (parse_masked_fill("masked_fill", args, nargs, kwnames, &mask, &value)
        < 0) {
        return NULL;
    }
    /* Unlike masked_fill_, the result takes the broadcast shape. */
    THTensor *self = THPVariable_Unpack(input);
    int ndim;
    int64_t sizes[TH_MAX_DIMS];
    if (THIter_broadcastShape(self->ndim, self->sizes, mask->ndim,
                              mask->sizes, &ndim, sizes)
        < 0) {
        return THPUtils_setErrorFromTH();
    }
    THTensor *result = new_result_copy(self, ndim, sizes);
    if (result == NULL) {
        return THPUtils_setErrorFromTH();
    }
    int status;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(result->numel),
                              status = THTensor_maskedFill(result, mask,
                                                           value));
    return finish_copy(result, status);
}
THP_DEFINE_OP(masked_fill)

static PyObject *
masked_select_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    static const char *const names[] = {"mask", "out"};
    PyObject *objs[2];
    THTensor *mask;
    if (THPUtils_parseArgs("masked_select", args, nargs, kwnames, names, 2, 1,
                           objs)
            < 0
        || require_args("masked_select", objs, names, 1) < 0
        || (mask = tensor_arg("masked_select", "mask", 2, objs[0])) == NULL
        || check_out_dtype("masked_select", objs[1],
                           THPVariable_Unpack(input)->dtype,
                           masked_select_dtype_error)
               < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *result;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(self->numel + mask->numel),
                              result = THTensor_newMaskedSelect(self, mask));
    return finish_with_out("masked_select", result, objs[1]);
}
THP_DEFINE_OP(masked_select)

/* ---- nonzero, argwhere ------------------------------------------------------------ */

/* nonzero(as_tuple=True): one 1-d tensor per dim (a 0-d input counts as
 * 1-d, as in PyTorch). */
static PyObject *
positions_as_tuple(THTensor *positions, int ndim)
{
    int columns = ndim == 0 ? 1 : ndim;
    PyObject *tuple = PyTuple_New(columns);
    if (tuple == NULL) {
        return NULL;
    }
    for (int d = 0; d < columns; d++) {
        THTensor *column;
        if (ndim > 0) {
            column = THTensor_newSelect(positions, 1, d);
        }
        else {
            /* n rows of no coordinates: position 0 of the 1-element view */
            column = THTensor_newEmpty(1, positions->sizes, TH_Int64,
                                       TH_DEVICE_CPU);
            if (column != NULL
                && THTensor_fill(column, THScalar_fromInt(0)) < 0) {
                THTensor_release(column);
                column = NULL;
            }
        }
        PyObject *item = THPVariable_Wrap(column);
        if (item == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, d, item); /* steals item */
    }
    return tuple;
}

static PyObject *
nonzero_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    static const char *const names[] = {"out", "as_tuple"};
    PyObject *objs[2];
    bool as_tuple = false;
    if (THPUtils_parseArgs("nonzero", args, nargs, kwnames, names, 2, 0, objs)
            < 0
        || bool_arg("nonzero", "as_tuple", objs[1], &as_tuple) < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (as_tuple && objs[0] != NULL && objs[0] != Py_None) {
        PyErr_SetString(PyExc_TypeError,
                        "nonzero(): out= is not supported with "
                        "as_tuple=True");
        return NULL;
    }
    if (check_out_dtype("nonzero", objs[0], TH_Int64, nonzero_dtype_error)
        < 0) {
        return NULL;
    }
    THTensor *positions;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(self->numel),
                              positions = THTensor_newNonzero(self));
    if (!as_tuple) {
        return finish_with_out("nonzero", positions, objs[0]);
    }
    if (positions == NULL) {
        return THPUtils_setErrorFromTH();
    }
    PyObject *tuple = positions_as_tuple(positions, self->ndim);
    THTensor_release(positions);
    return tuple;
}
THP_DEFINE_OP(nonzero)

static PyObject *
argwhere_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    if (THPUtils_parseArgs("argwhere", args, nargs, kwnames, NULL, 0, 0, NULL)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *positions;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(self->numel),
                              positions = THTensor_newNonzero(self));
    return positions == NULL ? THPUtils_setErrorFromTH()
                             : THPVariable_Wrap(positions);
}
THP_DEFINE_OP(argwhere)

/* ---- index_put ------------------------------------------------------------------ */

/* The index tensors of index_put_(indices=...): borrowed into `out`. */
static int
parse_index_list(PyObject *obj, THTensor **out)
{
    if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "index_put_(): argument 'indices' (position 1) must be "
                     "tuple of Tensors, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    if (n > TH_MAX_DIMS) {
        PyErr_Format(PyExc_IndexError,
                     "too many indices for tensor of dimension at most %d",
                     TH_MAX_DIMS);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(obj); /* borrowed */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!THPVariable_Check(items[i])) {
            PyErr_Format(PyExc_TypeError,
                         "expected Tensor as element %zd in argument 0, but "
                         "got %.100s",
                         i, Py_TYPE(items[i])->tp_name);
            return -1;
        }
        out[i] = THPVariable_Unpack(items[i]);
    }
    return (int)n;
}

static int
index_put_into(IndexOpTarget *t, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const char *const names[] = {"indices", "values", "accumulate"};
    PyObject *objs[3];
    THTensor *indices[TH_MAX_DIMS];
    THTensor *values;
    bool accumulate = false;
    int nindices;
    if (THPUtils_parseArgs("index_put_", args, nargs, kwnames, names, 3, 3,
                           objs)
            < 0
        || require_args("index_put_", objs, names, 2) < 0
        || (nindices = parse_index_list(objs[0], indices)) < 0
        || (values = tensor_arg("index_put_", "values", 2, objs[1])) == NULL
        || bool_arg("index_put_", "accumulate", objs[2], &accumulate) < 0) {
        return -1;
    }
    if (values->dtype != t->input->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "Index put requires the source and destination dtypes "
                     "match, got %s for the destination and %s for the "
                     "source.",
                     THDtype_scalarTypeName(t->input->dtype),
                     THDtype_scalarTypeName(values->dtype));
        return -1;
    }
    if (choose_target(t) < 0) { /* Note [Parse before the clone] */
        return -1;
    }
    THTensor *target = t->target;
    int status;
    THP_RUN_MAYBE_WITHOUT_GIL(THP_LARGE(target->numel + values->numel),
                              status = THTensor_indexPut(target, nindices,
                                                         indices, values,
                                                         accumulate));
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}


THP_TARGET_IMPLS(index_put, index_put_)
THP_DEFINE_OP(index_put_)
THP_DEFINE_OP(index_put)

/* ---- tables ------------------------------------------------------------------------- */

#define THP_INDEX_OPS_FUNCTIONS(_)                                          \
    _("index_select", index_select, "Elements of input at index along dim.") \
    _("gather", gather, "Gathers values along dim at index.")               \
    _("take", take, "input.flatten()[index], shaped like index.")           \
    _("scatter", scatter, "Out-of-place scatter_.")                         \
    _("scatter_add", scatter_add, "Out-of-place scatter_add_.")             \
    _("scatter_reduce", scatter_reduce, "Out-of-place scatter_reduce_.")    \
    _("index_add", index_add, "Out-of-place index_add_.")                   \
    _("index_fill", index_fill, "Out-of-place index_fill_.")                \
    _("index_copy", index_copy, "Out-of-place index_copy_.")                \
    _("put", put, "Out-of-place put_.")                                     \
    _("masked_fill", masked_fill, "Out-of-place masked_fill_.")             \
    _("masked_select", masked_select, "1-d tensor of input where mask.")    \
    _("nonzero", nonzero, "Positions of the non-zero elements.")            \
    _("argwhere", argwhere, "Positions of the non-zero elements.")          \
    _("index_put_", index_put_, "input[indices] = values, in place.")       \
    _("index_put", index_put, "Out-of-place index_put_.")

#define THP_INDEX_OPS_INPLACE_METHODS(_)                                    \
    _("scatter_", scatter_, "Writes src (or value) at index along dim.")   \
    _("scatter_add_", scatter_add_, "Adds src at index along dim.")        \
    _("scatter_reduce_", scatter_reduce_,                                  \
      "Reduces src into self at index along dim.")                          \
    _("index_add_", index_add_, "Adds source at index along dim.")         \
    _("index_fill_", index_fill_, "Fills value at index along dim.")       \
    _("index_copy_", index_copy_, "Copies source at index along dim.")     \
    _("put_", put_, "Writes (or adds) source at flat positions index.")    \
    _("masked_fill_", masked_fill_, "Fills value where mask is true.")

#define THP_FUNCTION_ROW(pyname, name, doc) \
    THP_FUNCTION_ENTRY(pyname, name, doc),
#define THP_METHOD_ROW(pyname, name, doc) THP_METHOD_ENTRY(pyname, name, doc),

PyMethodDef THPIndexOps_functions[] = {
    THP_INDEX_OPS_FUNCTIONS(THP_FUNCTION_ROW)
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_index_ops_methods[] = {
    THP_INDEX_OPS_FUNCTIONS(THP_METHOD_ROW)
    THP_INDEX_OPS_INPLACE_METHODS(THP_METHOD_ROW)
    {NULL, NULL, 0, NULL},
};

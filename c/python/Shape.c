/*
 * Shape.c -- shape operators (cat, stack, split, flip, roll, repeat, tril,
 * sort, topk, unique, one_hot, ...).
 * See Note [Function and method from one implementation] in THP.h.
 *
 * The wrappers parse arguments and call the core (THShape.h, THSort.h);
 * the view-making operators (split, chunk, tensor_split, unbind) are
 * narrow/select calls assembled into a tuple here.
 */
#include "THP.h"

/* ---- argument helpers ------------------------------------------------------- */

/* Parses a bool argument; PyTorch takes only True/False here.  An absent
 * argument (or None when none_ok) keeps the default. */
static int
parse_bool(const char *fname, const char *name, PyObject *obj, bool none_ok,
           bool *out)
{
    if (obj == NULL || (none_ok && obj == Py_None)) {
        return 0;
    }
    if (!PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be bool, not %.100s", fname,
                     name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = obj == Py_True;
    return 0;
}

/* An optional int argument (absent keeps the default). */
static int
parse_int(const char *fname, const char *name, PyObject *obj, int64_t *out)
{
    if (obj == NULL) {
        return 0;
    }
    return THPUtils_unpackLong(obj, fname, name, out);
}

/* One int or a tuple/list of ints, as `shifts` and `dims` take; returns
 * the count or -1. */
static int
parse_int_or_ints(const char *fname, const char *name, PyObject *obj,
                  int64_t *values)
{
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        return THPUtils_parseSizeSequence(fname, obj, values);
    }
    return THPUtils_unpackLong(obj, fname, name, values) < 0 ? -1 : 1;
}

/* The tensors of a tuple or list, as a new array of retained pointers
 * (the kernels may run with the GIL released, while another thread could
 * empty the list); free it with release_tensor_list.  NULL with TypeError
 * for anything that is not a sequence of tensors. */
static THTensor **
parse_tensor_list(const char *fname, PyObject *seq, int *n)
{
    if (seq == NULL || (!PyTuple_Check(seq) && !PyList_Check(seq))) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'tensors' (position 1) must be tuple of "
                     "Tensors, not %.100s",
                     fname, seq == NULL ? "nothing" : Py_TYPE(seq)->tp_name);
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    if (count > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s(): too many tensors", fname);
        return NULL;
    }
    THTensor **tensors = PyMem_Malloc(sizeof(*tensors) * (count + 1));
    if (tensors == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq); /* borrowed */
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!THPVariable_Check(items[i])) {
            PyErr_Format(PyExc_TypeError,
                         "expected Tensor as element %zd in argument 0, but "
                         "got %.100s",
                         i, Py_TYPE(items[i])->tp_name);
            PyMem_Free(tensors);
            return NULL;
        }
        tensors[i] = THPVariable_Unpack(items[i]);
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        THTensor_retain(tensors[i]);
    }
    *n = (int)count;
    return tensors;
}

static void
release_tensor_list(THTensor **tensors, int n)
{
    for (int i = 0; i < n; i++) {
        THTensor_release(tensors[i]); /* NULL-safe */
    }
    PyMem_Free(tensors);
}

/* Note [out= by copy]
 * ~~~~~~~~~~~~~~~~~~~
 * Apart from cat and stack (which write straight into out), the operators
 * here that take `out=` compute into a fresh tensor and then copy it into
 * out, after checking every out tensor (shape exactly, dtype exactly, as
 * PyTorch's "Expected out tensor to have dtype ..." does; ember never
 * resizes out).  So on any error no out tensor is touched, and an out that
 * overlaps the input reads nothing stale. */

static int
check_out_like(const char *fname, THTensor *out, const THTensor *result)
{
    if (out->dtype != result->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "Expected out tensor to have dtype %s, but got %s "
                     "instead",
                     THDtype_cppTypeName(result->dtype),
                     THDtype_cppTypeName(out->dtype));
        return -1;
    }
    if (out->ndim != result->ndim
        || memcmp(out->sizes, result->sizes,
                  sizeof(int64_t) * (size_t)out->ndim) != 0) {
        char want[256], got[256];
        THTensor_formatSizes(want, sizeof(want), result->ndim, result->sizes);
        THTensor_formatSizes(got, sizeof(got), out->ndim, out->sizes);
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): expected out of shape %s, but got %s (ember does "
                     "not resize out tensors)",
                     fname, want, got);
        return -1;
    }
    return 0;
}

/* Returns `result` (stolen) as a new tensor, or copied into out_obj when
 * one is given (Note [out= by copy]). */
static PyObject *
result_or_out(const char *fname, PyObject *out_obj, THTensor *result)
{
    if (result == NULL || out_obj == NULL || out_obj == Py_None) {
        return THPVariable_Wrap(result);
    }
    THTensor *out;
    if (THPUtils_parseOut(fname, out_obj, &out) < 0
        || check_out_like(fname, out, result) < 0) {
        THTensor_release(result);
        return NULL;
    }
    int status = THTensor_copy(out, result);
    THTensor_release(result);
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_INCREF(out_obj); /* returned: out */
    return out_obj;
}

/* Big kernels run with the GIL released (the core touches no Python). */
#define THP_BIG(tensor) ((tensor)->numel >= TH_PARALLEL_GRAIN)

/* ---- cat, stack, hstack, vstack -------------------------------------------- */

typedef THTensor *(*JoinFn)(int n, THTensor *const *tensors, int64_t dim);
typedef int (*JoinOutFn)(THTensor *out, int n, THTensor *const *tensors,
                         int64_t dim);

/* Runs a join (cat or stack) into a new tensor or into out; returns the
 * new tensor, or out (a new reference) on success. */
static PyObject *
run_join(JoinFn join, JoinOutFn join_out, int n, THTensor *const *tensors,
         int64_t dim, PyObject *out_obj, THTensor *out)
{
    if (out == NULL) {
        THTensor *result;
        THP_RUN_WITHOUT_GIL_IF(true, result = join(n, tensors, dim));
        return THPVariable_Wrap(result);
    }
    int status;
    THP_RUN_WITHOUT_GIL_IF(true, status = join_out(out, n, tensors, dim));
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_INCREF(out_obj); /* returned: out */
    return out_obj;
}

static PyObject *
join_entry(const char *fname, JoinFn join, JoinOutFn join_out,
           PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"tensors", "dim", "out"};
    PyObject *objs[3];
    int64_t dim = 0;
    THTensor *out;
    int n;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 3, 2, objs)
            < 0
        || parse_int(fname, "dim", objs[1], &dim) < 0
        || THPUtils_parseOut(fname, objs[2], &out) < 0) {
        return NULL;
    }
    THTensor **tensors = parse_tensor_list(fname, objs[0], &n);
    if (tensors == NULL) {
        return NULL;
    }
    PyObject *result = run_join(join, join_out, n, tensors, dim, objs[2], out);
    release_tensor_list(tensors, n);
    return result;
}

static PyObject *
THPFunction_cat(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    (void)module;
    return join_entry("cat", THTensor_newCat, THTensor_catOut, args, nargs,
                      kwnames);
}

static PyObject *
THPFunction_stack(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    (void)module;
    return join_entry("stack", THTensor_newStack, THTensor_stackOut, args,
                      nargs, kwnames);
}

/* The tensor viewed with at least `min_ndim` dims: atleast_1d gives (1,)
 * for a scalar, atleast_2d (1, n) for a vector and (1, 1) for a scalar. */
static THTensor *
new_at_least(THTensor *tensor, int min_ndim)
{
    THTensor_retain(tensor);
    while (tensor != NULL && tensor->ndim < min_ndim) {
        THTensor *view = THTensor_newUnsqueeze(tensor, 0);
        THTensor_release(tensor);
        tensor = view;
    }
    return tensor;
}

/* hstack (horizontal) and vstack: cat of the inputs made at least 1-d
 * (hstack: along dim 1, or 0 for vectors) or 2-d (vstack: along dim 0). */
static PyObject *
hv_stack(const char *fname, bool vertical, PyObject *const *args,
         Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"tensors", "out"};
    PyObject *objs[2];
    THTensor *out;
    int n;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 2, 1, objs) < 0
        || THPUtils_parseOut(fname, objs[1], &out) < 0) {
        return NULL;
    }
    THTensor **tensors = parse_tensor_list(fname, objs[0], &n);
    if (tensors == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    if (n == 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s expects a non-empty TensorList", fname);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        THTensor *view = new_at_least(tensors[i], vertical ? 2 : 1);
        THTensor_release(tensors[i]);
        tensors[i] = view;
        if (view == NULL) {
            THPUtils_setErrorFromTH();
            goto done;
        }
    }
    int64_t dim = vertical || tensors[0]->ndim == 1 ? 0 : 1;
    result = run_join(THTensor_newCat, THTensor_catOut, n, tensors, dim,
                      objs[1], out);
done:
    release_tensor_list(tensors, n);
    return result;
}

static PyObject *
THPFunction_hstack(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    (void)module;
    return hv_stack("hstack", false, args, nargs, kwnames);
}

static PyObject *
THPFunction_vstack(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    (void)module;
    return hv_stack("vstack", true, args, nargs, kwnames);
}

/* ---- split, chunk, tensor_split, unbind: tuples of views ------------------- */

/* A tuple of views: piece i is `lengths[i]` elements of dim starting at
 * starts[i]; narrow views, or (unbind) select views of index i when both
 * are NULL. */
static PyObject *
views_tuple(THTensor *tensor, int64_t dim, Py_ssize_t n,
            const int64_t *starts, const int64_t *lengths)
{
    PyObject *tuple = PyTuple_New(n);
    if (tuple == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        THTensor *view =
            lengths != NULL
                ? THTensor_newNarrow(tensor, dim, starts[i], lengths[i])
                : THTensor_newSelect(tensor, dim, i);
        PyObject *item = THPVariable_Wrap(view);
        if (item == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, item); /* steals item */
    }
    return tuple;
}

/* Pieces of consecutive lengths (they sum to the dim's size). */
static PyObject *
split_by_lengths(THTensor *tensor, int64_t dim, Py_ssize_t n,
                 int64_t *lengths)
{
    int64_t *starts = THPUtils_mallocArray(n, sizeof(int64_t));
    if (starts == NULL) {
        return NULL;
    }
    int64_t start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        starts[i] = start;
        start += lengths[i]; /* the lengths sum to the dim's size */
    }
    PyObject *result = views_tuple(tensor, dim, n, starts, lengths);
    PyMem_Free(starts);
    return result;
}

/* split with an int: pieces of split_size, the last one shorter. */
static PyObject *
split_even(THTensor *tensor, int64_t dim, int64_t split_size)
{
    int64_t size = tensor->sizes[dim];
    if (split_size < 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "split expects split_size be non-negative, but got "
                     "split_size=%lld",
                     (long long)split_size);
        return NULL;
    }
    if (split_size == 0 && size != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "split_size can only be 0 if dimension size is 0, but "
                     "got dimension size of %lld",
                     (long long)size);
        return NULL;
    }
    int64_t n = size == 0 ? 1 : TH_ceilDiv(size, split_size);
    int64_t *lengths = THPUtils_mallocArray(n, sizeof(int64_t));
    if (lengths == NULL) {
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t left = size - i * split_size; /* i * split_size < size */
        lengths[i] = left < split_size ? left : split_size;
    }
    PyObject *result = split_by_lengths(tensor, dim, (Py_ssize_t)n, lengths);
    PyMem_Free(lengths);
    return result;
}

/* split with a list of sizes: they must sum to the dim's size. */
static PyObject *
split_with_sizes(THTensor *tensor, int64_t dim, PyObject *seq)
{
    int64_t sizes[TH_MAX_DIMS];
    int64_t *lengths = sizes;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > TH_MAX_DIMS) { /* a long list: read it without the dims cap */
        lengths = PyMem_Malloc(sizeof(int64_t) * (size_t)n);
        if (lengths == NULL) {
            return PyErr_NoMemory();
        }
    }
    PyObject *result = NULL;
    int64_t total = 0;
    bool negative = false, overflowed = false;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (THPUtils_unpackLong(PySequence_Fast_GET_ITEM(seq, i), "split",
                                "split_size", &lengths[i])
            < 0) {
            goto done;
        }
        negative |= lengths[i] < 0;
        /* a sum past INT64_MAX cannot be the size: saturate, never wrap */
        if (TH_add_overflows(total, lengths[i], &total)) {
            total = INT64_MAX;
            overflowed = true;
        }
    }
    if (negative || overflowed || total != tensor->sizes[dim]) {
        PyObject *list = PySequence_List(seq);
        if (list == NULL) {
            goto done;
        }
        if (negative) {
            PyErr_Format(PyExc_RuntimeError,
                         "split_with_sizes expects split_sizes have only "
                         "non-negative entries, but got split_sizes=%R",
                         list);
        }
        else {
            PyErr_Format(PyExc_RuntimeError,
                         "split_with_sizes expects split_sizes to sum "
                         "exactly to %lld (input tensor's size at dimension "
                         "%lld), but got split_sizes=%R",
                         (long long)tensor->sizes[dim], (long long)dim, list);
        }
        Py_DECREF(list);
        goto done;
    }
    result = split_by_lengths(tensor, dim, n, lengths);
done:
    if (lengths != sizes) {
        PyMem_Free(lengths);
    }
    return result;
}

/* The dim of a view operator on a tensor that needs one. */
static int
wrap_view_dim(const char *what, THTensor *tensor, int64_t dim, int64_t *out)
{
    if (tensor->ndim == 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s expects at least a 1-dimensional tensor", what);
        return -1;
    }
    if (THTensor_wrapDim(dim, tensor->ndim, out) < 0) {
        THPUtils_setErrorFromTH();
        return -1;
    }
    return 0;
}

static PyObject *
split_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    /* Tensor.split calls its first argument split_size: take both names */
    static const char *const names[] = {"split_size_or_sections", "dim",
                                        "split_size"};
    PyObject *objs[3];
    int64_t dim = 0, d;
    THTensor *tensor = THPVariable_Unpack(input);
    if (THPUtils_parseArgs("split", args, nargs, kwnames, names, 3, 2, objs)
            < 0
        || parse_int("split", "dim", objs[1], &dim) < 0) {
        return NULL;
    }
    if (objs[2] != NULL) {
        if (objs[0] != NULL) {
            PyErr_SetString(PyExc_TypeError,
                            "split() got multiple values for argument "
                            "'split_size'");
            return NULL;
        }
        objs[0] = objs[2];
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "split() missing required argument "
                        "'split_size_or_sections'");
        return NULL;
    }
    if (wrap_view_dim("split", tensor, dim, &d) < 0) {
        return NULL;
    }
    if (PyTuple_Check(objs[0]) || PyList_Check(objs[0])) {
        return split_with_sizes(tensor, d, objs[0]);
    }
    int64_t split_size;
    if (THPUtils_unpackLong(objs[0], "split", "split_size", &split_size)
        < 0) {
        return NULL;
    }
    return split_even(tensor, d, split_size);
}
THP_DEFINE_OP(split)

static PyObject *
chunk_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    static const char *const names[] = {"chunks", "dim"};
    PyObject *objs[2];
    int64_t chunks = 0, dim = 0, d;
    THTensor *tensor = THPVariable_Unpack(input);
    if (THPUtils_parseArgs("chunk", args, nargs, kwnames, names, 2, 2, objs)
            < 0
        || parse_int("chunk", "dim", objs[1], &dim) < 0) {
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "chunk() missing required argument 'chunks'");
        return NULL;
    }
    if (parse_int("chunk", "chunks", objs[0], &chunks) < 0
        || wrap_view_dim("chunk", tensor, dim, &d) < 0) {
        return NULL;
    }
    if (chunks <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "chunk expects `chunks` to be greater than 0, got: %lld",
                     (long long)chunks);
        return NULL;
    }
    int64_t size = tensor->sizes[d];
    if (size == 0) { /* PyTorch: `chunks` empty pieces */
        int64_t *zeros = THPUtils_mallocArray(chunks, sizeof(int64_t));
        if (zeros == NULL) {
            return NULL;
        }
        memset(zeros, 0, sizeof(int64_t) * (size_t)chunks);
        PyObject *result = split_by_lengths(tensor, d, chunks, zeros);
        PyMem_Free(zeros);
        return result;
    }
    return split_even(tensor, d, TH_ceilDiv(size, chunks));
}
THP_DEFINE_OP(chunk)

static int64_t
clamp_index(int64_t i, int64_t lo, int64_t hi)
{
    return i < lo ? lo : i > hi ? hi : i;
}

/* tensor_split: NumPy's array_split.  An int gives that many pieces, the
 * first size % n one longer; a list of indices cuts before each. */
static PyObject *
tensor_split_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"indices_or_sections", "dim"};
    PyObject *objs[2];
    int64_t dim = 0, d;
    THTensor *tensor = THPVariable_Unpack(input);
    if (THPUtils_parseArgs("tensor_split", args, nargs, kwnames, names, 2, 2,
                           objs)
            < 0
        || parse_int("tensor_split", "dim", objs[1], &dim) < 0) {
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "tensor_split() missing required argument "
                        "'indices_or_sections'");
        return NULL;
    }
    if (wrap_view_dim("tensor_split", tensor, dim, &d) < 0) {
        return NULL;
    }
    int64_t size = tensor->sizes[d];
    bool by_indices = PyTuple_Check(objs[0]) || PyList_Check(objs[0]);
    int64_t sections = 0;
    Py_ssize_t n;
    if (by_indices) {
        n = PySequence_Fast_GET_SIZE(objs[0]) + 1;
    }
    else {
        if (THPUtils_unpackLong(objs[0], "tensor_split", "sections",
                                &sections)
            < 0) {
            return NULL;
        }
        if (sections <= 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "number of sections must be larger than 0, got "
                         "%lld",
                         (long long)sections);
            return NULL;
        }
        if (sections > PY_SSIZE_T_MAX / 16) { /* so 2 * n cannot wrap */
            return PyErr_NoMemory();
        }
        n = (Py_ssize_t)sections;
    }
    int64_t *starts = THPUtils_mallocArray(2 * (int64_t)n, sizeof(int64_t));
    if (starts == NULL) {
        return NULL;
    }
    int64_t *lengths = starts + n;
    int64_t start = 0;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t end;
        if (!by_indices) {
            end = start + size / sections + (i < size % sections ? 1 : 0);
        }
        else if (i == n - 1) {
            end = size;
        }
        else if (THPUtils_unpackLong(PySequence_Fast_GET_ITEM(objs[0], i),
                                     "tensor_split", "indices", &end)
                 < 0) {
            goto done;
        }
        if (end < 0) { /* Python slice semantics: from the end */
            end += size;
        }
        starts[i] = clamp_index(start, 0, size);
        end = clamp_index(end, starts[i], size);
        lengths[i] = end - starts[i];
        start = end > start ? end : start;
    }
    result = views_tuple(tensor, d, n, starts, lengths);
done:
    PyMem_Free(starts);
    return result;
}
THP_DEFINE_OP(tensor_split)

static PyObject *
unbind_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    static const char *const names[] = {"dim"};
    PyObject *dim_obj;
    int64_t dim = 0, d;
    THTensor *tensor = THPVariable_Unpack(input);
    if (THPUtils_parseArgs("unbind", args, nargs, kwnames, names, 1, 1,
                           &dim_obj)
            < 0
        || parse_int("unbind", "dim", dim_obj, &dim) < 0) {
        return NULL;
    }
    if (tensor->ndim == 0) {
        PyErr_SetString(PyExc_IndexError,
                        "Dimension specified as 0 but tensor has no "
                        "dimensions");
        return NULL;
    }
    if (THTensor_wrapDim(dim, tensor->ndim, &d) < 0) {
        return THPUtils_setErrorFromTH();
    }
    /* One tuple slot per index: a dim too long for a tuple (an expanded
     * zeros(1).expand(2**61)) is a MemoryError from PyTuple_New. */
    int64_t n = tensor->sizes[d];
    if (n > PY_SSIZE_T_MAX) {
        return PyErr_NoMemory();
    }
    return views_tuple(tensor, d, (Py_ssize_t)n, NULL, NULL);
}
THP_DEFINE_OP(unbind)

/* ---- flip, roll, repeat, tile ------------------------------------------------ */

/* dims given as flip(0, 1), flip((0, 1)) or flip(dims=(0, 1)). */
static int
parse_dims_varargs(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, const char *kwname, int64_t *dims)
{
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        const char *const names[] = {kwname};
        PyObject *obj;
        if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 1, 0, &obj)
            < 0) {
            return -1;
        }
        return parse_int_or_ints(fname, kwname, obj, dims);
    }
    if (nargs == 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s() missing 1 required positional arguments: \"%s\"",
                     fname, kwname);
        return -1;
    }
    return THPUtils_parseSizes(fname, args, nargs, dims);
}

static PyObject *
flip_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    int64_t dims[TH_MAX_DIMS];
    int ndims = parse_dims_varargs("flip", args, nargs, kwnames, "dims",
                                   dims);
    if (ndims < 0) {
        return NULL;
    }
    return THPVariable_Wrap(
        THTensor_newFlip(THPVariable_Unpack(input), ndims, dims));
}
THP_DEFINE_OP(flip)

/* fliplr / flipud: flip dim 1 / dim 0 of a tensor with enough dims. */
static PyObject *
flip_one(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, const char *fname, int64_t dim)
{
    THTensor *tensor = THPVariable_Unpack(input);
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, NULL, 0, 0, NULL)
        < 0) {
        return NULL;
    }
    if (tensor->ndim < dim + 1) {
        PyErr_Format(PyExc_RuntimeError, "Input must be >= %lld-d.",
                     (long long)(dim + 1));
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newFlip(tensor, 1, &dim));
}

static PyObject *
fliplr_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    return flip_one(input, args, nargs, kwnames, "fliplr", 1);
}
THP_DEFINE_OP(fliplr)

static PyObject *
flipud_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    return flip_one(input, args, nargs, kwnames, "flipud", 0);
}
THP_DEFINE_OP(flipud)

static PyObject *
roll_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    static const char *const names[] = {"shifts", "dims"};
    PyObject *objs[2];
    int64_t shifts[TH_MAX_DIMS], dims[TH_MAX_DIMS];
    int ndims = 0;
    if (THPUtils_parseArgs("roll", args, nargs, kwnames, names, 2, 2, objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "roll() missing required argument 'shifts'");
        return NULL;
    }
    int nshifts = parse_int_or_ints("roll", "shifts", objs[0], shifts);
    if (nshifts < 0) {
        return NULL;
    }
    if (objs[1] != NULL && objs[1] != Py_None) {
        ndims = parse_int_or_ints("roll", "dims", objs[1], dims);
        if (ndims < 0) {
            return NULL;
        }
    }
    return THPVariable_Wrap(THTensor_newRoll(THPVariable_Unpack(input),
                                             nshifts, shifts, ndims, dims));
}
THP_DEFINE_OP(roll)

static PyObject *
repeat_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    int64_t repeats[TH_MAX_DIMS];
    int n = parse_dims_varargs("repeat", args, nargs, kwnames, "repeats",
                               repeats);
    if (n < 0) {
        return NULL;
    }
    return THPVariable_Wrap(
        THTensor_newRepeat(THPVariable_Unpack(input), n, repeats));
}

/* tile: repeat with the repeats padded by leading 1s to the tensor's
 * ndim (repeat itself pads the tensor instead). */
static PyObject *
tile_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    int64_t dims[TH_MAX_DIMS], repeats[TH_MAX_DIMS];
    THTensor *tensor = THPVariable_Unpack(input);
    int n = parse_dims_varargs("tile", args, nargs, kwnames, "dims", dims);
    if (n < 0) {
        return NULL;
    }
    int lead = tensor->ndim > n ? tensor->ndim - n : 0;
    for (int d = 0; d < lead + n; d++) {
        repeats[d] = d < lead ? 1 : dims[d - lead];
    }
    return THPVariable_Wrap(THTensor_newRepeat(tensor, lead + n, repeats));
}
THP_DEFINE_OP(tile)

/* (diagonal=0) and, where `out` is not NULL, a keyword-only out=. */
static int
parse_diagonal(const char *fname, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames, int64_t *diagonal, PyObject **out)
{
    static const char *const names[] = {"diagonal", "out"};
    PyObject *objs[2];
    *diagonal = 0;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names,
                           out != NULL ? 2 : 1, 1, objs)
        < 0) {
        return -1;
    }
    if (out != NULL) {
        *out = objs[1];
    }
    return parse_int(fname, "diagonal", objs[0], diagonal);
}

/* repeats as ints: a Python int, or an int32/int64 tensor of 0 or 1 dims.
 * Returns the count (into *repeats, or a new PyMem array in *heap), or
 * -1. */
static int64_t
parse_repeats(PyObject *obj, int64_t *one, int64_t **heap)
{
    *heap = NULL;
    if (!THPVariable_Check(obj)) {
        if (THPUtils_unpackLong(obj, "repeat_interleave", "repeats", one)
            < 0) {
            return -1;
        }
        if (*one < 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "Repeats must be non-negative");
            return -1;
        }
        return 1;
    }
    THTensor *t = THPVariable_Unpack(obj);
    if (t->ndim > 1) {
        PyErr_SetString(PyExc_RuntimeError,
                        "repeats must be 0-dim or 1-dim tensor");
        return -1;
    }
    if (t->dtype != TH_Int64 && t->dtype != TH_Int32) {
        PyErr_Format(PyExc_NotImplementedError,
                     "\"repeat_interleave_cpu\" not implemented for '%s'",
                     THDtype_name(t->dtype));
        return -1;
    }
    THTensor *as_long = THTensor_newCast(t, TH_Int64, false);
    THTensor *flat = as_long ? THTensor_newContiguous(as_long) : NULL;
    THTensor_release(as_long);
    if (flat == NULL) {
        THPUtils_setErrorFromTH();
        return -1;
    }
    int64_t n = flat->numel;
    *heap = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (*heap == NULL) {
        THTensor_release(flat);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(*heap, THTensor_data(flat), sizeof(int64_t) * (size_t)n);
    THTensor_release(flat);
    for (int64_t i = 0; i < n; i++) {
        if ((*heap)[i] < 0) {
            PyMem_Free(*heap);
            *heap = NULL;
            PyErr_SetString(PyExc_RuntimeError, "repeats can not be negative");
            return -1;
        }
    }
    return n;
}

/* repeat_interleave(input, repeats, dim=None, *, output_size=None), and
 * repeat_interleave(repeats_tensor): arange(n) repeated by it. */
static PyObject *
repeat_interleave_impl(PyObject *input, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"repeats", "dim", "output_size"};
    const char *fname = "repeat_interleave";
    PyObject *objs[3];
    int64_t dim = 0, output_size = -1, one, *heap;
    THTensor *tensor = THPVariable_Unpack(input);
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 3, 2, objs)
            < 0
        || (objs[1] != NULL && objs[1] != Py_None
            && parse_int(fname, "dim", objs[1], &dim) < 0)
        || (objs[2] != NULL && objs[2] != Py_None
            && parse_int(fname, "output_size", objs[2], &output_size) < 0)) {
        return NULL;
    }
    bool dim_given = objs[1] != NULL && objs[1] != Py_None;
    THTensor *source = NULL;
    if (objs[0] == NULL) { /* the input is the repeats */
        int64_t n = tensor->numel;
        source = THTensor_newEmpty(1, &n, TH_Int64, tensor->storage->device);
        if (source == NULL
            || THTensor_arange(source, THScalar_fromInt(0),
                               THScalar_fromInt(1))
                   < 0) {
            THTensor_release(source);
            return THPUtils_setErrorFromTH();
        }
        objs[0] = input;
        dim_given = true;
        dim = 0;
    }
    else {
        THTensor_retain(tensor);
        source = tensor;
    }
    int64_t nrepeats = parse_repeats(objs[0], &one, &heap);
    THTensor *out = NULL;
    if (nrepeats >= 0) {
        out = THTensor_newRepeatInterleave(source, nrepeats,
                                           heap ? heap : &one, dim_given,
                                           dim);
        if (out == NULL) {
            THPUtils_setErrorFromTH();
        }
    }
    PyMem_Free(heap);
    THTensor_release(source);
    int64_t made = out == NULL    ? 0
                   : dim_given ? out->sizes[dim < 0 ? dim + out->ndim : dim]
                               : out->numel;
    if (out != NULL && output_size >= 0 && made != output_size) {
        THTensor_release(out);
        PyErr_Format(PyExc_RuntimeError,
                     "repeat_interleave: Invalid output_size, expected %lld "
                     "but got %lld",
                     (long long)made, (long long)output_size);
        return NULL;
    }
    return out == NULL ? NULL : THPVariable_Wrap(out);
}
THP_DEFINE_OP(repeat_interleave)

/* ---- diagonal, diag ------------------------------------------------------------- */

static PyObject *
diagonal_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    static const char *const names[] = {"offset", "dim1", "dim2"};
    PyObject *objs[3];
    int64_t v[3] = {0, 0, 1};
    if (THPUtils_parseArgs("diagonal", args, nargs, kwnames, names, 3, 3,
                           objs)
        < 0) {
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (parse_int("diagonal", names[i], objs[i], &v[i]) < 0) {
            return NULL;
        }
    }
    return THPVariable_Wrap(
        THTensor_newDiagonal(THPVariable_Unpack(input), v[0], v[1], v[2]));
}
THP_DEFINE_OP(diagonal)

static PyObject *
diag_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    int64_t diagonal;
    PyObject *out;
    if (parse_diagonal("diag", args, nargs, kwnames, &diagonal, &out) < 0) {
        return NULL;
    }
    return result_or_out(
        "diag", out, THTensor_newDiag(THPVariable_Unpack(input), diagonal));
}
THP_DEFINE_OP(diag)

/* ---- tril / triu ---------------------------------------------------------------- */

static PyObject *
triangle(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, bool upper)
{
    int64_t diagonal;
    PyObject *out;
    const char *fname = upper ? "triu" : "tril";
    if (parse_diagonal(fname, args, nargs, kwnames, &diagonal, &out) < 0) {
        return NULL;
    }
    return result_or_out(
        fname, out,
        THTensor_newTriangle(THPVariable_Unpack(input), diagonal, upper));
}

static PyObject *
triangle_(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, bool upper)
{
    int64_t diagonal;
    if (parse_diagonal(upper ? "triu_" : "tril_", args, nargs, kwnames,
                       &diagonal, NULL)
        < 0) {
        return NULL;
    }
    if (THTensor_triangle_(THPVariable_Unpack(self), diagonal, upper) < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_INCREF(self); /* returned: self */
    return self;
}

static PyObject *
tril_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    return triangle(input, args, nargs, kwnames, false);
}
THP_DEFINE_OP(tril)

static PyObject *
triu_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    return triangle(input, args, nargs, kwnames, true);
}
THP_DEFINE_OP(triu)

static PyObject *
tril__impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    return triangle_(input, args, nargs, kwnames, false);
}

static PyObject *
triu__impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    return triangle_(input, args, nargs, kwnames, true);
}

/* ---- sort, argsort, msort, topk, kthvalue ----------------------------------- */

/* Two core results (stolen) as a result tuple (Note [Named result tuples]
 * in ReturnTypes.c), or copied into the two tensors of out_obj, which the
 * tuple then holds (Note [out= by copy]). */
static PyObject *
values_indices(const char *fname, THPResultType result_type, PyObject *out_obj,
               THTensor *values, THTensor *indices)
{
    if (out_obj == NULL || out_obj == Py_None) {
        return THPReturnTypes_packTensors(result_type, values, indices);
    }
    PyObject *result = NULL;
    if (!PyTuple_Check(out_obj) || PyTuple_GET_SIZE(out_obj) != 2
        || !THPVariable_Check(PyTuple_GET_ITEM(out_obj, 0))
        || !THPVariable_Check(PyTuple_GET_ITEM(out_obj, 1))) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'out' must be tuple of 2 Tensors, not "
                     "%.100s",
                     fname, Py_TYPE(out_obj)->tp_name);
        goto done;
    }
    PyObject *out_values = PyTuple_GET_ITEM(out_obj, 0);  /* borrowed */
    PyObject *out_indices = PyTuple_GET_ITEM(out_obj, 1); /* borrowed */
    THTensor *ov = THPVariable_Unpack(out_values);
    THTensor *oi = THPVariable_Unpack(out_indices);
    if (check_out_like(fname, ov, values) < 0
        || check_out_like(fname, oi, indices) < 0) {
        goto done;
    }
    if (THTensor_copy(ov, values) < 0 || THTensor_copy(oi, indices) < 0) {
        THPUtils_setErrorFromTH();
        goto done;
    }
    Py_INCREF(out_values);  /* held by the result */
    Py_INCREF(out_indices); /* held by the result */
    result = THPReturnTypes_pack(result_type, out_values, out_indices);
done:
    THTensor_release(values);
    THTensor_release(indices);
    return result;
}

/* The shared arguments of sort and argsort (out=, sort's only, is
 * returned when `out` is not NULL). */
static int
parse_sort_args(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames, int64_t *dim, bool *descending,
                PyObject **out)
{
    static const char *const names[] = {"dim", "descending", "stable", "out"};
    PyObject *objs[4];
    bool stable = false; /* every ember sort is stable (THSort.h) */
    *dim = -1;
    *descending = false;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names,
                           out != NULL ? 4 : 3, 2, objs)
        < 0) {
        return -1;
    }
    if (out != NULL) {
        *out = objs[3];
    }
    return parse_int(fname, "dim", objs[0], dim) < 0
                   || parse_bool(fname, "descending", objs[1], false,
                                 descending)
                          < 0
                   || parse_bool(fname, "stable", objs[2], true, &stable) < 0
               ? -1
               : 0;
}

static int
run_sort(THTensor *tensor, int64_t dim, bool descending, THTensor **values,
         THTensor **indices)
{
    int status;
    THP_RUN_WITHOUT_GIL_IF(
        THP_BIG(tensor),
        status = THTensor_sort(tensor, dim, descending, values, indices));
    return status < 0 ? THPUtils_setErrorFromTH_int() : 0;
}

static PyObject *
sort_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    int64_t dim;
    bool descending;
    PyObject *out;
    THTensor *values, *indices;
    if (parse_sort_args("sort", args, nargs, kwnames, &dim, &descending,
                        &out)
            < 0
        || run_sort(THPVariable_Unpack(input), dim, descending, &values,
                    &indices)
               < 0) {
        return NULL;
    }
    return values_indices("sort", THP_RESULT_SORT, out, values, indices);
}
THP_DEFINE_OP(sort)

static PyObject *
argsort_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    int64_t dim;
    bool descending;
    THTensor *values, *indices;
    if (parse_sort_args("argsort", args, nargs, kwnames, &dim, &descending,
                        NULL)
            < 0
        || run_sort(THPVariable_Unpack(input), dim, descending, &values,
                    &indices)
               < 0) {
        return NULL;
    }
    THTensor_release(values);
    return THPVariable_Wrap(indices);
}
THP_DEFINE_OP(argsort)

static PyObject *
msort_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    static const char *const names[] = {"out"};
    PyObject *out;
    THTensor *values, *indices;
    if (THPUtils_parseArgs("msort", args, nargs, kwnames, names, 1, 0, &out)
            < 0
        || run_sort(THPVariable_Unpack(input), 0, false, &values, &indices)
               < 0) {
        return NULL;
    }
    THTensor_release(indices);
    return result_or_out("msort", out, values);
}
THP_DEFINE_OP(msort)

static PyObject *
topk_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    static const char *const names[] = {"k", "dim", "largest", "sorted",
                                        "out"};
    PyObject *objs[5];
    int64_t k = 0, dim = -1;
    bool largest = true, sorted = true; /* always sorted: a full sort */
    THTensor *tensor = THPVariable_Unpack(input);
    THTensor *values, *indices;
    if (THPUtils_parseArgs("topk", args, nargs, kwnames, names, 5, 4, objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "topk() missing required argument 'k'");
        return NULL;
    }
    if (parse_int("topk", "k", objs[0], &k) < 0
        || parse_int("topk", "dim", objs[1], &dim) < 0
        || parse_bool("topk", "largest", objs[2], false, &largest) < 0
        || parse_bool("topk", "sorted", objs[3], false, &sorted) < 0) {
        return NULL;
    }
    int status;
    THP_RUN_WITHOUT_GIL_IF(true, status = THTensor_topk(tensor, k, dim, largest,
                                                        &values, &indices));
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    return values_indices("topk", THP_RESULT_TOPK, objs[4], values, indices);
}
THP_DEFINE_OP(topk)

static PyObject *
kthvalue_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    static const char *const names[] = {"k", "dim", "keepdim", "out"};
    PyObject *objs[4];
    int64_t k = 0, dim = -1;
    bool keepdim = false;
    THTensor *tensor = THPVariable_Unpack(input);
    THTensor *values, *indices;
    if (THPUtils_parseArgs("kthvalue", args, nargs, kwnames, names, 4, 3,
                           objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "kthvalue() missing required argument 'k'");
        return NULL;
    }
    if (parse_int("kthvalue", "k", objs[0], &k) < 0
        || parse_int("kthvalue", "dim", objs[1], &dim) < 0
        || parse_bool("kthvalue", "keepdim", objs[2], false, &keepdim) < 0) {
        return NULL;
    }
    int status;
    THP_RUN_WITHOUT_GIL_IF(true,
                           status = THTensor_kthvalue(tensor, k, dim, keepdim,
                                                      &values, &indices));
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    return values_indices("kthvalue", THP_RESULT_KTHVALUE, objs[3], values,
                          indices);
}
THP_DEFINE_OP(kthvalue)

/* ---- unique, unique_consecutive ------------------------------------------------- */

typedef int (*UniqueFn)(THTensor *input, THTensor **values,
                        THTensor **inverse, THTensor **counts);

/* PyTorch's return convention: the values alone, or a tuple of the values
 * followed by inverse and/or counts when asked for. */
static PyObject *
run_unique(const char *fname, UniqueFn unique, bool consecutive,
           THTensor *tensor, PyObject *dim_obj, bool return_inverse,
           bool return_counts)
{
    int64_t dim = 0;
    bool by_dim = dim_obj != NULL && dim_obj != Py_None;
    if (by_dim && THPUtils_unpackLong(dim_obj, fname, "dim", &dim) < 0) {
        return NULL;
    }
    THTensor *values = NULL, *inverse = NULL, *counts = NULL;
    THTensor **want_inverse = return_inverse ? &inverse : NULL;
    THTensor **want_counts = return_counts ? &counts : NULL;
    int status;
    THP_RUN_WITHOUT_GIL_IF(
        true, status = by_dim ? THTensor_uniqueDim(tensor, dim, consecutive,
                                                   &values, want_inverse,
                                                   want_counts)
                              : unique(tensor, &values, want_inverse,
                                       want_counts));
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    if (!return_inverse && !return_counts) {
        return THPVariable_Wrap(values);
    }
    PyObject *parts[3] = {THPVariable_Wrap(values), NULL, NULL};
    int nparts = 1;
    if (return_inverse) {
        parts[nparts++] = THPVariable_Wrap(inverse);
    }
    if (return_counts) {
        parts[nparts++] = THPVariable_Wrap(counts);
    }
    PyObject *result = NULL;
    if (parts[0] != NULL && parts[1] != NULL
        && (nparts < 3 || parts[2] != NULL)) {
        result = nparts == 2 ? PyTuple_Pack(2, parts[0], parts[1])
                             : PyTuple_Pack(3, parts[0], parts[1], parts[2]);
    }
    for (int i = 0; i < nparts; i++) {
        Py_XDECREF(parts[i]); /* the tuple holds its own references */
    }
    return result;
}

static PyObject *
unique_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    static const char *const names[] = {"sorted", "return_inverse",
                                        "return_counts", "dim"};
    PyObject *objs[4];
    bool sorted = true, inverse = false, counts = false;
    if (THPUtils_parseArgs("unique", args, nargs, kwnames, names, 4, 4, objs)
            < 0
        || parse_bool("unique", "sorted", objs[0], false, &sorted) < 0
        || parse_bool("unique", "return_inverse", objs[1], false, &inverse)
               < 0
        || parse_bool("unique", "return_counts", objs[2], false, &counts)
               < 0) {
        return NULL;
    }
    /* sorted=False may return any order; ember's is always ascending. */
    return run_unique("unique", THTensor_unique, false,
                      THPVariable_Unpack(input), objs[3], inverse, counts);
}
THP_DEFINE_OP(unique)

static PyObject *
unique_consecutive_impl(PyObject *input, PyObject *const *args,
                        Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"return_inverse", "return_counts",
                                        "dim"};
    PyObject *objs[3];
    bool inverse = false, counts = false;
    const char *fname = "unique_consecutive";
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 3, 3, objs)
            < 0
        || parse_bool(fname, "return_inverse", objs[0], false, &inverse) < 0
        || parse_bool(fname, "return_counts", objs[1], false, &counts) < 0) {
        return NULL;
    }
    return run_unique(fname, THTensor_uniqueConsecutive, true,
                      THPVariable_Unpack(input), objs[2], inverse, counts);
}
THP_DEFINE_OP(unique_consecutive)

/* ---- one_hot ---------------------------------------------------------------- */

static PyObject *
one_hot_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    static const char *const names[] = {"num_classes"};
    PyObject *obj;
    int64_t num_classes = -1;
    if (THPUtils_parseArgs("one_hot", args, nargs, kwnames, names, 1, 1, &obj)
            < 0
        || parse_int("one_hot", "num_classes", obj, &num_classes) < 0) {
        return NULL;
    }
    return THPVariable_Wrap(
        THTensor_newOneHot(THPVariable_Unpack(input), num_classes));
}

/* A module function only: PyTorch has no Tensor.one_hot. */
static PyObject *
THPFunction_one_hot(PyObject *module, PyObject *const *args,
                    Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    if (THPUtils_checkOpInput("one_hot", args, nargs) == NULL) {
        return NULL;
    }
    return one_hot_impl(args[0], args + 1, nargs - 1, kwnames);
}

/* ---- tables -------------------------------------------------------------------- */

/* An entry for a function or method that is only one of the two (cat is
 * no method, Tensor.repeat no function). */
#define THP_FASTCALL_ENTRY(pyname, fn, doc) \
    {pyname, THP_FASTCALL_KW(fn), METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef THPShape_functions[] = {
    THP_FASTCALL_ENTRY("cat", THPFunction_cat,
                   "cat(tensors, dim=0, *, out=None): join along dim."),
    THP_FASTCALL_ENTRY("concat", THPFunction_cat, "Alias of cat."),
    THP_FASTCALL_ENTRY("concatenate", THPFunction_cat, "Alias of cat."),
    THP_FASTCALL_ENTRY("stack", THPFunction_stack,
                   "stack(tensors, dim=0, *, out=None): join along a new "
                   "dim."),
    THP_FASTCALL_ENTRY("hstack", THPFunction_hstack,
                   "hstack(tensors, *, out=None): join column-wise."),
    THP_FASTCALL_ENTRY("vstack", THPFunction_vstack,
                   "vstack(tensors, *, out=None): join row-wise."),
    THP_FUNCTION_ENTRY("split", split,
                       "split(tensor, split_size_or_sections, dim=0): "
                       "views."),
    THP_FUNCTION_ENTRY("chunk", chunk, "chunk(input, chunks, dim=0): views."),
    THP_FUNCTION_ENTRY("tensor_split", tensor_split,
                       "tensor_split(input, indices_or_sections, dim=0): "
                       "views, as numpy.array_split."),
    THP_FUNCTION_ENTRY("unbind", unbind, "unbind(input, dim=0): views."),
    THP_FUNCTION_ENTRY("flip", flip, "flip(input, dims): reversed copy."),
    THP_FUNCTION_ENTRY("fliplr", fliplr, "flip along dim 1."),
    THP_FUNCTION_ENTRY("flipud", flipud, "flip along dim 0."),
    THP_FUNCTION_ENTRY("roll", roll,
                       "roll(input, shifts, dims=None): circular shift."),
    THP_FUNCTION_ENTRY("tile", tile, "tile(input, dims): repeat the input."),
    THP_FUNCTION_ENTRY("repeat_interleave", repeat_interleave,
                       "repeat_interleave(input, repeats, dim=None, *, "
                       "output_size=None)."),
    THP_FUNCTION_ENTRY("diagonal", diagonal,
                       "diagonal(input, offset=0, dim1=0, dim2=1): a view."),
    THP_FUNCTION_ENTRY("diag", diag,
                       "diag(input, diagonal=0): vector to matrix or matrix "
                       "diagonal (a copy)."),
    THP_FUNCTION_ENTRY("tril", tril,
                       "tril(input, diagonal=0): lower triangle."),
    THP_FUNCTION_ENTRY("triu", triu,
                       "triu(input, diagonal=0): upper triangle."),
    THP_FUNCTION_ENTRY("sort", sort,
                       "sort(input, dim=-1, descending=False, *, "
                       "stable=False) -> (values, indices); always stable."),
    THP_FUNCTION_ENTRY("argsort", argsort,
                       "argsort(input, dim=-1, descending=False, *, "
                       "stable=False)."),
    THP_FUNCTION_ENTRY("msort", msort, "msort(input): sort along dim 0."),
    THP_FUNCTION_ENTRY("topk", topk,
                       "topk(input, k, dim=-1, largest=True, sorted=True) "
                       "-> (values, indices)."),
    THP_FUNCTION_ENTRY("kthvalue", kthvalue,
                       "kthvalue(input, k, dim=-1, keepdim=False) -> "
                       "(values, indices)."),
    THP_FUNCTION_ENTRY("unique", unique,
                       "unique(input, sorted=True, return_inverse=False, "
                       "return_counts=False, dim=None)."),
    THP_FUNCTION_ENTRY("unique_consecutive", unique_consecutive,
                       "unique_consecutive(input, return_inverse=False, "
                       "return_counts=False, dim=None)."),
    THP_FASTCALL_ENTRY("_one_hot", THPFunction_one_hot,
                       "one_hot(tensor, num_classes=-1): int64 one-hot "
                       "encoding (torch.nn.functional.one_hot)."),
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_shape_methods[] = {
    THP_METHOD_ENTRY("split", split, NULL),
    THP_METHOD_ENTRY("chunk", chunk, NULL),
    THP_METHOD_ENTRY("tensor_split", tensor_split, NULL),
    THP_METHOD_ENTRY("unbind", unbind, NULL),
    THP_METHOD_ENTRY("flip", flip, NULL),
    THP_METHOD_ENTRY("fliplr", fliplr, NULL),
    THP_METHOD_ENTRY("flipud", flipud, NULL),
    THP_METHOD_ENTRY("roll", roll, NULL),
    THP_FASTCALL_ENTRY("repeat", repeat_impl, NULL),
    THP_METHOD_ENTRY("tile", tile, NULL),
    THP_METHOD_ENTRY("repeat_interleave", repeat_interleave, NULL),
    THP_METHOD_ENTRY("diagonal", diagonal, NULL),
    THP_METHOD_ENTRY("diag", diag, NULL),
    THP_METHOD_ENTRY("tril", tril, NULL),
    THP_METHOD_ENTRY("triu", triu, NULL),
    THP_FASTCALL_ENTRY("tril_", tril__impl, NULL),
    THP_FASTCALL_ENTRY("triu_", triu__impl, NULL),
    THP_METHOD_ENTRY("sort", sort, NULL),
    THP_METHOD_ENTRY("argsort", argsort, NULL),
    THP_METHOD_ENTRY("msort", msort, NULL),
    THP_METHOD_ENTRY("topk", topk, NULL),
    THP_METHOD_ENTRY("kthvalue", kthvalue, NULL),
    THP_METHOD_ENTRY("unique", unique, NULL),
    THP_METHOD_ENTRY("unique_consecutive", unique_consecutive, NULL),
    {NULL, NULL, 0, NULL},
};

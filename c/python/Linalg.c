/*
 * Linalg.c -- matmul and its family (mm, bmm, mv, dot, vdot, outer, addmm,
 * baddbmm) on the packed GEMM of THBlas.
 * See Note [Function and method from one implementation] in THP.h.
 *
 * Every operator here is one product C = beta * C + alpha * A @ B over
 * broadcast batch dims (Note [Products as batched GEMM]); the operators
 * differ only in which shapes they accept and in the words of their errors,
 * which follow PyTorch's: each one checks its operands in PyTorch's order
 * (shapes, then dtypes, then the dtypes it does not support) and reports
 * sizes as PyTorch would see them.  Like PyTorch, none of them promotes
 * dtypes except outer (a broadcast multiply).
 *
 * Note [Products as batched GEMM]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A 1-D left operand becomes a 1 x k row, a 1-D right operand a k x 1
 * column; the batch dims of both are broadcast and both operands expanded
 * to them (views, no copy); the result is allocated without the dims the
 * vectors stood for and viewed with them reinserted for the GEMM.  So dot,
 * mv, mm, bmm and N-D matmul all reach THBlas_gemmTensor, which folds
 * what it can back into one large GEMM.
 */
#include "THP.h"

#include <stdarg.h>
#include <string.h>

/* Products with at least this many multiply-adds release the GIL. */
#define LINALG_GIL_RELEASE_WORK ((int64_t)1 << 16)

/* ---- PyTorch's names for dtypes in messages -------------------------------- */


#define SIZES_BUFFER (TH_MAX_DIMS * 24 + 4)

static int
runtime_error(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    PyErr_FormatV(PyExc_RuntimeError, fmt, args);
    va_end(args);
    return -1;
}

/* PyTorch has no bool kernel for its products (NotImplementedError, a
 * subclass of RuntimeError). */
static int
check_not_bool(THDtype dtype, const char *kernel)
{
    if (dtype == TH_Bool) {
        PyErr_Format(PyExc_NotImplementedError,
                     "\"%s\" not implemented for 'Bool'", kernel);
        return -1;
    }
    return 0;
}

/* ---- argument parsing --------------------------------------------------------- */

/* Parses `ntensors` tensor arguments (positional or by name; names[0..])
 * followed by keyword-only ones (names[ntensors..]), such as beta, alpha
 * and out.  `out=None` counts as absent.  Borrowed references. */
static int
parse_op_args(const char *fname, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, const char *const *names, int nnames,
              int ntensors, PyObject **objs, THTensor **tensors)
{
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, nnames,
                           ntensors, objs)
        < 0) {
        return -1;
    }
    for (int i = 0; i < ntensors; i++) {
        if (objs[i] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() missing required argument '%s' (pos %d)",
                         fname, names[i], i + 2);
            return -1;
        }
        if (!THPVariable_Check(objs[i])) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' (position %d) must be Tensor, "
                         "not %.100s",
                         fname, names[i], i + 2, Py_TYPE(objs[i])->tp_name);
            return -1;
        }
        tensors[i] = THPVariable_Unpack(objs[i]);
    }
    for (int i = ntensors; i < nnames; i++) {
        if (objs[i] == Py_None) {
            objs[i] = NULL;
        }
        if (objs[i] != NULL && strcmp(names[i], "out") == 0
            && !THPVariable_Check(objs[i])) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'out' must be Tensor, not %.100s",
                         fname, Py_TYPE(objs[i])->tp_name);
            return -1;
        }
    }
    return 0;
}

/* beta or alpha: absent means 1. */
static int
parse_coefficient(PyObject *obj, THScalar *out)
{
    if (obj == NULL) {
        *out = THScalar_fromInt(1);
        return 0;
    }
    return THPUtils_parseScalar(obj, out);
}

static bool
scalar_is_zero(THScalar s)
{
    switch (s.dtype) {
    case TH_Bool:
        return !s.value.b;
    case TH_Int64:
        return s.value.i == 0;
    default:
        return s.value.d == 0;
    }
}

/* ---- the checks of each product, in PyTorch's order and words ----------------- */

/* mm, and matmul with a matrix (or a folded batch of rows) on the right. */
static int
check_mm(int64_t m, int64_t k1, int64_t k2, int64_t n, THDtype dtype1,
         THDtype dtype2)
{
    if (k1 != k2) {
        return runtime_error("mat1 and mat2 shapes cannot be multiplied "
                             "(%lldx%lld and %lldx%lld)",
                             (long long)m, (long long)k1, (long long)k2,
                             (long long)n);
    }
    if (dtype1 != dtype2) {
        return runtime_error("expected m1 and m2 to have the same dtype, "
                             "but got: %s != %s",
                             THDtype_cppTypeName(dtype1), THDtype_cppTypeName(dtype2));
    }
    return check_not_bool(dtype1, "addmm_impl_cpu_");
}

/* mv, and matmul with a vector on the right. */
static int
check_mv(int64_t m, int64_t k, int64_t vec_len, THDtype mat_dtype,
         THDtype vec_dtype)
{
    if (k != vec_len) {
        return runtime_error("size mismatch, got input (%lld), mat "
                             "(%lldx%lld), vec (%lld)",
                             (long long)m, (long long)m, (long long)k,
                             (long long)vec_len);
    }
    if (mat_dtype != vec_dtype) {
        return runtime_error("addmv input tensors must have the same dtype, "
                             "but got %s, %s, and %s",
                             THDtype_scalarTypeName(vec_dtype),
                             THDtype_scalarTypeName(mat_dtype),
                             THDtype_scalarTypeName(vec_dtype));
    }
    return check_not_bool(mat_dtype, "addmv_impl_cpu");
}

/* dot and vdot (real dtypes: the same product). */
static int
check_dot(const char *fname, THTensor *a, THTensor *b)
{
    if (a->ndim != 1 || b->ndim != 1) {
        return runtime_error("1D tensors expected, but got %dD and %dD "
                             "tensors",
                             a->ndim, b->ndim);
    }
    if (a->dtype != b->dtype) {
        return runtime_error("%s : expected both vectors to have same dtype, "
                             "but found %s and %s",
                             fname, THDtype_scalarTypeName(a->dtype),
                             THDtype_scalarTypeName(b->dtype));
    }
    if (a->sizes[0] != b->sizes[0]) {
        return runtime_error("inconsistent tensor size, expected tensor "
                             "[%lld] and src [%lld] to have the same number "
                             "of elements, but got %lld and %lld elements "
                             "respectively",
                             (long long)a->sizes[0], (long long)b->sizes[0],
                             (long long)a->sizes[0], (long long)b->sizes[0]);
    }
    return check_not_bool(a->dtype, fname);
}

/* bmm, and batched matmul after broadcasting (`batch` products). */
static int
check_bmm(int64_t batch, int64_t k1, int64_t k2, THDtype dtype1,
          THDtype dtype2)
{
    if (k1 != k2) {
        return runtime_error("Expected size for first two dimensions of "
                             "batch2 tensor to be: [%lld, %lld] but got: "
                             "[%lld, %lld].",
                             (long long)batch, (long long)k1,
                             (long long)batch, (long long)k2);
    }
    if (dtype1 != dtype2) {
        return runtime_error("expected scalar type %s but found %s",
                             THDtype_scalarTypeName(dtype1),
                             THDtype_scalarTypeName(dtype2));
    }
    return check_not_bool(dtype1, "bmm");
}

/* The broadcast shape of two batch shapes (right-aligned), PyTorch's
 * message on a mismatch.  Returns the number of dims or -1. */
static int
broadcast_batch(int na, const int64_t *a, int nb, const int64_t *b,
                int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int d = 0; d < n; d++) {
        int da = d - (n - na), db = d - (n - nb);
        int64_t sa = da >= 0 ? a[da] : 1, sb = db >= 0 ? b[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            return runtime_error("The size of tensor a (%lld) must match the "
                                 "size of tensor b (%lld) at non-singleton "
                                 "dimension %d",
                                 (long long)sa, (long long)sb, d);
        }
        out[d] = sa == 1 ? sb : sa;
    }
    return n;
}

/* ---- one product (Note [Products as batched GEMM]) ----------------------------- */

typedef struct {
    THTensor *a;   /* owned: (batch..., m, k) */
    THTensor *b;   /* owned: (batch..., k, n) */
    int ndim;      /* of the result: batch dims, then m and n unless a
                      vector stood for them */
    int64_t sizes[TH_MAX_DIMS];
    bool a_was_vector, b_was_vector;
} Product;

static void
product_release(Product *p)
{
    if (p->a != NULL) {
        THTensor_release(p->a);
    }
    if (p->b != NULL) {
        THTensor_release(p->b);
    }
    p->a = p->b = NULL;
}

/* A view of `tensor` with its first ndim - 2 dims broadcast to `batch`. */
static THTensor *
expand_batch(THTensor *tensor, int nbatch, const int64_t *batch)
{
    int64_t sizes[TH_MAX_DIMS];
    memcpy(sizes, batch, (size_t)nbatch * sizeof(int64_t));
    sizes[nbatch] = tensor->sizes[tensor->ndim - 2];
    sizes[nbatch + 1] = tensor->sizes[tensor->ndim - 1];
    return THTensor_newExpand(tensor, nbatch + 2, sizes);
}

/* Builds the product of a (ndim >= 1) and b (ndim >= 1) whose shapes the
 * caller has checked.  Returns 0, or -1 with a Python exception. */
static int
product_init(Product *p, THTensor *a_in, THTensor *b_in)
{
    p->a = p->b = NULL;
    p->a_was_vector = a_in->ndim == 1;
    p->b_was_vector = b_in->ndim == 1;
    THTensor *a = p->a_was_vector ? THTensor_newUnsqueeze(a_in, 0)
                                  : (THTensor_retain(a_in), a_in);
    THTensor *b = p->b_was_vector ? THTensor_newUnsqueeze(b_in, 1)
                                  : (THTensor_retain(b_in), b_in);
    if (a == NULL || b == NULL) {
        goto fail_th;
    }
    int64_t batch[TH_MAX_DIMS];
    int nbatch = broadcast_batch(a->ndim - 2, a->sizes, b->ndim - 2,
                                 b->sizes, batch);
    if (nbatch < 0) {
        goto fail;
    }
    p->a = expand_batch(a, nbatch, batch);
    p->b = expand_batch(b, nbatch, batch);
    if (p->a == NULL || p->b == NULL) {
        goto fail_th;
    }
    THTensor_release(a);
    THTensor_release(b);
    p->ndim = nbatch;
    memcpy(p->sizes, batch, (size_t)nbatch * sizeof(int64_t));
    if (!p->a_was_vector) {
        p->sizes[p->ndim++] = p->a->sizes[nbatch];
    }
    if (!p->b_was_vector) {
        p->sizes[p->ndim++] = p->b->sizes[nbatch + 1];
    }
    return 0;
fail_th:
    THPUtils_setErrorFromTH();
fail:
    if (a != NULL) {
        THTensor_release(a);
    }
    if (b != NULL) {
        THTensor_release(b);
    }
    product_release(p);
    return -1;
}

/* The result viewed as (batch..., m, n): the vector dims put back. */
static THTensor *
new_gemm_view(const Product *p, THTensor *result)
{
    int nbatch = p->a->ndim - 2;
    THTensor_retain(result);
    THTensor *view = result;
    if (p->a_was_vector) {
        view = THTensor_newUnsqueeze(result, nbatch);
        THTensor_release(result);
        if (view == NULL) {
            return NULL;
        }
    }
    if (p->b_was_vector) {
        THTensor *column = THTensor_newUnsqueeze(view, nbatch + 1);
        THTensor_release(view);
        view = column;
    }
    return view;
}

/* Whether the addend is copied into the result first (beta == 0 ignores
 * it, NaNs included, as in PyTorch). */
static bool
adds_init(THTensor *init, THScalar beta)
{
    return init != NULL && !scalar_is_zero(beta);
}

/* target = beta * init + alpha * a @ b (init NULL: no addend). */
static int
run_gemm(const Product *p, THTensor *target, THTensor *init, THScalar beta,
         THScalar alpha)
{
    bool add_init = adds_init(init, beta);
    if (add_init && THTensor_copy(target, init) < 0) {
        return -1;
    }
    THTensor *c = new_gemm_view(p, target);
    if (c == NULL) {
        return -1;
    }
    int nd = p->a->ndim;
    int64_t work = c->numel * p->a->sizes[nd - 1];
    THScalar gemm_beta = add_init ? beta : THScalar_fromInt(0);
    int status;
    THP_RUN_WITHOUT_GIL_IF(
        work >= LINALG_GIL_RELEASE_WORK,
        status = THBlas_gemmTensor(c, p->a, p->b, gemm_beta, alpha));
    THTensor_release(c);
    return status;
}

static bool
same_sizes(const THTensor *t, int ndim, const int64_t *sizes)
{
    return t->ndim == ndim
           && memcmp(t->sizes, sizes, (size_t)ndim * sizeof(int64_t)) == 0;
}

/* Checks an out= tensor (or the self of an in-place op) before anything is
 * written. */
static int
check_out(const Product *p, THTensor *out, bool in_place)
{
    char want[SIZES_BUFFER], got[SIZES_BUFFER];
    THDtype dtype = p->a->dtype;
    if (!same_sizes(out, p->ndim, p->sizes)) {
        THTensor_formatSizes(want, sizeof(want), p->ndim, p->sizes);
        THTensor_formatSizes(got, sizeof(got), out->ndim, out->sizes);
        if (in_place) {
            return runtime_error("Bad in-place call: input tensor size %s "
                                 "and output tensor size %s should match",
                                 got, want);
        }
        return runtime_error("Expected out tensor to have shape %s, but got "
                             "%s instead",
                             want, got);
    }
    if (out->dtype != dtype) {
        return runtime_error("Expected out tensor to have dtype %s, but got "
                             "%s instead",
                             THDtype_cppTypeName(dtype), THDtype_cppTypeName(out->dtype));
    }
    if (THTensor_checkWritable(out) < 0) {
        return THPUtils_setErrorFromTH_int();
    }
    if (THTensor_checkNoInternalOverlap(out) < 0) {
        return THPUtils_setErrorFromTH_int();
    }
    return 0;
}

/* Computes the product into a new tensor, or into `out_obj` (out= or the
 * self of an in-place op).  Consumes nothing; returns a new reference. */
static PyObject *
run_product(const Product *p, THTensor *init, THScalar beta, THScalar alpha,
            PyObject *out_obj, bool in_place)
{
    if (out_obj == NULL) {
        THTensor *result = THTensor_newEmpty(p->ndim, p->sizes, p->a->dtype,
                                             p->a->storage->device);
        if (result == NULL || run_gemm(p, result, init, beta, alpha) < 0) {
            if (result != NULL) {
                THTensor_release(result);
            }
            return THPUtils_setErrorFromTH();
        }
        return THPVariable_Wrap(result);
    }
    THTensor *out = THPVariable_Unpack(out_obj);
    if (check_out(p, out, in_place) < 0) {
        return NULL;
    }
    /* An out that shares memory with an operand is written last, from a
     * temporary, so no operand changes while it is read. */
    bool aside = THTensor_mayOverlap(out, p->a) || THTensor_mayOverlap(out, p->b);
    THTensor *target = out;
    if (aside) {
        target = THTensor_newEmpty(p->ndim, p->sizes, out->dtype,
                                   out->storage->device);
        if (target == NULL) {
            return THPUtils_setErrorFromTH();
        }
    }
    int status = run_gemm(p, target, init, beta, alpha);
    if (aside) {
        if (status == 0) {
            status = THTensor_copy(out, target); /* bumps the version */
        }
        THTensor_release(target);
    } else if (status == 0 && !adds_init(init, beta)) {
        THTensor_bumpVersion(out); /* (copying the addend in bumped it) */
    }
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    return Py_NewRef(out_obj);
}

/* The product of a and b (shapes checked) with no addend. */
static PyObject *
multiply(THTensor *a, THTensor *b, PyObject *out_obj)
{
    Product p;
    if (product_init(&p, a, b) < 0) {
        return NULL;
    }
    PyObject *result = run_product(&p, NULL, THScalar_fromInt(0),
                                   THScalar_fromInt(1), out_obj, false);
    product_release(&p);
    return result;
}

/* ---- matmul ------------------------------------------------------------------- */

static int64_t
prod_sizes(int ndim, const int64_t *sizes)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        n *= sizes[d];
    }
    return n;
}

/* PyTorch's dispatch of matmul, for its checks: vector.vector is dot,
 * matrix @ vector is mv, (vector or matrix) @ matrix is mm, and an N-D
 * left operand times a vector or matrix is folded into one mv or mm; the
 * rest is a broadcast bmm. */
static int
check_matmul(THTensor *a, THTensor *b)
{
    int da = a->ndim, db = b->ndim;
    if (da == 0 || db == 0) {
        return runtime_error("both arguments to matmul need to be at least "
                             "1D, but they are %dD and %dD",
                             da, db);
    }
    if (da == 1 && db == 1) {
        return check_dot("dot", a, b);
    }
    if (db == 1 && da >= 2) {
        return check_mv(prod_sizes(da - 1, a->sizes), a->sizes[da - 1],
                        b->sizes[0], a->dtype, b->dtype);
    }
    if (db == 2 && da <= 2) {
        return check_mm(da == 1 ? 1 : a->sizes[0], a->sizes[da - 1],
                        b->sizes[0], b->sizes[1], a->dtype, b->dtype);
    }
    if (db == 2) {
        return check_mm(prod_sizes(da - 1, a->sizes), a->sizes[da - 1],
                        b->sizes[0], b->sizes[1], a->dtype, b->dtype);
    }
    int64_t batch[TH_MAX_DIMS];
    int nbatch = broadcast_batch(da > 2 ? da - 2 : 0, a->sizes, db - 2,
                                 b->sizes, batch);
    if (nbatch < 0) {
        return -1;
    }
    return check_bmm(prod_sizes(nbatch, batch), a->sizes[da - 1],
                     b->sizes[db - 2], a->dtype, b->dtype);
}

static PyObject *
matmul_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    static const char *const names[] = {"other", "out"};
    PyObject *objs[2];
    THTensor *other;
    if (parse_op_args("matmul", args, nargs, kwnames, names, 2, 1, objs,
                      &other)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (check_matmul(self, other) < 0) {
        return NULL;
    }
    return multiply(self, other, objs[1]);
}
THP_DEFINE_OP(matmul)

/* The @ operator: NotImplemented for a non-tensor operand, so Python tries
 * the other operand's __rmatmul__ and then raises TypeError. */
static PyObject *
matmul_slot_pinned(PyObject *a, PyObject *b)
{
    PyObject *operands[2] = {a, b}, *routed;
    if (THPAutograd_maybeDispatch("__matmul__", operands, 2, &routed)) {
        return routed;
    }
    THTensor *ta = THPVariable_Unpack(a), *tb = THPVariable_Unpack(b);
    if (check_matmul(ta, tb) < 0) {
        return NULL;
    }
    return multiply(ta, tb, NULL);
}

static PyObject *
THPVariable_matmul_slot(PyObject *a, PyObject *b)
{
    if (!THPVariable_Check(a) || !THPVariable_Check(b)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return THPPin_callBinary("__matmul__", matmul_slot_pinned, a, b,
                             false);
}

/* ---- mm, bmm, mv, dot, vdot, outer -------------------------------------------- */

static PyObject *
mm_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
        PyObject *kwnames)
{
    static const char *const names[] = {"mat2", "out"};
    PyObject *objs[2];
    THTensor *mat2;
    if (parse_op_args("mm", args, nargs, kwnames, names, 2, 1, objs, &mat2)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (self->ndim != 2) {
        runtime_error("self must be a matrix");
        return NULL;
    }
    if (mat2->ndim != 2) {
        runtime_error("mat2 must be a matrix");
        return NULL;
    }
    if (check_mm(self->sizes[0], self->sizes[1], mat2->sizes[0],
                 mat2->sizes[1], self->dtype, mat2->dtype)
        < 0) {
        return NULL;
    }
    return multiply(self, mat2, objs[1]);
}
THP_DEFINE_OP(mm)

static PyObject *
bmm_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    static const char *const names[] = {"mat2", "out"};
    PyObject *objs[2];
    THTensor *mat2;
    if (parse_op_args("bmm", args, nargs, kwnames, names, 2, 1, objs, &mat2)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (self->ndim != 3) {
        runtime_error("batch1 must be a 3D tensor");
        return NULL;
    }
    if (mat2->ndim != 3) {
        runtime_error("batch2 must be a 3D tensor");
        return NULL;
    }
    /* bmm does not broadcast: the batch sizes are part of the check. */
    if (self->sizes[0] != mat2->sizes[0]) {
        runtime_error("Expected size for first two dimensions of batch2 "
                      "tensor to be: [%lld, %lld] but got: [%lld, %lld].",
                      (long long)self->sizes[0], (long long)self->sizes[2],
                      (long long)mat2->sizes[0], (long long)mat2->sizes[1]);
        return NULL;
    }
    if (check_bmm(self->sizes[0], self->sizes[2], mat2->sizes[1],
                  self->dtype, mat2->dtype)
        < 0) {
        return NULL;
    }
    return multiply(self, mat2, objs[1]);
}
THP_DEFINE_OP(bmm)

static PyObject *
mv_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
        PyObject *kwnames)
{
    static const char *const names[] = {"vec", "out"};
    PyObject *objs[2];
    THTensor *vec;
    if (parse_op_args("mv", args, nargs, kwnames, names, 2, 1, objs, &vec)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (self->ndim != 2 || vec->ndim != 1) {
        runtime_error("vector + matrix @ vector expected, got 1, %d, %d",
                      self->ndim, vec->ndim);
        return NULL;
    }
    if (check_mv(self->sizes[0], self->sizes[1], vec->sizes[0], self->dtype,
                 vec->dtype)
        < 0) {
        return NULL;
    }
    return multiply(self, vec, objs[1]);
}
THP_DEFINE_OP(mv)

/* dot and vdot: for real dtypes vdot's conjugation is the identity.
 * `other_name` is the second argument's name: "tensor" for dot, "other"
 * for vdot (PyTorch's). */
static PyObject *
dot_like(const char *fname, const char *other_name, PyObject *input,
         PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const char *const names[] = {other_name, "out"};
    PyObject *objs[2];
    THTensor *other;
    if (parse_op_args(fname, args, nargs, kwnames, names, 2, 1, objs, &other)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (check_dot("dot", self, other) < 0) { /* PyTorch's vdot says "dot" */
        return NULL;
    }
    return multiply(self, other, objs[1]);
}

static PyObject *
dot_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return dot_like("dot", "tensor", input, args, nargs, kwnames);
}
THP_DEFINE_OP(dot)

static PyObject *
vdot_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    return dot_like("vdot", "other", input, args, nargs, kwnames);
}
THP_DEFINE_OP(vdot)

/* outer(a, b)[i, j] = a[i] * b[j]: a k = 1 product of a column and a row.
 * Unlike the other products it promotes, being a broadcast multiply. */
static PyObject *
outer_like(const char *fname, PyObject *input, PyObject *const *args,
           Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"vec2", "out"};
    PyObject *objs[2];
    THTensor *vec2;
    if (parse_op_args(fname, args, nargs, kwnames, names, 2, 1, objs, &vec2)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (self->ndim != 1 || vec2->ndim != 1) {
        runtime_error("outer: Expected 1-D argument %s, but got %d-D",
                      self->ndim != 1 ? "self" : "vec2",
                      self->ndim != 1 ? self->ndim : vec2->ndim);
        return NULL;
    }
    THDtype dtype = THDtype_promote(self->dtype, vec2->dtype);
    THTensor *a = THTensor_newCast(self, dtype, false);
    THTensor *b = THTensor_newCast(vec2, dtype, false);
    THTensor *column = a == NULL ? NULL : THTensor_newUnsqueeze(a, 1);
    THTensor *row = b == NULL ? NULL : THTensor_newUnsqueeze(b, 0);
    PyObject *result = NULL;
    if (column == NULL || row == NULL) {
        THPUtils_setErrorFromTH();
    } else {
        result = multiply(column, row, objs[1]);
    }
    THTensor *owned[] = {a, b, column, row};
    for (int i = 0; i < 4; i++) {
        if (owned[i] != NULL) {
            THTensor_release(owned[i]);
        }
    }
    return result;
}

static PyObject *
outer_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    return outer_like("outer", input, args, nargs, kwnames);
}
THP_DEFINE_OP(outer)

static PyObject *
ger_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    return outer_like("ger", input, args, nargs, kwnames);
}
THP_DEFINE_OP(ger)

/* ---- addmm, baddbmm and their in-place forms ----------------------------------- */

/* input broadcast to the product's shape, then beta * input + alpha * a @
 * b, into a new tensor, out=, or input itself (in_place). */
static PyObject *
add_product(PyObject *input, THTensor *a, THTensor *b, PyObject *beta_obj,
            PyObject *alpha_obj, PyObject *out_obj, bool in_place)
{
    THScalar beta, alpha;
    if (parse_coefficient(beta_obj, &beta) < 0
        || parse_coefficient(alpha_obj, &alpha) < 0) {
        return NULL;
    }
    Product p;
    if (product_init(&p, a, b) < 0) {
        return NULL;
    }
    THTensor *init = THTensor_newExpand(THPVariable_Unpack(input), p.ndim,
                                        p.sizes);
    PyObject *result = NULL;
    if (init == NULL) {
        THPUtils_setErrorFromTH();
    } else {
        result = run_product(&p, init, beta, alpha,
                             in_place ? input : out_obj, in_place);
        THTensor_release(init);
    }
    product_release(&p);
    return result;
}

static PyObject *
addmm_common(const char *fname, PyObject *input, PyObject *const *args,
             Py_ssize_t nargs, PyObject *kwnames, bool in_place)
{
    static const char *const names[] = {"mat1", "mat2", "beta", "alpha",
                                        "out"};
    PyObject *objs[5];
    THTensor *mats[2];
    if (parse_op_args(fname, args, nargs, kwnames, names, in_place ? 4 : 5,
                      2, objs, mats)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    for (int i = 0; i < 2; i++) {
        if (mats[i]->ndim != 2) {
            runtime_error("%s must be a matrix, got %d-D tensor", names[i],
                          mats[i]->ndim);
            return NULL;
        }
    }
    if (self->dtype != mats[1]->dtype) {
        runtime_error("self and mat2 must have the same dtype, but got %s "
                      "and %s",
                      THDtype_scalarTypeName(self->dtype),
                      THDtype_scalarTypeName(mats[1]->dtype));
        return NULL;
    }
    if (mats[0]->dtype != mats[1]->dtype) {
        runtime_error("mat1 and mat2 must have the same dtype, but got %s "
                      "and %s",
                      THDtype_scalarTypeName(mats[0]->dtype),
                      THDtype_scalarTypeName(mats[1]->dtype));
        return NULL;
    }
    if (check_mm(mats[0]->sizes[0], mats[0]->sizes[1], mats[1]->sizes[0],
                 mats[1]->sizes[1], mats[0]->dtype, mats[1]->dtype)
        < 0) {
        return NULL;
    }
    return add_product(input, mats[0], mats[1], objs[2], objs[3],
                       in_place ? NULL : objs[4], in_place);
}

static PyObject *
addmm_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    return addmm_common("addmm", input, args, nargs, kwnames, false);
}
THP_DEFINE_OP(addmm)

/* In-place: a method only (PyTorch has no module-level addmm_). */
static PyObject *
THPMethod_addmm_(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    return addmm_common("addmm_", input, args, nargs, kwnames, true);
}

static PyObject *
baddbmm_common(const char *fname, PyObject *input, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, bool in_place)
{
    static const char *const names[] = {"batch1", "batch2", "beta", "alpha",
                                        "out"};
    PyObject *objs[5];
    THTensor *batches[2];
    if (parse_op_args(fname, args, nargs, kwnames, names, in_place ? 4 : 5,
                      2, objs, batches)
        < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *b1 = batches[0], *b2 = batches[1];
    for (int i = 0; i < 2; i++) {
        if (batches[i]->ndim != 3) {
            runtime_error("%s must be a 3D tensor", names[i]);
            return NULL;
        }
    }
    if (b1->dtype != b2->dtype) {
        runtime_error("expected scalar type %s but found %s",
                      THDtype_scalarTypeName(b1->dtype),
                      THDtype_scalarTypeName(b2->dtype));
        return NULL;
    }
    if (b1->sizes[0] != b2->sizes[0] || b1->sizes[2] != b2->sizes[1]) {
        runtime_error("Expected size for first two dimensions of batch2 "
                      "tensor to be: [%lld, %lld] but got: [%lld, %lld].",
                      (long long)b1->sizes[0], (long long)b1->sizes[2],
                      (long long)b2->sizes[0], (long long)b2->sizes[1]);
        return NULL;
    }
    if (self->dtype != b1->dtype || b1->dtype == TH_Bool) {
        runtime_error("Input dtypes must be the same, got: input %s, "
                      "batch1: %s, batch2: %s",
                      THDtype_cppTypeName(self->dtype), THDtype_cppTypeName(b1->dtype),
                      THDtype_cppTypeName(b2->dtype));
        return NULL;
    }
    return add_product(input, b1, b2, objs[2], objs[3],
                       in_place ? NULL : objs[4], in_place);
}

static PyObject *
baddbmm_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    return baddbmm_common("baddbmm", input, args, nargs, kwnames, false);
}
THP_DEFINE_OP(baddbmm)

/* In-place: a method only (PyTorch has no module-level baddbmm_). */
static PyObject *
THPMethod_baddbmm_(PyObject *input, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames)
{
    return baddbmm_common("baddbmm_", input, args, nargs, kwnames, true);
}

/* _gemm_kernel([name]): the GEMM micro-kernel family in use ("avx512",
 * "avx2" or "generic"); with a name, selects that family first (tests and
 * benchmarks use it). */
static PyObject *
THPLinalg_gemm_kernel(PyObject *module, PyObject *args)
{
    (void)module;
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "|s:_gemm_kernel", &name)) {
        return NULL;
    }
    if (name != NULL && THBlas_setKernel(name) < 0) {
        return THPUtils_setErrorFromTH();
    }
    return PyUnicode_FromString(THBlas_kernelName());
}

/* _gemm_blocking() -> dict: the family in use, the cache sizes (bytes,
 * L1 to L3) and, per packed dtype, the tile (mr x nr) and blocks (mc, kc,
 * nc) derived from them (Note [GEMM blocking from the cache sizes]), and
 * whether bfloat16 products run on the CPU's bfloat16 dot-product
 * instruction (Note [Half-precision matmul]). */
static PyObject *
THPLinalg_gemm_blocking(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int64_t caches[3];
    THBlasBlocking f, d;
    THBlas_cacheSizes(caches);
    if (THBlas_blocking(TH_Float32, &f) < 0
        || THBlas_blocking(TH_Float64, &d) < 0) {
        return THPUtils_setErrorFromTH();
    }
    return Py_BuildValue(
        "{s:s,s:(LLL),s:{s:i,s:i,s:L,s:L,s:L},s:{s:i,s:i,s:L,s:L,s:L},s:O}",
        "kernel", THBlas_kernelName(), "caches", (long long)caches[0],
        (long long)caches[1], (long long)caches[2], "float32", "mr", f.mr,
        "nr", f.nr, "mc", (long long)f.mc, "kc", (long long)f.kc, "nc",
        (long long)f.nc, "float64", "mr", d.mr, "nr", d.nr, "mc",
        (long long)d.mc, "kc", (long long)d.kc, "nc", (long long)d.nc,
        "bfloat16_dot", THBlas_bf16DotAvailable() ? Py_True : Py_False);
}

/* ---- tables -------------------------------------------------------------------- */

PyMethodDef THPLinalg_functions[] = {
    THP_FUNCTION_ENTRY("matmul", matmul,
                       "matmul(input, other, *, out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("mm", mm, "mm(input, mat2, *, out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("bmm", bmm, "bmm(input, mat2, *, out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("mv", mv, "mv(input, vec, *, out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("dot", dot, "dot(input, tensor, *, out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("vdot", vdot,
                       "vdot(input, other, *, out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("outer", outer,
                       "outer(input, vec2, *, out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("ger", ger, "ger(input, vec2, *, out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("addmm", addmm,
                       "addmm(input, mat1, mat2, *, beta=1, alpha=1, "
                       "out=None) -> Tensor"),
    THP_FUNCTION_ENTRY("baddbmm", baddbmm,
                       "baddbmm(input, batch1, batch2, *, beta=1, alpha=1, "
                       "out=None) -> Tensor"),
    {"_gemm_kernel", THPLinalg_gemm_kernel, METH_VARARGS,
     "_gemm_kernel([name]) -> str: the GEMM kernel family in use"},
    {"_gemm_blocking", THPLinalg_gemm_blocking, METH_NOARGS,
     "_gemm_blocking() -> dict: the GEMM family, cache sizes and blocking"},
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_linalg_methods[] = {
    THP_METHOD_ENTRY("matmul", matmul, "matmul(other) -> Tensor"),
    THP_METHOD_ENTRY("mm", mm, "mm(mat2) -> Tensor"),
    THP_METHOD_ENTRY("bmm", bmm, "bmm(mat2) -> Tensor"),
    THP_METHOD_ENTRY("mv", mv, "mv(vec) -> Tensor"),
    THP_METHOD_ENTRY("dot", dot, "dot(tensor) -> Tensor"),
    THP_METHOD_ENTRY("vdot", vdot, "vdot(other) -> Tensor"),
    THP_METHOD_ENTRY("outer", outer, "outer(vec2) -> Tensor"),
    THP_METHOD_ENTRY("ger", ger, "ger(vec2) -> Tensor"),
    THP_METHOD_ENTRY("addmm", addmm,
                     "addmm(mat1, mat2, *, beta=1, alpha=1) -> Tensor"),
    THP_METHOD_ENTRY("addmm_", addmm_,
                     "addmm_(mat1, mat2, *, beta=1, alpha=1) -> Tensor"),
    THP_METHOD_ENTRY("baddbmm", baddbmm,
                     "baddbmm(batch1, batch2, *, beta=1, alpha=1) -> Tensor"),
    THP_METHOD_ENTRY("baddbmm_", baddbmm_,
                     "baddbmm_(batch1, batch2, *, beta=1, alpha=1) -> "
                     "Tensor"),
    {NULL, NULL, 0, NULL},
};

/* a @= b rebinds a to a @ b, as in PyTorch (whose tensors have no
 * __imatmul__): the tensor a named before is left unchanged. */
void
THPLinalg_initTypeSlots(PyNumberMethods *number)
{
    number->nb_matrix_multiply = THPVariable_matmul_slot;
    number->nb_inplace_matrix_multiply = THPVariable_matmul_slot;
}

/*
 * Norm.c -- the normalisation kernels of c/th/THNorm.c as private
 * functions of ember._C: for ember.nn.functional.batch_norm these three,
 * and for layer_norm and group_norm _layer_norm, _group_norm and their
 * backwards (documented at the end):
 *
 *   _batch_norm_stats(input)                       -> (mean, biased var)
 *   _batch_norm(input, mean, var, weight, bias, eps) -> output
 *   _batch_norm_backward(grad_output, input, mean, var, weight, eps,
 *                        training, input_mask, weight_mask, bias_mask)
 *                        -> (grad_input, grad_weight, grad_bias), None
 *                           where the mask is false
 *
 * Python passes a contiguous (N, C, *) input and per-channel tensors of its
 * dtype (weight, bias may be None); PyTorch's argument checks and the
 * running statistics' update live there.  The checks here keep a direct
 * caller from reading out of bounds.  Pinned functions (Note [Pinned
 * arguments]): every number is read before a THTensor is taken.
 */
#include "THP.h"

#include "THNorm.h"

/* A contiguous float32/float64 input of at least 2 dims. */
static int
check_input(const char *fname, const char *what, const THTensor *t)
{
    if (t->ndim < 2 || !t->is_contiguous
        || (t->dtype != TH_Float32 && t->dtype != TH_Float64)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: %s must be a contiguous float32 or float64 tensor of at "
                     "least 2 dims", fname, what);
        return -1;
    }
    return 0;
}

/* A contiguous 1-D tensor of `channels` elements of `dtype`, or (when
 * `optional`) None; `*out` is its tensor or NULL. */
static int
unpack_channels(const char *fname, const char *what, PyObject *arg, int64_t channels,
                THDtype dtype, bool optional, THTensor **out)
{
    *out = NULL;
    if (optional && arg == Py_None) {
        return 0;
    }
    if (!THPVariable_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be Tensor, not %.100s", fname, what,
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    THTensor *t = THPVariable_Unpack(arg);
    if (t->ndim != 1 || t->sizes[0] != channels || !t->is_contiguous
        || t->dtype != dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: %s must be a contiguous 1-D tensor of the input's dtype with "
                     "one element per channel", fname, what);
        return -1;
    }
    *out = t;
    return 0;
}

static THTensor *
new_channels(int64_t channels, THDtype dtype)
{
    return THTensor_newEmpty(1, &channels, dtype, TH_DEVICE_CPU);
}

static int
unpack_eps(const char *fname, PyObject *arg, double *eps)
{
    *eps = PyFloat_AsDouble(arg);
    if (*eps == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if (!(*eps >= 0.0)) {
        PyErr_Format(PyExc_RuntimeError, "%s: eps must be non-negative", fname);
        return -1;
    }
    return 0;
}

/* grad_output's dtype and sizes are the input's. */
static int
check_same_as_input(const char *fname, const THTensor *grad_output, const THTensor *input)
{
    if (grad_output->dtype != input->dtype || grad_output->ndim != input->ndim
        || !grad_output->is_contiguous
        || memcmp(grad_output->sizes, input->sizes, sizeof(int64_t) * input->ndim) != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: grad_output must be contiguous and match the input", fname);
        return -1;
    }
    return 0;
}

static PyObject *
THPModule_batch_norm_stats(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    (void)module;
    const char *fname = "_batch_norm_stats";
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 1, 1, -1) < 0) {
        return NULL;
    }
    THTensor *input = THPVariable_Unpack(args[0]);
    if (check_input(fname, "input", input) < 0) {
        return NULL;
    }
    THTensor *stats[2] = {new_channels(input->sizes[1], input->dtype),
                          new_channels(input->sizes[1], input->dtype)};
    int status = stats[0] != NULL && stats[1] != NULL ? 0 : -1;
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THBatchNorm_stats(stats[0], stats[1], input));
    }
    return THPLayer_finish(status, 2, stats);
}

static PyObject *
THPModule_batch_norm(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    (void)module;
    const char *fname = "_batch_norm";
    double eps;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 6, 1, -1) < 0
        || unpack_eps(fname, args[5], &eps) < 0) {
        return NULL;
    }
    THTensor *input = THPVariable_Unpack(args[0]);
    if (check_input(fname, "input", input) < 0) {
        return NULL;
    }
    int64_t channels = input->sizes[1];
    THTensor *mean, *var, *weight, *bias;
    if (unpack_channels(fname, "mean", args[1], channels, input->dtype, false, &mean) < 0
        || unpack_channels(fname, "var", args[2], channels, input->dtype, false, &var) < 0
        || unpack_channels(fname, "weight", args[3], channels, input->dtype, true, &weight)
               < 0
        || unpack_channels(fname, "bias", args[4], channels, input->dtype, true, &bias)
               < 0) {
        return NULL;
    }
    THTensor *output = THTensor_newEmpty(input->ndim, input->sizes, input->dtype,
                                         TH_DEVICE_CPU);
    if (output == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(output,
                        THBatchNorm_forward(output, input, mean, var, weight, bias, eps));
    return THPVariable_Wrap(output);
}

static PyObject *
THPModule_batch_norm_backward(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    (void)module;
    const char *fname = "_batch_norm_backward";
    double eps;
    int64_t training, mask[3];
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 10, 2, -1) < 0
        || unpack_eps(fname, args[5], &eps) < 0
        || THPUtils_unpackLong(args[6], fname, "training", &training) < 0) {
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (THPUtils_unpackLong(args[7 + i], fname, "output_mask", &mask[i]) < 0) {
            return NULL;
        }
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    THTensor *input = THPVariable_Unpack(args[1]);
    if (check_input(fname, "input", input) < 0
        || check_input(fname, "grad_output", grad_output) < 0) {
        return NULL;
    }
    if (check_same_as_input(fname, grad_output, input) < 0) {
        return NULL;
    }
    int64_t channels = input->sizes[1];
    THTensor *mean, *var, *weight;
    if (unpack_channels(fname, "mean", args[2], channels, input->dtype, false, &mean) < 0
        || unpack_channels(fname, "var", args[3], channels, input->dtype, false, &var) < 0
        || unpack_channels(fname, "weight", args[4], channels, input->dtype, true, &weight)
               < 0) {
        return NULL;
    }
    THTensor *grads[3] = {NULL, NULL, NULL};
    int status = 0;
    for (int i = 0; i < 3 && status == 0; i++) {
        if (mask[i]) {
            grads[i] = i == 0 ? THTensor_newEmpty(input->ndim, input->sizes, input->dtype,
                                                  TH_DEVICE_CPU)
                              : new_channels(channels, input->dtype);
            status = grads[i] == NULL ? -1 : 0;
        }
    }
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THBatchNorm_backward(
                                         grads[0], grads[1], grads[2], grad_output, input,
                                         mean, var, weight, eps, training != 0));
    }
    return THPLayer_finish(status, 3, grads);
}

/* ---- layer and group norm (Note [Layer and group norm as row norm]) ----------
 *
 *   _layer_norm(input, weight, bias, normalized_ndim, eps)
 *   _group_norm(input, weight, bias, num_groups, eps)
 *                                    -> (output, mean, rstd), one per row
 *   _layer_norm_backward(grad_output, input, mean, rstd, weight,
 *                        normalized_ndim, input_mask, weight_mask, bias_mask)
 *   _group_norm_backward(... num_groups ...)
 *                                    -> (grad_input, grad_weight, grad_bias),
 *                                       None where the mask is false
 *
 * weight and bias are flat (normalized_shape's or C elements) or None. */

/* The product of sizes[from, to); -1 with an error on overflow. */
static int
sizes_product(const char *fname, const THTensor *t, int from, int to, int64_t *out)
{
    *out = 1;
    for (int d = from; d < to; d++) {
        if (TH_mul_overflows(*out, t->sizes[d], out)) {
            PyErr_Format(PyExc_RuntimeError, "%s: the input is too large", fname);
            return -1;
        }
    }
    return 0;
}

/* The rows of a layer norm over the last `arg` dims (grouped: false) or of
 * a group norm with `arg` groups; the input contiguous float32/float64. */
static int
row_shape(const char *fname, const THTensor *input, bool grouped, int64_t arg,
          THRowNormShape *s)
{
    if (!input->is_contiguous || (input->dtype != TH_Float32 && input->dtype != TH_Float64)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: input must be a contiguous float32 or float64 tensor", fname);
        return -1;
    }
    if (!grouped) {
        if (arg < 1 || arg > input->ndim) {
            PyErr_Format(PyExc_RuntimeError, "%s: normalized_ndim must be in [1, %d]",
                         fname, input->ndim);
            return -1;
        }
        int split = input->ndim - (int)arg;
        s->groups = s->spatial = 1;
        if (sizes_product(fname, input, 0, split, &s->rows) < 0) {
            return -1;
        }
        return sizes_product(fname, input, split, input->ndim, &s->channels);
    }
    if (input->ndim < 2 || arg <= 0 || input->sizes[1] % arg != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: num_groups must be positive and divide the channels of an input "
                     "of at least 2 dims", fname);
        return -1;
    }
    s->groups = arg;
    s->channels = input->sizes[1] / arg;
    if (TH_mul_overflows(input->sizes[0], arg, &s->rows)) {
        PyErr_Format(PyExc_RuntimeError, "%s: the input is too large", fname);
        return -1;
    }
    return sizes_product(fname, input, 2, input->ndim, &s->spatial);
}

static PyObject *
row_norm(const char *fname, bool grouped, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    int64_t arg;
    double eps;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 5, 1, -1) < 0
        || THPUtils_unpackLong(args[3], fname, grouped ? "num_groups" : "normalized_ndim",
                               &arg) < 0
        || unpack_eps(fname, args[4], &eps) < 0) {
        return NULL;
    }
    THTensor *input = THPVariable_Unpack(args[0]);
    THRowNormShape s;
    THTensor *weight, *bias;
    if (row_shape(fname, input, grouped, arg, &s) < 0
        || unpack_channels(fname, "weight", args[1], s.groups * s.channels, input->dtype,
                           true, &weight) < 0
        || unpack_channels(fname, "bias", args[2], s.groups * s.channels, input->dtype,
                           true, &bias) < 0) {
        return NULL;
    }
    THTensor *results[3] = {
        THTensor_newEmpty(input->ndim, input->sizes, input->dtype, TH_DEVICE_CPU),
        new_channels(s.rows, input->dtype), new_channels(s.rows, input->dtype)};
    int status = results[0] && results[1] && results[2] ? 0 : -1;
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THRowNorm_forward(results[0], results[1],
                                                                results[2], input, weight,
                                                                bias, &s, eps));
    }
    return THPLayer_finish(status, 3, results);
}

static PyObject *
row_norm_backward(const char *fname, bool grouped, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    int64_t arg, mask[3];
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 9, 4, -1) < 0
        || THPUtils_unpackLong(args[5], fname, grouped ? "num_groups" : "normalized_ndim",
                               &arg) < 0) {
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (THPUtils_unpackLong(args[6 + i], fname, "output_mask", &mask[i]) < 0) {
            return NULL;
        }
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    THTensor *input = THPVariable_Unpack(args[1]);
    THRowNormShape s;
    THTensor *mean, *rstd, *weight;
    if (row_shape(fname, input, grouped, arg, &s) < 0
        || check_same_as_input(fname, grad_output, input) < 0
        || unpack_channels(fname, "mean", args[2], s.rows, input->dtype, false, &mean) < 0
        || unpack_channels(fname, "rstd", args[3], s.rows, input->dtype, false, &rstd) < 0
        || unpack_channels(fname, "weight", args[4], s.groups * s.channels, input->dtype,
                           true, &weight) < 0) {
        return NULL;
    }
    THTensor *grads[3] = {NULL, NULL, NULL};
    int status = 0;
    for (int i = 0; i < 3 && status == 0; i++) {
        if (mask[i]) {
            grads[i] = i == 0 ? THTensor_newEmpty(input->ndim, input->sizes, input->dtype,
                                                  TH_DEVICE_CPU)
                              : new_channels(s.groups * s.channels, input->dtype);
            status = grads[i] == NULL ? -1 : 0;
        }
    }
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THRowNorm_backward(grads[0], grads[1],
                                                                 grads[2], grad_output,
                                                                 input, mean, rstd, weight,
                                                                 &s));
    }
    return THPLayer_finish(status, 3, grads);
}

#define ROW_NORM_ENTRY(name, body, grouped)                                       \
    static PyObject *THPModule##name(PyObject *module, PyObject *const *args,     \
                                     Py_ssize_t nargs, PyObject *kwnames)         \
    {                                                                             \
        (void)module;                                                             \
        return body(#name, grouped, args, nargs, kwnames);                        \
    }
ROW_NORM_ENTRY(_layer_norm, row_norm, false)
ROW_NORM_ENTRY(_group_norm, row_norm, true)
ROW_NORM_ENTRY(_layer_norm_backward, row_norm_backward, false)
ROW_NORM_ENTRY(_group_norm_backward, row_norm_backward, true)
#undef ROW_NORM_ENTRY

#define NORM_FUNCTION(name, doc)                                           \
    {#name, (PyCFunction)(void (*)(void))THPModule##name,                 \
     METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef THPNorm_methods[] = {
    NORM_FUNCTION(_batch_norm_stats,
                  "_batch_norm_stats(input) -> (mean, biased variance) per channel"),
    NORM_FUNCTION(_batch_norm, "_batch_norm(input, mean, var, weight, bias, eps)"),
    NORM_FUNCTION(_batch_norm_backward,
                  "_batch_norm_backward(grad_output, input, mean, var, weight, eps, "
                  "training, input_mask, weight_mask, bias_mask)"),
    NORM_FUNCTION(_layer_norm, "_layer_norm(input, weight, bias, normalized_ndim, eps) "
                               "-> (output, mean, rstd)"),
    NORM_FUNCTION(_group_norm, "_group_norm(input, weight, bias, num_groups, eps) "
                               "-> (output, mean, rstd)"),
    NORM_FUNCTION(_layer_norm_backward,
                  "_layer_norm_backward(grad_output, input, mean, rstd, weight, "
                  "normalized_ndim, input_mask, weight_mask, bias_mask)"),
    NORM_FUNCTION(_group_norm_backward,
                  "_group_norm_backward(grad_output, input, mean, rstd, weight, num_groups, "
                  "input_mask, weight_mask, bias_mask)"),
    {NULL, NULL, 0, NULL},
};

/*
 * Norm.c -- the batch norm kernels of c/th/THNorm.c as private functions
 * of ember._C, for ember.nn.functional.batch_norm:
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
    if (status < 0) {
        for (int i = 0; i < 2; i++) {
            if (stats[i] != NULL) {
                THTensor_release(stats[i]);
            }
        }
        return THPUtils_setErrorFromTH();
    }
    return THPLayer_wrapTuple(2, stats);
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
    if (grad_output->dtype != input->dtype || grad_output->ndim != input->ndim
        || memcmp(grad_output->sizes, input->sizes, sizeof(int64_t) * input->ndim) != 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: grad_output must match the input", fname);
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
    if (status < 0) {
        for (int i = 0; i < 3; i++) {
            if (grads[i] != NULL) {
                THTensor_release(grads[i]);
            }
        }
        return THPUtils_setErrorFromTH();
    }
    return THPLayer_wrapTuple(3, grads);
}

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
    {NULL, NULL, 0, NULL},
};

/*
 * Attention.c -- the blockwise attention of c/th/THAttention.c as private
 * functions of ember._C, for ember.nn.functional.scaled_dot_product_attention:
 *
 *   _attention(query, key, value, mask, scale, is_causal) -> (out, logsumexp)
 *   _attention_backward(grad_out, query, key, value, out, logsumexp, mask,
 *                       scale, is_causal, query_mask, key_mask, value_mask)
 *                       -> (grad_query, grad_key, grad_value), None where
 *                          the mask is false
 *
 * query (B, H, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev) of any
 * strides; mask None or (B, H, L, S), bool or of the query's dtype (an
 * expanded view is fine).  Python (ember/nn/_attention.py) brings other
 * shapes to these and checks the arguments with PyTorch's messages; the
 * core checks the shapes again (Note [Attention in blocks]).  Pinned
 * functions (Note [Pinned arguments]): every number is read before a
 * THTensor is taken.
 */
#include "THP.h"

#include "THAttention.h"

static int
unpack_scale_and_causal(const char *fname, PyObject *const *args, double *scale,
                        int64_t *causal)
{
    *scale = PyFloat_AsDouble(args[0]);
    if (*scale == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    return THPUtils_unpackLong(args[1], fname, "is_causal", causal);
}

static THTensor *
optional_tensor(PyObject *arg)
{
    return arg == Py_None ? NULL : THPVariable_Unpack(arg);
}

static PyObject *
THPModule_attention(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    (void)module;
    const char *fname = "_attention";
    double scale;
    int64_t causal;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 6, 4, 3) < 0
        || unpack_scale_and_causal(fname, args + 4, &scale, &causal) < 0) {
        return NULL;
    }
    THTensor *query = THPVariable_Unpack(args[0]);
    THTensor *key = THPVariable_Unpack(args[1]);
    THTensor *value = THPVariable_Unpack(args[2]);
    THTensor *mask = optional_tensor(args[3]);
    if (query->ndim != 4 || value->ndim != 4) {
        PyErr_Format(PyExc_RuntimeError, "%s: expected 4-D query, key and value", fname);
        return NULL;
    }
    int64_t out_sizes[4] = {query->sizes[0], query->sizes[1], query->sizes[2],
                            value->sizes[3]};
    THTensor *results[2] = {
        THTensor_newEmpty(4, out_sizes, query->dtype, TH_DEVICE_CPU),
        THTensor_newEmpty(3, out_sizes, query->dtype, TH_DEVICE_CPU)};
    int status = results[0] != NULL && results[1] != NULL ? 0 : -1;
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THAttention_forward(
                                         results[0], results[1], query, key, value, mask,
                                         scale, causal != 0));
    }
    return THPLayer_finish(status, 2, results);
}

static PyObject *
THPModule_attention_backward(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    (void)module;
    const char *fname = "_attention_backward";
    double scale;
    int64_t causal, wanted[3];
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 12, 7, 6) < 0
        || unpack_scale_and_causal(fname, args + 7, &scale, &causal) < 0) {
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (THPUtils_unpackLong(args[9 + i], fname, "output_mask", &wanted[i]) < 0) {
            return NULL;
        }
    }
    THTensor *operands[6]; /* grad_out, query, key, value, out, logsumexp */
    for (int i = 0; i < 6; i++) {
        operands[i] = THPVariable_Unpack(args[i]);
    }
    THTensor *mask = optional_tensor(args[6]);
    THTensor *grads[3] = {NULL, NULL, NULL};
    int status = 0;
    for (int i = 0; i < 3 && status == 0; i++) {
        const THTensor *like = operands[1 + i];
        if (wanted[i]) {
            grads[i] = THTensor_newEmpty(like->ndim, like->sizes, like->dtype,
                                         TH_DEVICE_CPU);
            status = grads[i] == NULL ? -1 : 0;
        }
    }
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THAttention_backward(
                                         grads[0], grads[1], grads[2], operands[0],
                                         operands[1], operands[2], operands[3],
                                         operands[4], operands[5], mask, scale,
                                         causal != 0));
    }
    return THPLayer_finish(status, 3, grads);
}

#define ATTENTION_FUNCTION(name, doc)                                      \
    {#name, (PyCFunction)(void (*)(void))THPModule##name,                 \
     METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef THPAttention_methods[] = {
    ATTENTION_FUNCTION(_attention,
                       "_attention(query, key, value, mask, scale, is_causal) -> "
                       "(out, logsumexp)"),
    ATTENTION_FUNCTION(_attention_backward,
                       "_attention_backward(grad_out, query, key, value, out, logsumexp, "
                       "mask, scale, is_causal, query_mask, key_mask, value_mask)"),
    {NULL, NULL, 0, NULL},
};

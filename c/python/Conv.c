/*
 * Conv.c -- the convolution kernels of c/th/THConv.c as private functions
 * of ember._C, for ember.nn.functional:
 *
 *   _conv2d(input, weight, bias, sh, sw, ph, pw, dh, dw, groups)
 *   _conv2d_backward_input(grad_output, weight, in_h, in_w, sh, sw, ph, pw,
 *                          dh, dw, groups)
 *   _conv2d_backward_weight(grad_output, input, kh, kw, sh, sw, ph, pw,
 *                           dh, dw, groups)
 *
 * PyTorch's argument forms ('same' padding, padding modes, tuples, 1-D
 * convolution) and its error messages live in Python (F.conv2d and
 * friends), which passes contiguous NCHW tensors; the checks here keep a
 * direct caller from reading out of bounds.  They are pinned functions
 * (Note [Pinned arguments]): every int is read before a THTensor is taken,
 * and the kernel runs without the GIL on pinned tensors.
 */
#include "THP.h"

#include "THConv.h"

/* The ints after the tensor arguments: (sh, sw, ph, pw, dh, dw, groups)
 * preceded by two leading ints (in_h, in_w or kh, kw) when `leading`. */
typedef struct {
    int64_t leading[2];
    int64_t stride[2], pad[2], dilation[2], groups;
} ConvInts;

static int
parse_ints(const char *fname, PyObject *const *args, int first, int leading,
           ConvInts *out)
{
    static const char *const names[] = {"stride", "stride", "padding", "padding",
                                        "dilation", "dilation", "groups"};
    int64_t *slots[] = {&out->stride[0], &out->stride[1], &out->pad[0],
                        &out->pad[1], &out->dilation[0], &out->dilation[1],
                        &out->groups};
    for (int i = 0; i < leading; i++) {
        if (THPUtils_unpackLong(args[first + i], fname, "size", &out->leading[i]) < 0) {
            return -1;
        }
    }
    for (int i = 0; i < 7; i++) {
        if (THPUtils_unpackLong(args[first + leading + i], fname, names[i], slots[i])
            < 0) {
            return -1;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (out->stride[i] <= 0 || out->dilation[i] <= 0 || out->pad[i] < 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s: stride and dilation must be positive and padding "
                         "non-negative", fname);
            return -1;
        }
    }
    if (out->groups <= 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: groups must be positive", fname);
        return -1;
    }
    return 0;
}

int
THPLayer_checkArgs(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, Py_ssize_t expected, int ntensors,
                   int optional)
{
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", fname);
        return -1;
    }
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", fname,
                     expected, nargs);
        return -1;
    }
    for (int i = 0; i < ntensors; i++) {
        if (i == optional && args[i] == Py_None) {
            continue;
        }
        if (!THPVariable_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "%s(): argument %d must be Tensor, not %.100s",
                         fname, i + 1, Py_TYPE(args[i])->tp_name);
            return -1;
        }
    }
    return 0;
}

/* 4-D, contiguous, float32/float64, of `dtype`. */
static int
check_operand(const char *fname, const char *what, const THTensor *t, THDtype dtype)
{
    if (t->ndim != 4 || !t->is_contiguous || t->dtype != dtype
        || (dtype != TH_Float32 && dtype != TH_Float64)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: %s must be a contiguous 4-D float32 or float64 tensor "
                     "of the input's dtype", fname, what);
        return -1;
    }
    return 0;
}

/* Completes `s` from the input and weight sizes; checks they agree. */
static int
fill_shape(const char *fname, THConvShape *s, const ConvInts *ints,
           const int64_t in[4], const int64_t w[4])
{
    *s = (THConvShape){.batch = in[0], .in_channels = in[1], .in_h = in[2],
                       .in_w = in[3], .out_channels = w[0], .kernel_h = w[2],
                       .kernel_w = w[3], .groups = ints->groups,
                       .stride_h = ints->stride[0], .stride_w = ints->stride[1],
                       .pad_h = ints->pad[0], .pad_w = ints->pad[1],
                       .dilation_h = ints->dilation[0],
                       .dilation_w = ints->dilation[1]};
    if (s->in_channels != w[1] * s->groups || s->out_channels % s->groups != 0
        || s->kernel_h <= 0 || s->kernel_w <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: the weight does not match the input's channels and groups",
                     fname);
        return -1;
    }
    s->out_h = THConv_outputSize(s->in_h, s->kernel_h, s->stride_h, s->pad_h,
                                 s->dilation_h);
    s->out_w = THConv_outputSize(s->in_w, s->kernel_w, s->stride_w, s->pad_w,
                                 s->dilation_w);
    if (s->out_h <= 0 || s->out_w <= 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: the kernel is larger than the padded input",
                     fname);
        return -1;
    }
    return 0;
}

THTensor *
THPLayer_new4d(int64_t a, int64_t b, int64_t c, int64_t d, THDtype dtype)
{
    int64_t sizes[4] = {a, b, c, d};
    return THTensor_newEmpty(4, sizes, dtype, TH_DEVICE_CPU);
}

PyObject *
THPLayer_wrapTuple(int count, THTensor **tensors)
{
    PyObject *tuple = PyTuple_New(count);
    for (int i = 0; i < count; i++) { /* after a failure: release the rest */
        PyObject *item;
        if (tensors[i] == NULL) {
            item = Py_NewRef(Py_None);
        }
        else if (tuple == NULL) {
            THTensor_release(tensors[i]);
            continue;
        }
        else {
            item = THPVariable_Wrap(tensors[i]); /* steals, on failure too */
        }
        if (item == NULL) {
            Py_CLEAR(tuple);
            continue;
        }
        if (tuple == NULL) {
            Py_DECREF(item);
            continue;
        }
        PyTuple_SET_ITEM(tuple, i, item);
    }
    return tuple;
}

PyObject *
THPLayer_finish(int status, int count, THTensor **results)
{
    if (status < 0) {
        for (int i = 0; i < count; i++) {
            if (results[i] != NULL) {
                THTensor_release(results[i]);
            }
        }
        return THPUtils_setErrorFromTH();
    }
    return THPLayer_wrapTuple(count, results);
}

static PyObject *
THPModule_conv2d(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    (void)module;
    const char *fname = "_conv2d";
    ConvInts ints;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 10, 3, 2) < 0
        || parse_ints(fname, args, 3, 0, &ints) < 0) {
        return NULL;
    }
    THTensor *input = THPVariable_Unpack(args[0]);
    THTensor *weight = THPVariable_Unpack(args[1]);
    THTensor *bias = args[2] == Py_None ? NULL : THPVariable_Unpack(args[2]);
    THConvShape s;
    if (check_operand(fname, "input", input, input->dtype) < 0
        || check_operand(fname, "weight", weight, input->dtype) < 0
        || fill_shape(fname, &s, &ints, input->sizes, weight->sizes) < 0) {
        return NULL;
    }
    if (bias != NULL && (bias->ndim != 1 || bias->sizes[0] != s.out_channels
                         || !bias->is_contiguous || bias->dtype != input->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "%s: bad bias", fname);
        return NULL;
    }
    THTensor *output = THPLayer_new4d(s.batch, s.out_channels, s.out_h, s.out_w,
                                  input->dtype);
    if (output == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(output, THConv2d_forward(output, input, weight, bias, &s));
    return THPVariable_Wrap(output);
}

static PyObject *
THPModule_conv2d_backward_input(PyObject *module, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    const char *fname = "_conv2d_backward_input";
    ConvInts ints;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 11, 2, -1) < 0
        || parse_ints(fname, args, 2, 2, &ints) < 0) {
        return NULL;
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    THTensor *weight = THPVariable_Unpack(args[1]);
    if (check_operand(fname, "grad_output", grad_output, grad_output->dtype) < 0
        || check_operand(fname, "weight", weight, grad_output->dtype) < 0) {
        return NULL;
    }
    int64_t in[4] = {grad_output->sizes[0], weight->sizes[1] * ints.groups,
                     ints.leading[0], ints.leading[1]};
    THConvShape s;
    if (fill_shape(fname, &s, &ints, in, weight->sizes) < 0) {
        return NULL;
    }
    if (grad_output->sizes[1] != s.out_channels || grad_output->sizes[2] != s.out_h
        || grad_output->sizes[3] != s.out_w) {
        PyErr_Format(PyExc_RuntimeError, "%s: grad_output has the wrong shape", fname);
        return NULL;
    }
    THTensor *grad_input = THPLayer_new4d(in[0], in[1], in[2], in[3], grad_output->dtype);
    if (grad_input == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(grad_input,
                        THConv2d_backwardInput(grad_input, grad_output, weight, &s));
    return THPVariable_Wrap(grad_input);
}

static PyObject *
THPModule_conv2d_backward_weight(PyObject *module, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    const char *fname = "_conv2d_backward_weight";
    ConvInts ints;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 11, 2, -1) < 0
        || parse_ints(fname, args, 2, 2, &ints) < 0) {
        return NULL;
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    THTensor *input = THPVariable_Unpack(args[1]);
    if (check_operand(fname, "grad_output", grad_output, input->dtype) < 0
        || check_operand(fname, "input", input, input->dtype) < 0) {
        return NULL;
    }
    if (ints.groups <= 0 || input->sizes[1] % ints.groups != 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: groups must divide the channels", fname);
        return NULL;
    }
    int64_t w[4] = {grad_output->sizes[1], input->sizes[1] / ints.groups,
                    ints.leading[0], ints.leading[1]};
    THConvShape s;
    if (fill_shape(fname, &s, &ints, input->sizes, w) < 0) {
        return NULL;
    }
    if (grad_output->sizes[0] != s.batch || grad_output->sizes[2] != s.out_h
        || grad_output->sizes[3] != s.out_w) {
        PyErr_Format(PyExc_RuntimeError, "%s: grad_output has the wrong shape", fname);
        return NULL;
    }
    THTensor *grad_weight = THPLayer_new4d(w[0], w[1], w[2], w[3], input->dtype);
    if (grad_weight == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(grad_weight,
                        THConv2d_backwardWeight(grad_weight, grad_output, input, &s));
    return THPVariable_Wrap(grad_weight);
}

#define CONV_FUNCTION(name, doc)                                           \
    {#name, (PyCFunction)(void (*)(void))THPModule##name,                 \
     METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef THPConv_methods[] = {
    CONV_FUNCTION(_conv2d, "_conv2d(input, weight, bias, sh, sw, ph, pw, dh, dw, "
                           "groups): NCHW convolution (Note [Convolution as GEMM])"),
    CONV_FUNCTION(_conv2d_backward_input,
                  "_conv2d_backward_input(grad_output, weight, in_h, in_w, sh, sw, "
                  "ph, pw, dh, dw, groups)"),
    CONV_FUNCTION(_conv2d_backward_weight,
                  "_conv2d_backward_weight(grad_output, input, kh, kw, sh, sw, ph, "
                  "pw, dh, dw, groups)"),
    {NULL, NULL, 0, NULL},
};

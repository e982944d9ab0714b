/*
 * Pool.c -- the pooling kernels of c/th/THPool.c as private functions of
 * ember._C, for ember.nn.functional:
 *
 *   _max_pool2d(input, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode,
 *               with_indices)                 -> (output, indices or None)
 *   _max_pool2d_backward(grad_output, indices, in_h, in_w) -> grad_input
 *   _avg_pool2d(input, kh, kw, sh, sw, ph, pw, ceil_mode,
 *               count_include_pad, divisor_override (0: none)) -> output
 *   _avg_pool2d_backward(grad_output, in_h, in_w, kh, kw, sh, sw, ph, pw,
 *               ceil_mode, count_include_pad, divisor_override)
 *                                             -> grad_input
 *   _adaptive_avg_pool2d(input, out_h, out_w)  -> output
 *   _adaptive_avg_pool2d_backward(grad_output, in_h, in_w) -> grad_input
 *   _adaptive_max_pool2d(input, out_h, out_w)  -> (output, indices); its
 *               backward is _max_pool2d_backward
 *
 * PyTorch's argument forms and error messages live in Python
 * (ember/nn/_pooling.py), which passes contiguous NCHW tensors; the checks
 * here keep a direct caller from reading or writing out of bounds.
 * Pinned functions (Note [Pinned arguments]): every int is read before a
 * THTensor is taken, and the kernels run without the GIL.
 */
#include "THP.h"

#include "THPool.h"

/* The window's ints: kh, kw, sh, sw, ph, pw, [dh, dw,] ceil_mode. */
static int
parse_window(const char *fname, PyObject *const *args, int first, bool with_dilation,
             THPoolShape *s, int64_t *ceil_mode)
{
    int64_t *slots[] = {&s->kernel_h, &s->kernel_w, &s->stride_h, &s->stride_w,
                        &s->pad_h,    &s->pad_w,    &s->dilation_h, &s->dilation_w};
    static const char *const names[] = {"kernel_size", "kernel_size", "stride", "stride",
                                        "padding",     "padding",     "dilation",
                                        "dilation"};
    int count = with_dilation ? 8 : 6;
    s->dilation_h = s->dilation_w = 1;
    for (int i = 0; i < count; i++) {
        if (THPUtils_unpackLong(args[first + i], fname, names[i], slots[i]) < 0) {
            return -1;
        }
    }
    if (THPUtils_unpackLong(args[first + count], fname, "ceil_mode", ceil_mode) < 0) {
        return -1;
    }
    int64_t kernels[2] = {s->kernel_h, s->kernel_w}, strides[2] = {s->stride_h, s->stride_w};
    int64_t pads[2] = {s->pad_h, s->pad_w}, dilations[2] = {s->dilation_h, s->dilation_w};
    for (int i = 0; i < 2; i++) {
        if (kernels[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0
            || kernels[i] > INT32_MAX || dilations[i] > INT32_MAX
            || pads[i] > (dilations[i] * (kernels[i] - 1) + 1) / 2) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s: kernel, stride and dilation must be positive and "
                         "padding at most half the effective kernel", fname);
            return -1;
        }
    }
    return 0;
}

/* Completes `s` from the input's (N, C, H, W) and checks a window fits. */
static int
fill_extents(const char *fname, THPoolShape *s, const int64_t in[4], bool ceil_mode)
{
    s->in_h = in[2];
    s->in_w = in[3];
    s->out_h = THPool_outputSize(s->in_h, s->kernel_h, s->stride_h, s->pad_h,
                                 s->dilation_h, ceil_mode);
    s->out_w = THPool_outputSize(s->in_w, s->kernel_w, s->stride_w, s->pad_w,
                                 s->dilation_w, ceil_mode);
    if (TH_mul_overflows(in[0], in[1], &s->planes) || s->out_h <= 0 || s->out_w <= 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: the output size is too small", fname);
        return -1;
    }
    return 0;
}

/* 4-D and contiguous, float32/float64 (indices: int64). */
static int
check_operand(const char *fname, const char *what, const THTensor *t, bool indices)
{
    bool dtype_ok = indices ? t->dtype == TH_Int64
                            : t->dtype == TH_Float32 || t->dtype == TH_Float64;
    if (t->ndim != 4 || !t->is_contiguous || !dtype_ok) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s must be a contiguous 4-D %s tensor",
                     fname, what, indices ? "int64" : "float32 or float64");
        return -1;
    }
    return 0;
}

static int
check_same_sizes(const char *fname, const char *what, const THTensor *t,
                 const int64_t sizes[4])
{
    for (int d = 0; d < 4; d++) {
        if (t->sizes[d] != sizes[d]) {
            PyErr_Format(PyExc_RuntimeError, "%s: %s has the wrong shape", fname, what);
            return -1;
        }
    }
    return 0;
}

/* The divisor arguments: count_include_pad, divisor_override. */
static int
parse_divisor(const char *fname, PyObject *const *args, int first, THAvgPoolDivisor *d)
{
    int64_t include_pad;
    if (THPUtils_unpackLong(args[first], fname, "count_include_pad", &include_pad) < 0
        || THPUtils_unpackLong(args[first + 1], fname, "divisor_override",
                               &d->divisor_override) < 0) {
        return -1;
    }
    d->count_include_pad = include_pad != 0;
    return 0;
}

static PyObject *
THPModule_max_pool2d(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    (void)module;
    const char *fname = "_max_pool2d";
    THPoolShape s;
    int64_t ceil_mode, with_indices;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 11, 1, -1) < 0
        || parse_window(fname, args, 1, true, &s, &ceil_mode) < 0
        || THPUtils_unpackLong(args[10], fname, "return_indices", &with_indices) < 0) {
        return NULL;
    }
    THTensor *input = THPVariable_Unpack(args[0]);
    if (check_operand(fname, "input", input, false) < 0
        || fill_extents(fname, &s, input->sizes, ceil_mode) < 0) {
        return NULL;
    }
    int64_t n = input->sizes[0], c = input->sizes[1];
    THTensor *results[2] = {THPLayer_new4d(n, c, s.out_h, s.out_w, input->dtype), NULL};
    if (results[0] != NULL && with_indices) {
        results[1] = THPLayer_new4d(n, c, s.out_h, s.out_w, TH_Int64);
        if (results[1] == NULL) {
            THTensor_release(results[0]);
            results[0] = NULL;
        }
    }
    if (results[0] == NULL) {
        return THPUtils_setErrorFromTH();
    }
    int status;
    THP_RUN_WITHOUT_GIL_IF(true, status = THPool2d_maxForward(results[0], results[1],
                                                              input, &s));
    if (status < 0) {
        THTensor_release(results[0]);
        if (results[1] != NULL) {
            THTensor_release(results[1]);
        }
        return THPUtils_setErrorFromTH();
    }
    return THPLayer_wrapTuple(2, results);
}

static PyObject *
THPModule_max_pool2d_backward(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    (void)module;
    const char *fname = "_max_pool2d_backward";
    int64_t in_h, in_w;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 4, 2, -1) < 0
        || THPUtils_unpackLong(args[2], fname, "size", &in_h) < 0
        || THPUtils_unpackLong(args[3], fname, "size", &in_w) < 0) {
        return NULL;
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    THTensor *indices = THPVariable_Unpack(args[1]);
    THPoolShape s = {.in_h = in_h, .in_w = in_w};
    if (check_operand(fname, "grad_output", grad_output, false) < 0
        || check_operand(fname, "indices", indices, true) < 0
        || check_same_sizes(fname, "indices", indices, grad_output->sizes) < 0) {
        return NULL;
    }
    s.out_h = grad_output->sizes[2];
    s.out_w = grad_output->sizes[3];
    if (in_h < 0 || in_w < 0
        || TH_mul_overflows(grad_output->sizes[0], grad_output->sizes[1], &s.planes)) {
        PyErr_Format(PyExc_RuntimeError, "%s: bad input size", fname);
        return NULL;
    }
    THTensor *grad_input = THPLayer_new4d(grad_output->sizes[0], grad_output->sizes[1],
                                          in_h, in_w, grad_output->dtype);
    if (grad_input == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(grad_input,
                        THPool2d_maxBackward(grad_input, grad_output, indices, &s));
    return THPVariable_Wrap(grad_input);
}

static PyObject *
THPModule_avg_pool2d(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    (void)module;
    const char *fname = "_avg_pool2d";
    THPoolShape s;
    THAvgPoolDivisor divisor;
    int64_t ceil_mode;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 10, 1, -1) < 0
        || parse_window(fname, args, 1, false, &s, &ceil_mode) < 0
        || parse_divisor(fname, args, 8, &divisor) < 0) {
        return NULL;
    }
    THTensor *input = THPVariable_Unpack(args[0]);
    if (check_operand(fname, "input", input, false) < 0
        || fill_extents(fname, &s, input->sizes, ceil_mode) < 0) {
        return NULL;
    }
    THTensor *output = THPLayer_new4d(input->sizes[0], input->sizes[1], s.out_h, s.out_w,
                                      input->dtype);
    if (output == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(output, THPool2d_avgForward(output, input, &s, divisor));
    return THPVariable_Wrap(output);
}

static PyObject *
THPModule_avg_pool2d_backward(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    (void)module;
    const char *fname = "_avg_pool2d_backward";
    THPoolShape s;
    THAvgPoolDivisor divisor;
    int64_t in_h, in_w, ceil_mode;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 12, 1, -1) < 0
        || THPUtils_unpackLong(args[1], fname, "size", &in_h) < 0
        || THPUtils_unpackLong(args[2], fname, "size", &in_w) < 0
        || parse_window(fname, args, 3, false, &s, &ceil_mode) < 0
        || parse_divisor(fname, args, 10, &divisor) < 0) {
        return NULL;
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    if (check_operand(fname, "grad_output", grad_output, false) < 0) {
        return NULL;
    }
    int64_t in[4] = {grad_output->sizes[0], grad_output->sizes[1], in_h, in_w};
    if (in_h < 0 || in_w < 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: bad input size", fname);
        return NULL;
    }
    if (fill_extents(fname, &s, in, ceil_mode) < 0) {
        return NULL;
    }
    int64_t out[4] = {in[0], in[1], s.out_h, s.out_w};
    if (check_same_sizes(fname, "grad_output", grad_output, out) < 0) {
        return NULL;
    }
    THTensor *grad_input = THPLayer_new4d(in[0], in[1], in_h, in_w, grad_output->dtype);
    if (grad_input == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(grad_input,
                        THPool2d_avgBackward(grad_input, grad_output, &s, divisor));
    return THPVariable_Wrap(grad_input);
}

/* ---- adaptive pooling (Note [Adaptive pooling windows]) ------------------------ */

/* The shape of pooling an (N, C, in_h, in_w) plane set to out_h x out_w;
 * every extent positive (PyTorch's callers refuse empty planes). */
static int
adaptive_shape(const char *fname, const int64_t sizes[4], int64_t out_h, int64_t out_w,
               THPoolShape *s)
{
    *s = (THPoolShape){.in_h = sizes[2], .in_w = sizes[3], .out_h = out_h, .out_w = out_w};
    if (sizes[2] <= 0 || sizes[3] <= 0 || out_h <= 0 || out_w <= 0
        || TH_mul_overflows(sizes[0], sizes[1], &s->planes)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: the input and output planes must be non-empty", fname);
        return -1;
    }
    return 0;
}

/* (input, out_h, out_w): the output's extents read, the input checked. */
static THTensor *
adaptive_input(const char *fname, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames, THPoolShape *s)
{
    int64_t out_h, out_w;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 3, 1, -1) < 0
        || THPUtils_unpackLong(args[1], fname, "output_size", &out_h) < 0
        || THPUtils_unpackLong(args[2], fname, "output_size", &out_w) < 0) {
        return NULL;
    }
    THTensor *input = THPVariable_Unpack(args[0]);
    if (check_operand(fname, "input", input, false) < 0
        || adaptive_shape(fname, input->sizes, out_h, out_w, s) < 0) {
        return NULL;
    }
    return input;
}

static PyObject *
THPModule_adaptive_avg_pool2d(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    (void)module;
    THPoolShape s;
    THTensor *input = adaptive_input("_adaptive_avg_pool2d", args, nargs, kwnames, &s);
    if (input == NULL) {
        return NULL;
    }
    THTensor *output = THPLayer_new4d(input->sizes[0], input->sizes[1], s.out_h, s.out_w,
                                      input->dtype);
    if (output == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(output, THPool2d_adaptiveAvgForward(output, input, &s));
    return THPVariable_Wrap(output);
}

static PyObject *
THPModule_adaptive_max_pool2d(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    (void)module;
    THPoolShape s;
    THTensor *input = adaptive_input("_adaptive_max_pool2d", args, nargs, kwnames, &s);
    if (input == NULL) {
        return NULL;
    }
    int64_t n = input->sizes[0], c = input->sizes[1];
    THTensor *results[2] = {THPLayer_new4d(n, c, s.out_h, s.out_w, input->dtype),
                            THPLayer_new4d(n, c, s.out_h, s.out_w, TH_Int64)};
    int status = results[0] != NULL && results[1] != NULL ? 0 : -1;
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THPool2d_adaptiveMaxForward(
                                         results[0], results[1], input, &s));
    }
    return THPLayer_finish(status, 2, results);
}

static PyObject *
THPModule_adaptive_avg_pool2d_backward(PyObject *module, PyObject *const *args,
                                       Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    const char *fname = "_adaptive_avg_pool2d_backward";
    int64_t in_h, in_w;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, 3, 1, -1) < 0
        || THPUtils_unpackLong(args[1], fname, "size", &in_h) < 0
        || THPUtils_unpackLong(args[2], fname, "size", &in_w) < 0) {
        return NULL;
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    THPoolShape s;
    if (check_operand(fname, "grad_output", grad_output, false) < 0) {
        return NULL;
    }
    int64_t in[4] = {grad_output->sizes[0], grad_output->sizes[1], in_h, in_w};
    if (adaptive_shape(fname, in, grad_output->sizes[2], grad_output->sizes[3], &s) < 0) {
        return NULL;
    }
    THTensor *grad_input = THPLayer_new4d(in[0], in[1], in_h, in_w, grad_output->dtype);
    if (grad_input == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(grad_input, THPool2d_adaptiveAvgBackward(grad_input, grad_output, &s));
    return THPVariable_Wrap(grad_input);
}

#define POOL_FUNCTION(name, doc)                                           \
    {#name, (PyCFunction)(void (*)(void))THPModule##name,                 \
     METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef THPPool_methods[] = {
    POOL_FUNCTION(_max_pool2d, "_max_pool2d(input, kh, kw, sh, sw, ph, pw, dh, dw, "
                               "ceil_mode, return_indices) -> (output, indices or None)"),
    POOL_FUNCTION(_max_pool2d_backward,
                  "_max_pool2d_backward(grad_output, indices, in_h, in_w)"),
    POOL_FUNCTION(_avg_pool2d, "_avg_pool2d(input, kh, kw, sh, sw, ph, pw, ceil_mode, "
                               "count_include_pad, divisor_override)"),
    POOL_FUNCTION(_avg_pool2d_backward,
                  "_avg_pool2d_backward(grad_output, in_h, in_w, kh, kw, sh, sw, ph, pw, "
                  "ceil_mode, count_include_pad, divisor_override)"),
    POOL_FUNCTION(_adaptive_avg_pool2d, "_adaptive_avg_pool2d(input, out_h, out_w)"),
    POOL_FUNCTION(_adaptive_avg_pool2d_backward,
                  "_adaptive_avg_pool2d_backward(grad_output, in_h, in_w)"),
    POOL_FUNCTION(_adaptive_max_pool2d,
                  "_adaptive_max_pool2d(input, out_h, out_w) -> (output, indices)"),
    {NULL, NULL, 0, NULL},
};

/*
 * Conv.c -- the convolution kernels of c/th/THConv.c as private functions
 * of ember._C, for ember.nn.functional, in a 2-D and a 3-D form:
 *
 *   _conv2d(input, weight, bias, sh, sw, ph, pw, dh, dw, groups)
 *   _conv2d_backward_input(grad_output, weight, in_h, in_w, sh, sw, ph, pw,
 *                          dh, dw, groups)
 *   _conv2d_backward_weight(grad_output, input, kh, kw, sh, sw, ph, pw,
 *                           dh, dw, groups)
 *   _conv3d(input, weight, bias, sd, sh, sw, pd, ph, pw, dd, dh, dw, groups)
 *   _conv3d_backward_input(grad_output, weight, in_d, in_h, in_w, sd, sh, sw,
 *                          pd, ph, pw, dd, dh, dw, groups)
 *   _conv3d_backward_weight(grad_output, input, kd, kh, kw, sd, sh, sw, pd,
 *                           ph, pw, dd, dh, dw, groups)
 *
 * Each pair shares one implementation, told the number of spatial dims; a
 * 2-D call fills the depth fields of the THConvShape with 1 (Note [Three
 * spatial dims, one code path] in THConv.h).  PyTorch's argument forms
 * ('same' padding, padding modes, tuples, 1-D convolution) and its error
 * messages live in Python (F.conv2d and friends), which passes contiguous
 * NC(D)HW tensors; the checks here keep a direct caller from reading out of
 * bounds.  They are pinned functions (Note [Pinned arguments]): every int
 * is read before a THTensor is taken, and the kernel runs without the GIL
 * on pinned tensors.
 */
#include "THP.h"

#include "THConv.h"

/* Spatial dims are indexed depth, height, width (0, 1, 2); a 2-D call's
 * are the last two, its depth entries those of a depth-1 volume. */
enum { DEPTH, HEIGHT, WIDTH, MAX_SPATIAL };

/* The ints after the tensor arguments: `spatial` strides, paddings and
 * dilations and groups, preceded by `spatial` leading ints (the input's or
 * the kernel's sizes) when `leading`. */
typedef struct {
    int64_t leading[MAX_SPATIAL];
    int64_t stride[MAX_SPATIAL], pad[MAX_SPATIAL], dilation[MAX_SPATIAL], groups;
} ConvInts;

static int
parse_ints(const char *fname, PyObject *const *args, int spatial, bool leading,
           ConvInts *out)
{
    static const char *const names[] = {"stride", "padding", "dilation"};
    int64_t *rows[] = {out->stride, out->pad, out->dilation};
    *out = (ConvInts){.leading = {1, 1, 1}, .stride = {1, 1, 1}, .dilation = {1, 1, 1}};
    int first = MAX_SPATIAL - spatial; /* 2-D: no depth */
    int next = 0;
    for (int i = first; leading && i < MAX_SPATIAL; i++) {
        if (THPUtils_unpackLong(args[next++], fname, "size", &out->leading[i]) < 0) {
            return -1;
        }
    }
    for (int row = 0; row < 3; row++) {
        for (int i = first; i < MAX_SPATIAL; i++) {
            if (THPUtils_unpackLong(args[next++], fname, names[row], &rows[row][i]) < 0) {
                return -1;
            }
        }
    }
    if (THPUtils_unpackLong(args[next], fname, "groups", &out->groups) < 0) {
        return -1;
    }
    for (int i = 0; i < MAX_SPATIAL; i++) {
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

/* How many arguments a product takes: its tensors, the leading sizes,
 * stride, padding and dilation per spatial dim, and groups. */
static Py_ssize_t
conv_nargs(int tensors, int spatial, bool leading)
{
    return tensors + (leading ? spatial : 0) + 3 * spatial + 1;
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

/* (spatial + 2)-D, contiguous, float32/float64, of `dtype`. */
static int
check_operand(const char *fname, const char *what, const THTensor *t, THDtype dtype,
              int spatial)
{
    if (t->ndim != spatial + 2 || !t->is_contiguous || t->dtype != dtype
        || (dtype != TH_Float32 && dtype != TH_Float64)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: %s must be a contiguous %d-D float32 or float64 tensor "
                     "of the input's dtype", fname, what, spatial + 2);
        return -1;
    }
    return 0;
}

/* A tensor's sizes as (N, C, D, H, W): a 2-D operand's depth is 1. */
static void
volume_sizes(const int64_t *sizes, int spatial, int64_t out[2 + MAX_SPATIAL])
{
    int first = MAX_SPATIAL - spatial;
    out[0] = sizes[0];
    out[1] = sizes[1];
    for (int i = 0; i < MAX_SPATIAL; i++) {
        out[2 + i] = i < first ? 1 : sizes[2 + i - first];
    }
}

/* in + 2 * pad and dilation * (kernel - 1) fit in int64, so
 * THConv_outputSize and the padded buffer's extents are defined (the
 * buffer's volume is checked where it is sized: THConv.c's gather_setup). */
static bool
extent_fits(int64_t in, int64_t kernel, int64_t pad, int64_t dilation)
{
    int64_t padded, reach;
    return !__builtin_mul_overflow(pad, 2, &padded)
           && !__builtin_add_overflow(padded, in, &padded)
           && !__builtin_mul_overflow(dilation, kernel - 1, &reach);
}

/* Completes `s` from the input and weight sizes (N, C, D, H, W and
 * O, C/groups, kd, kh, kw); checks they agree. */
static int
fill_shape(const char *fname, THConvShape *s, const ConvInts *ints,
           const int64_t in[5], const int64_t w[5])
{
    *s = (THConvShape){.batch = in[0], .in_channels = in[1], .in_d = in[2],
                       .in_h = in[3], .in_w = in[4], .out_channels = w[0],
                       .kernel_d = w[2], .kernel_h = w[3], .kernel_w = w[4],
                       .groups = ints->groups,
                       .stride_d = ints->stride[DEPTH], .stride_h = ints->stride[HEIGHT],
                       .stride_w = ints->stride[WIDTH], .pad_d = ints->pad[DEPTH],
                       .pad_h = ints->pad[HEIGHT], .pad_w = ints->pad[WIDTH],
                       .dilation_d = ints->dilation[DEPTH],
                       .dilation_h = ints->dilation[HEIGHT],
                       .dilation_w = ints->dilation[WIDTH]};
    if (s->in_channels != w[1] * s->groups || s->out_channels % s->groups != 0
        || s->kernel_d <= 0 || s->kernel_h <= 0 || s->kernel_w <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: the weight does not match the input's channels and groups",
                     fname);
        return -1;
    }
    if (!extent_fits(s->in_d, s->kernel_d, s->pad_d, s->dilation_d)
        || !extent_fits(s->in_h, s->kernel_h, s->pad_h, s->dilation_h)
        || !extent_fits(s->in_w, s->kernel_w, s->pad_w, s->dilation_w)) {
        PyErr_Format(PyExc_RuntimeError, "%s: the padding or dilation is too large",
                     fname);
        return -1;
    }
    s->out_d = THConv_outputSize(s->in_d, s->kernel_d, s->stride_d, s->pad_d,
                                 s->dilation_d);
    s->out_h = THConv_outputSize(s->in_h, s->kernel_h, s->stride_h, s->pad_h,
                                 s->dilation_h);
    s->out_w = THConv_outputSize(s->in_w, s->kernel_w, s->stride_w, s->pad_w,
                                 s->dilation_w);
    if (s->out_d <= 0 || s->out_h <= 0 || s->out_w <= 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: the kernel is larger than the padded input",
                     fname);
        return -1;
    }
    return 0;
}

/* The output's sizes (N, O, out_d, out_h, out_w). */
static void
output_volume(const THConvShape *s, int64_t volume[2 + MAX_SPATIAL])
{
    int64_t sizes[2 + MAX_SPATIAL] = {s->batch, s->out_channels, s->out_d, s->out_h,
                                      s->out_w};
    memcpy(volume, sizes, sizeof sizes);
}

/* A new (N, C, D, H, W) tensor, the D left out for a 2-D one. */
static THTensor *
new_operand(const int64_t volume[2 + MAX_SPATIAL], int spatial, THDtype dtype)
{
    int64_t sizes[2 + MAX_SPATIAL];
    memcpy(sizes, volume, 2 * sizeof(int64_t));
    memcpy(sizes + 2, volume + 2 + MAX_SPATIAL - spatial, (size_t)spatial * sizeof(int64_t));
    return THTensor_newEmpty(spatial + 2, sizes, dtype, TH_DEVICE_CPU);
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

/* grad_output's sizes are those of the shape's output. */
static int
check_grad_output(const char *fname, const THTensor *grad_output, const THConvShape *s,
                  int spatial)
{
    int64_t want[2 + MAX_SPATIAL], got[2 + MAX_SPATIAL];
    output_volume(s, want);
    volume_sizes(grad_output->sizes, spatial, got);
    for (int i = 0; i < 2 + MAX_SPATIAL; i++) {
        if (got[i] != want[i]) {
            PyErr_Format(PyExc_RuntimeError, "%s: grad_output has the wrong shape", fname);
            return -1;
        }
    }
    return 0;
}

static PyObject *
conv_forward(const char *fname, int spatial, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    ConvInts ints;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, conv_nargs(3, spatial, false), 3,
                           2) < 0
        || parse_ints(fname, args + 3, spatial, false, &ints) < 0) {
        return NULL;
    }
    THTensor *input = THPVariable_Unpack(args[0]);
    THTensor *weight = THPVariable_Unpack(args[1]);
    THTensor *bias = args[2] == Py_None ? NULL : THPVariable_Unpack(args[2]);
    THConvShape s;
    int64_t in[2 + MAX_SPATIAL], w[2 + MAX_SPATIAL], out[2 + MAX_SPATIAL];
    if (check_operand(fname, "input", input, input->dtype, spatial) < 0
        || check_operand(fname, "weight", weight, input->dtype, spatial) < 0) {
        return NULL;
    }
    volume_sizes(input->sizes, spatial, in);
    volume_sizes(weight->sizes, spatial, w);
    if (fill_shape(fname, &s, &ints, in, w) < 0) {
        return NULL;
    }
    if (bias != NULL && (bias->ndim != 1 || bias->sizes[0] != s.out_channels
                         || !bias->is_contiguous || bias->dtype != input->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "%s: bad bias", fname);
        return NULL;
    }
    output_volume(&s, out);
    THTensor *output = new_operand(out, spatial, input->dtype);
    if (output == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(output, THConv_forward(output, input, weight, bias, &s));
    return THPVariable_Wrap(output);
}

static PyObject *
conv_backward_input(const char *fname, int spatial, PyObject *const *args,
                    Py_ssize_t nargs, PyObject *kwnames)
{
    ConvInts ints;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, conv_nargs(2, spatial, true), 2,
                           -1) < 0
        || parse_ints(fname, args + 2, spatial, true, &ints) < 0) {
        return NULL;
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    THTensor *weight = THPVariable_Unpack(args[1]);
    if (check_operand(fname, "grad_output", grad_output, grad_output->dtype, spatial) < 0
        || check_operand(fname, "weight", weight, grad_output->dtype, spatial) < 0) {
        return NULL;
    }
    int64_t w[2 + MAX_SPATIAL];
    volume_sizes(weight->sizes, spatial, w);
    int64_t in[2 + MAX_SPATIAL] = {grad_output->sizes[0], w[1] * ints.groups,
                                   ints.leading[DEPTH], ints.leading[HEIGHT],
                                   ints.leading[WIDTH]};
    THConvShape s;
    if (fill_shape(fname, &s, &ints, in, w) < 0
        || check_grad_output(fname, grad_output, &s, spatial) < 0) {
        return NULL;
    }
    THTensor *grad_input = new_operand(in, spatial, grad_output->dtype);
    if (grad_input == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(grad_input,
                        THConv_backwardInput(grad_input, grad_output, weight, &s));
    return THPVariable_Wrap(grad_input);
}

static PyObject *
conv_backward_weight(const char *fname, int spatial, PyObject *const *args,
                     Py_ssize_t nargs, PyObject *kwnames)
{
    ConvInts ints;
    if (THPLayer_checkArgs(fname, args, nargs, kwnames, conv_nargs(2, spatial, true), 2,
                           -1) < 0
        || parse_ints(fname, args + 2, spatial, true, &ints) < 0) {
        return NULL;
    }
    THTensor *grad_output = THPVariable_Unpack(args[0]);
    THTensor *input = THPVariable_Unpack(args[1]);
    if (check_operand(fname, "grad_output", grad_output, input->dtype, spatial) < 0
        || check_operand(fname, "input", input, input->dtype, spatial) < 0) {
        return NULL;
    }
    if (input->sizes[1] % ints.groups != 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: groups must divide the channels", fname);
        return NULL;
    }
    int64_t in[2 + MAX_SPATIAL];
    volume_sizes(input->sizes, spatial, in);
    int64_t w[2 + MAX_SPATIAL] = {grad_output->sizes[1], in[1] / ints.groups,
                                  ints.leading[DEPTH], ints.leading[HEIGHT],
                                  ints.leading[WIDTH]};
    THConvShape s;
    if (fill_shape(fname, &s, &ints, in, w) < 0
        || check_grad_output(fname, grad_output, &s, spatial) < 0) {
        return NULL;
    }
    THTensor *grad_weight = new_operand(w, spatial, input->dtype);
    if (grad_weight == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THPLayer_RUN_KERNEL(grad_weight,
                        THConv_backwardWeight(grad_weight, grad_output, input, &s));
    return THPVariable_Wrap(grad_weight);
}

/* The module functions: _convNd{,_backward_input,_backward_weight}. */
#define CONV_ENTRY_POINTS(spatial)                                                     \
    static PyObject *THPModule_conv##spatial##d(PyObject *module, PyObject *const *args, \
                                                Py_ssize_t nargs, PyObject *kwnames)   \
    {                                                                                  \
        (void)module;                                                                  \
        return conv_forward("_conv" #spatial "d", spatial, args, nargs, kwnames);       \
    }                                                                                  \
    static PyObject *THPModule_conv##spatial##d_backward_input(                        \
        PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)  \
    {                                                                                  \
        (void)module;                                                                  \
        return conv_backward_input("_conv" #spatial "d_backward_input", spatial, args, \
                                   nargs, kwnames);                                    \
    }                                                                                  \
    static PyObject *THPModule_conv##spatial##d_backward_weight(                       \
        PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)  \
    {                                                                                  \
        (void)module;                                                                  \
        return conv_backward_weight("_conv" #spatial "d_backward_weight", spatial,     \
                                    args, nargs, kwnames);                             \
    }

CONV_ENTRY_POINTS(2)
CONV_ENTRY_POINTS(3)

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
    CONV_FUNCTION(_conv3d, "_conv3d(input, weight, bias, sd, sh, sw, pd, ph, pw, dd, dh, "
                           "dw, groups): NCDHW convolution (Note [Three spatial dims, "
                           "one code path])"),
    CONV_FUNCTION(_conv3d_backward_input,
                  "_conv3d_backward_input(grad_output, weight, in_d, in_h, in_w, sd, sh, "
                  "sw, pd, ph, pw, dd, dh, dw, groups)"),
    CONV_FUNCTION(_conv3d_backward_weight,
                  "_conv3d_backward_weight(grad_output, input, kd, kh, kw, sd, sh, sw, "
                  "pd, ph, pw, dd, dh, dw, groups)"),
    {NULL, NULL, 0, NULL},
};

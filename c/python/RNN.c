/*
 * RNN.c -- the recurrent layers' time loops of c/th/THRNN.c (Note
 * [Recurrent layers in one loop]) as private functions of ember._C, for
 * ember/nn/_rnn.py:
 *
 *   _rnn_forward(gates, w_hh, h0, c0, b_hh, w_hr, mode, reverse)
 *       -> (output, saved); overwrites gates with the activations
 *   _rnn_backward(grad_output, grad_h, grad_c, gates, output, saved, w_hh,
 *                 w_hr, h0, c0, mode, reverse)
 *       -> (grad_gates, grad_hidden_gates, grad_h0, grad_c0, grad_w_hr)
 *
 * mode is "RNN_TANH", "RNN_RELU", "LSTM" or "GRU"; None stands for what
 * the mode has not (saved and c0 of RNN, grad_hidden_gates of LSTM, ...)
 * and for an LSTM's w_hr without a projection (Note [LSTM projections]):
 * with one, h0 and the output have w_hr's rows as their width.
 * Python passes contiguous tensors of one dtype; the checks here keep a
 * direct caller from reading out of bounds.  Pinned functions (Note
 * [Pinned arguments]): mode and reverse are read before a THTensor is
 * taken.
 */
#include "THP.h"

#include "THRNN.h"

static const char *const mode_names[] = {"RNN_TANH", "RNN_RELU", "LSTM", "GRU"};

static int
unpack_mode(const char *fname, PyObject *arg, THRNNMode *mode)
{
    if (PyUnicode_Check(arg)) {
        for (int m = 0; m < 4; m++) {
            if (PyUnicode_CompareWithASCIIString(arg, mode_names[m]) == 0) {
                *mode = (THRNNMode)m;
                return 0;
            }
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "%s(): mode must be 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU'", fname);
    return -1;
}

/* The tensors' expected shapes: T steps, B batch, H hidden, G gates, S
 * the hidden state's width (H, or the projection's). */
typedef struct {
    const char *fname;
    THRNNMode mode;
    THDtype dtype;
    bool projected;
    int64_t steps, batch, hidden, gate_width, state_width;
} Shapes;

/* args[index] as a contiguous tensor of s->dtype and the given sizes; None
 * (*out = NULL) is accepted when `present` is false and required then too
 * for the arguments a mode has not. */
static int
unpack_operand(const Shapes *s, PyObject *const *args, int index, const char *what,
               bool present, int ndim, const int64_t *sizes, THTensor **out)
{
    *out = NULL;
    PyObject *arg = args[index];
    if (!present) {
        if (arg != Py_None) {
            PyErr_Format(PyExc_RuntimeError, "%s: %s must be None for mode %s",
                         s->fname, what, mode_names[s->mode]);
            return -1;
        }
        return 0;
    }
    if (!THPVariable_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be Tensor, not %.100s", s->fname,
                     what, Py_TYPE(arg)->tp_name);
        return -1;
    }
    THTensor *t = THPVariable_Unpack(arg);
    bool fits = t->ndim == ndim && t->is_contiguous && t->dtype == s->dtype;
    for (int d = 0; fits && d < ndim; d++) {
        fits = t->sizes[d] == sizes[d];
    }
    if (!fits) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: %s must be a contiguous %d-D tensor of the gates' dtype and "
                     "the layer's sizes", s->fname, what, ndim);
        return -1;
    }
    *out = t;
    return 0;
}

/* Checks the call (`expected` positional arguments, the last two mode and
 * reverse, read first: Note [Pinned arguments]) and reads the sizes from
 * the tensors args[gates_at] (T, B, G) and args[h0_at] (B, S); a tensor
 * args[w_hr_at] makes the layer projected. */
static int
parse_call(Shapes *s, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
           Py_ssize_t expected, int gates_at, int h0_at, int w_hr_at, int64_t *reverse)
{
    if (THPLayer_checkArgs(s->fname, args, nargs, kwnames, expected, 0, -1) < 0
        || unpack_mode(s->fname, args[expected - 2], &s->mode) < 0
        || THPUtils_unpackLong(args[expected - 1], s->fname, "reverse", reverse) < 0) {
        return -1;
    }
    if (!THPVariable_Check(args[gates_at]) || !THPVariable_Check(args[h0_at])) {
        PyErr_Format(PyExc_TypeError, "%s(): gates and h0 must be Tensors", s->fname);
        return -1;
    }
    const THTensor *gates = THPVariable_Unpack(args[gates_at]);
    const THTensor *h0 = THPVariable_Unpack(args[h0_at]);
    if (gates->ndim != 3 || h0->ndim != 2
        || (gates->dtype != TH_Float32 && gates->dtype != TH_Float64)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: gates must be a 3-D and h0 a 2-D float32 or float64 tensor",
                     s->fname);
        return -1;
    }
    int gate_count = THRNN_gateCount(s->mode);
    s->dtype = gates->dtype;
    s->steps = gates->sizes[0];
    s->batch = h0->sizes[0];
    s->gate_width = gates->sizes[2];
    s->projected = args[w_hr_at] != Py_None;
    s->state_width = h0->sizes[1];
    /* a projected layer's cell is as wide as the gates say; else as h0 */
    s->hidden = s->projected ? s->gate_width / gate_count : s->state_width;
    if (s->hidden <= 0 || s->state_width <= 0
        || s->gate_width != gate_count * s->hidden) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: gates must have %d * hidden_size columns for mode %s", s->fname,
                     gate_count, mode_names[s->mode]);
        return -1;
    }
    return 0;
}

static THTensor *
new_steps(const Shapes *s, int64_t width)
{
    int64_t sizes[3] = {s->steps, s->batch, width};
    return THTensor_newEmpty(3, sizes, s->dtype, TH_DEVICE_CPU);
}

static PyObject *
THPModule_rnn_forward(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    (void)module;
    Shapes s = {.fname = "_rnn_forward"};
    int64_t reverse;
    if (parse_call(&s, args, nargs, kwnames, 8, 0, 2, 5, &reverse) < 0) {
        return NULL;
    }
    bool lstm = s.mode == TH_RNN_LSTM, gru = s.mode == TH_RNN_GRU;
    int64_t state[2] = {s.batch, s.state_width};
    int64_t cell[2] = {s.batch, s.hidden};
    int64_t weight[2] = {s.gate_width, s.state_width};
    int64_t projection[2] = {s.state_width, s.hidden};
    int64_t steps[3] = {s.steps, s.batch, s.gate_width};
    THTensor *gates, *w_hh, *h0, *c0, *b_hh, *w_hr;
    if (unpack_operand(&s, args, 0, "gates", true, 3, steps, &gates) < 0
        || unpack_operand(&s, args, 1, "w_hh", true, 2, weight, &w_hh) < 0
        || unpack_operand(&s, args, 2, "h0", true, 2, state, &h0) < 0
        || unpack_operand(&s, args, 3, "c0", lstm, 2, cell, &c0) < 0
        || unpack_operand(&s, args, 4, "b_hh", gru && args[4] != Py_None, 1,
                          &s.gate_width, &b_hh) < 0
        || unpack_operand(&s, args, 5, "w_hr", lstm && s.projected, 2, projection,
                          &w_hr) < 0) {
        return NULL;
    }
    THTensor *results[2] = {new_steps(&s, s.state_width),
                            lstm || gru ? new_steps(&s, s.hidden) : NULL};
    int status = results[0] != NULL && (results[1] != NULL || !(lstm || gru)) ? 0 : -1;
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THRNN_forward(s.mode, reverse != 0, gates,
                                                            results[0], results[1], w_hh,
                                                            b_hh, w_hr, h0, c0));
    }
    return THPLayer_finish(status, 2, results);
}

/* A new tensor of from's sizes holding a copy of `from`. */
static THTensor *
copy_state(const Shapes *s, THTensor *from)
{
    THTensor *t = THTensor_newEmpty(from->ndim, from->sizes, s->dtype, TH_DEVICE_CPU);
    if (t != NULL && THTensor_copy(t, from) < 0) {
        THTensor_release(t);
        return NULL;
    }
    return t;
}

static PyObject *
THPModule_rnn_backward(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    (void)module;
    Shapes s = {.fname = "_rnn_backward"};
    int64_t reverse;
    if (parse_call(&s, args, nargs, kwnames, 12, 3, 8, 7, &reverse) < 0) {
        return NULL;
    }
    bool lstm = s.mode == TH_RNN_LSTM, gru = s.mode == TH_RNN_GRU;
    bool projected = lstm && s.projected;
    int64_t state[2] = {s.batch, s.state_width};
    int64_t cell[2] = {s.batch, s.hidden};
    int64_t weight[2] = {s.gate_width, s.state_width};
    int64_t projection[2] = {s.state_width, s.hidden};
    int64_t gate_steps[3] = {s.steps, s.batch, s.gate_width};
    int64_t state_steps[3] = {s.steps, s.batch, s.state_width};
    int64_t cell_steps[3] = {s.steps, s.batch, s.hidden};
    THTensor *grad_output, *grad_h, *grad_c, *gates, *output, *saved, *w_hh, *w_hr, *h0,
        *c0;
    if (unpack_operand(&s, args, 0, "grad_output", true, 3, state_steps, &grad_output) < 0
        || unpack_operand(&s, args, 1, "grad_h", true, 2, state, &grad_h) < 0
        || unpack_operand(&s, args, 2, "grad_c", lstm, 2, cell, &grad_c) < 0
        || unpack_operand(&s, args, 3, "gates", true, 3, gate_steps, &gates) < 0
        || unpack_operand(&s, args, 4, "output", true, 3, state_steps, &output) < 0
        || unpack_operand(&s, args, 5, "saved", lstm || gru, 3, cell_steps, &saved) < 0
        || unpack_operand(&s, args, 6, "w_hh", true, 2, weight, &w_hh) < 0
        || unpack_operand(&s, args, 7, "w_hr", projected, 2, projection, &w_hr) < 0
        || unpack_operand(&s, args, 8, "h0", true, 2, state, &h0) < 0
        || unpack_operand(&s, args, 9, "c0", lstm, 2, cell, &c0) < 0) {
        return NULL;
    }
    /* grad_gates, grad_hidden_gates, grad_h0, grad_c0, grad_w_hr */
    THTensor *results[5] = {new_steps(&s, s.gate_width),
                            gru ? new_steps(&s, s.gate_width) : NULL,
                            copy_state(&s, grad_h), lstm ? copy_state(&s, grad_c) : NULL,
                            projected ? THTensor_newEmpty(2, projection, s.dtype,
                                                          TH_DEVICE_CPU)
                                      : NULL};
    bool allocated = results[0] != NULL && (results[1] != NULL || !gru)
                     && results[2] != NULL && (results[3] != NULL || !lstm)
                     && (results[4] != NULL || !projected);
    int status = allocated ? 0 : -1;
    if (status == 0) {
        THP_RUN_WITHOUT_GIL_IF(true, status = THRNN_backward(
                                         s.mode, reverse != 0, results[0], results[1],
                                         results[2], results[3], results[4], grad_output,
                                         gates, output, saved, w_hh, w_hr, h0, c0));
    }
    return THPLayer_finish(status, 5, results);
}

#define RNN_FUNCTION(name, doc)                                            \
    {#name, (PyCFunction)(void (*)(void))THPModule##name,                 \
     METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef THPRNN_methods[] = {
    RNN_FUNCTION(_rnn_forward,
                 "_rnn_forward(gates, w_hh, h0, c0, b_hh, w_hr, mode, reverse) -> "
                 "(output, saved); overwrites gates with the activations"),
    RNN_FUNCTION(_rnn_backward,
                 "_rnn_backward(grad_output, grad_h, grad_c, gates, output, saved, w_hh, "
                 "w_hr, h0, c0, mode, reverse) -> (grad_gates, grad_hidden_gates, "
                 "grad_h0, grad_c0, grad_w_hr)"),
    {NULL, NULL, 0, NULL},
};

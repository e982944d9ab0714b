/*
 * Optim.c -- the one-pass optimizer updates of c/th/THOptim.c (Note [One
 * pass per parameter]) as private functions of ember._C, for
 * ember/optim/adam.py:
 *
 *   _adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr,
 *               weight_decay, decoupled_weight_decay, beta1, beta2, eps,
 *               step_size, bias_correction2_sqrt, amsgrad, maximize)
 *       -> True after updating param and the state in place; False (and
 *          nothing done) when the kernel does not take these tensors
 *          (THOptim_adamTakes), for Python to run the op-by-op update.
 *
 * max_exp_avg_sq is None without amsgrad.  A pinned function (Note [Pinned
 * arguments]): every number is read before a THTensor is taken.
 */
#include "THP.h"

#include "THOptim.h"

#define ADAM_NARGS 15
#define ADAM_NTENSORS 5
#define ADAM_MAX_EXP_AVG_SQ 4 /* the argument that may be None */

/* The numbers and flags after the tensors, read (which can run Python:
 * __float__, __bool__) before any THTensor is taken. */
static int
unpack_adam_options(PyObject *const *args, THAdamOptions *o)
{
    struct { int arg; double *value; } numbers[] = {
        {5, &o->lr}, {6, &o->weight_decay}, {8, &o->beta1}, {9, &o->beta2},
        {10, &o->eps}, {11, &o->step_size}, {12, &o->bias_correction2_sqrt}};
    struct { int arg; bool *value; } flags[] = {
        {7, &o->decoupled_weight_decay}, {13, &o->amsgrad}, {14, &o->maximize}};
    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
        *numbers[i].value = PyFloat_AsDouble(args[numbers[i].arg]);
        if (*numbers[i].value == -1.0 && PyErr_Occurred()) {
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        int truth = PyObject_IsTrue(args[flags[i].arg]);
        if (truth < 0) {
            return -1;
        }
        *flags[i].value = truth != 0;
    }
    return 0;
}

static PyObject *
THPModule_adam_step_(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    (void)module;
    THAdamOptions options;
    if (THPLayer_checkArgs("_adam_step_", args, nargs, kwnames, ADAM_NARGS,
                           ADAM_NTENSORS, ADAM_MAX_EXP_AVG_SQ) < 0
        || unpack_adam_options(args, &options) < 0) {
        return NULL;
    }
    THTensor *t[ADAM_NTENSORS];
    for (int i = 0; i < ADAM_NTENSORS; i++) {
        t[i] = args[i] == Py_None ? NULL : THPVariable_Unpack(args[i]);
    }
    if (!THOptim_adamTakes(t[0], t[1], t[2], t[3], t[4], options.amsgrad)) {
        Py_RETURN_FALSE;
    }
    int status;
    THP_RUN_WITHOUT_GIL_IF(t[0]->numel >= TH_PARALLEL_GRAIN,
                           status = THOptim_adam(t[0], t[1], t[2], t[3], t[4],
                                                 &options));
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_RETURN_TRUE;
}

PyMethodDef THPOptim_methods[] = {
    {"_adam_step_", (PyCFunction)(void (*)(void))THPModule_adam_step_,
     METH_FASTCALL | METH_KEYWORDS,
     "_adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, "
     "weight_decay, decoupled_weight_decay, beta1, beta2, eps, step_size, "
     "bias_correction2_sqrt, amsgrad, maximize) -> bool: one Adam step in "
     "one pass, or False when these tensors need the op-by-op update"},
    {NULL, NULL, 0, NULL},
};

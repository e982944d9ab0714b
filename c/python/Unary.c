/*
 * Unary.c -- elementwise unary math (exp, log, sin, ..., activations, isnan, nan_to_num).
 * See Note [Function and method from one implementation] in THP.h.
 */
#include "THP.h"

PyMethodDef THPUnary_functions[] = {
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_unary_methods[] = {
    {NULL, NULL, 0, NULL},
};

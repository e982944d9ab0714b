/*
 * Reduce.c -- reductions (sum, mean, max, var, norm, ...), softmax and scans.
 * See Note [Function and method from one implementation] in THP.h.
 */
#include "THP.h"

PyMethodDef THPReduce_functions[] = {
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_reduce_methods[] = {
    {NULL, NULL, 0, NULL},
};

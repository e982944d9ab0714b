/*
 * Shape.c -- shape operators (cat, stack, split, flip, roll, repeat, tril, sort, topk, unique, one_hot, ...).
 * See Note [Function and method from one implementation] in THP.h.
 */
#include "THP.h"

PyMethodDef THPShape_functions[] = {
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_shape_methods[] = {
    {NULL, NULL, 0, NULL},
};

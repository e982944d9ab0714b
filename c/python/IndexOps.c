/*
 * IndexOps.c -- indexing operators (index_select, gather, scatter, masked_fill, nonzero, take, ...).
 * See Note [Function and method from one implementation] in THP.h.
 */
#include "THP.h"

PyMethodDef THPIndexOps_functions[] = {
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_index_ops_methods[] = {
    {NULL, NULL, 0, NULL},
};

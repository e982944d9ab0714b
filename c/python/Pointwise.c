/*
 * Pointwise.c -- elementwise binary operators, comparisons, logical and bitwise ops, where and clamp, and the tensor's number-protocol slots.
 * See Note [Function and method from one implementation] in THP.h.
 */
#include "THP.h"

PyMethodDef THPPointwise_functions[] = {
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_pointwise_methods[] = {
    {NULL, NULL, 0, NULL},
};

void
THPPointwise_initTypeSlots(PyTypeObject *type, PyNumberMethods *number)
{
    (void)type;
    (void)number;
}

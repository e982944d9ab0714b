/*
 * THOptim.h -- optimizer updates in one pass over each parameter.
 *
 * Note [One pass per parameter]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Adam's update, written with tensor ops as torch.optim's single-tensor
 * loop writes it, is about ten elementwise ops per parameter (shrink the
 * weights, lerp the first moment, two ops on the second, sqrt, two more
 * for the denominator, a divide and the final add), each a pass over
 * memory: a GPT's 10M parameters made the optimizer 1.75x PyTorch's time.
 * THOptim_adam reads the parameter, its gradient and the moments once and
 * writes them once (PyTorch's fused=True idea, "one pass per parameter").
 *
 * Per element it runs the same ops in the same order as the op-by-op
 * update in ember/optim/adam.py, each rounded to the parameter's dtype
 * (every Python number converted to it first, as an eager op converts its
 * scalar argument; no FMA: Note [No FMA contraction]), so the two give the
 * same bits and tests compare them exactly.  Python keeps the op-by-op
 * update for what this kernel does not take: other dtypes and devices,
 * layouts that are not contiguous, a tensor learning rate, differentiable
 * steps.
 */
#ifndef TH_OPTIM_H
#define TH_OPTIM_H

#include "THTensor.h"

#include <stdbool.h>

typedef struct {
    double lr;
    double weight_decay;              /* 0: none */
    bool decoupled_weight_decay;      /* AdamW: param *= 1 - lr * wd first;
                                       * else wd * param joins the gradient */
    double beta1, beta2, eps;
    double step_size;                 /* lr / (1 - beta1 ** step) */
    double bias_correction2_sqrt;     /* (1 - beta2 ** step) ** 0.5 */
    bool amsgrad;                     /* max_exp_avg_sq given and updated */
    bool maximize;                    /* ascend: the gradient negated */
} THAdamOptions;

/* Whether THOptim_adam takes these operands: CPU, float32 or float64, all
 * of one dtype and element count, contiguous, and max_exp_avg_sq given
 * exactly when `amsgrad`. */
bool THOptim_adamTakes(const THTensor *param, const THTensor *grad,
                       const THTensor *exp_avg, const THTensor *exp_avg_sq,
                       const THTensor *max_exp_avg_sq, bool amsgrad);

/* One Adam step in place on param, exp_avg, exp_avg_sq (and
 * max_exp_avg_sq), bumping their versions.  0, or -1 with a TH error when
 * THOptim_adamTakes is false.  Runs on the worker threads when large. */
int THOptim_adam(THTensor *param, const THTensor *grad, THTensor *exp_avg,
                 THTensor *exp_avg_sq, THTensor *max_exp_avg_sq,
                 const THAdamOptions *options);

#endif /* TH_OPTIM_H */

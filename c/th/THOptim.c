/*
 * THOptim.c -- Adam's update in one pass (Note [One pass per parameter] in
 * THOptim.h).
 */
#include "THOptim.h"

#include "THFormulas.h"
#include "THParallel.h"

#include <math.h>

/* Built with -fno-math-errno -fno-trapping-math (setup.py's FILE_FLAGS),
 * without which gcc vectorises none of the loop below. */

/* Everything one range of the update needs, the numbers already in the
 * parameter's dtype (as the op-by-op update's scalar arguments are). */
typedef struct {
    void *param, *exp_avg, *exp_avg_sq, *max_exp_avg_sq;
    const void *grad;
    const THAdamOptions *options;
} AdamRun;

/* The op-by-op update of ember/optim/adam.py, element by element; each
 * line is one eager op, with its formula:
 *   g = -grad                                  (maximize)
 *   p = p * (1 - lr * wd)                      (decoupled weight decay)
 *   g = g + wd * p                             (L2 weight decay)
 *   m = m + w * (g - m)      if |w| < 0.5      (lerp toward g by w = 1 - beta1,
 *   m = g - (g - m) * (1 - w) otherwise         from the nearer end)
 *   v = v * beta2 + (1 - beta2) * (g * g)
 *   s = max(s_max, v)                          (amsgrad: s_max = s)
 *   d = sqrt(s) / bias_correction2_sqrt + eps
 *   p = p + (-step_size) * (m / d)
 * AMSGRAD is a constant (two loops), so the loop has no store to skip. */
#define TH_DEFINE_ADAM_RANGE(Name, ctype, AMSGRAD, suffix)                    \
    TH_VECTOR_CLONES static void adam_##Name##suffix(AdamRun *run,            \
                                                     int64_t begin,           \
                                                     int64_t end)             \
    {                                                                         \
        const THAdamOptions *o = run->options;                                \
        ctype *param = run->param, *m_all = run->exp_avg;                     \
        ctype *v_all = run->exp_avg_sq, *vmax_all = run->max_exp_avg_sq;      \
        const ctype *grad = run->grad;                                        \
        const bool maximize = o->maximize;                                    \
        const bool decoupled = o->weight_decay != 0 && o->decoupled_weight_decay; \
        const bool l2 = o->weight_decay != 0 && !o->decoupled_weight_decay;   \
        const double w = 1 - o->beta1;                                        \
        const bool from_start = fabs(w) < 0.5;                                \
        const ctype shrink = (ctype)(1 - o->lr * o->weight_decay);            \
        const ctype wd = (ctype)o->weight_decay;                              \
        const ctype lerp_w = (ctype)(from_start ? w : 1 - w);                 \
        const ctype beta2 = (ctype)o->beta2;                                  \
        const ctype one_minus_beta2 = (ctype)(1 - o->beta2);                  \
        const ctype bc2_sqrt = (ctype)o->bias_correction2_sqrt;               \
        const ctype eps = (ctype)o->eps;                                      \
        const ctype neg_step = (ctype)(-o->step_size);                        \
        (void)vmax_all;                                                       \
        for (int64_t i = begin; i < end; i++) {                               \
            ctype g = maximize ? EXPR_NEG(Name, ctype, grad[i]) : grad[i];    \
            ctype p = param[i];                                               \
            p = decoupled ? EXPR_MUL(Name, ctype, p, shrink, 0) : p;          \
            g = l2 ? EXPR_ADD_ALPHA(Name, ctype, g, p, wd) : g;               \
            ctype m = m_all[i];                                               \
            ctype gm = EXPR_SUB(Name, ctype, g, m, 0);                        \
            m = from_start                                                    \
                    ? EXPR_ADD_ALPHA(Name, ctype, m, gm, lerp_w)              \
                    : EXPR_SUB(Name, ctype, g,                                \
                               EXPR_MUL(Name, ctype, gm, lerp_w, 0), 0);      \
            ctype v = EXPR_MUL(Name, ctype, v_all[i], beta2, 0);              \
            v = EXPR_ADD_ALPHA(Name, ctype, v,                                \
                               EXPR_MUL(Name, ctype, g, g, 0),                \
                               one_minus_beta2);                              \
            ctype s = v;                                                      \
            if (AMSGRAD) {                                                    \
                s = EXPR_MAXIMUM(Name, ctype, vmax_all[i], v, 0);             \
                vmax_all[i] = s;                                              \
            }                                                                 \
            ctype d = EXPR_DIV(Name, ctype, TH_FLOAT_FN(sqrt, ctype)(s),      \
                               bc2_sqrt, 0);                                  \
            d = EXPR_ADD(Name, ctype, d, eps, 0);                             \
            param[i] = EXPR_ADD_ALPHA(Name, ctype, p,                         \
                                      EXPR_DIV(Name, ctype, m, d, 0),         \
                                      neg_step);                              \
            m_all[i] = m;                                                     \
            v_all[i] = v;                                                     \
        }                                                                     \
    }
TH_DEFINE_ADAM_RANGE(Float32, float, 0, )
TH_DEFINE_ADAM_RANGE(Float32, float, 1, _amsgrad)
TH_DEFINE_ADAM_RANGE(Float64, double, 0, )
TH_DEFINE_ADAM_RANGE(Float64, double, 1, _amsgrad)
#undef TH_DEFINE_ADAM_RANGE

#define TH_DEFINE_ADAM_DISPATCH(Name)                                    \
    static void adam_range_##Name(int64_t begin, int64_t end, void *ctx) \
    {                                                                    \
        AdamRun *run = ctx;                                              \
        if (run->options->amsgrad) {                                     \
            adam_##Name##_amsgrad(run, begin, end);                      \
        }                                                                \
        else {                                                           \
            adam_##Name(run, begin, end);                                \
        }                                                                \
    }
TH_DEFINE_ADAM_DISPATCH(Float32)
TH_DEFINE_ADAM_DISPATCH(Float64)
#undef TH_DEFINE_ADAM_DISPATCH

static bool
matches(const THTensor *t, const THTensor *param)
{
    return t->dtype == param->dtype && t->numel == param->numel
           && t->is_contiguous && t->storage->device == TH_DEVICE_CPU;
}

bool
THOptim_adamTakes(const THTensor *param, const THTensor *grad,
                  const THTensor *exp_avg, const THTensor *exp_avg_sq,
                  const THTensor *max_exp_avg_sq, bool amsgrad)
{
    if (param->dtype != TH_Float32 && param->dtype != TH_Float64) {
        return false;
    }
    if ((max_exp_avg_sq != NULL) != amsgrad) {
        return false;
    }
    return matches(param, param) && matches(grad, param)
           && matches(exp_avg, param) && matches(exp_avg_sq, param)
           && (max_exp_avg_sq == NULL || matches(max_exp_avg_sq, param));
}

int
THOptim_adam(THTensor *param, const THTensor *grad, THTensor *exp_avg,
             THTensor *exp_avg_sq, THTensor *max_exp_avg_sq,
             const THAdamOptions *options)
{
    if (!THOptim_adamTakes(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                           options->amsgrad)) {
        return THError_set(TH_ERR_VALUE,
                           "adam: the parameter, its gradient and its state "
                           "must be contiguous CPU float32 or float64 tensors "
                           "of one dtype and size (max_exp_avg_sq exactly "
                           "with amsgrad)");
    }
    AdamRun run = {
        .param = THTensor_data(param),
        .exp_avg = THTensor_data(exp_avg),
        .exp_avg_sq = THTensor_data(exp_avg_sq),
        .max_exp_avg_sq = max_exp_avg_sq == NULL ? NULL
                                                 : THTensor_data(max_exp_avg_sq),
        .grad = THTensor_data(grad),
        .options = options,
    };
    if (param->numel > 0) {
        THParallel_for(param->numel, TH_PARALLEL_GRAIN,
                       param->dtype == TH_Float32 ? adam_range_Float32
                                                  : adam_range_Float64,
                       &run);
    }
    THTensor_bumpVersion(param);
    THTensor_bumpVersion(exp_avg);
    THTensor_bumpVersion(exp_avg_sq);
    if (max_exp_avg_sq != NULL) {
        THTensor_bumpVersion(max_exp_avg_sq);
    }
    return 0;
}

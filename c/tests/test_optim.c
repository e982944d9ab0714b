/*
 * test_optim.c -- THOptim_adam (Note [One pass per parameter]): one step
 * against Adam's formula worked out by hand in double, the versions it
 * bumps, and the operands it refuses.
 */
#include "th_test.h"

#include <math.h>

static THTensor *
vector(THDtype dtype, int64_t n, double value)
{
    THTensor *t = THTensor_newEmpty(1, &n, dtype, TH_DEVICE_CPU);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == TH_Float32) {
            ((float *)THTensor_data(t))[i] = (float)value;
        }
        else {
            ((double *)THTensor_data(t))[i] = value;
        }
    }
    return t;
}

/* Step 1 of AdamW from m = v = 0: m = 0.1 g, v = 0.001 g^2, and with the
 * bias corrections p = p (1 - lr wd) - lr g / (|g| + eps'). */
static void
test_adam_first_step(void)
{
    const THAdamOptions options = {
        .lr = 0.5, .weight_decay = 0.25, .decoupled_weight_decay = true,
        .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
        .step_size = 0.5 / (1 - 0.9), .bias_correction2_sqrt = sqrt(1 - 0.999),
    };
    THTensor *param = vector(TH_Float64, 3, 2.0), *grad = vector(TH_Float64, 3, -4.0);
    THTensor *m = vector(TH_Float64, 3, 0.0), *v = vector(TH_Float64, 3, 0.0);
    int64_t version = param->version_counter->version;
    CHECK_OK(THOptim_adam(param, grad, m, v, NULL, &options));
    const double *p = (const double *)THTensor_data(param);
    CHECK_NEAR(p[2], 2.0 * (1 - 0.5 * 0.25) + 0.5 * 4.0 / (4.0 + 1e-8), 1e-12);
    CHECK_NEAR(((double *)THTensor_data(m))[0], -0.4, 1e-15);
    CHECK_NEAR(((double *)THTensor_data(v))[1], 0.016, 1e-15);
    CHECK(param->version_counter->version > version);
    THTensor *refs[] = {param, grad, m, v};
    for (int i = 0; i < 4; i++) {
        THTensor_release(refs[i]);
    }
}

static void
test_adam_refuses_mismatched_operands(void)
{
    const THAdamOptions options = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999,
                                   .step_size = 1, .bias_correction2_sqrt = 1};
    THTensor *param = vector(TH_Float32, 4, 1.0), *wrong_size = vector(TH_Float32, 5, 1.0);
    THTensor *wrong_dtype = vector(TH_Float64, 4, 1.0), *half = THTensor_newEmpty(
        1, (int64_t[]){4}, TH_Float16, TH_DEVICE_CPU);
    CHECK(!THOptim_adamTakes(param, wrong_size, param, param, NULL, false));
    CHECK(!THOptim_adamTakes(param, wrong_dtype, param, param, NULL, false));
    CHECK(!THOptim_adamTakes(half, half, half, half, NULL, false));
    CHECK(!THOptim_adamTakes(param, param, param, param, NULL, true));
    CHECK(THOptim_adamTakes(param, param, param, param, param, true));
    CHECK_FAILS(THOptim_adam(param, wrong_size, param, param, NULL, &options),
                TH_ERR_VALUE, "contiguous CPU float32 or float64");
    THTensor_release(param);
    THTensor_release(wrong_size);
    THTensor_release(wrong_dtype);
    THTensor_release(half);
}

TH_TEST_SUITE(optim) = {
    TH_TEST(test_adam_first_step),
    TH_TEST(test_adam_refuses_mismatched_operands),
    TH_TEST_END,
};

/*
 * test_random.c -- xoshiro256** seeded through splitmix64, the uniform /
 * normal / randint / exponential / bernoulli fills, the generator state,
 * in-place sampling of views, randperm, bernoulli, poisson and multinomial
 * (THRandom.h).  The statistical checks use fixed seeds and bounds of
 * several standard deviations, wide enough to be stable and narrow enough
 * that a biased sampler fails them.
 */
#include "th_test.h"

#include <math.h>

/*
 * Reference values computed independently with this Python transcription
 * of the published algorithms (Vigna's splitmix64.c and
 * xoshiro256starstar.c, https://prng.di.unimi.it/):
 *
 *     M = (1 << 64) - 1
 *     def rotl(x, k): return ((x << k) | (x >> (64 - k))) & M
 *     def splitmix64(x):                      # returns (new x, output)
 *         x = (x + 0x9E3779B97F4A7C15) & M
 *         z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
 *         z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
 *         return x, z ^ (z >> 31)
 *     def seed(s):
 *         st = []
 *         for _ in range(4):
 *             s, v = splitmix64(s); st.append(v)
 *         return st
 *     def next(s):
 *         r = (rotl((s[1] * 5) & M, 7) * 9) & M
 *         t = (s[1] << 17) & M
 *         s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]
 *         s[2] ^= t; s[3] = rotl(s[3], 45)
 *         return r
 *
 *     s = seed(0)   # [0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4,
 *                   #  0x06c45d188009454f, 0xf88bb8a8724c81ec]
 *     [hex(next(s)) for _ in range(5)]
 *     [(next(s) >> 11) * 2**-53 for _ in range(3)]   # on a fresh seed(0)
 *
 * (The seed-0 splitmix64 state is also the well-known first output
 * sequence of splitmix64: 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, ...)
 */
static void
test_random_known_values_seed0(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 0);
    CHECK_EQ_U64(gen.seed, 0);
    CHECK_EQ_U64(gen.state[0], UINT64_C(0xe220a8397b1dcdaf));
    CHECK_EQ_U64(gen.state[1], UINT64_C(0x6e789e6aa1b965f4));
    CHECK_EQ_U64(gen.state[2], UINT64_C(0x06c45d188009454f));
    CHECK_EQ_U64(gen.state[3], UINT64_C(0xf88bb8a8724c81ec));
    static const uint64_t expected[5] = {
        UINT64_C(0x99ec5f36cb75f2b4), UINT64_C(0xbf6e1f784956452a),
        UINT64_C(0x1a5f849d4933e6e0), UINT64_C(0x6aa594f1262d2d2c),
        UINT64_C(0xbba5ad4a1f842e59),
    };
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_U64(THGenerator_next(&gen), expected[i]);
    }
    THGenerator_seed(&gen, 0);
    CHECK_EQ_DBL(THGenerator_uniform01(&gen), 0.6012629994179048);
    CHECK_EQ_DBL(THGenerator_uniform01(&gen), 0.7477740925472398);
    CHECK_EQ_DBL(THGenerator_uniform01(&gen), 0.10301998939503632);
}

static void
test_random_same_seed_same_sequence(void)
{
    THGenerator a, b, c;
    THGenerator_seed(&a, 12345);
    THGenerator_seed(&b, 12345);
    THGenerator_seed(&c, 12346);
    CHECK_EQ_U64(a.seed, 12345);
    bool all_same = true, any_differs_from_c = false;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = THGenerator_next(&a);
        all_same = all_same && x == THGenerator_next(&b);
        any_differs_from_c = any_differs_from_c || x != THGenerator_next(&c);
    }
    CHECK(all_same);
    CHECK(any_differs_from_c);
    /* reseeding restarts the sequence */
    THGenerator_seed(&a, 12345);
    THGenerator_seed(&b, 12345);
    CHECK_EQ_U64(THGenerator_next(&a), THGenerator_next(&b));

    /* tensors filled from equal generators are equal */
    THTensor *x = THTensor_newEmpty(TT_SIZES(100), TH_Float32, TH_DEVICE_CPU);
    THTensor *y = THTensor_newEmpty(TT_SIZES(100), TH_Float32, TH_DEVICE_CPU);
    THGenerator_seed(&a, 7);
    THGenerator_seed(&b, 7);
    if (x && y) {
        CHECK_OK(THTensor_normal(x, &a, 0, 1));
        CHECK_OK(THTensor_normal(y, &b, 0, 1));
        CHECK(memcmp(THTensor_data(x), THTensor_data(y), 400) == 0);
        CHECK_OK(THTensor_uniform(x, &a, -1, 1));
        CHECK(memcmp(THTensor_data(x), THTensor_data(y), 400) != 0);
    }
    THTensor_release(x);
    THTensor_release(y);

    /* the default generator starts at PyTorch's default seed; it is the
     * same object every time */
    THGenerator *d = THGenerator_default();
    CHECK(d == THGenerator_default());
    CHECK_EQ_U64(d->seed, TH_DEFAULT_SEED);
}

/* The modular inverse of an odd 64-bit number (Newton's iteration). */
static uint64_t
inverse64(uint64_t a)
{
    uint64_t x = a; /* correct to 3 bits for odd a */
    for (int i = 0; i < 5; i++) {
        x *= 2 - a * x;
    }
    return x;
}

/* Sets the state so that the next THGenerator_next returns `value`:
 * result = rotl(s[1] * 5, 7) * 9, so s[1] = rotr(value / 9, 7) / 5. */
static void
force_next(THGenerator *gen, uint64_t value)
{
    uint64_t x = value * inverse64(9);
    x = (x >> 7) | (x << 57);
    gen->state[0] = gen->state[2] = gen->state[3] = 1;
    gen->state[1] = x * inverse64(5);
}

static void
test_random_uniform_range(void)
{
    THGenerator gen;
    /* the crafted state really produces the value asked for */
    force_next(&gen, UINT64_C(0x0123456789abcdef));
    CHECK_EQ_U64(THGenerator_next(&gen), UINT64_C(0x0123456789abcdef));

    THTensor *d = THTensor_newEmpty(TT_SIZES(10000), TH_Float64,
                                    TH_DEVICE_CPU);
    THTensor *f = THTensor_newEmpty(TT_SIZES(10000), TH_Float32,
                                    TH_DEVICE_CPU);
    if (!d || !f) {
        CHECK(false);
        THTensor_release(d);
        THTensor_release(f);
        return;
    }
    THGenerator_seed(&gen, 1);
    CHECK_OK(THTensor_uniform(d, &gen, -3, 5));
    CHECK_OK(THTensor_uniform(f, &gen, -3, 5));
    CHECK_EQ_INT(tt_version(d), 0); /* a fresh fill is not a write */
    double sum_d = 0, sum_f = 0, min_d = 1e9, max_d = -1e9;
    bool in_range = true;
    for (int64_t i = 0; i < 10000; i++) {
        double a = tt_get(d, i), b = tt_get(f, i);
        in_range = in_range && a >= -3 && a < 5 && b >= -3 && b < 5;
        sum_d += a;
        sum_f += b;
        min_d = a < min_d ? a : min_d;
        max_d = a > max_d ? a : max_d;
    }
    CHECK(in_range);
    CHECK_NEAR(sum_d / 10000, 1.0, 0.15); /* sd of the mean: 0.023 */
    CHECK_NEAR(sum_f / 10000, 1.0, 0.15);
    CHECK(min_d < -2.9 && max_d > 4.9);

    /* the largest possible draw still lands below `high`: u = 1 - 2^-53
     * gives 1 + u == 2.0 in double arithmetic, 1 - 2^-24 in float */
    THTensor *one_d = THTensor_newEmpty(TT_SIZES(1), TH_Float64,
                                        TH_DEVICE_CPU);
    THTensor *one_f = THTensor_newEmpty(TT_SIZES(1), TH_Float32,
                                        TH_DEVICE_CPU);
    if (one_d && one_f) {
        force_next(&gen, UINT64_MAX);
        CHECK_OK(THTensor_uniform(one_d, &gen, 1, 2));
        CHECK_MSG(tt_get(one_d, 0) < 2, "float64 uniform(1, 2) gave %.17g",
                  tt_get(one_d, 0));
        CHECK(tt_get(one_d, 0) >= 1.9999999);
        force_next(&gen, UINT64_MAX);
        CHECK_OK(THTensor_uniform(one_f, &gen, 1, 2));
        CHECK_MSG(tt_get(one_f, 0) < 2, "float32 uniform(1, 2) gave %.9g",
                  tt_get(one_f, 0));
        CHECK(tt_get(one_f, 0) >= 1.999);
        /* and the smallest is exactly low */
        force_next(&gen, 0);
        CHECK_OK(THTensor_uniform(one_d, &gen, 1, 2));
        CHECK_EQ_DBL(tt_get(one_d, 0), 1);
        /* low == high gives low */
        CHECK_OK(THTensor_uniform(one_d, &gen, 3, 3));
        CHECK_EQ_DBL(tt_get(one_d, 0), 3);
    }
    THTensor_release(one_d);
    THTensor_release(one_f);

    /* uniform01 draws equal (next >> 11) * 2^-53 */
    THGenerator g1, g2;
    THGenerator_seed(&g1, 99);
    THGenerator_seed(&g2, 99);
    for (int i = 0; i < 10; i++) {
        double u = THGenerator_uniform01(&g1);
        CHECK_EQ_DBL(u, (double)(THGenerator_next(&g2) >> 11) * 0x1.0p-53);
        CHECK(u >= 0 && u < 1);
    }

    /* refusals */
    THTensor *ints = THTensor_newEmpty(TT_SIZES(3), TH_Int32, TH_DEVICE_CPU);
    if (ints != NULL) {
        CHECK_FAILS(THTensor_uniform(ints, &gen, 0, 1), TH_ERR_TYPE,
                    "\"uniform\" not implemented for 'int32'");
        CHECK_FAILS(THTensor_normal(ints, &gen, 0, 1), TH_ERR_TYPE,
                    "\"normal\" not implemented for 'int32'");
    }
    THTensor_release(ints);
    /* a gappy view (every other column) is refused; a transposed but
     * dense one is filled in storage order */
    THTensor *m = THTensor_newEmpty(TT_SIZES(2, 4), TH_Float32, TH_DEVICE_CPU);
    THTensor *mt = m ? THTensor_newSlice(m, 1, 0, 4, 2) : NULL;
    if (mt != NULL) {
        CHECK_FAILS(THTensor_uniform(mt, &gen, 0, 1), TH_ERR_RUNTIME,
                    "dense");
        CHECK_FAILS(THTensor_normal(mt, &gen, 0, 1), TH_ERR_RUNTIME,
                    "dense");
        CHECK_FAILS(THTensor_randint(mt, &gen, 0, 1), TH_ERR_RUNTIME,
                    "dense");
    }
    THTensor *transposed = m ? THTensor_newTranspose(m, 0, 1) : NULL;
    if (transposed != NULL) {
        CHECK_OK(THTensor_uniform(transposed, &gen, 0, 1));
    }
    THTensor_release(transposed);
    THTensor_release(mt);
    THTensor_release(m);
    float frozen[2] = {0, 0};
    THStorage *ro = THStorage_newExternal(frozen, sizeof(frozen),
                                          TH_DEVICE_CPU, true, NULL, NULL);
    THTensor *rt = ro ? THTensor_newWithStorage(ro, 0, TT_SIZES(2), NULL,
                                                TH_Float32)
                      : NULL;
    THStorage_release(ro);
    if (rt != NULL) {
        CHECK_FAILS(THTensor_uniform(rt, &gen, 0, 1), TH_ERR_RUNTIME,
                    "read-only");
        CHECK_FAILS(THTensor_normal(rt, &gen, 0, 1), TH_ERR_RUNTIME,
                    "read-only");
        CHECK_FAILS(THTensor_randint(rt, &gen, 0, 10), TH_ERR_RUNTIME,
                    "read-only");
        CHECK(frozen[0] == 0 && frozen[1] == 0);
        CHECK_EQ_INT(tt_version(rt), 0);
    }
    THTensor_release(rt);
    THTensor_release(d);
    THTensor_release(f);
}

static void
moments(const THTensor *t, double *mean, double *std)
{
    double sum = 0, sum2 = 0;
    for (int64_t i = 0; i < t->numel; i++) {
        double v = tt_get(t, i);
        sum += v;
        sum2 += v * v;
    }
    *mean = sum / (double)t->numel;
    *std = sqrt(sum2 / (double)t->numel - *mean * *mean);
}

static void
test_random_normal(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 2024);
    THTensor *t = THTensor_newEmpty(TT_SIZES(100000), TH_Float64,
                                    TH_DEVICE_CPU);
    THTensor *f = THTensor_newEmpty(TT_SIZES(100001), TH_Float32,
                                    TH_DEVICE_CPU);
    if (!t || !f) {
        CHECK(false);
        THTensor_release(t);
        THTensor_release(f);
        return;
    }
    double mean, std;
    CHECK_OK(THTensor_normal(t, &gen, 0, 1));
    moments(t, &mean, &std);
    /* standard error of the mean 0.0032, of the std 0.0022 */
    CHECK_NEAR(mean, 0, 0.02);
    CHECK_NEAR(std, 1, 0.02);
    /* tails: about 4.55% beyond 2 sigma, none absurd */
    int64_t beyond2 = 0;
    bool finite = true;
    for (int64_t i = 0; i < t->numel; i++) {
        double v = tt_get(t, i);
        beyond2 += fabs(v) > 2;
        finite = finite && isfinite(v) && fabs(v) < 10;
    }
    CHECK(finite);
    CHECK_NEAR((double)beyond2 / 100000, 0.0455, 0.005);

    /* mean and std parameters; an odd count fills the last element too */
    tt_set(f, 100000, NAN);
    CHECK_OK(THTensor_normal(f, &gen, 3, 2));
    moments(f, &mean, &std);
    CHECK_NEAR(mean, 3, 0.04);
    CHECK_NEAR(std, 2, 0.04);
    CHECK(!isnan(tt_get(f, 100000)));
    CHECK_OK(THTensor_normal(f, &gen, 5, 0));
    CHECK_EQ_DBL(tt_get(f, 12345), 5);

    CHECK_FAILS(THTensor_normal(t, &gen, 0, -1), TH_ERR_RUNTIME,
                "normal expects std >= 0.0");
    CHECK_FAILS(THTensor_normal(t, &gen, 0, NAN), TH_ERR_RUNTIME,
                "std >= 0.0");
    THTensor_release(t);
    THTensor_release(f);
}

static void
test_random_randint(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 42);
    THTensor *t = THTensor_newEmpty(TT_SIZES(100000), TH_Int64,
                                    TH_DEVICE_CPU);
    if (t == NULL) {
        CHECK(false);
        return;
    }
    CHECK_OK(THTensor_randint(t, &gen, 0, 10));
    CHECK_EQ_INT(tt_version(t), 0);
    int64_t counts[10] = {0};
    bool in_range = true;
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t v = tt_get_int(t, i);
        in_range = in_range && v >= 0 && v < 10;
        if (v >= 0 && v < 10) {
            counts[v]++;
        }
    }
    CHECK(in_range);
    for (int v = 0; v < 10; v++) {
        /* expected 10000 each, sd 95: 5% is more than 5 sd */
        CHECK_MSG(counts[v] > 9500 && counts[v] < 10500,
                  "value %d appeared %lld times in 100000 draws", v,
                  (long long)counts[v]);
    }

    /* negative ranges, a one-value range, the whole int64 range */
    CHECK_OK(THTensor_randint(t, &gen, -5, 5));
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t v = tt_get_int(t, i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    CHECK_EQ_INT(lo, -5);
    CHECK_EQ_INT(hi, 4);
    CHECK_OK(THTensor_randint(t, &gen, 7, 8));
    CHECK_EQ_INT(tt_get_int(t, 99999), 7);
    CHECK_OK(THTensor_randint(t, &gen, INT64_MIN, INT64_MAX));
    bool negative = false, positive = false;
    for (int64_t i = 0; i < 100; i++) {
        int64_t v = tt_get_int(t, i);
        negative = negative || v < 0;
        positive = positive || v > 0;
        CHECK(v != INT64_MAX);
    }
    CHECK(negative && positive);

    /* other dtypes */
    THTensor *u8 = THTensor_newEmpty(TT_SIZES(5000), TH_UInt8, TH_DEVICE_CPU);
    THTensor *fl = THTensor_newEmpty(TT_SIZES(5000), TH_Float32,
                                     TH_DEVICE_CPU);
    THTensor *b = THTensor_newEmpty(TT_SIZES(100), TH_Bool, TH_DEVICE_CPU);
    if (u8 && fl && b) {
        CHECK_OK(THTensor_randint(u8, &gen, 250, 256));
        CHECK_OK(THTensor_randint(fl, &gen, -3, 3));
        CHECK_OK(THTensor_randint(b, &gen, 0, 2));
        bool ok_u8 = true, ok_fl = true, saw255 = false;
        int trues = 0;
        for (int64_t i = 0; i < 5000; i++) {
            double v = tt_get(u8, i), w = tt_get(fl, i);
            ok_u8 = ok_u8 && v >= 250 && v <= 255;
            saw255 = saw255 || v == 255;
            ok_fl = ok_fl && w >= -3 && w < 3 && w == floor(w);
        }
        for (int64_t i = 0; i < 100; i++) {
            trues += tt_get(b, i) != 0;
        }
        CHECK(ok_u8 && saw255 && ok_fl);
        CHECK(trues > 20 && trues < 80);
    }
    THTensor_release(u8);
    THTensor_release(fl);
    THTensor_release(b);

    /* low >= high */
    CHECK_FAILS(THTensor_randint(t, &gen, 5, 5), TH_ERR_RUNTIME,
                "random_ expects 'from' to be less than 'to', but got "
                "from=5 >= to=5");
    CHECK_FAILS(THTensor_randint(t, &gen, 3, -3), TH_ERR_RUNTIME,
                "from=3 >= to=-3");
    CHECK_EQ_INT(tt_version(t), 0);
    THTensor_release(t);
}


static void
test_random_state_roundtrip(void)
{
    THGenerator gen, copy;
    THGenerator_seed(&gen, 77);
    (void)THGenerator_next(&gen);
    uint8_t state[TH_GENERATOR_STATE_SIZE];
    THGenerator_getState(&gen, state);
    /* little-endian words, then the seed */
    CHECK_EQ_U64(state[0], gen.state[0] & 0xff);
    CHECK_EQ_U64(state[32], 77);
    THGenerator_seed(&copy, 1);
    CHECK_OK(THGenerator_setState(&copy, state, TH_GENERATOR_STATE_SIZE));
    CHECK_EQ_U64(copy.seed, 77);
    bool same = true;
    for (int i = 0; i < 100; i++) {
        same = same && THGenerator_next(&gen) == THGenerator_next(&copy);
    }
    CHECK(same);
    CHECK_FAILS(THGenerator_setState(&copy, state, 39), TH_ERR_RUNTIME,
                "Expected an RNG state of size 40 but found the input RNG "
                "state size to be 39");
    uint8_t zeros[TH_GENERATOR_STATE_SIZE] = {0};
    CHECK_FAILS(THGenerator_setState(&copy, zeros, TH_GENERATOR_STATE_SIZE),
                TH_ERR_RUNTIME, "all zero");
    /* two OS seeds differ (a 2^-64 chance that they do not) */
    CHECK(THGenerator_nondeterministicSeed()
          != THGenerator_nondeterministicSeed());
}

static void
test_random_bounded(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 5);
    int64_t counts[3] = {0, 0, 0};
    bool in_range = true;
    for (int i = 0; i < 30000; i++) {
        uint64_t v = THGenerator_bounded(&gen, 3);
        in_range = in_range && v < 3;
        counts[v < 3 ? v : 0]++;
    }
    CHECK(in_range);
    for (int v = 0; v < 3; v++) {
        /* expected 10000, sd 82 */
        CHECK_MSG(counts[v] > 9600 && counts[v] < 10400, "%d: %lld", v,
                  (long long)counts[v]);
    }
    CHECK_EQ_U64(THGenerator_bounded(&gen, 1), 0);
    /* the biggest range: both halves of the 64-bit space */
    bool high = false, low = false;
    for (int i = 0; i < 64; i++) {
        uint64_t v = THGenerator_bounded(&gen, UINT64_MAX);
        high = high || v >= (UINT64_C(1) << 63);
        low = low || v < (UINT64_C(1) << 63);
    }
    CHECK(high && low);
}

static void
test_random_exponential_bernoulli(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 11);
    THTensor *t = THTensor_newEmpty(TT_SIZES(100000), TH_Float64,
                                    TH_DEVICE_CPU);
    THTensor *b = THTensor_newEmpty(TT_SIZES(100000), TH_UInt8,
                                    TH_DEVICE_CPU);
    if (!t || !b) {
        CHECK(false);
        THTensor_release(t);
        THTensor_release(b);
        return;
    }
    double mean, std;
    CHECK_OK(THTensor_exponential(t, &gen, 2.0));
    moments(t, &mean, &std);
    /* Exponential(2): mean and sd 0.5; se of the mean 0.0016 */
    CHECK_NEAR(mean, 0.5, 0.01);
    CHECK_NEAR(std, 0.5, 0.015);
    bool positive = true;
    for (int64_t i = 0; i < t->numel; i++) {
        positive = positive && tt_get(t, i) >= 0 && isfinite(tt_get(t, i));
    }
    CHECK(positive);
    CHECK_FAILS(THTensor_exponential(t, &gen, 0), TH_ERR_RUNTIME,
                "exponential_ expects lambda > 0.0, but found lambda=0");
    CHECK_FAILS(THTensor_exponential(b, &gen, 1), TH_ERR_RUNTIME,
                "dtype must be a floating point but you specified uint8");

    CHECK_OK(THTensor_bernoulli(b, &gen, 0.3));
    int64_t ones = 0;
    bool binary = true;
    for (int64_t i = 0; i < b->numel; i++) {
        int64_t v = tt_get_int(b, i);
        binary = binary && (v == 0 || v == 1);
        ones += v;
    }
    CHECK(binary);
    CHECK_NEAR((double)ones / 100000, 0.3, 0.007); /* sd 0.00145 */
    CHECK_OK(THTensor_bernoulli(b, &gen, 1.0));
    CHECK_EQ_INT(tt_get_int(b, 4242), 1);
    CHECK_OK(THTensor_bernoulli(b, &gen, 0.0));
    CHECK_EQ_INT(tt_get_int(b, 4242), 0);
    CHECK_FAILS(THTensor_bernoulli(b, &gen, 1.5), TH_ERR_RUNTIME,
                "bernoulli_ expects p to be in [0, 1], but got p=1.5");
    CHECK_FAILS(THTensor_uniform(t, &gen, 2, 1), TH_ERR_RUNTIME,
                "uniform_ expects to return a [from, to) range, but found "
                "from=2 > to=1");
    THTensor_release(t);
    THTensor_release(b);
}

static void
test_random_sample_inplace(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 3);
    THTensor *m = THTensor_newEmpty(TT_SIZES(4, 6), TH_Float32, TH_DEVICE_CPU);
    THTensor *cols = m ? THTensor_newSlice(m, 1, 0, 6, 2) : NULL;
    if (cols == NULL) {
        CHECK(false);
        THTensor_release(m);
        return;
    }
    for (int64_t i = 0; i < 24; i++) {
        tt_set(m, i, -7);
    }
    int64_t before = tt_version(m);
    THDistribution dist = {.kind = TH_DIST_UNIFORM, .a = 0, .b = 1};
    CHECK_OK(THTensor_sample_(cols, &gen, &dist));
    CHECK(tt_version(m) > before); /* the view shares the counter */
    bool ok = true;
    for (int64_t i = 0; i < 24; i++) {
        double v = tt_get(m, i);
        /* even columns drawn, odd ones untouched */
        ok = ok && (i % 2 == 0 ? v >= 0 && v < 1 : v == -7);
    }
    CHECK(ok);
    /* a dense tensor is drawn in place */
    dist = (THDistribution){.kind = TH_DIST_RANDINT, .low = 3, .high = 5};
    before = tt_version(m);
    CHECK_OK(THTensor_sample_(m, &gen, &dist));
    CHECK_EQ_INT(tt_version(m), before + 1);
    ok = true;
    for (int64_t i = 0; i < 24; i++) {
        ok = ok && (tt_get(m, i) == 3 || tt_get(m, i) == 4);
    }
    CHECK(ok);
    /* a bad parameter leaves the tensor and its version alone */
    dist = (THDistribution){.kind = TH_DIST_NORMAL, .a = 0, .b = -1};
    before = tt_version(m);
    CHECK_FAILS(THTensor_sample_(cols, &gen, &dist), TH_ERR_RUNTIME,
                "normal expects std >= 0.0");
    CHECK_EQ_INT(tt_version(m), before);
    CHECK(tt_get(m, 1) == 3 || tt_get(m, 1) == 4);
    THTensor_release(cols);
    THTensor_release(m);
}

static void
test_random_randperm(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 8);
    THTensor *p = THTensor_newRandperm(1000, TH_Int64, &gen);
    CHECK_NOT_NULL(p);
    if (p != NULL) {
        CHECK_SHAPE(p, 1000);
        bool seen[1000] = {false}, valid = true;
        int64_t fixed = 0;
        for (int64_t i = 0; i < 1000; i++) {
            int64_t v = tt_get_int(p, i);
            valid = valid && v >= 0 && v < 1000 && !seen[v];
            if (v >= 0 && v < 1000) {
                seen[v] = true;
            }
            fixed += v == i;
        }
        CHECK(valid);
        CHECK(fixed < 10); /* about 1 fixed point expected */
    }
    THTensor_release(p);
    /* where element 0 lands over many small shuffles: uniform on 0..4 */
    int64_t counts[5] = {0};
    for (int trial = 0; trial < 5000; trial++) {
        THTensor *q = THTensor_newRandperm(5, TH_Float32, &gen);
        for (int64_t i = 0; q != NULL && i < 5; i++) {
            counts[i] += tt_get(q, i) == 0;
        }
        THTensor_release(q);
    }
    for (int i = 0; i < 5; i++) {
        CHECK_MSG(counts[i] > 850 && counts[i] < 1150, "%d: %lld", i,
                  (long long)counts[i]); /* expected 1000, sd 28 */
    }
    THTensor *empty = THTensor_newRandperm(0, TH_Int64, &gen);
    CHECK_NOT_NULL(empty);
    THTensor_release(empty);
    CHECK_NEW_FAILS(THTensor_newRandperm(257, TH_UInt8, &gen),
                    TH_ERR_RUNTIME,
                    "n is too large for result tensor type: 'uint8'");
}

static void
test_random_bernoulli_poisson(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 21);
    double pv[4] = {0.0, 0.25, 0.9, 1.0};
    THTensor *probs = tt_from(TH_Float32, TT_SIZES(4), pv);
    THTensor *big = probs ? THTensor_newExpand(probs, TT_SIZES(20000, 4))
                          : NULL;
    THTensor *draws = big ? THTensor_newBernoulli(big, TH_Float64, &gen)
                          : NULL;
    CHECK_NOT_NULL(draws);
    if (draws != NULL) {
        CHECK_SHAPE(draws, 20000, 4);
        double sums[4] = {0};
        for (int64_t i = 0; i < draws->numel; i++) {
            sums[i % 4] += tt_get(draws, i);
        }
        CHECK_EQ_DBL(sums[0], 0);
        CHECK_NEAR(sums[1] / 20000, 0.25, 0.015); /* sd 0.003 */
        CHECK_NEAR(sums[2] / 20000, 0.9, 0.01);   /* sd 0.002 */
        CHECK_EQ_DBL(sums[3], 20000);
    }
    THTensor_release(draws);
    tt_set(probs, 1, 1.5);
    CHECK_NEW_FAILS(THTensor_newBernoulli(probs, TH_Float32, &gen),
                    TH_ERR_RUNTIME, "Expected p_in >= 0 && p_in <= 1");

    /* Poisson: mean = variance = rate, for the small- and large-rate
     * samplers */
    double rv[3] = {0.0, 3.5, 250.0};
    THTensor *rates = tt_from(TH_Float64, TT_SIZES(3), rv);
    THTensor *many = rates ? THTensor_newExpand(rates, TT_SIZES(20000, 3))
                           : NULL;
    THTensor *counts = many ? THTensor_newPoisson(many, &gen) : NULL;
    CHECK_NOT_NULL(counts);
    if (counts != NULL) {
        double sum[3] = {0}, sum2[3] = {0};
        bool integral = true;
        for (int64_t i = 0; i < counts->numel; i++) {
            double v = tt_get(counts, i);
            integral = integral && v >= 0 && v == floor(v);
            sum[i % 3] += v;
            sum2[i % 3] += v * v;
        }
        CHECK(integral);
        CHECK_EQ_DBL(sum[0], 0);
        for (int k = 1; k < 3; k++) {
            double mean = sum[k] / 20000;
            double var = sum2[k] / 20000 - mean * mean;
            /* se of the mean: sqrt(rate / 20000) = 0.013 and 0.11 */
            CHECK_NEAR(mean, rv[k], 8 * sqrt(rv[k] / 20000));
            CHECK_NEAR(var / rv[k], 1, 0.06);
        }
    }
    THTensor_release(counts);
    tt_set(rates, 1, -1);
    CHECK_NEW_FAILS(THTensor_newPoisson(rates, &gen), TH_ERR_RUNTIME,
                    "invalid Poisson rate, expected rate to be non-negative");
    THTensor *ints = THTensor_newEmpty(TT_SIZES(2), TH_Int64, TH_DEVICE_CPU);
    if (ints != NULL) {
        CHECK_NEW_FAILS(THTensor_newPoisson(ints, &gen), TH_ERR_TYPE,
                        "\"poisson\" not implemented for 'int64'");
    }
    THTensor_release(ints);
    THTensor_release(many);
    THTensor_release(rates);
    THTensor_release(big);
    THTensor_release(probs);
}

/* Chi-square of observed category counts against weights w (normalised). */
static double
chi_square(const int64_t *observed, const double *w, int k, int64_t n)
{
    double total = 0, chi2 = 0;
    for (int c = 0; c < k; c++) {
        total += w[c];
    }
    for (int c = 0; c < k; c++) {
        if (w[c] > 0) {
            double expected = (double)n * w[c] / total;
            chi2 += (observed[c] - expected) * (observed[c] - expected)
                    / expected;
        }
    }
    return chi2;
}

static void
test_random_multinomial(void)
{
    THGenerator gen;
    THGenerator_seed(&gen, 31);
    double wv[5] = {1, 0, 2, 3, 4}; /* not normalised, one zero */
    THTensor *w = tt_from(TH_Float32, TT_SIZES(5), wv);
    THTensor *draws = w ? THTensor_newMultinomial(w, 50000, true, &gen)
                        : NULL;
    CHECK_NOT_NULL(draws);
    if (draws != NULL) {
        CHECK_SHAPE(draws, 50000);
        CHECK_EQ_INT(draws->dtype, TH_Int64);
        int64_t counts[5] = {0};
        for (int64_t i = 0; i < 50000; i++) {
            int64_t c = tt_get_int(draws, i);
            counts[c >= 0 && c < 5 ? c : 1]++;
        }
        CHECK_EQ_INT(counts[1], 0);
        /* 3 degrees of freedom: P(chi2 > 20) < 0.0002 */
        CHECK_MSG(chi_square(counts, wv, 5, 50000) < 20, "chi2 %g",
                  chi_square(counts, wv, 5, 50000));
    }
    THTensor_release(draws);

    /* few draws from many categories take the binary search (the path
     * above is the alias table): weights 0..4 by c % 5, counts by class */
    double many_v[1000];
    for (int c = 0; c < 1000; c++) {
        many_v[c] = c % 5;
    }
    THTensor *many = tt_from(TH_Float64, TT_SIZES(1000), many_v);
    int64_t by_class[5] = {0};
    for (int trial = 0; many != NULL && trial < 200; trial++) {
        THTensor *d = THTensor_newMultinomial(many, 100, true, &gen);
        for (int64_t i = 0; d != NULL && i < 100; i++) {
            by_class[tt_get_int(d, i) % 5]++;
        }
        THTensor_release(d);
    }
    THTensor_release(many);
    double class_w[5] = {0, 1, 2, 3, 4};
    CHECK_EQ_INT(by_class[0], 0);
    CHECK_MSG(chi_square(by_class, class_w, 5, 20000) < 20, "chi2 %g",
              chi_square(by_class, class_w, 5, 20000));

    /* without replacement: all distinct; the first draw follows the
     * weights; drawing every positive category gives each once */
    int64_t first[5] = {0};
    bool distinct = true;
    for (int trial = 0; trial < 4000; trial++) {
        THTensor *d = THTensor_newMultinomial(w, 3, false, &gen);
        if (d == NULL) {
            CHECK(false);
            break;
        }
        int64_t a = tt_get_int(d, 0), b = tt_get_int(d, 1),
                c = tt_get_int(d, 2);
        distinct = distinct && a != b && b != c && a != c && a != 1
                   && b != 1 && c != 1;
        first[a >= 0 && a < 5 ? a : 1]++;
        THTensor_release(d);
    }
    CHECK(distinct);
    CHECK_EQ_INT(first[1], 0);
    CHECK_MSG(chi_square(first, wv, 5, 4000) < 20, "chi2 %g",
              chi_square(first, wv, 5, 4000));
    THTensor *all = THTensor_newMultinomial(w, 4, false, &gen);
    if (all != NULL) {
        int64_t sum = 0;
        for (int64_t i = 0; i < 4; i++) {
            sum += tt_get_int(all, i);
        }
        CHECK_EQ_INT(sum, 0 + 2 + 3 + 4);
    }
    THTensor_release(all);

    /* 2-d: one distribution per row */
    double rows_v[6] = {0, 0, 1, 1, 0, 0};
    THTensor *rows = tt_from(TH_Float64, TT_SIZES(2, 3), rows_v);
    THTensor *rd = rows ? THTensor_newMultinomial(rows, 4, true, &gen) : NULL;
    CHECK_NOT_NULL(rd);
    if (rd != NULL) {
        CHECK_SHAPE(rd, 2, 4);
        CHECK_VALUES(rd, 2, 2, 2, 2, 0, 0, 0, 0);
    }
    THTensor_release(rd);

    /* refusals */
    CHECK_NEW_FAILS(THTensor_newMultinomial(w, 5, false, &gen),
                    TH_ERR_RUNTIME, "not enough non-negative category");
    CHECK_NEW_FAILS(THTensor_newMultinomial(w, 6, false, &gen),
                    TH_ERR_RUNTIME,
                    "cannot sample n_sample > prob_dist.size(-1) samples "
                    "without replacement");
    CHECK_NEW_FAILS(THTensor_newMultinomial(w, 0, true, &gen),
                    TH_ERR_RUNTIME, "cannot sample n_sample <= 0 samples");
    tt_set(w, 2, -1);
    CHECK_NEW_FAILS(THTensor_newMultinomial(w, 1, true, &gen),
                    TH_ERR_RUNTIME,
                    "probability tensor contains either `inf`, `nan` or "
                    "element < 0");
    tt_set(w, 2, NAN);
    CHECK_NEW_FAILS(THTensor_newMultinomial(w, 1, false, &gen),
                    TH_ERR_RUNTIME, "`nan`");
    double zero_v[2] = {0, 0};
    THTensor *zero = tt_from(TH_Float32, TT_SIZES(2), zero_v);
    CHECK_NEW_FAILS(THTensor_newMultinomial(zero, 1, true, &gen),
                    TH_ERR_RUNTIME,
                    "invalid multinomial distribution (sum of probabilities "
                    "<= 0)");
    THTensor *longs = THTensor_newEmpty(TT_SIZES(2), TH_Int64, TH_DEVICE_CPU);
    CHECK_NEW_FAILS(THTensor_newMultinomial(longs, 1, true, &gen),
                    TH_ERR_RUNTIME,
                    "multinomial only supports floating-point dtypes");
    THTensor *cube = THTensor_newEmpty(TT_SIZES(1, 1, 1), TH_Float32,
                                       TH_DEVICE_CPU);
    CHECK_NEW_FAILS(THTensor_newMultinomial(cube, 1, true, &gen),
                    TH_ERR_RUNTIME, "prob_dist must be 1 or 2 dim");
    THTensor_release(cube);
    THTensor_release(longs);
    THTensor_release(zero);
    THTensor_release(rows);
    THTensor_release(w);
}

TH_TEST_SUITE(random) = {
    TH_TEST(test_random_known_values_seed0),
    TH_TEST(test_random_same_seed_same_sequence),
    TH_TEST(test_random_uniform_range),
    TH_TEST(test_random_normal),
    TH_TEST(test_random_randint),
    TH_TEST(test_random_state_roundtrip),
    TH_TEST(test_random_bounded),
    TH_TEST(test_random_exponential_bernoulli),
    TH_TEST(test_random_sample_inplace),
    TH_TEST(test_random_randperm),
    TH_TEST(test_random_bernoulli_poisson),
    TH_TEST(test_random_multinomial),
    TH_TEST_END,
};

/*
 * test_random.c -- xoshiro256** seeded through splitmix64, and the
 * uniform / normal / randint fills (THRandom.h).
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

TH_TEST_SUITE(random) = {
    TH_TEST(test_random_known_values_seed0),
    TH_TEST(test_random_same_seed_same_sequence),
    TH_TEST(test_random_uniform_range),
    TH_TEST(test_random_normal),
    TH_TEST(test_random_randint),
    TH_TEST_END,
};

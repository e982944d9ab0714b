/*
 * THRandom.h -- ember's own seeded random number generator.
 *
 * xoshiro256** (Blackman and Vigna, 2018), seeded through splitmix64: small,
 * fast, and defined bit for bit, so `manual_seed(n)` gives the same numbers
 * on every platform and compiler (we never use rand() or the C library's
 * distributions).  Not cryptographic.
 *
 * The default generator is process-wide and, like all of ember's global
 * state, used only with the GIL held.
 */
#ifndef TH_RANDOM_H
#define TH_RANDOM_H

#include "THTensor.h"

#include <stdint.h>

typedef struct {
    uint64_t state[4];
    uint64_t seed; /* the seed it was last seeded with */
} THGenerator;

/* PyTorch's default seed, so an unseeded program is still deterministic. */
#define TH_DEFAULT_SEED UINT64_C(67280421310721)

THGenerator *THGenerator_default(void);
void THGenerator_seed(THGenerator *gen, uint64_t seed);
uint64_t THGenerator_next(THGenerator *gen);
/* A double in [0, 1) with 53 random bits. */
double THGenerator_uniform01(THGenerator *gen);

/* Fill a fresh contiguous tensor. uniform/normal need a floating dtype;
 * randint draws from [low, high) (PyTorch's bounds: THRandom_randintRange)
 * without modulo bias. */
int THTensor_uniform(THTensor *tensor, THGenerator *gen, double low,
                     double high);
int THTensor_normal(THTensor *tensor, THGenerator *gen, double mean,
                    double std);
int THTensor_randint(THTensor *tensor, THGenerator *gen, int64_t low,
                     int64_t high);
/* Exponential(lambd): -log(1 - u) / lambd; floating dtypes, lambd > 0. */
int THTensor_exponential(THTensor *tensor, THGenerator *gen, double lambd);
/* 1 with probability p, else 0, in any dtype; 0 <= p <= 1. */
int THTensor_bernoulli(THTensor *tensor, THGenerator *gen, double p);

/* ---- generator state and seeds -------------------------------------------- */

/* get_state()/set_state(): the four state words, then the seed, each as
 * 8 little-endian bytes.  Our own format (PyTorch's Mersenne Twister state
 * is 5056 bytes and cannot be exchanged with it). */
#define TH_GENERATOR_STATE_SIZE 40
void THGenerator_getState(const THGenerator *gen,
                          uint8_t state[TH_GENERATOR_STATE_SIZE]);
/* Fails (RuntimeError kind) unless `size` is TH_GENERATOR_STATE_SIZE and
 * the state words are not all zero (xoshiro's one invalid state). */
int THGenerator_setState(THGenerator *gen, const uint8_t *state,
                         int64_t size);
/* A seed from the operating system (/dev/urandom), for ember.seed(); like
 * PyTorch's, below 2**53 so a double holds it exactly. */
uint64_t THGenerator_nondeterministicSeed(void);
/* A uniform draw from [0, range), range >= 1, without bias (Lemire's
 * multiply-and-reject). */
uint64_t THGenerator_bounded(THGenerator *gen, uint64_t range);

/* The exclusive upper bound of random_() without `to`: every integer in
 * [0, bound) is exact in dtype (dtype max + 1 for the integers, but
 * INT64_MAX for int64; 2^mantissa + 1 for the floats).  randperm(n) needs
 * n <= bound. */
int64_t THRandom_defaultHigh(THDtype dtype);

/* The integers random_(low, high) of `dtype` draws: low + [0, range), with
 * range 0 meaning all 2^64 (random_(INT64_MIN) without `to`). */
typedef struct {
    int64_t low;
    uint64_t range;
    /* PyTorch's float-range warning: `from` / `to - 1` lies beyond
     * +-2^digits, the integers the float dtype holds exactly */
    bool inexact_from, inexact_to;
    int digits;
} THRandintRange;

/* PyTorch's random_from_to_impl: [low, *high), or with high NULL [low,
 * the dtype's largest exact integer]; a float dtype's ends moved inward
 * where they round outward (Note [random_'s float ends]), and its errors
 * for ends out of order or outside the dtype. */
int THRandom_randintRange(THDtype dtype, int64_t low, const int64_t *high,
                          THRandintRange *range);

/* ---- in-place sampling of any tensor ------------------------------------ */

typedef enum {
    TH_DIST_UNIFORM,     /* a, b: [low, high) */
    TH_DIST_NORMAL,      /* a, b: mean, std */
    TH_DIST_RANDINT,     /* low, high: integers in [low, high), or
                            [low, largest exact] with high_is_max */
    TH_DIST_EXPONENTIAL, /* a: lambd */
    TH_DIST_BERNOULLI,   /* a: p */
} THDistKind;

typedef struct {
    THDistKind kind;
    double a, b;
    int64_t low, high;
    bool high_is_max; /* random_(from) without `to` */
} THDistribution;

/* Tensor.uniform_/normal_/random_/exponential_/bernoulli_: overwrites
 * every element of `tensor` (any layout: a view that is not dense is
 * sampled into a fresh tensor and copied in) and bumps its version. */
int THTensor_sample_(THTensor *tensor, THGenerator *gen,
                     const THDistribution *dist);

/* ---- samplers that make their result ------------------------------------ */

/* randperm(n): a uniformly random permutation of 0..n-1 (Fisher-Yates),
 * 1-d of `dtype`. */
THTensor *THTensor_newRandperm(int64_t n, THDtype dtype, THGenerator *gen);
/* bernoulli(probs): 1 where u < probs[i], shaped like probs, in `dtype`;
 * every probability must lie in [0, 1]. */
THTensor *THTensor_newBernoulli(THTensor *probs, THDtype dtype,
                                THGenerator *gen);
/* poisson(rates): Poisson(rates[i]) counts, shaped like rates, in rates'
 * (floating) dtype. */
THTensor *THTensor_newPoisson(THTensor *rates, THGenerator *gen);
/* multinomial(probs, nsamples, replacement): category indices (int64),
 * [nsamples] for a 1-d probs, [rows, nsamples] for a 2-d one.  The
 * weights need not sum to one.  Without replacement the indices come in
 * the order they were drawn, as PyTorch's. */
THTensor *THTensor_newMultinomial(THTensor *probs, int64_t nsamples,
                                  bool replacement, THGenerator *gen);

#endif /* TH_RANDOM_H */

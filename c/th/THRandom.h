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
 * randint draws from [low, high) without modulo bias. */
int THTensor_uniform(THTensor *tensor, THGenerator *gen, double low,
                     double high);
int THTensor_normal(THTensor *tensor, THGenerator *gen, double mean,
                    double std);
int THTensor_randint(THTensor *tensor, THGenerator *gen, int64_t low,
                     int64_t high);

#endif /* TH_RANDOM_H */

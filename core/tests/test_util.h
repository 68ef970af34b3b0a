/* What the seed/ unit tests (and hip/tests/test_split_policy.c) share: a counting CHECK that keeps going after a
 * failure, and one seeded splitmix64 stream (seed printed by each test). */
#ifndef MLA_SEED_TEST_UTIL_H
#define MLA_SEED_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            if (failures < 30) {                                                               \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
                fprintf(stderr, __VA_ARGS__);                                                  \
                fputc('\n', stderr);                                                           \
            }                                                                                  \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

static uint64_t rng_state;

static inline uint64_t next_u64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif

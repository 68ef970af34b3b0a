/* The failure counter and CHECK of the emulator tests, in C and C++ alike:
 * emu_test_util.h (the C++ kernel harness) and mla_case.h (the MLA cases,
 * also built as C) both take them from here. */
#ifndef MLA_EMU_TEST_CHECK_H
#define MLA_EMU_TEST_CHECK_H

#include <stdio.h>

static int g_failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            ++g_failures;                                                                          \
        }                                                                                          \
    } while (0)

#endif

/* tests/ufn_lib.c: a shared object of precompiled functions for
 * lf_fn_from_library's tests (tests/test_ufn.c): plain C, exported,
 * operations whose rounding no compiler flag can change. */
#include <stdint.h>

__attribute__((visibility("default"))) float lib_diff3(float a, float b) { return (a - b) / 3.0f; }

__attribute__((visibility("default"))) int64_t lib_tri(int64_t n) { return n * (n + 1) / 2; }

__attribute__((visibility("default"))) int lib_is_neg(double x) { return x < 0; }

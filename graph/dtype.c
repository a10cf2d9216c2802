/* graph/dtype.c: the dtype table as data, and what reads only data from it.
 *
 * graph_dtypes[] is graph/dtypes.def's rows in lf_dtype's order; the public
 * lf_dtype_size, lf_dtype_name and lf_dtype_promote, and the DLPack code
 * lookup, read it and nothing else. Promotion is NumPy 2's, derived from
 * each row's kind, digits, maxexp and rank rather than from the enum's
 * order (so a dtype appended to the enum, as the ABI requires, still
 * promotes by its place in the lattice):
 *
 *   safe(a -> c): a and c equal; or a bool; or both integers, not signed to
 *     unsigned, c with at least a's digits; or a an integer (or float) and c
 *     a float (or complex) with at least a's digits (and exponent range);
 *     NumPy also calls every integer safe in its widest float (i64 -> f64),
 *     so the float (or complex) with the most digits takes any integer.
 *   promote(a, b): the dtype of lowest rank that both convert to safely.
 *
 * This gives the header's rules (bool with X is X, u8 with i8 is i16, u64
 * with i64 is f64, i8 with f16 is f16, f16 with bf16 is f32, ...);
 * test_eval's dtype_promote_table holds the whole table, and
 * tests/dtype_promote_numpy.py checks it against NumPy 2 (and ml_dtypes'
 * bfloat16 where it has an answer).
 *
 * Must stay true: graph_dtypes[t] describes dtype t (checked below at
 * compile time against the enum), and every lookup guards t first.
 */
#include "graph/graph.h"

#include <assert.h>

const graph_dtype_info graph_dtypes[LF_NDTYPES] = {
#define LF_DTYPE(ID, name_, size_, kind_, rank_, digits_, maxexp_, c_type, c_value, cuda_type, cuda_value, dl, skey) \
    [LF_##ID] = {.name = name_,                                                                                      \
                 .size = size_,                                                                                      \
                 .kind = DTYPE_##kind_,                                                                              \
                 .rank = rank_,                                                                                      \
                 .digits = digits_,                                                                                  \
                 .maxexp = maxexp_,                                                                                  \
                 .dl_code = GRAPH_DL_##dl,                                                                           \
                 .sort_key = SORT_KEY_##skey},
#include "graph/dtypes.def"
};

/* Each row lands at its own enum value and every enumerator has a row: the
 * .def's row count equals LF_NDTYPES, and rows are named by enumerator. */
enum {
#define LF_DTYPE(ID, ...) DTYPE_ROW_##ID,
#include "graph/dtypes.def"
    DTYPE_ROWS
};
_Static_assert((int)DTYPE_ROWS == (int)LF_NDTYPES, "graph/dtypes.def needs one row per lf_dtype enumerator");
#define LF_DTYPE(ID, ...) _Static_assert((int)DTYPE_ROW_##ID == (int)LF_##ID, "graph/dtypes.def rows follow lf_dtype's order");
#include "graph/dtypes.def"

size_t lf_dtype_size(lf_dtype t) { return (unsigned)t < LF_NDTYPES ? graph_dtypes[t].size : 0; }

const char *lf_dtype_name(lf_dtype t) { return (unsigned)t < LF_NDTYPES ? graph_dtypes[t].name : "?"; }

/* The floating (or complex) dtype with the most digits: NumPy's home for
 * every integer. */
static bool widest_of_kind(lf_dtype c) {
    for (int t = 0; t < LF_NDTYPES; t++)
        if (graph_dtypes[t].kind == graph_dtypes[c].kind && graph_dtypes[t].digits > graph_dtypes[c].digits)
            return false;
    return true;
}

/* Whether every value of dtype a converts to dtype c exactly (the module
 * comment's safe(a -> c)). */
static bool converts_safely(lf_dtype a, lf_dtype c) {
    const graph_dtype_info *x = &graph_dtypes[a], *y = &graph_dtypes[c];
    if (a == c || x->kind == DTYPE_BOOL) return true;
    bool x_int = x->kind == DTYPE_SINT || x->kind == DTYPE_UINT;
    switch (y->kind) {
    case DTYPE_BOOL: return false;
    case DTYPE_SINT:
    case DTYPE_UINT:
        if (!x_int || (x->kind == DTYPE_SINT && y->kind == DTYPE_UINT)) return false;
        return y->digits >= x->digits;
    case DTYPE_FLOAT:
    case DTYPE_COMPLEX:
        if (x_int) return y->digits >= x->digits || widest_of_kind(c);
        if (x->kind == DTYPE_COMPLEX && y->kind != DTYPE_COMPLEX) return false;
        return y->digits >= x->digits && y->maxexp >= x->maxexp;
    }
    return false;
}

lf_dtype lf_dtype_promote(lf_dtype a, lf_dtype b) {
    if ((unsigned)a >= LF_NDTYPES || (unsigned)b >= LF_NDTYPES) return LF_F64;
    lf_dtype best = LF_F64; /* NumPy's answer when no dtype holds both */
    int best_rank = -1;
    for (int c = 0; c < LF_NDTYPES; c++) {
        if (!converts_safely(a, (lf_dtype)c) || !converts_safely(b, (lf_dtype)c)) continue;
        if (best_rank < 0 || graph_dtypes[c].rank < best_rank) {
            best = (lf_dtype)c;
            best_rank = graph_dtypes[c].rank;
        }
    }
    return best;
}

int64_t graph_dtype_int_max(lf_dtype t) {
    const graph_dtype_info *d = &graph_dtypes[t];
    if (d->kind == DTYPE_BOOL) return 1;
    assert(d->kind == DTYPE_SINT || d->kind == DTYPE_UINT);
    if (d->digits >= 64) return -1; /* u64: all bits set, its lf_scalar form */
    return (int64_t)((UINT64_C(1) << d->digits) - 1);
}

int64_t graph_dtype_int_min(lf_dtype t) {
    const graph_dtype_info *d = &graph_dtypes[t];
    if (d->kind != DTYPE_SINT) return 0;
    return -graph_dtype_int_max(t) - 1;
}

lf_dtype graph_dtype_from_dlpack(int code, int bits) {
    for (int t = 0; t < LF_NDTYPES; t++)
        if (graph_dtypes[t].dl_code == code && graph_dtypes[t].size * 8 == (size_t)bits) return (lf_dtype)t;
    return LF_NDTYPES;
}

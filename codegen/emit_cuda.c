/* codegen/emit_cuda.c: launch plans of the CUDA kernels (host side).
 *
 * For one laid-out kernel and its parameters P, says which entry points of
 * the module emit.c printed (cg_dialect_cuda) to launch, in order, with
 * which grid and block, how much device scratch the launches share, and
 * fills the argument words (the lf_args layout of codegen.h).
 *
 * What must stay true:
 *  - every entry named here exists in the emitted module (names follow
 *    emit.c's cuda_names, suffixed 32 or 64);
 *  - the 32-bit variant is chosen only when every index the kernel computes
 *    fits in an int: element counts plus a grid stride, and for every
 *    access |offset| + sum |stride| * (extent - 1);
 *  - the `vec` variant only when cg_cuda_vectorizable and every contiguous
 *    access's first element is aligned to 4 elements;
 *  - group sizes, block counts and the partials' order depend on the shape
 *    alone (never on the device), so results are the same on every GPU;
 *  - a FULL kernel always launches at least one block per pass (it writes
 *    the finished value even for an empty reduction).
 */
#include "codegen/codegen.h"

#include <string.h>

enum {
    THREADS = 256,         /* threads per block of every launch */
    BLOCKS_PER_SM = 16     /* grid-stride launches: blocks per multiprocessor */
};

static const char *const entries[][2] = {
    {"lf_k_run32", "lf_k_run64"},     {"lf_k_vec32", "lf_k_vec64"},
    {"lf_k_rows32", "lf_k_rows64"},   {"lf_k_cols32", "lf_k_cols64"},
    {"lf_k_row32", "lf_k_row64"},     {"lf_k_pass032", "lf_k_pass064"},
    {"lf_k_pass132", "lf_k_pass164"}, {"lf_k_pass232", "lf_k_pass264"},
    {"lf_k_pass332", "lf_k_pass364"}, {"lf_k_pass432", "lf_k_pass464"},
    {"lf_k_pass532", "lf_k_pass564"}, {"lf_k_pass632", "lf_k_pass664"},
    {"lf_k_pass732", "lf_k_pass764"},
};
enum { E_RUN, E_VEC, E_ROWS, E_COLS, E_ROW, E_PASS0 };

static int64_t product(const cg_layout *lay, const int64_t *P, int first, int n) {
    int64_t p = 1;
    for (int ax = first; ax < first + n; ax++) p *= P[lay->param_extent + ax];
    return p;
}

static int64_t abs64(int64_t x) { return x < 0 ? -x : x; }

/* Whether every index of the kernel fits in an int with `threads` threads
 * striding over `work` items. */
static bool fits_int32(const cg_layout *lay, const int64_t *P, int64_t work, int64_t threads) {
    const int64_t lim = INT32_MAX;
    if (work > lim - threads || lay->count > lim - threads) return false;
    int64_t total = product(lay, P, 0, lay->ndim);
    if (total > lim - threads) return false;
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->param_steps >= 0) return false;
        int64_t bound = abs64(P[a->param_offset]);
        for (int ax = 0; ax < lay->ndim; ax++) {
            int64_t ext = P[lay->param_extent + ax];
            if (ext <= 1) continue;
            int64_t st = abs64(P[a->param_offset + 1 + ax]);
            if (st > lim / (ext - 1)) return false;
            bound += st * (ext - 1);
            if (bound > lim) return false;
        }
    }
    return true;
}

static unsigned grid_for(int64_t items, int64_t per_block, int sm_count) {
    int64_t g = (items + per_block - 1) / per_block;
    int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 1) * BLOCKS_PER_SM;
    if (g > cap) g = cap;
    return g < 1 ? 1u : (unsigned)g;
}

static void add(cg_cuda_plan *plan, int entry, bool i32, unsigned grid, unsigned bx, unsigned by) {
    cg_cuda_launch *l = &plan->launch[plan->nlaunches++];
    l->entry = entries[entry][i32 ? 0 : 1];
    l->grid[0] = grid;
    l->grid[1] = l->grid[2] = 1;
    l->block[0] = bx;
    l->block[1] = by;
    l->block[2] = 1;
}

static bool aligned4(const cg_layout *lay, const int64_t *P, const uint64_t *buf_addr) {
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->buf < 0 || a->inner != CG_INNER_CONTIGUOUS) continue;
        uint64_t size = (uint64_t)lf_dtype_size(a->dtype);
        uint64_t first = buf_addr[a->buf] + (uint64_t)P[a->param_offset] * size;
        if (first % (4 * size)) return false;
    }
    return true;
}

/* Group size of a row reduction over C positions: a warp for short rows,
 * up to a whole block for long ones (the shape alone decides). */
static unsigned row_group(int64_t C) {
    if (C <= 512) return 32;
    if (C <= 2048) return 64;
    if (C <= 8192) return 128;
    return THREADS;
}

void cg_cuda_plan_kernel(const cg_layout *lay, const int64_t *P, const uint64_t *buf_addr, int sm_count,
                         cg_cuda_plan *plan) {
    memset(plan, 0, sizeof *plan);
    const fuse_kernel *kn = lay->kernel;
    int nb = lay->nbufs > 0 ? lay->nbufs : 1, np = lay->nparams > 0 ? lay->nparams : 1;
    plan->nwords = nb + 3 + np;
    int64_t cap_threads = (int64_t)(sm_count > 0 ? sm_count : 1) * BLOCKS_PER_SM * THREADS;
    switch (lay->strategy) {
    case CG_ELEMENTWISE: {
        int64_t T = product(lay, P, 0, lay->ndim);
        if (T == 0) return;
        bool vec = cg_cuda_vectorizable(lay) && T >= 4 && aligned4(lay, P, buf_addr);
        int64_t items = vec ? T / 4 : T;
        unsigned grid = grid_for(items, THREADS, sm_count);
        add(plan, vec ? E_VEC : E_RUN, fits_int32(lay, P, T, cap_threads), grid, THREADS, 1);
        return;
    }
    case CG_REDUCE_INNER: {
        int64_t nout = product(lay, P, 0, lay->nkept);
        if (nout == 0) return;
        unsigned G = row_group(lay->count), rows = THREADS / G;
        unsigned grid = grid_for(nout, rows, sm_count * 2);
        add(plan, E_ROWS, fits_int32(lay, P, nout, (int64_t)grid * rows + THREADS), grid, G, rows);
        return;
    }
    case CG_REDUCE_OUTER: {
        int64_t nout = product(lay, P, 0, lay->nkept) * P[lay->param_extent + lay->ndim - 1];
        if (nout == 0) return;
        add(plan, E_COLS, fits_int32(lay, P, nout, cap_threads), grid_for(nout, THREADS, sm_count), THREADS,
            1);
        return;
    }
    case CG_REDUCE_FULL: {
        int64_t E0 = P[lay->param_extent], FB = P[lay->param_full_block];
        int64_t nblocks = FB > 0 ? (E0 + FB - 1) / FB : 0;
        if (nblocks < 1) nblocks = 1;
        if (nblocks > INT32_MAX) nblocks = INT32_MAX; /* unreachable: FB >= 1 per 16 Ki positions */
        bool i32 = fits_int32(lay, P, nblocks * THREADS, THREADS) &&
                   product(lay, P, 0, lay->ndim) <= INT32_MAX - cap_threads;
        int most = 0;
        for (int q = 0; q < kn->npasses; q++) {
            int nq = cg_pass_reductions(kn, q);
            if (nq > most) most = nq;
            add(plan, E_PASS0 + q, i32, (unsigned)nblocks, THREADS, 1);
        }
        if (kn->row) {
            int64_t T = product(lay, P, 0, lay->ndim);
            if (T > 0) add(plan, E_ROW, i32, grid_for(T, THREADS, sm_count), THREADS, 1);
        }
        size_t nreds = (size_t)(kn->nreds > 0 ? kn->nreds : 1);
        plan->scratch_R = 0;
        plan->scratch_ticket = nreds * sizeof(cg_value);
        plan->scratch_part = plan->scratch_ticket + ((size_t)kn->npasses * 4 + 15) / 16 * 16;
        plan->scratch_bytes = plan->scratch_part + (size_t)nblocks * (size_t)most * sizeof(cg_partial);
        return;
    }
    }
}

void cg_cuda_fill_args(const cg_layout *lay, const cg_cuda_plan *plan, const int64_t *P,
                       const uint64_t *buf_addr, uint64_t scratch, uint64_t *words) {
    int nb = lay->nbufs > 0 ? lay->nbufs : 1;
    memset(words, 0, (size_t)plan->nwords * sizeof *words);
    for (int b = 0; b < lay->nbufs; b++) words[b] = buf_addr[b];
    if (plan->scratch_bytes) {
        words[nb] = scratch + plan->scratch_R;
        words[nb + 1] = scratch + plan->scratch_part;
        words[nb + 2] = scratch + plan->scratch_ticket;
    }
    for (int i = 0; i < lay->nparams; i++) words[nb + 3 + i] = (uint64_t)P[i];
}

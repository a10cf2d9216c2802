/* codegen/emit_cuda.c: the CUDA kernels: their skeletons (device side,
 * cg_cuda_skeletons, printed through the walker of emit.h), the CUDA
 * dialect's hooks (the argument struct, the sort key pass's store) and their launch plans
 * (host side).
 *
 * The launch plans: for one laid-out kernel and its parameters P, say which
 * entry points of the module its skeletons printed to launch, in order, with
 * which grid and block, how much device scratch the launches share, and
 * fill the argument words (the lf_args layout of codegen.h).
 *
 * What must stay true:
 *  - every entry named here exists in the emitted module (names follow
 *    cuda_names below, suffixed 32 or 64);
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
#include "codegen/emit.h"

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

/* The scan entries (SCAN), their own table: scanred, scanoff, scan. */
static const char *const scan_entries[][2] = {
    {"lf_k_scanred32", "lf_k_scanred64"}, {"lf_k_scanoff32", "lf_k_scanoff64"}, {"lf_k_scan32", "lf_k_scan64"}};

static void plan_scan(const cg_layout *lay, const int64_t *P, int sm_count, cg_cuda_plan *plan) {
    int64_t rows = product(lay, P, 0, lay->nkept), nb = cg_scan_blocks(lay);
    if (rows == 0 || nb == 0) return;
    int64_t cap_threads = (int64_t)(sm_count > 0 ? sm_count : 1) * BLOCKS_PER_SM * THREADS;
    bool i32 = fits_int32(lay, P, rows * nb, cap_threads) && rows * nb <= INT32_MAX - cap_threads;
    unsigned g_items = grid_for(rows * nb, THREADS, sm_count), g_rows = grid_for(rows, THREADS, sm_count);
    unsigned grids[3] = {g_items, g_rows, g_items};
    for (int k = 0; k < 3; k++) {
        cg_cuda_launch *l = &plan->launch[plan->nlaunches++];
        l->entry = scan_entries[k][i32 ? 0 : 1];
        l->grid[0] = grids[k];
        l->grid[1] = l->grid[2] = 1;
        l->block[0] = THREADS;
        l->block[1] = l->block[2] = 1;
    }
    /* no R and no ticket is used; they keep their places (and stay zero) */
    plan->scratch_R = 0;
    plan->scratch_ticket = sizeof(cg_value);
    plan->scratch_part = 2 * sizeof(cg_value);
    plan->scratch_bytes = plan->scratch_part + (size_t)(rows * nb) * sizeof(cg_partial);
}

void cg_cuda_plan_kernel(const cg_layout *lay, const int64_t *P, const uint64_t *buf_addr, int sm_count,
                         cg_cuda_plan *plan) {
    memset(plan, 0, sizeof *plan);
    const fuse_kernel *kn = lay->kernel;
    int nb = lay->nbufs > 0 ? lay->nbufs : 1, np = lay->nparams > 0 ? lay->nparams : 1;
    plan->nwords = nb + 3 + np;
    int64_t cap_threads = (int64_t)(sm_count > 0 ? sm_count : 1) * BLOCKS_PER_SM * THREADS;
    if (kn->kind == FUSE_KERNEL_SCATTER) { /* a thread per block of positions, then a thread per dst element */
        int ps = lay->param_scatter;
        int64_t nblocks = P[ps + 3], dn = P[ps + 2];
        bool i32 = fits_int32(lay, P, nblocks, cap_threads) && P[ps + 1] <= INT32_MAX - cap_threads &&
                   lay->part_entries <= INT32_MAX - cap_threads;
        if (nblocks > 0) add(plan, E_RUN, i32, grid_for(nblocks, THREADS, sm_count), THREADS, 1);
        if (dn > 0) add(plan, E_ROW, i32, grid_for(dn, THREADS, sm_count), THREADS, 1);
        return;
    }
    if (kn->sort && kn->sort->u.sort.k == 0) return; /* nothing to write: no key pass either */
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
        unsigned G = cg_kernel_contracts(kn) ? 1 : row_group(lay->count), rows = THREADS / G; /* emit_contract.c */
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
            add(plan, E_PASS0 + q, i32, (unsigned)nblocks, cg_kernel_contracts(kn) ? 1 : THREADS, 1);
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
    case CG_SCAN: plan_scan(lay, P, sm_count, plan); return;
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

void cg_cuda_fill_scalar_args(const cg_layout *lay, const int64_t *P, uint64_t *words) {
    int nb = lay->nbufs > 0 ? lay->nbufs : 1;
    for (int j = 0; j < lay->kernel->nscalars; j++)
        words[nb + 3 + lay->param_scalar + j] = (uint64_t)P[lay->param_scalar + j];
}

/* ---- CUDA skeletons ------------------------------------------------------------------------
 * Each body is a template over the index type lf_idx, instantiated by two
 * extern "C" __global__ entries, lf_k_<name>32 (int) and lf_k_<name>64
 * (long long); emit_cuda.c picks 32 when every index of the launch fits.
 * The single kernel parameter `a` (lf_args) holds B, R, part, ticket and P;
 * the macros B, P and R name its fields so the walker (emit.c) prints
 * the same text as for C. Every thread of a block reaches every
 * __syncthreads (loops that contain one have block-uniform bounds).
 *
 *  - run (ELEMENTWISE): grid-stride loop over flat elements.
 *  - vec (ELEMENTWISE, one contiguous axis; emitted when
 *    cg_cuda_vectorizable): each thread takes 4 consecutive elements with
 *    one 4-element (16-byte for f32) load per input and store per output;
 *    a scalar loop takes the tail. Used when every pointer is aligned.
 *  - rows (INNER): a group of blockDim.x threads per output element,
 *    blockDim.y outputs per block; thread x folds positions x, x + G, ...,
 *    then the group combines through shared memory in a fixed tree.
 *  - cols (OUTER): a thread per output, consecutive threads on consecutive
 *    innermost outputs (coalesced reads); each folds its reduced positions
 *    in the reference's order.
 *  - pass<q> (FULL): a block per CG block of the outermost axis writes its
 *    partial; the last block to finish (an integer ticket, no float
 *    atomics) combines the partials in a fixed tree, writes R and, after
 *    the last pass, runs the epilogue; row: grid-stride over positions.
 *  - scanred, scanoff, scan (SCAN): reduce-then-scan over fixed blocks of
 *    LF_SCAN_BLOCK positions of each row: scanred, a thread per (row,
 *    block), folds the block from the identity into part; scanoff, a thread
 *    per row, turns the row's block totals into offsets in block order; scan,
 *    a thread per (row, block), scans its block from its offset and runs the
 *    epilogue and the stores. This is the order of lazyfuse.h exactly (each
 *    block sequential, offsets in block order), so float scans are
 *    bit-identical to the CPU and the reference and never depend on timing.
 *    Why not CUB's decoupled look-back (Merrill & Garland 2016, one pass,
 *    2n traffic against this 3n): its result is order-independent only for
 *    integer, min and max scans; a float sum through look-back would need
 *    the same fixed blocking to stay deterministic anyway, and a sequential
 *    chain per block. What this costs and what was not measured: a thread
 *    walks its block alone (consecutive threads read addresses a block
 *    apart, uncoalesced; a warp-cooperative block scan in shared memory
 *    would be needed for bandwidth, keeping the fold order would need the
 *    in-block order to be a fixed tree instead), and none of it has run on
 *    a GPU (no device here): only NVRTC compiles and the host emulation of
 *    tests/test_cuda_codegen.c checked it.
 */

/* Calls to the device math library in fn (sqrt, rsqrt and fma are single
 * instructions and do not count). */
static int math_calls(const lf_fn *fn) {
    int n = 0;
    for (int i = 0; i < fn->nexprs; i++) {
        const fn_expr *x = &fn->exprs[i];
        if (x->kind != EXPR_OP) continue;
        lf_op op = x->op;
        if ((graph_ops[op].typing == OPTY_FLOAT && op != LF_OP_SQRT && op != LF_OP_RSQRT && op != LF_OP_FMA) ||
            op == LF_OP_POW || op == LF_OP_MOD || op == LF_OP_FMOD)
            n++;
    }
    return n;
}

bool cg_cuda_vectorizable(const cg_layout *lay) {
    if (lay->strategy != CG_ELEMENTWISE || lay->ndim != 1 || lay->kernel->sort) return false;
    /* four lanes of many inlined math calls compile slowly (polar_distance:
     * 230 ms) and such kernels gain little from wide loads */
    if (math_calls(lay->kernel->passes[0].fn) > 3) return false;
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->param_steps >= 0 || a->inner == CG_INNER_STRIDED) return false;
        if (a->fn < 0 && a->inner != CG_INNER_CONTIGUOUS) return false;
    }
    return true;
}

static const char *cuda_names[] = {"run", "vec", "rows", "cols", "row", "pass0", "pass1",
                                   "pass2", "pass3", "pass4", "pass5", "pass6", "pass7"};

static void skel_open_body(cg_emitter *e, const char *name) {
    cg_line(e, "template <typename lf_idx>");
    cg_open_block(e, "static __device__ __forceinline__ void lf_body_%s(const lf_args &a) {", name);
    e->level = 0;
    cg_declare_buffers(e); /* the scalars too (e->scalars_local) */
    cg_line(e, "const lf_idx lf_tid = (lf_idx)blockIdx.x * blockDim.x + threadIdx.x;");
    cg_line(e, "const lf_idx lf_stride = (lf_idx)gridDim.x * blockDim.x;");
    cg_line(e, "(void)lf_tid; (void)lf_stride;");
}

/* Closes body `name` and prints its two entries; variant32/64 are the
 * LF_VARIANT values that compile them (1 and 2: 32- and 64-bit run, rows,
 * cols, row and pass entries; 3 and 4: the vec entries): a module built with
 * -DLF_VARIANT=v instantiates only variant v's bodies, one without it all of
 * them (what the backend compiles today). */
static void skel_close_body(cg_emitter *e, const char *name, int variant32, int variant64) {
    cg_close_block(e);
    for (int w = 32; w <= 64; w += 32) {
        cg_line(e, "#if !defined(LF_VARIANT) || LF_VARIANT == %d", w == 32 ? variant32 : variant64);
        cg_line(e,
             "extern \"C\" __global__ void __launch_bounds__(256) lf_k_%s%d(const lf_args a) "
             "{ lf_body_%s<%s>(a); }",
             name, w, name, w == 32 ? "int" : "long long");
        cg_line(e, "#endif");
    }
}

/* lf_idx <name> = product of the extents of loop axes [first, first + n). */
static void skel_extent_product(cg_emitter *e, const char *name, int first, int n) {
    cg_line(e, "lf_idx %s = 1;", name);
    for (int ax = first; ax < first + n; ax++)
        cg_line(e, "%s *= (lf_idx)P[%d];", name, e->lay->param_extent + ax);
}

/* Opens the offsets of region reg (all regions when reg < 0) at flat
 * position `flat` of loop axes [first, ndim): the outer ones go into the
 * next level's offsets; returns the innermost index expression in jv. */
static void skel_position(cg_emitter *e, int reg, const char *flat, int first, char jv[32]) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1, L = e->level;
    if (first >= inner) {
        cg_fmt(jv, 32, "%s", flat);
        return;
    }
    cg_line(e, "lf_idx rest%d = %s;", L, flat);
    cg_line(e, "const lf_idx jin%d = rest%d %% (lf_idx)P[%d];", L, L, lay->param_extent + inner);
    cg_line(e, "rest%d /= (lf_idx)P[%d];", L, lay->param_extent + inner);
    for (int i = 0; i < lay->naccess; i++)
        if (reg < 0 || cg_in_region(e, &lay->access[i], reg))
            cg_line(e, "%slf_idx o%d_%d = o%d_%d;", e->d->value_attr, i, L + 1, i, L);
    for (int ax = inner - 1; ax >= first; ax--) {
        if (ax > first) {
            cg_line(e, "{");
            cg_line(e, "    const lf_idx q = rest%d %% (lf_idx)P[%d];", L, lay->param_extent + ax);
            cg_line(e, "    rest%d /= (lf_idx)P[%d];", L, lay->param_extent + ax);
        } else {
            cg_line(e, "{");
            cg_line(e, "    const lf_idx q = rest%d;", L);
        }
        for (int i = 0; i < lay->naccess; i++)
            if (reg < 0 || cg_in_region(e, &lay->access[i], reg))
                cg_line(e, "    o%d_%d += q * (lf_idx)P[%d];", i, L + 1, lay->access[i].param_offset + 1 + ax);
        cg_line(e, "}");
    }
    e->level++;
    cg_fmt(jv, 32, "jin%d", L);
}

/* Shared arrays of pass q's reductions (every reduction when q < 0). */
static void skel_declare_shared(cg_emitter *e, int q) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (q >= 0 && r->pass != q) continue;
        cg_line(e, "__shared__ %s sacc%d[256];", cg_red_float(r) ? "double" : "int64_t", j);
        if (cg_red_arg(r)) cg_line(e, "__shared__ int64_t sarg%d[256];", j);
    }
}

/* Combines the acc<r>[0] of pass q over a group of G threads (thread tx at
 * shared index slot) into sacc<r>[slot - tx] through a fixed tree. */
static void skel_group_combine(cg_emitter *e, int q, const char *G) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        cg_line(e, "sacc%d[slot] = acc%d[0];", j, j);
        if (cg_red_arg(r)) cg_line(e, "sarg%d[slot] = arg%d[0];", j, j);
    }
    cg_line(e, "__syncthreads();");
    cg_open_block(e, "for (int s = %s / 2; s > 0; s >>= 1) {", G);
    cg_open_block(e, "if (tx < s) {");
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        char a[32], g[32], b[48], bg[48];
        cg_fmt(a, sizeof a, "sacc%d[slot]", j);
        cg_fmt(g, sizeof g, "sarg%d[slot]", j);
        cg_fmt(b, sizeof b, "sacc%d[slot + s]", j);
        cg_fmt(bg, sizeof bg, "sarg%d[slot + s]", j);
        cg_emit_combine(e, r, a, g, b, bg);
    }
    cg_close_block(e);
    cg_line(e, "__syncthreads();");
    cg_close_block(e);
}

/* Finished value of reduction j from the group's shared slot `base`. */
static void skel_finished(cg_emitter *e, int j, const char *base, char *out, size_t cap) {
    char a[48], g[48];
    cg_fmt(a, sizeof a, "sacc%d[%s]", j, base);
    cg_fmt(g, sizeof g, "sarg%d[%s]", j, base);
    cg_finish_value(e, &e->kn->reds[j], a, g, out, cap);
}

/* The body (region 0) at flat element `at` (row length E), inside a loop
 * over elements: its row and column unravelled, its invariant loads
 * hoisted, then the fn and stores. */
static void skel_flat_element(cg_emitter *e) {
    int inner = e->lay->ndim - 1;
    if (inner > 0) {
        cg_line(e, "const lf_idx row = at / E, j = at - row * E;");
        cg_unravel(e, "row", 0, inner);
    } else {
        cg_line(e, "const lf_idx j = at; (void)E;");
        cg_unravel(e, "0", 0, 0);
    }
    cg_hoist_invariants(e, 0);
    cg_emit_body(e, 0, "j", ACC_SCALAR, "");
}

static void skel_elementwise(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1;
    skel_open_body(e, "run");
    cg_line(e, "const lf_idx E = (lf_idx)P[%d];", lay->param_extent + inner);
    skel_extent_product(e, "T", 0, lay->ndim);
    cg_open_block(e, "for (lf_idx at = lf_tid; at < T; at += lf_stride) {");
    skel_flat_element(e);
    cg_close_block(e);
    skel_close_body(e, "run", 1, 2);
    if (!cg_cuda_vectorizable(lay)) return;

    skel_open_body(e, "vec");
    cg_line(e, "const lf_idx T = (lf_idx)P[%d];", lay->param_extent);
    cg_unravel(e, "0", 0, 0);
    cg_hoist_invariants(e, 0);
    cg_open_block(e, "for (lf_idx g = lf_tid; g < T / 4; g += lf_stride) {");
    cg_line(e, "const lf_idx j0 = g * 4;");
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->buf < 0 || a->inner != CG_INNER_CONTIGUOUS) continue;
        const char *t = e->d->type[a->dtype];
        if (a->fn >= 0)
            cg_line(e, "const lf_v4<%s> w%d = *(const lf_v4<%s> *)(b%d + o%d_0 + j0);", t, i, t, a->buf, i);
        else
            cg_line(e, "lf_v4<%s> w%d;", t, i);
    }
    cg_line(e, "#pragma unroll");
    cg_open_block(e, "for (int l = 0; l < 4; l++) {");
    cg_line(e, "const lf_idx j = j0 + l; (void)j;");
    e->vec = true;
    cg_emit_body(e, 0, "j", ACC_SCALAR, "");
    e->vec = false;
    cg_close_block(e);
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->fn >= 0 || a->buf < 0) continue;
        const char *t = e->d->type[a->dtype];
        cg_line(e, "*(lf_v4<%s> *)(b%d + o%d_0 + j0) = w%d;", t, a->buf, i, i);
    }
    cg_close_block(e);
    cg_open_block(e, "for (lf_idx j = T / 4 * 4 + lf_tid; j < T; j += lf_stride) {");
    cg_emit_body(e, 0, "j", ACC_SCALAR, "");
    cg_close_block(e);
    skel_close_body(e, "vec", 3, 4);
}

/* The loop of one thread over its positions p = tx, tx + G, ... < C of the
 * reduced axes [first, ndim) for pass q (or, q == npasses + 1, the row
 * pass); flat positions are base + p. */
static void skel_thread_positions(cg_emitter *e, int q, int first, const char *base, const char *G,
                                  acc_form form) {
    const fuse_kernel *kn = e->kn;
    cg_open_block(e, "for (lf_idx p = tx; p < C; p += %s) {", G);
    cg_line(e, "const lf_idx fl = %s + p; (void)fl;", base);
    int level = e->level;
    char jv[32];
    skel_position(e, q, "fl", first, jv);
    cg_hoist_invariants(e, q);
    if (q == kn->npasses + 1) {
        cg_emit_body(e, q, jv, form, "r");
    } else {
        cg_emit_pass_body(e, q, jv, form, "0", "(int64_t)fl");
    }
    e->level = level;
    cg_close_block(e);
}

static void skel_inner(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    skel_open_body(e, "rows");
    skel_declare_shared(e, -1);
    cg_line(e, "const int tx = threadIdx.x, G = blockDim.x, slot = threadIdx.y * G + tx;");
    cg_line(e, "(void)slot;");
    skel_extent_product(e, "NOUT", 0, lay->nkept);
    cg_line(e, "const lf_idx C = (lf_idx)P[%d];", lay->param_count);
    cg_open_block(e, "for (lf_idx base = (lf_idx)blockIdx.x * blockDim.y; base < NOUT; "
            "base += (lf_idx)gridDim.x * blockDim.y) {");
    cg_line(e, "const lf_idx out = base + threadIdx.y;");
    cg_line(e, "const bool live = out < NOUT;");
    cg_unravel(e, "(live ? out : 0)", 0, lay->nkept);
    cg_declare_results(e, NULL);
    for (int q = 0; q < kn->npasses; q++) {
        cg_open_block(e, "{ /* pass %d */", q);
        cg_declare_accs(e, q, "1", "1");
        cg_open_block(e, "if (live) {");
        skel_thread_positions(e, q, lay->nkept, "0", "G", ACC_SCALAR);
        cg_close_block(e);
        skel_group_combine(e, q, "G");
        for (int j = 0; j < kn->nreds; j++) {
            if (kn->reds[j].pass != q) continue;
            expr_buf v;
            skel_finished(e, j, "threadIdx.y * G", v, sizeof v);
            cg_line(e, "res%d = %s;", j, v);
        }
        cg_line(e, "__syncthreads();");
        cg_close_block(e);
    }
    cg_open_block(e, "if (live && tx == 0) { /* epilogue */");
    cg_emit_body(e, kn->npasses, NULL, ACC_SCALAR, "e");
    cg_close_block(e);
    if (kn->row) {
        cg_open_block(e, "if (live) { /* row pass */");
        skel_thread_positions(e, kn->npasses + 1, lay->nkept, "0", "G", ACC_SCALAR);
        cg_close_block(e);
    }
    cg_close_block(e);
    skel_close_body(e, "rows", 1, 2);
}

static void skel_outer(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    int last = lay->ndim - 1;
    skel_open_body(e, "cols");
    cg_line(e, "const lf_idx EK = (lf_idx)P[%d];", lay->param_extent + last);
    skel_extent_product(e, "NOUT", 0, lay->nkept);
    cg_line(e, "NOUT *= EK;");
    cg_open_block(e, "for (lf_idx u = lf_tid; u < NOUT; u += lf_stride) {");
    cg_line(e, "const lf_idx out = u / EK, k = u - out * EK;");
    cg_unravel(e, "out", 0, lay->nkept);
    for (int i = 0; i < lay->naccess; i++)
        cg_line(e, "o%d_0 += k * (lf_idx)P[%d];", i, lay->access[i].param_offset + 1 + last);
    cg_declare_results(e, NULL);
    for (int q = 0; q < kn->npasses; q++) {
        cg_open_block(e, "{ /* pass %d */", q);
        bool pos = cg_pass_tracks_pos(kn, q);
        cg_declare_accs(e, q, "1", "1");
        if (pos) cg_line(e, "const int64_t pos0 = 0;");
        int opened = 0;
        for (int ax = lay->nkept; ax < last; ax++, opened++) cg_open_level(e, ax, q, NULL, NULL, pos);
        char posx[16];
        cg_fmt(posx, sizeof posx, "pos%d", e->level);
        cg_emit_pass_body(e, q, NULL, ACC_SCALAR, "0", posx);
        while (opened--) cg_close_level(e);
        cg_finish_into(e, q, "0", NULL);
        cg_close_block(e);
    }
    cg_open_block(e, "{ /* epilogue */");
    cg_emit_body(e, kn->npasses, NULL, ACC_SCALAR, "e");
    cg_close_block(e);
    if (kn->row) {
        int reg = kn->npasses + 1, opened = 0;
        cg_open_block(e, "{ /* row pass */");
        for (int ax = lay->nkept; ax < last; ax++, opened++) cg_open_level(e, ax, reg, NULL, NULL, false);
        cg_emit_body(e, reg, NULL, ACC_SCALAR, "r");
        while (opened--) cg_close_level(e);
        cg_close_block(e);
    }
    cg_close_block(e);
    skel_close_body(e, "cols", 1, 2);
}

static void skel_full(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    for (int q = 0; q < kn->npasses; q++) {
        int nq = cg_pass_reductions(kn, q);
        skel_open_body(e, cuda_names[5 + q]);
        skel_declare_shared(e, q);
        cg_line(e, "__shared__ int lf_last;");
        cg_line(e, "const int tx = threadIdx.x, slot = tx;");
        cg_line(e, "const lf_idx blk = blockIdx.x;");
        cg_line(e, "const lf_idx lo = blk * (lf_idx)P[%d];", lay->param_full_block);
        cg_line(e, "const lf_idx hi = (lf_idx)P[%d] - lo < (lf_idx)P[%d] ? (lf_idx)P[%d] : lo + (lf_idx)P[%d];",
             lay->param_extent, lay->param_full_block, lay->param_extent, lay->param_full_block);
        cg_unravel(e, "0", 0, 0);
        skel_extent_product(e, "Cin", 1, lay->ndim - 1);
        cg_line(e, "const lf_idx C = (hi - lo) * Cin;");
        cg_declare_accs(e, q, "1", "1");
        cg_open_block(e, "{");
        skel_thread_positions(e, q, 0, "lo * Cin", "(lf_idx)blockDim.x", ACC_R);
        cg_close_block(e);
        skel_group_combine(e, q, "(int)blockDim.x");
        cg_open_block(e, "if (tx == 0) {");
        for (int j = 0, m = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            cg_line(e, "a.part[blk * %d + %d].v.%s = sacc%d[0];", nq, m, cg_red_float(r) ? "f" : "i", j);
            if (cg_red_arg(r)) cg_line(e, "a.part[blk * %d + %d].arg = sarg%d[0];", nq, m, j);
            else cg_line(e, "a.part[blk * %d + %d].arg = -1;", nq, m);
            m++;
        }
        cg_line(e, "__threadfence();");
        cg_line(e, "lf_last = atomicAdd(&a.ticket[%d], 1u) == gridDim.x - 1;", q);
        cg_close_block(e);
        cg_line(e, "__syncthreads();");
        cg_open_block(e, "if (lf_last) { /* the last block combines the partials in a fixed order */");
        cg_line(e, "__threadfence();");
        for (int j = 0, m = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            bool fl = cg_red_float(r);
            cg_line(e, "acc%d[0] = %s;", j, cg_red_init(r));
            if (cg_red_arg(r)) cg_line(e, "arg%d[0] = -1;", j);
            cg_open_block(e, "for (lf_idx b = tx; b < (lf_idx)gridDim.x; b += blockDim.x) {");
            cg_line(e, "const %s pv = __ldcg(&a.part[b * %d + %d].v.%s);", fl ? "double" : "long long", nq, m,
                 fl ? "f" : "i");
            cg_line(e, "const long long pa = __ldcg(&a.part[b * %d + %d].arg); (void)pa;", nq, m);
            char a[32], g[32];
            cg_fmt(a, sizeof a, "acc%d[0]", j);
            cg_fmt(g, sizeof g, "arg%d[0]", j);
            cg_emit_combine(e, r, a, g, "pv", "pa");
            cg_close_block(e);
            m++;
        }
        skel_group_combine(e, q, "(int)blockDim.x");
        cg_open_block(e, "if (tx == 0) {");
        for (int j = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            expr_buf v;
            skel_finished(e, j, "0", v, sizeof v);
            cg_line(e, "R[%d].%s = %s;", j, graph_dtype_is_float(r->node->dtype) ? "f" : "i", v);
        }
        cg_line(e, "a.ticket[%d] = 0;", q);
        if (q == kn->npasses - 1) {
            cg_open_block(e, "{ /* epilogue */");
            cg_emit_body(e, kn->npasses, NULL, ACC_R, "e");
            cg_close_block(e);
        }
        cg_close_block(e);
        cg_close_block(e);
        skel_close_body(e, cuda_names[5 + q], 1, 2);
    }
    if (kn->row) {
        skel_open_body(e, "row");
        cg_unravel(e, "0", 0, 0);
        skel_extent_product(e, "C", 0, lay->ndim);
        cg_line(e, "const lf_idx tx = lf_tid;");
        skel_thread_positions(e, kn->npasses + 1, 0, "0", "lf_stride", ACC_R);
        skel_close_body(e, "row", 1, 2);
    }
}

/* The scan's three entries (see the top). */
static void skel_scan(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    const fuse_red *r = &kn->reds[0];
    bool fl = cg_red_float(r);
    expr_buf idb;
    const char *T = fl ? "double" : "long long", *X = fl ? "f" : "i", *id = cg_scan_identity(r, idb, sizeof idb);
    int inner = lay->ndim - 1, B = LF_SCAN_BLOCK;
    for (int epi = 0; epi < 2; epi++) {
        const char *name = epi ? "scan" : "scanred";
        skel_open_body(e, name);
        cg_line(e, "const lf_idx E = (lf_idx)P[%d];", lay->param_extent + inner);
        skel_extent_product(e, "rows", 0, lay->nkept);
        cg_line(e, "const lf_idx nb = (E + %d) / %d;", B - 1, B);
        cg_open_block(e, "for (lf_idx t = lf_tid; t < rows * nb; t += lf_stride) {");
        cg_line(e, "const lf_idx row = t / nb, blk = t - row * nb; (void)row;");
        cg_unravel(e, "row", 0, lay->nkept);
        cg_hoist_invariants(e, 0);
        if (epi) cg_hoist_invariants(e, kn->npasses);
        cg_line(e, "%s acc0[1];", T);
        if (epi) cg_line(e, "acc0[0] = a.part[t].v.%s;", X);
        else cg_line(e, "acc0[0] = %s;", id);
        cg_line(e, "const lf_idx j1 = E - blk * %d < %d ? E : (blk + 1) * %d;", B, B, B);
        cg_open_block(e, "for (lf_idx jj = blk * %d; jj < j1; jj++) {", B);
        cg_emit_scan_element(e, "jj", "0", false, epi);
        cg_close_block(e);
        if (!epi) cg_line(e, "a.part[t].v.%s = acc0[0];", X);
        cg_close_block(e);
        skel_close_body(e, name, 1, 2);
        if (epi) break;
        skel_open_body(e, "scanoff");
        cg_line(e, "const lf_idx E = (lf_idx)P[%d];", lay->param_extent + inner);
        skel_extent_product(e, "rows", 0, lay->nkept);
        cg_line(e, "const lf_idx nb = (E + %d) / %d;", B - 1, B);
        cg_open_block(e, "for (lf_idx row = lf_tid; row < rows; row += lf_stride) {");
        cg_line(e, "%s off = %s;", T, id);
        cg_open_block(e, "for (lf_idx b = row * nb; b < (row + 1) * nb; b++) {");
        cg_line(e, "const %s t = a.part[b].v.%s;", T, X);
        cg_line(e, "a.part[b].v.%s = off;", X);
        cg_emit_scan_fold_acc(e, r, "off", "t");
        cg_close_block(e);
        cg_close_block(e);
        skel_close_body(e, "scanoff", 1, 2);
    }
}

/* A scatter kernel (plan_scatter.c): run, a thread per block of positions
 * folding them in position order into the block's partials (deterministic,
 * no atomics; parallel only across blocks); row, a thread per dst element
 * combining dst and the partials in block order. */
static void skel_scatter(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1, ps = lay->param_scatter;
    skel_open_body(e, "run");
    cg_line(e, "const lf_idx E = (lf_idx)P[%d], BS = (lf_idx)P[%d], N = (lf_idx)P[%d], DN = (lf_idx)P[%d], NB = "
               "(lf_idx)P[%d];",
            lay->param_extent + inner, ps, ps + 1, ps + 2, ps + 3);
    cg_open_block(e, "for (lf_idx blk = lf_tid; blk < NB; blk += lf_stride) {");
    cg_line(e, "lf_partial *sp = b%d + blk * DN;", lay->part_buf);
    cg_open_block(e, "for (lf_idx t = 0; t < DN; t++) {");
    cg_emit_scatter_init(e, "sp[t]");
    cg_close_block(e);
    cg_line(e, "const lf_idx stop = N - blk * BS < BS ? N : blk * BS + BS;");
    cg_open_block(e, "for (lf_idx at = blk * BS; at < stop; at++) {");
    skel_flat_element(e);
    cg_close_block(e);
    cg_close_block(e);
    skel_close_body(e, "run", 1, 2);
    skel_open_body(e, "row");
    cg_line(e, "const lf_idx DN = (lf_idx)P[%d], NB = (lf_idx)P[%d];", ps + 2, ps + 3);
    cg_line(e, "const lf_partial *sp = b%d;", lay->part_buf);
    cg_open_block(e, "for (lf_idx t = lf_tid; t < DN; t += lf_stride) {");
    cg_emit_scatter_finish(e, "t", "NB", "DN");
    cg_close_block(e);
    skel_close_body(e, "row", 1, 2);
}

/* A sort kernel's key pass (plan_sort.c; the backend's steps are in
 * sort_cuda.c's top comment): run, a grid-stride loop over the flat
 * positions p of the kernel's space (the sort input's rows one after the
 * other, the sorted axis innermost), writes K[p], the sort key of the
 * body's value (graph_sort_key's order, descending folded in: uint32, or
 * uint64 for f64 and i64), and, when the kernel has a values node, V[p],
 * the value itself (the body's dtype), in the same pass. K and V share one
 * work area, bound as store 0's buffer: K at its start, V at
 * cg_cuda_sort_values_offset (cg_cuda_sort_work_bytes in all). The slots
 * are written later by the module's lf_sort_write, from V through the
 * sorted positions: values are moved, never decoded from keys, so -0.0 and
 * NaN payloads keep their bits. */
static void skel_sort(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    const fuse_kernel *kn = e->kn;
    int inner = lay->ndim - 1, wb = -1;
    for (int i = 0; i < lay->naccess; i++)
        if (lay->access[i].fn < 0 && lay->access[i].index == 0) wb = lay->access[i].buf;
    lf_dtype t = kn->body_etype[kn->stores[0].expr];
    bool wide = graph_sort_key_wide(t);
    const char *kt = wide ? "uint64_t" : "uint32_t", *vt = e->d->type[t];
    cg_emit_sort_key_defs(e);
    skel_open_body(e, "run");
    cg_line(e, "%s *__restrict__ lf_K = (%s *)B[%d]; /* sort keys, K[position] */", kt, kt, wb);
    cg_line(e, "const lf_idx E = (lf_idx)P[%d];", lay->param_extent + inner);
    skel_extent_product(e, "T", 0, lay->ndim);
    if (kn->sort_values)
        cg_line(e, "%s *__restrict__ lf_V = (%s *)((char *)B[%d] + (((unsigned long long)T * %d + 255) & ~255ull)); "
                   "/* values, V[position] */",
                vt, vt, wb, wide ? 8 : 4);
    cg_open_block(e, "for (lf_idx at = lf_tid; at < T; at += lf_stride) {");
    skel_flat_element(e);
    cg_close_block(e);
    skel_close_body(e, "run", 1, 2);
}

/* The CUDA skeleton of each kernel kind (codegen.h's cg_dialect.skeleton). */
cg_skeleton *const cg_cuda_skeletons[FUSE_KERNEL_NKINDS] = {
    [FUSE_KERNEL_ELEMENTWISE] = skel_elementwise,
    [FUSE_KERNEL_REDUCE_FULL] = skel_full,
    [FUSE_KERNEL_REDUCE_INNER] = skel_inner,
    [FUSE_KERNEL_REDUCE_OUTER] = skel_outer,
    [FUSE_KERNEL_SCAN] = skel_scan,
    [FUSE_KERNEL_SCATTER] = skel_scatter,
    [FUSE_KERNEL_SORT] = skel_sort,
};

/* The one by-value argument of every entry (the buffers, the reduction
 * results, the partials, the last-block ticket, the parameters), and the
 * names the walker prints for its fields. */
void cg_cuda_kernel_head(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    cg_printf(e->t, "struct lf_args {\n    void *B[%d];\n    lf_value *R;\n    lf_partial *part;\n"
                    "    unsigned int *ticket;\n    long long P[%d];\n};\n",
              lay->nbufs > 0 ? lay->nbufs : 1, lay->nparams > 0 ? lay->nparams : 1);
    cg_printf(e->t, "#define B (a.B)\n#define P (a.P)\n#define R (a.R)\n");
}

/* A sort kernel's store 0 in CUDA (skel_sort's key pass): the key into
 * lf_K at the position, and the value into lf_V when the kernel has a
 * values node (backends/cuda/sort.c sorts them). */
void cg_cuda_sort_store(cg_emitter *e, const char *idx, const char *key, const char *x, lf_dtype from) {
    cg_line(e, "lf_K[%s] = %s; /* sort key -> n%d */", idx, key, e->kn->sort->id);
    const lf_node *vn = e->kn->sort_values;
    if (!vn) return;
    if (from == LF_BOOL) cg_line(e, "lf_V[%s] = (uint8_t)((%s) != 0); /* value -> n%d */", idx, x, vn->id);
    else cg_line(e, "lf_V[%s] = %s; /* value -> n%d */", idx, x, vn->id);
}

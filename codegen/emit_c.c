/* codegen/emit_c.c: the C skeletons of each kernel kind (see emit.h for the
 * walker they call and emit.c's top comment for the strategies).
 *
 *  - ELEMENTWISE: lf_k_run(B, P, begin, end) over flat elements: per row
 *    segment the outer axes are unravelled once, then a unit-stride inner
 *    loop the compiler vectorizes; loads invariant in it are hoisted. A
 *    kernel with a contiguous store runs that loop in tiles of
 *    CG_STREAM_TILE elements; with its streaming switch on
 *    (cg_layout.param_stream, for kernels larger than the cache) the
 *    contiguous stores fill stack tiles written out with non-temporal
 *    stores (lf_stream), else they go straight to the outputs.
 *  - REDUCE_INNER: lf_k_run over output elements; each pass folds into
 *    CG_LANES lanes (emit_lane_nest), combined in lane order. A kernel of
 *    contractions alone goes to emit_contract.c's contraction rows (several
 *    outputs' fmaf chains interleaved) instead.
 *  - REDUCE_OUTER: lf_k_run over (outer output, block of innermost outputs),
 *    each output accumulating in reduced order.
 *  - REDUCE_FULL: lf_k_pass<q> (a partial per block of the outermost reduced
 *    axis), lf_k_fin<q> (partials in block order), lf_k_epi, lf_k_row.
 *  - SCAN: lf_k_run over rows, each row in one pass that keeps two
 *    accumulators (the running value, which starts each LF_SCAN_BLOCK block
 *    at the block's offset, and the block's total from the identity, folded
 *    into the offset at the block's end: two independent dependency chains,
 *    so one pass costs what a plain sequential loop costs); for one long row
 *    on several threads, lf_k_pass0 (block totals), lf_k_fin0 (offsets in
 *    block order, chained from a carry) and lf_k_scan (each block from its
 *    offset), pass0 and scan taking SCAN_GROUP consecutive blocks at once so
 *    that a thread runs SCAN_GROUP independent chains. The CPU backend runs
 *    them on cache-sized groups of blocks with a look-back between threads
 *    (backends/cpu/cpu.c, scan_lookback), so the row's second read comes
 *    from the cache. Every way folds in the order of lazyfuse.h.
 *  - sort kernels (kernel->sort): lf_k_run writes each position's sort
 *    key, lf_k_raw its value, into the backend's work array (emit_sort).
 *
 * What must stay true: every function named in codegen.h ("Names of the
 * generated functions") is printed for its strategy, with the signatures of
 * the cg_*_fn types; the order of every fold depends on the shape alone.
 */
#include "codegen/emit.h"

#include <inttypes.h>

/* The reduced nest of pass q (INNER and FULL): levels over the reduced axes
 * but the innermost, then the innermost axis split into lanes. lo/hi bound
 * the outermost reduced axis (FULL blocks) or are NULL. */
static void emit_lane_nest(cg_emitter *e, int q, acc_form form, const char *lo, const char *hi) {
    const cg_layout *lay = e->lay;
    bool pos = cg_pass_tracks_pos(e->kn, q);
    int inner = lay->ndim - 1;
    char jlo[32], jhi[32];
    if (pos) cg_line(e, "const int64_t pos%d = 0;", e->level);
    int opened = cg_open_reduced_nest(e, q, lo, hi, pos, jlo, jhi);
    char posx[64];
    cg_fmt(posx, sizeof posx, "pos%d * P[%d] + jj", e->level, lay->param_extent + inner);
    cg_line(e, "int64_t j = %s;", jlo);
    cg_open_block(e, "for (; j + %d <= %s; j += %d) {", CG_LANES, jhi, CG_LANES);
    /* not unrolled: GCC's loop vectorizer (not SLP) calls the simd math */
    cg_line(e, "_Pragma(\"GCC unroll 1\")");
    cg_open_block(e, "for (int64_t l = 0; l < %d; l++) {", CG_LANES);
    cg_line(e, "const int64_t jj = j + l;");
    cg_emit_pass_body(e, q, "jj", form, "l", posx);
    cg_close_block(e);
    cg_close_block(e);
    cg_open_block(e, "for (int64_t l = 0; j + l < %s; l++) {", jhi);
    cg_line(e, "const int64_t jj = j + l;");
    cg_emit_pass_body(e, q, "jj", form, "l", posx);
    cg_close_block(e);
    cg_close_reduced_nest(e, opened);
}

/* Combines pass q's lanes into acc<r>[0] / arg<r>[0] in lane order. */
static void combine_lanes(cg_emitter *e, int q) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        cg_open_block(e, "for (int64_t l = 1; l < %d; l++) {", CG_LANES);
        char a[32], g[32], b[32], bg[32];
        cg_fmt(a, sizeof a, "acc%d[0]", j);
        cg_fmt(g, sizeof g, "arg%d[0]", j);
        cg_fmt(b, sizeof b, "acc%d[l]", j);
        cg_fmt(bg, sizeof bg, "arg%d[l]", j);
        cg_emit_combine(e, r, a, g, b, bg);
        cg_close_block(e);
    }
}

/* The row pass over the reduced nest (INNER and FULL). */
static void emit_row_nest(cg_emitter *e, acc_form form, const char *lo, const char *hi) {
    const fuse_kernel *kn = e->kn;
    int reg = kn->npasses + 1;
    char jlo[32], jhi[32];
    int opened = cg_open_reduced_nest(e, reg, lo, hi, false, jlo, jhi);
    cg_open_block(e, "for (int64_t jj = %s; jj < %s; jj++) {", jlo, jhi);
    cg_emit_body(e, reg, "jj", form, "r");
    cg_close_block(e);
    cg_close_reduced_nest(e, opened);
}

/* ---- function skeletons --------------------------------------------------------------------- */


static void open_fn(cg_emitter *e, const char *sig) {
    cg_open_block(e, "%s void lf_k_%s {", e->d->entry, sig);
    e->level = 0;
    e->scalars_local = false; /* until this function's cg_declare_buffers */
}

#define ARGS_RUN "void *const *restrict B, const int64_t *restrict P, int64_t begin, int64_t end"

/* Whether region 0 of the kernel has split remapped reads (param_split). */
static bool has_split(const cg_emitter *e) {
    for (int i = 0; i < e->lay->naccess; i++)
        if (e->lay->access[i].param_split >= 0 && cg_in_region(e, &e->lay->access[i], 0)) return true;
    return false;
}

/* Per row: each split read's lf_rrow (rr<a>) and interior base (ri<a>),
 * and the row's interior [jl, jh) inside [j0, j1): the elements where no
 * split read clamps or reflects (jl <= jh). */
static void declare_split_row(cg_emitter *e) {
    cg_line(e, "int64_t jl = j0, jh = j1;");
    for (int i = 0; i < e->lay->naccess; i++) {
        const cg_access *a = &e->lay->access[i];
        if (a->param_split < 0 || !cg_in_region(e, a, 0)) continue;
        cg_line(e, "const lf_rrow rr%d = lf_remap_row(P + %d, o%d_%d, P[%d], P[%d]);", i, a->param_steps, i,
                e->level, a->param_split, a->param_split + 1);
        cg_line(e, "const lf_idx ri%d = rr%d.inner;", i, i);
        cg_line(e, "if (rr%d.lo > jl) jl = rr%d.lo;", i, i);
        cg_line(e, "if (rr%d.hi < jh) jh = rr%d.hi;", i, i);
    }
    cg_line(e, "if (jh < jl) jh = jl;");
    cg_declare_row_true_compares(e);
}

/* The loop over row elements [lo, hi) running the body: with split reads,
 * three loops (border before jl, the interior [jl, jh) with plain shifted
 * loads the compiler vectorizes, border from jh), else one; each marked
 * `#pragma GCC ivdep` (see emit_flat_range). */
static void emit_row_loop(cg_emitter *e, const char *lo, const char *hi, bool split) {
    if (!split) {
        cg_line(e, "#pragma GCC ivdep");
        cg_open_block(e, "for (int64_t j = %s; j < %s; j++) {", lo, hi);
        cg_emit_body(e, 0, "j", ACC_SCALAR, "");
        cg_close_block(e);
        return;
    }
    for (int k = 0; k < 3; k++) {
        expr_buf from, to;
        if (k == 0) cg_fmt(from, sizeof from, "%s", lo);
        else cg_fmt(from, sizeof from, k == 1 ? "%s > jl ? %s : jl" : "%s > jh ? %s : jh", lo, lo);
        if (k == 2) cg_fmt(to, sizeof to, "%s", hi);
        else cg_fmt(to, sizeof to, k == 0 ? "%s < jl ? %s : jl" : "%s < jh ? %s : jh", hi, hi);
        e->split = k == 1 ? 2 : 1;
        cg_line(e, "#pragma GCC ivdep");
        cg_open_block(e, "for (int64_t j = (%s), je%d = (%s); j < je%d; j++) {", from, k, to, k);
        cg_emit_body(e, 0, "j", ACC_SCALAR, "");
        cg_close_block(e);
    }
    e->split = 0;
}

/* The body (region 0) over flat elements from `at` to `stop` (row length E):
 * per row segment the outer axes are unravelled once and the loads
 * invariant in the inner loop hoisted, then a unit-stride inner loop; with
 * e->stream that loop runs in tiles of CG_STREAM_TILE elements whose
 * streamed stores go to stack tiles, each written out after the tile.
 * The inner loop is marked `#pragma GCC ivdep`: no iteration reads what
 * another writes (outputs never overlap inputs, except an in-place output,
 * which fusion/plan_inplace.c allows only where each point reads its own
 * element), and without the mark GCC gives up vectorizing a loop whose
 * loads it would have to check at run time against a store it cannot
 * prove apart (a stream tile's pointer, an in-place output) once there are
 * more than 10 of them (--param vect-max-version-for-alias-checks): a
 * 31-tap convolution ran scalar, 30x slower than a 9-tap one. */
static void emit_flat_range(cg_emitter *e, const char *stop) {
    cg_open_block(e, "while (at < %s) {", stop);
    cg_line(e, "const int64_t row = at / E, j0 = at - row * E;");
    cg_line(e, "const int64_t j1 = %s - at < E - j0 ? j0 + (%s - at) : E;", stop, stop);
    cg_unravel(e, "row", 0, e->lay->ndim - 1);
    cg_hoist_invariants(e, 0);
    bool split = has_split(e);
    if (split) declare_split_row(e);
    if (e->stream) {
        cg_open_block(e, "for (int64_t jt = j0; jt < j1; jt += %d) {", CG_STREAM_TILE);
        cg_line(e, "const int64_t je = j1 - jt < %d ? j1 : jt + %d;", CG_STREAM_TILE, CG_STREAM_TILE);
        cg_emit_stream_targets(e, "jt");
        emit_row_loop(e, "jt", "je", split);
        cg_open_block(e, "if (lf_nt) {");
        cg_emit_stream_flush(e, "jt", "je - jt");
        cg_close_block(e);
        cg_close_block(e);
    } else {
        emit_row_loop(e, "j0", "j1", split);
    }
    cg_line(e, "at += j1 - j0;");
    cg_close_block(e);
}

/* With a streaming switch (lay->param_stream), one tiled body whose
 * streamable stores go through pointers set per tile: to stack tiles
 * written out with non-temporal stores when the backend set the switch,
 * to the outputs themselves otherwise (one body: the kernel compiles once).
 * The values are the same either way; only how they reach memory differs
 * (non-temporal stores bypass the cache and skip reading the lines they
 * fill; an sfence orders them before the run's end is published). */
static void emit_elementwise(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1;
    open_fn(e, "run(" ARGS_RUN ")");
    cg_declare_buffers(e);
    cg_line(e, "const int64_t E = P[%d];", lay->param_extent + inner);
    cg_line(e, "int64_t at = begin;");
    if (lay->param_stream >= 0) {
        cg_line(e, "const int lf_nt = P[%d] != 0; /* streaming stores */", lay->param_stream);
        cg_declare_stream_tiles(e);
        e->stream = true;
        emit_flat_range(e, "end");
        e->stream = false;
        cg_line(e, "if (lf_nt) lf_sfence();");
    } else {
        emit_flat_range(e, "end");
    }
    cg_close_block(e);
}



/* Whether pass q stores a row keep. */
static bool pass_keeps(const fuse_kernel *kn, int q) {
    for (int t = 0; t < kn->nkeeps; t++)
        if (kn->keeps[t].pass == q) return true;
    return false;
}

/* Row keeps (fuse_keep): with one reduced axis, each kept value gets a row
 * buffer lf_keep<t> of CG_KEEP_BYTES on the stack; rows that fit
 * (lf_keepon) run the passes that compute a kept value and the row pass
 * twice over: once storing it, once reading it back; longer rows compute
 * it again. Both ways give the same bits. */
static void emit_inner(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    bool keeps = kn->row && kn->nkeeps > 0 && lay->nkept == lay->ndim - 1;
    open_fn(e, "run(" ARGS_RUN ")");
    cg_declare_buffers(e);
    int64_t keep_len = CG_KEEP_BYTES;
    for (int t = 0; keeps && t < kn->nkeeps; t++) {
        int64_t len = CG_KEEP_BYTES / (int64_t)lf_dtype_size(kn->keeps[t].dtype);
        if (len < keep_len) keep_len = len;
    }
    for (int t = 0; keeps && t < kn->nkeeps; t++)
        cg_line(e, "%s lf_keep%d[%" PRId64 "]; /* row keep: n%d */", cg_vtype(e, kn->keeps[t].dtype), t, keep_len,
                kn->keeps[t].node->id);
    if (keeps) cg_line(e, "const int lf_keepon = P[%d] <= %" PRId64 ";", lay->param_extent + lay->ndim - 1, keep_len);
    cg_open_block(e, "for (int64_t out = begin; out < end; out++) {");
    cg_unravel(e, "out", 0, lay->nkept);
    cg_declare_results(e, NULL);
    for (int q = 0; q < kn->npasses; q++) {
        cg_open_block(e, "{ /* pass %d */", q);
        char lanes[16];
        cg_fmt(lanes, sizeof lanes, "%d", CG_LANES);
        cg_declare_accs(e, q, lanes, lanes);
        if (keeps && pass_keeps(kn, q)) {
            cg_open_block(e, "if (lf_keepon) {");
            e->keep = true;
            emit_lane_nest(e, q, ACC_SCALAR, NULL, NULL);
            e->keep = false;
            cg_close_block(e);
            cg_open_block(e, "else {");
            emit_lane_nest(e, q, ACC_SCALAR, NULL, NULL);
            cg_close_block(e);
        } else {
            emit_lane_nest(e, q, ACC_SCALAR, NULL, NULL);
        }
        combine_lanes(e, q);
        cg_finish_into(e, q, "0", NULL);
        cg_close_block(e);
    }
    cg_open_block(e, "{ /* epilogue */");
    cg_emit_body(e, kn->npasses, NULL, ACC_SCALAR, "e");
    cg_close_block(e);
    if (kn->row) {
        cg_open_block(e, "{ /* row pass */");
        if (keeps) {
            cg_open_block(e, "if (lf_keepon) {");
            e->keep = true;
            emit_row_nest(e, ACC_SCALAR, NULL, NULL);
            e->keep = false;
            cg_close_block(e);
            cg_open_block(e, "else {");
        }
        emit_row_nest(e, ACC_SCALAR, NULL, NULL);
        if (keeps) cg_close_block(e);
        cg_close_block(e);
    }
    cg_close_block(e);
    cg_close_block(e);
}

static void emit_outer(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    int last = lay->ndim - 1;
    open_fn(e, "run(" ARGS_RUN ")");
    cg_declare_buffers(e);
    cg_line(e, "const int64_t EK = P[%d], nblk = (EK + %d) / %d;", lay->param_extent + last,
         CG_OUTER_BLOCK - 1, CG_OUTER_BLOCK);
    cg_open_block(e, "for (int64_t u = begin; u < end; u++) {");
    cg_line(e, "const int64_t out = u / nblk, k0 = (u - out * nblk) * %d;", CG_OUTER_BLOCK);
    cg_line(e, "const int64_t K = EK - k0 < %d ? EK - k0 : %d;", CG_OUTER_BLOCK, CG_OUTER_BLOCK);
    cg_unravel(e, "out", 0, lay->nkept);
    for (int i = 0; i < lay->naccess; i++)
        cg_line(e, "o%d_0 += k0 * P[%d];", i, lay->access[i].param_offset + 1 + last);
    char blk[16];
    cg_fmt(blk, sizeof blk, "%d", CG_OUTER_BLOCK);
    cg_declare_results(e, blk);
    for (int q = 0; q < kn->npasses; q++) {
        cg_open_block(e, "{ /* pass %d */", q);
        bool pos = cg_pass_tracks_pos(kn, q);
        cg_declare_accs(e, q, blk, "K");
        if (pos) cg_line(e, "const int64_t pos0 = 0;");
        int opened = 0;
        for (int ax = lay->nkept; ax < last; ax++, opened++) cg_open_level(e, ax, q, NULL, NULL, pos);
        cg_hoist_invariants(e, q);
        char posx[16];
        cg_fmt(posx, sizeof posx, "pos%d", e->level);
        cg_open_block(e, "for (int64_t kk = 0; kk < K; kk++) {");
        cg_emit_pass_body(e, q, "kk", ACC_ARRAY, "kk", posx);
        cg_close_block(e);
        while (opened--) cg_close_level(e);
        cg_open_block(e, "for (int64_t kk = 0; kk < K; kk++) {");
        cg_finish_into(e, q, "kk", "kk");
        cg_close_block(e);
        cg_close_block(e);
    }
    cg_hoist_invariants(e, kn->npasses);
    cg_open_block(e, "for (int64_t kk = 0; kk < K; kk++) { /* epilogue */");
    cg_emit_body(e, kn->npasses, "kk", ACC_ARRAY, "e");
    cg_close_block(e);
    if (kn->row) {
        int reg = kn->npasses + 1, opened = 0;
        cg_open_block(e, "{ /* row pass */");
        for (int ax = lay->nkept; ax < last; ax++, opened++) cg_open_level(e, ax, reg, NULL, NULL, false);
        cg_hoist_invariants(e, reg);
        cg_open_block(e, "for (int64_t kk = 0; kk < K; kk++) {");
        cg_emit_body(e, reg, "kk", ACC_ARRAY, "r");
        cg_close_block(e);
        while (opened--) cg_close_level(e);
        cg_close_block(e);
    }
    cg_close_block(e);
    cg_close_block(e);
}

/* lo, hi: the outermost-axis range of block blk (FULL). */
static void block_bounds(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    cg_line(e, "const int64_t lo = blk * P[%d];", lay->param_full_block);
    cg_line(e, "const int64_t hi = P[%d] - lo < P[%d] ? P[%d] : lo + P[%d];", lay->param_extent,
         lay->param_full_block, lay->param_extent, lay->param_full_block);
}


static void emit_full(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    for (int q = 0; q < kn->npasses; q++) {
        int nq = cg_pass_reductions(kn, q);
        char sig[256];
        cg_fmt(sig, sizeof sig,
                 "pass%d(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R, "
                 "int64_t begin, int64_t end, lf_partial *restrict part)",
                 q);
        open_fn(e, sig);
        cg_line(e, "(void)R;");
        cg_declare_buffers(e);
        cg_open_block(e, "for (int64_t blk = begin; blk < end; blk++) {");
        block_bounds(e);
        cg_unravel(e, "0", 0, 0);
        char lanes[16];
        cg_fmt(lanes, sizeof lanes, "%d", CG_LANES);
        cg_declare_accs(e, q, lanes, lanes);
        emit_lane_nest(e, q, ACC_R, "lo", "hi");
        combine_lanes(e, q);
        for (int j = 0, m = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            cg_line(e, "part[blk * %d + %d].v.%s = acc%d[0];", nq, m, cg_red_float(r) ? "f" : "i", j);
            if (cg_red_arg(r)) cg_line(e, "part[blk * %d + %d].arg = arg%d[0];", nq, m, j);
            else cg_line(e, "part[blk * %d + %d].arg = -1;", nq, m);
            m++;
        }
        cg_close_block(e);
        cg_close_block(e);

        cg_fmt(sig, sizeof sig,
                 "fin%d(const int64_t *restrict P, lf_value *restrict R, const lf_partial *restrict "
                 "part, int64_t nblocks)",
                 q);
        open_fn(e, sig);
        for (int j = 0, m = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            bool fl = cg_red_float(r);
            cg_open_block(e, "{ /* n%d %s */", r->node->id, graph_reds[r->op].text);
            cg_line(e, "%s acc%d[1] = {%s};", cg_acc_type(r), j, cg_red_init(r));
            cg_line(e, "int64_t arg%d[1] = {-1};", j);
            cg_open_block(e, "for (int64_t b = 0; b < nblocks; b++) {");
            char a[32], g[32], b[64], bg[64];
            cg_fmt(a, sizeof a, "acc%d[0]", j);
            cg_fmt(g, sizeof g, "arg%d[0]", j);
            cg_fmt(b, sizeof b, "part[b * %d + %d].v.%s", nq, m, fl ? "f" : "i");
            cg_fmt(bg, sizeof bg, "part[b * %d + %d].arg", nq, m);
            cg_emit_combine(e, r, a, g, b, bg);
            cg_close_block(e);
            expr_buf v;
            cg_finish_value(e, r, a, g, v, sizeof v);
            cg_line(e, "R[%d].%s = %s;", j, graph_dtype_is_float(r->node->dtype) ? "f" : "i", v);
            cg_close_block(e);
            m++;
        }
        cg_line(e, "(void)P;");
        cg_close_block(e);
    }
    open_fn(e, "epi(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R)");
    cg_declare_buffers(e);
    cg_unravel(e, "0", 0, 0);
    cg_emit_body(e, kn->npasses, NULL, ACC_R, "e");
    cg_close_block(e);
    if (kn->row) {
        open_fn(e, "row(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R, "
                   "int64_t begin, int64_t end)");
        cg_declare_buffers(e);
        cg_open_block(e, "for (int64_t blk = begin; blk < end; blk++) {");
        block_bounds(e);
        cg_unravel(e, "0", 0, 0);
        emit_row_nest(e, ACC_R, "lo", "hi");
        cg_close_block(e);
        cg_close_block(e);
    }
}


/* ---- scans (CG_SCAN) ----------------------------------------------------------------------- */

enum { SCAN_GROUP = 4 }; /* blocks one thread scans at once (independent chains) */

static const char *scan_acc_type(const fuse_kernel *kn) { return cg_red_float(&kn->reds[0]) ? "double" : "int64_t"; }

/* The blocks [begin, end) of the one row: groups of SCAN_GROUP full blocks,
 * then one at a time. init(l) is each block's starting value; epi: scan
 * with the epilogue, else fold the totals into part. */
static void scan_blocks(cg_emitter *e, bool epi) {
    const fuse_kernel *kn = e->kn;
    const char *T = scan_acc_type(kn), *X = cg_red_float(&kn->reds[0]) ? "f" : "i";
    expr_buf idb;
    const char *id = cg_scan_identity(&kn->reds[0], idb, sizeof idb);
    int B = LF_SCAN_BLOCK, G = SCAN_GROUP;
    cg_line(e, "int64_t blk = begin;");
    cg_open_block(e, "for (; blk + %d <= end && (blk + %d) * %d <= E; blk += %d) {", G, G, B, G);
    cg_line(e, "%s acc0[%d];", T, G);
    if (epi) cg_line(e, "for (int64_t l = 0; l < %d; l++) acc0[l] = part[blk + l].v.%s;", G, X);
    else cg_line(e, "for (int64_t l = 0; l < %d; l++) acc0[l] = %s;", G, id);
    cg_open_block(e, "for (int64_t j = 0; j < %d; j++) {", B);
    cg_line(e, "_Pragma(\"GCC unroll %d\")", G);
    cg_open_block(e, "for (int64_t l = 0; l < %d; l++) {", G);
    cg_line(e, "const int64_t jj = (blk + l) * %d + j;", B);
    cg_emit_scan_element(e, "jj", "l", false, epi);
    cg_close_block(e);
    cg_close_block(e);
    if (!epi) cg_line(e, "for (int64_t l = 0; l < %d; l++) part[blk + l].v.%s = acc0[l], part[blk + l].arg = -1;", G, X);
    cg_close_block(e);
    cg_open_block(e, "for (; blk < end; blk++) {");
    cg_line(e, "%s acc0[1] = {%s};", T, epi ? "0" : id);
    if (epi) cg_line(e, "acc0[0] = part[blk].v.%s;", X);
    cg_line(e, "const int64_t j1 = E - blk * %d < %d ? E : (blk + 1) * %d;", B, B, B);
    cg_open_block(e, "for (int64_t jj = blk * %d; jj < j1; jj++) {", B);
    cg_emit_scan_element(e, "jj", "0", false, epi);
    cg_close_block(e);
    if (!epi) cg_line(e, "part[blk].v.%s = acc0[0], part[blk].arg = -1;", X);
    cg_close_block(e);
}

/* Whether the rows of a scan lie end to end for every access: the last kept
 * axis steps by the row's extent times the scanned axis' step (a C-ordered
 * array, or a broadcast along both), so row out + l's element j is the
 * element j + l * E of row out, and no access has a non-affine map or a
 * gather. Then rows out .. out + SCAN_GROUP - 1 (within one run of the last
 * kept axis) are scanned together: SCAN_GROUP dependency chains instead of
 * one, each row still folded in its own order. */
static bool scan_rows_end_to_end(const cg_layout *lay) {
    if (lay->nkept < 1) return false;
    int k = lay->nkept - 1, in = lay->ndim - 1;
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->param_steps >= 0 || a->param_gather >= 0) return false;
        if (a->strides[k] != lay->extent[in] * a->strides[in]) return false;
    }
    return true;
}

/* Rows out .. out + G - 1 of a scan's run, in one pass each, side by side
 * (G > 1 only where scan_rows_end_to_end holds: row out + l's element j is
 * element j + l * E of row out): per row the running value (acc0[l], which
 * starts each LF_SCAN_BLOCK block at the block's offset) and the block's
 * total (tot[l], from the identity, folded into the offset off[l] at the
 * block's end), each row folded in its own order. */
static void scan_rows(cg_emitter *e, int G) {
    const fuse_kernel *kn = e->kn;
    const fuse_red *r = &kn->reds[0];
    expr_buf idb;
    const char *T = scan_acc_type(kn), *id = cg_scan_identity(r, idb, sizeof idb);
    int B = LF_SCAN_BLOCK;
    cg_line(e, "%s off[%d], acc0[%d], tot[%d];", T, G, G, G);
    cg_line(e, "for (int64_t l = 0; l < %d; l++) off[l] = %s;", G, id);
    cg_open_block(e, "for (int64_t j0 = 0; j0 < E; j0 += %d) {", B);
    cg_line(e, "const int64_t j1 = E - j0 < %d ? E : j0 + %d;", B, B);
    cg_line(e, "for (int64_t l = 0; l < %d; l++) acc0[l] = off[l], tot[l] = %s;", G, id);
    cg_open_block(e, "for (int64_t j = j0; j < j1; j++) {");
    cg_line(e, "_Pragma(\"GCC unroll %d\")", G);
    cg_open_block(e, "for (int64_t l = 0; l < %d; l++) {", G);
    cg_line(e, "const int64_t jj = j + l * E; /* row out + l */");
    cg_emit_scan_element(e, "jj", "l", true, true);
    cg_close_block(e);
    cg_close_block(e);
    cg_open_block(e, "for (int64_t l = 0; l < %d; l++) {", G);
    cg_emit_scan_fold_acc(e, r, "off[l]", "tot[l]");
    cg_close_block(e);
    cg_close_block(e);
}

static void emit_scan(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    const fuse_red *r = &kn->reds[0];
    expr_buf idb;
    const char *T = scan_acc_type(kn), *X = cg_red_float(r) ? "f" : "i", *id = cg_scan_identity(r, idb, sizeof idb);
    int inner = lay->ndim - 1;
    /* rows, each in one pass; SCAN_GROUP rows at once where they lie end to
       end (scan_rows_end_to_end), so a thread runs that many chains */
    open_fn(e, "run(" ARGS_RUN ")");
    cg_declare_buffers(e);
    cg_line(e, "const int64_t E = P[%d];", lay->param_extent + inner);
    cg_open_block(e, "for (int64_t out = begin; out < end; out++) {");
    cg_unravel(e, "out", 0, lay->nkept);
    cg_hoist_invariants(e, 0);
    cg_hoist_invariants(e, kn->npasses);
    if (scan_rows_end_to_end(lay)) {
        cg_line(e, "const int64_t Ek = P[%d];", lay->param_extent + lay->nkept - 1);
        cg_open_block(e, "if (end - out >= %d && out %% Ek + %d <= Ek) {", SCAN_GROUP, SCAN_GROUP);
        scan_rows(e, SCAN_GROUP);
        cg_line(e, "out += %d - 1;", SCAN_GROUP);
        cg_line(e, "continue;");
        cg_close_block(e);
    }
    scan_rows(e, 1);
    cg_close_block(e);
    cg_close_block(e);
    /* one row over threads: block totals, offsets, blocks from their offsets */
    const char *sig_pass = "pass0(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R, "
                           "int64_t begin, int64_t end, lf_partial *restrict part)";
    for (int epi = 0; epi < 2; epi++) {
        open_fn(e, epi ? "scan(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R, "
                         "int64_t begin, int64_t end, lf_partial *restrict part)"
                       : sig_pass);
        cg_line(e, "(void)R;");
        cg_declare_buffers(e);
        cg_line(e, "const int64_t E = P[%d];", lay->param_extent + inner);
        cg_unravel(e, "0", 0, lay->nkept);
        cg_hoist_invariants(e, 0);
        if (epi) cg_hoist_invariants(e, kn->npasses);
        scan_blocks(e, epi);
        cg_close_block(e);
    }
    /* offsets of blocks [0, nblocks) of part from their totals, in block
       order, starting from the carry R[0] when R[1].i is 1 (else, and when R
       is NULL, from the identity); R[0] then holds the fold up to the last
       block: the host chains calls */
    open_fn(e, "fin0(const int64_t *restrict P, lf_value *restrict R, lf_partial *restrict part, int64_t nblocks)");
    cg_line(e, "(void)P;");
    cg_line(e, "%s off = R && R[1].i == 1 ? (%s)R[0].%s : %s;", T, T, X, id);
    cg_open_block(e, "for (int64_t b = 0; b < nblocks; b++) {");
    cg_line(e, "const %s t = part[b].v.%s;", T, X);
    cg_line(e, "part[b].v.%s = off;", X);
    cg_emit_scan_fold_acc(e, r, "off", "t");
    cg_close_block(e);
    cg_line(e, "if (R) R[0].%s = off;", X);
    cg_close_block(e);
}

/* A scatter kernel (plan_scatter.c): lf_k_run over blocks of positions, each
 * folding into its own partials in position order (the elementwise loop
 * nest of the block's range); lf_k_row over destination elements: dst, then
 * the partials in block order. */
static void emit_scatter(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1, ps = lay->param_scatter;
    open_fn(e, "run(" ARGS_RUN ")");
    cg_declare_buffers(e);
    cg_line(e, "const int64_t E = P[%d], BS = P[%d], N = P[%d], DN = P[%d];", lay->param_extent + inner, ps, ps + 1,
            ps + 2);
    cg_open_block(e, "for (int64_t blk = begin; blk < end; blk++) {");
    cg_line(e, "lf_partial *restrict sp = b%d + blk * DN;", lay->part_buf);
    cg_open_block(e, "for (int64_t t = 0; t < DN; t++) {");
    cg_emit_scatter_init(e, "sp[t]");
    cg_close_block(e);
    cg_line(e, "const int64_t stop = N - blk * BS < BS ? N : blk * BS + BS;");
    cg_line(e, "int64_t at = blk * BS;");
    emit_flat_range(e, "stop");
    cg_close_block(e);
    cg_close_block(e);
    open_fn(e, "row(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R, int64_t begin, "
               "int64_t end)");
    cg_declare_buffers(e);
    cg_line(e, "(void)R;");
    cg_line(e, "const int64_t DN = P[%d], NB = P[%d];", ps + 2, ps + 3);
    cg_line(e, "const lf_partial *restrict sp = b%d;", lay->part_buf);
    cg_open_block(e, "for (int64_t t = begin; t < end; t++) {");
    cg_emit_scatter_finish(e, "t", "NB", "DN");
    cg_close_block(e);
    cg_close_block(e);
}

/* A sort kernel (plan_sort.c): int lf_k_run(B, P, begin, end) writes the
 * sort keys of flat positions [begin, end) of its space (rows one after the
 * other, the sorted axis innermost) to the work array at position -
 * begin, and returns whether one of the values is a float its key does
 * not give back (-0.0, a NaN other than the canonical one: lf_sodd_*);
 * lf_k_raw(B, P, begin, end) writes the values themselves (the body's
 * dtype) the same way. The work array is passed as B[buf of store
 * 0]; the backend sorts the rows and writes the slots. */
static void emit_sort(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1;
    cg_emit_sort_key_defs(e);
    for (int raw = 0; raw < 2; raw++) {
        e->sort_raw = raw;
        if (raw) open_fn(e, "raw(" ARGS_RUN ")");
        else { /* returns whether a value of the range is one its key does not give back */
            cg_open_block(e, "%s int lf_k_run(" ARGS_RUN ") {", e->d->entry);
            e->level = 0;
            e->scalars_local = false;
            cg_line(e, "int lf_odd = 0;");
        }
        cg_declare_buffers(e);
        int wb = -1;
        for (int i = 0; i < lay->naccess; i++)
            if (lay->access[i].fn < 0 && lay->access[i].index == 0) wb = lay->access[i].buf;
        cg_line(e, "void *restrict lf_w = B[%d];", wb);
        cg_line(e, "const int64_t lf_base = begin;");
        cg_line(e, "const int64_t E = P[%d];", lay->param_extent + inner);
        cg_line(e, "int64_t at = begin;");
        emit_flat_range(e, "end");
        if (!raw) cg_line(e, "return lf_odd;");
        cg_close_block(e);
    }
    e->sort_raw = false;
}

/* The C skeleton of each kernel kind (codegen.h's cg_dialect.skeleton). A
 * contraction's reduction first tries its packed GEMM (emit_contract.c: the
 * layout found its M, N and K axes), then, for an inner one, its rows of
 * outputs side by side; else the generic skeleton. */
static void emit_inner_kind(cg_emitter *e) {
    if (!cg_emit_contract_gemm(e) && !cg_emit_contract_rows(e)) emit_inner(e);
}

static void emit_outer_kind(cg_emitter *e) {
    if (!cg_emit_contract_gemm(e)) emit_outer(e);
}

cg_skeleton *const cg_c_skeletons[FUSE_KERNEL_NKINDS] = {
    [FUSE_KERNEL_ELEMENTWISE] = emit_elementwise,
    [FUSE_KERNEL_REDUCE_FULL] = emit_full,
    [FUSE_KERNEL_REDUCE_INNER] = emit_inner_kind,
    [FUSE_KERNEL_REDUCE_OUTER] = emit_outer_kind,
    [FUSE_KERNEL_SCAN] = emit_scan,
    [FUSE_KERNEL_SCATTER] = emit_scatter,
    [FUSE_KERNEL_SORT] = emit_sort,
};

/* A sort kernel's store 0 in C: the key (or, with e->sort_raw, the value
 * itself) into the work array lf_w at the position relative to lf_base; the
 * backend sorts it and writes the slots (backends/cpu/sort_kernel.c). */
void cg_c_sort_store(cg_emitter *e, const char *idx, const char *key, const char *x, lf_dtype from) {
    if (e->sort_raw) {
        if (from == LF_BOOL) cg_line(e, "((uint8_t *)lf_w)[%s - lf_base] = (uint8_t)((%s) != 0);", idx, x);
        else cg_line(e, "((%s *)lf_w)[%s - lf_base] = %s;", e->d->type[from], idx, x);
        return;
    }
    cg_line(e, "((%s *)lf_w)[%s - lf_base] = %s; /* sort key -> n%d */",
            graph_sort_key_wide(from) ? "uint64_t" : "uint32_t", idx, key, e->kn->sort->id);
    if (graph_dtypes[from].sort_key == SORT_KEY_FLOAT) /* lf_k_run returns whether a value needs lf_k_raw */
        cg_line(e, "lf_odd |= lf_sodd_%s(%s);", lf_dtype_name(from), x);
}

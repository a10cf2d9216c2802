/* codegen/emit_contract.c: contractions (lazyfuse.h, "Contractions";
 * graph/contract.c) in generated code.
 *
 * The generic reduction skeletons (inner lanes, outer arrays, full blocks,
 * both dialects) fold a contraction with cg_emit_contract_fold: its own
 * sequential chain of fmaf steps per output element, in ascending order,
 * flushed into the double accumulator every LF_CONTRACT_BLOCK steps and
 * after the last. What keeps that the order of lazyfuse.h: an inner lane
 * nest folds every position into slot 0; a full reduction of a kernel with
 * a contraction is one block (layout.c) and, on CUDA, one thread
 * (emit_cuda.c's plan); CUDA's inner reductions give such a kernel one
 * thread per output. A C inner-reduction kernel of contractions alone runs
 * several outputs' chains side by side (contraction rows, below), each in
 * that same order.
 */
#include "codegen/emit.h"

#include <string.h>

void cg_emit_contract_fold(cg_emitter *e, int j, int cx, int cy, const char *slot) {
    if (e->contract_rows) { /* the block loop of emit_rows closes each block */
        cg_line(e, "cp%d_%s = fmaf(v%d, v%d, cp%d_%s); /* contraction n%d */", j, slot, cx, cy, j, slot,
                e->kn->reds[j].node->id);
        return;
    }
    const char *s = strcmp(slot, "l") ? slot : "0";
    cg_line(e, "cp%d[%s] = fmaf(v%d, v%d, cp%d[%s]); /* contraction n%d */", j, s, cx, cy, j, s,
            e->kn->reds[j].node->id);
    cg_open_block(e, "if ((++cn%d[%s] & %d) == 0 || cn%d[%s] == P[%d]) {", j, s, LF_CONTRACT_BLOCK - 1, j, s,
                  e->lay->param_count);
    cg_line(e, "acc%d[%s] += (double)cp%d[%s];", j, s, j, s);
    cg_line(e, "cp%d[%s] = 0.0f;", j, s);
    cg_close_block(e);
}

bool cg_kernel_contracts(const fuse_kernel *kn) {
    int x, y;
    for (int j = 0; j < kn->nreds; j++)
        if (fuse_red_contraction(kn, j, &x, &y)) return true;
    return false;
}

/* ---- the packed GEMM kernel (CPU) ------------------------------------------------------------
 *
 * A kernel whose one reduction is a contraction, with one pass, no row pass,
 * no gather, on an inner or outer layout with one reduced loop axis, whose
 * x loads do not move along a kept loop axis N and whose y loads do not
 * move along another kept loop axis M (cg_contract_layout), is printed as a
 * packed, cache-blocked GEMM (Goto's loops; BLIS names them jc, pc, ic,
 * jr, ir) instead of the generic skeleton:
 *
 *   work item u: (batch b, block of GEMM_MC rows of M, block of GEMM_NC
 *   columns of N), so a result never depends on the thread count (no
 *   split of K); for each block of LF_CONTRACT_BLOCK positions of K (the
 *   contraction's block, so the packed K loop is its block): pack y of the
 *   block (KC x NC, micro-panels of LF_NR columns, zero-padded) and x
 *   (MC x KC, micro-panels of LF_MR rows, zero-padded), each packed
 *   element computed by the pass fn (the prologue maps applied while
 *   packing); then per micro-tile LF_MR x LF_NR the micro-kernel: float
 *   accumulators from +0.0f, one explicit FMA per element and k in
 *   ascending order (so each lane computes graph_contract_fold's partial
 *   of its block), added into the item's double scratch Cd (from 0.0).
 *   Last, each output element: res0 = (float)Cd, the epilogue and its
 *   stores at the element (relu(C + bias) fused into the store).
 *
 * An element at a tile edge gets the same bits as one inside: padding
 * adds zero-valued rows and columns that are never stored, and every
 * element's K sequence is the same whole sequence. The FMA is
 * __builtin_ia32_vfmaddps512_mask on AVX-512 (16 lanes, LF_NR = 32),
 * __builtin_ia32_vfmaddps256 with FMA (8 lanes), fmaf per lane otherwise
 * (-ffp-contract is off, so a * b + c would round twice). Packing buffers
 * and Cd live on the worker's stack (GEMM_MC x GEMM_NC: about 640 KB).
 */
enum { GEMM_MC = 128, GEMM_NC = 256, GEMM_MR = 8 };

/* Bit j: expression i of f reads load j (at most 64 loads). */
static void load_deps(const lf_fn *f, uint64_t *dep) {
    for (int i = 0; i < f->nexprs; i++) {
        const fn_expr *x = &f->exprs[i];
        dep[i] = x->kind == EXPR_PARAM ? (uint64_t)1 << x->param : 0;
        for (int k = 0; k < 3; k++)
            if ((x->kind == EXPR_OP || x->kind == EXPR_CAST || x->kind == EXPR_CALL) && x->arg[k] >= 0) dep[i] |= dep[x->arg[k]];
    }
}

void cg_contract_layout(cg_layout *lay) {
    lay->gemm_m = lay->gemm_n = lay->gemm_k = -1;
    const fuse_kernel *kn = lay->kernel;
    int cx, cy;
    if (kn->kind == FUSE_KERNEL_SCAN || kn->row || kn->npasses != 1 || kn->nreds != 1 || lay->err_buf >= 0)
        return;
    if ((lay->strategy != CG_REDUCE_INNER && lay->strategy != CG_REDUCE_OUTER) || lay->nred != 1) return;
    if (!fuse_red_contraction(kn, 0, &cx, &cy)) return;
    for (int a = 0; a < lay->naccess; a++)
        if (lay->access[a].param_gather >= 0) return;
    const lf_fn *f = kn->passes[0].fn;
    uint64_t dep[FUSE_MAX_OPS * 4 + 64];
    if (f->nexprs > (int)(sizeof dep / sizeof dep[0])) return;
    load_deps(f, dep);
    int kept[LF_MAX_DIMS], nk = 0;
    for (int ax = 0; ax < lay->nkept; ax++) kept[nk++] = ax;
    if (lay->strategy == CG_REDUCE_OUTER) kept[nk++] = lay->ndim - 1;
    bool xz[LF_MAX_DIMS], yz[LF_MAX_DIMS];
    for (int i = 0; i < nk; i++) {
        int ax = kept[i];
        xz[ax] = yz[ax] = true;
        for (int j = 0; j < kn->passes[0].nloads; j++) {
            const cg_access *a = cg_load_access(lay, 0, j);
            bool moves = a->strides[ax] != 0;
            if ((dep[cx] >> j & 1) && moves) xz[ax] = false;
            if ((dep[cy] >> j & 1) && moves) yz[ax] = false;
        }
    }
    int an = -1, am = -1;
    for (int i = nk - 1; i >= 0 && an < 0; i--) /* N: x does not move along it, y does */
        if (xz[kept[i]] && !yz[kept[i]]) an = kept[i];
    for (int i = nk - 1; i >= 0 && am < 0; i--)
        if (kept[i] != an && yz[kept[i]] && !xz[kept[i]]) am = kept[i];
    if (an < 0 || am < 0) return;
    lay->gemm_m = am;
    lay->gemm_n = an;
    lay->gemm_k = lay->nkept;
    int64_t w = 1;
    for (int i = 0; i < nk; i++)
        if (kept[i] != am && kept[i] != an) w *= lay->extent[kept[i]];
    int64_t EM = lay->extent[am], EN = lay->extent[an];
    lay->work = w * ((EM + GEMM_MC - 1) / GEMM_MC) * ((EN + GEMM_NC - 1) / GEMM_NC);
}

/* The vector type, FMA and micro-kernel, once per unit. */
static void gemm_defs(cg_emitter *e) {
    cg_printf(e->t,
              "#ifndef LF_GEMM_DEFS\n#define LF_GEMM_DEFS\n"
              "/* contractions: one explicit FMA per element (graph_contract_fold's step) */\n"
              "#if defined(__GNUC__) && defined(__AVX512F__)\n"
              "typedef float lf_vf __attribute__((vector_size(64), may_alias));\n"
              "#define LF_VW 16\n"
              "LF_INLINE lf_vf lf_vfma(lf_vf a, lf_vf b, lf_vf c) { return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4); }\n"
              "#define LF_BCAST(s) ((lf_vf){s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s})\n"
              "#elif defined(__GNUC__) && defined(__FMA__)\n"
              "typedef float lf_vf __attribute__((vector_size(32), may_alias));\n"
              "#define LF_VW 8\n"
              "LF_INLINE lf_vf lf_vfma(lf_vf a, lf_vf b, lf_vf c) { return __builtin_ia32_vfmaddps256(a, b, c); }\n"
              "#define LF_BCAST(s) ((lf_vf){s, s, s, s, s, s, s, s})\n"
              "#else\n"
              "typedef float lf_vf __attribute__((vector_size(16), may_alias));\n"
              "#define LF_VW 4\n"
              "LF_INLINE lf_vf lf_vfma(lf_vf a, lf_vf b, lf_vf c) {\n"
              "    lf_vf r;\n"
              "    for (int i = 0; i < 4; i++) r[i] = fmaf(a[i], b[i], c[i]);\n"
              "    return r;\n"
              "}\n"
              "#define LF_BCAST(s) ((lf_vf){s, s, s, s})\n"
              "#endif\n"
              "#define LF_MR %d\n#define LF_NR (2 * LF_VW)\n#define LF_KC %d\n"
              "/* C (LF_MR x LF_NR doubles, row stride ldc) += the float products of\n"
              "   kc steps from +0.0f: a, kc x LF_MR (packed), b, kc x LF_NR (packed) */\n"
              "static void lf_gemm_micro(int64_t kc, const float *restrict a, const float *restrict b, double *restrict C,\n"
              "                          int64_t ldc) {\n",
              GEMM_MR, LF_CONTRACT_BLOCK);
    for (int m = 0; m < GEMM_MR; m++) cg_printf(e->t, "    lf_vf c%d0 = {0}, c%d1 = {0};\n", m, m);
    cg_printf(e->t, "    for (int64_t k = 0; k < kc; k++) {\n"
                    "        const lf_vf b0 = *(const lf_vf *)(b + k * LF_NR), b1 = *(const lf_vf *)(b + k * LF_NR + LF_VW);\n");
    for (int m = 0; m < GEMM_MR; m++)
        cg_printf(e->t,
                  "        { const float s = a[k * LF_MR + %d]; const lf_vf av = LF_BCAST(s);"
                  " c%d0 = lf_vfma(av, b0, c%d0); c%d1 = lf_vfma(av, b1, c%d1); }\n",
                  m, m, m, m, m);
    cg_printf(e->t, "    }\n");
    /* one loop nest for the double update (eight small loops cost gcc 0.4 s
       of loop distribution) */
    cg_printf(e->t, "    float t[LF_MR * LF_NR] __attribute__((aligned(64)));\n");
    for (int m = 0; m < GEMM_MR; m++)
        cg_printf(e->t, "    *(lf_vf *)(t + %d * LF_NR) = c%d0, *(lf_vf *)(t + %d * LF_NR + LF_VW) = c%d1;\n", m, m, m, m);
    cg_printf(e->t, "    for (int m = 0; m < LF_MR; m++)\n"
                    "        for (int j = 0; j < LF_NR; j++) C[m * ldc + j] += (double)t[m * LF_NR + j];\n"
                    "}\n#endif\n");
}

/* o<a>_1 of the accesses of region reg (all pass loads for reg 0) at batch
 * base bo<a> plus the given loop-axis indices (NULL: not added). */
static void gemm_offsets(cg_emitter *e, int reg, const char *im, const char *ik, const char *in) {
    const cg_layout *lay = e->lay;
    for (int a = 0; a < lay->naccess; a++) {
        const cg_access *ac = &lay->access[a];
        if (!cg_in_region(e, ac, reg)) continue;
        int s = ac->param_offset + 1;
        char t[160];
        int n = snprintf(t, sizeof t, "bo%d", a);
        if (im) n += snprintf(t + n, sizeof t - (size_t)n, " + (%s) * (lf_idx)P[%d]", im, s + lay->gemm_m);
        if (ik) n += snprintf(t + n, sizeof t - (size_t)n, " + (%s) * (lf_idx)P[%d]", ik, s + lay->gemm_k);
        if (in) snprintf(t + n, sizeof t - (size_t)n, " + (%s) * (lf_idx)P[%d]", in, s + lay->gemm_n);
        cg_line(e, "const lf_idx o%d_1 = %s;", a, t);
    }
}

static void emit_gemm(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    int cx, cy, am = lay->gemm_m, an = lay->gemm_n, ak = lay->gemm_k;
    fuse_red_contraction(kn, 0, &cx, &cy);
    gemm_defs(e);
    cg_open_block(e, "%s void lf_k_run(void *const *restrict B, const int64_t *restrict P, int64_t begin, int64_t end) {",
                  e->d->entry);
    e->level = 1;
    cg_declare_buffers(e);
    cg_line(e, "/* packed GEMM of contraction n%d (emit_contract.c) */", kn->reds[0].node->id);
    cg_line(e, "const int64_t EM = P[%d], EN = P[%d], EK = P[%d];", lay->param_extent + am, lay->param_extent + an,
            lay->param_extent + ak);
    cg_line(e, "const int64_t nmb = (EM + %d) / %d, nnb = (EN + %d) / %d;", GEMM_MC - 1, GEMM_MC, GEMM_NC - 1, GEMM_NC);
    cg_line(e, "float Ap[%d * LF_KC] __attribute__((aligned(64)));", GEMM_MC);
    cg_line(e, "float Bp[%d * LF_KC] __attribute__((aligned(64)));", GEMM_NC);
    cg_line(e, "double Cd[%d * %d] __attribute__((aligned(64)));", GEMM_MC, GEMM_NC);
    cg_open_block(e, "for (int64_t u = begin; u < end; u++) {");
    cg_line(e, "const int64_t nb = u %% nnb, mb = (u / nnb) %% nmb;");
    cg_line(e, "lf_idx bt = u / nnb / nmb, q;");
    /* batch axes: the kept loop axes other than M and N, row-major */
    for (int a = 0; a < lay->naccess; a++) cg_line(e, "lf_idx bo%d = (lf_idx)P[%d];", a, lay->access[a].param_offset);
    int kept[LF_MAX_DIMS], nk = 0;
    for (int ax = 0; ax < lay->nkept; ax++) kept[nk++] = ax;
    if (lay->strategy == CG_REDUCE_OUTER) kept[nk++] = lay->ndim - 1;
    for (int i = nk - 1; i >= 0; i--) {
        int ax = kept[i];
        if (ax == am || ax == an) continue;
        cg_line(e, "q = bt %% (lf_idx)P[%d], bt /= (lf_idx)P[%d];", lay->param_extent + ax, lay->param_extent + ax);
        for (int a = 0; a < lay->naccess; a++)
            cg_line(e, "bo%d += q * (lf_idx)P[%d];", a, lay->access[a].param_offset + 1 + ax);
    }
    cg_line(e, "(void)bt; (void)q;");
    cg_line(e, "const int64_t m0 = mb * %d, n0 = nb * %d;", GEMM_MC, GEMM_NC);
    cg_line(e, "const int64_t mc = EM - m0 < %d ? EM - m0 : %d, nc = EN - n0 < %d ? EN - n0 : %d;", GEMM_MC, GEMM_MC,
            GEMM_NC, GEMM_NC);
    cg_line(e, "const int64_t mcp = (mc + LF_MR - 1) / LF_MR * LF_MR, ncp = (nc + LF_NR - 1) / LF_NR * LF_NR;");
    cg_line(e, "for (int64_t i = 0; i < mcp; i++) for (int64_t j = 0; j < ncp; j++) Cd[i * %d + j] = 0.0;", GEMM_NC);
    cg_open_block(e, "for (int64_t k0 = 0; k0 < EK; k0 += LF_KC) {");
    cg_line(e, "const int64_t kc = EK - k0 < LF_KC ? EK - k0 : LF_KC;");
    /* pack y: Bp[(n / NR) * KC * NR + kk * NR + n % NR] */
    cg_open_block(e, "for (int64_t kk = 0; kk < kc; kk++) {");
    cg_line(e, "float *restrict bp = Bp + kk * LF_NR;");
    cg_open_block(e, "for (int64_t n = 0; n < nc; n++) {");
    gemm_offsets(e, 0, NULL, "k0 + kk", "n0 + n");
    cg_emit_body(e, 0, NULL, ACC_SCALAR, "");
    cg_line(e, "bp[n / LF_NR * LF_KC * LF_NR + n %% LF_NR] = v%d;", cy);
    cg_close_block(e);
    cg_line(e, "for (int64_t n = nc; n < ncp; n++) bp[n / LF_NR * LF_KC * LF_NR + n %% LF_NR] = 0.0f;");
    cg_close_block(e);
    /* pack x: Ap[(m / MR) * KC * MR + kk * MR + m % MR] */
    cg_open_block(e, "for (int64_t m = 0; m < mc; m++) {");
    cg_line(e, "float *restrict ap = Ap + m / LF_MR * LF_KC * LF_MR + m %% LF_MR;");
    cg_open_block(e, "for (int64_t kk = 0; kk < kc; kk++) {");
    gemm_offsets(e, 0, "m0 + m", "k0 + kk", NULL);
    cg_emit_body(e, 0, NULL, ACC_SCALAR, "");
    cg_line(e, "ap[kk * LF_MR] = v%d;", cx);
    cg_close_block(e);
    cg_close_block(e);
    cg_line(e, "for (int64_t m = mc; m < mcp; m++) for (int64_t kk = 0; kk < kc; kk++) "
               "Ap[m / LF_MR * LF_KC * LF_MR + kk * LF_MR + m %% LF_MR] = 0.0f;");
    cg_open_block(e, "for (int64_t jr = 0; jr < ncp; jr += LF_NR) {");
    cg_line(e, "for (int64_t ir = 0; ir < mcp; ir += LF_MR)");
    cg_line(e, "    lf_gemm_micro(kc, Ap + ir * LF_KC, Bp + jr * LF_KC, Cd + ir * %d + jr, %d);", GEMM_NC, GEMM_NC);
    cg_close_block(e);
    cg_close_block(e);
    /* the epilogue at each output element */
    cg_open_block(e, "for (int64_t m = 0; m < mc; m++) {");
    cg_open_block(e, "for (int64_t n = 0; n < nc; n++) {");
    cg_line(e, "const %s res0 = (float)Cd[m * %d + n];", cg_vtype(e, kn->reds[0].node->dtype), GEMM_NC);
    gemm_offsets(e, kn->npasses, "m0 + m", NULL, "n0 + n");
    cg_emit_body(e, kn->npasses, NULL, ACC_SCALAR, "e");
    cg_close_block(e);
    cg_close_block(e);
    cg_close_block(e);
    cg_close_block(e);
}

bool cg_emit_contract_gemm(cg_emitter *e) {
    if (e->lay->gemm_m < 0) return false;
    emit_gemm(e);
    return true;
}

/* ---- contraction rows (C REDUCE_INNER) ----------------------------------------------------------
 *
 * The generic inner skeleton folds one output at a time, and a contraction
 * folds all of an output's positions into one fmaf chain (slot 0), so each
 * step waits for the one before: a matvec ran at the FMA latency, 4 cycles
 * an element. Here a group of outputs (CG_VECTOR_ROWS on the vector rows
 * below when they fit, then CG_CONTRACT_ROWS, then single outputs for the
 * rest of the range) runs its chains side by side: per block of
 * LF_CONTRACT_BLOCK reduced positions, every output of the group keeps a
 * float partial cp<j>_<r> from +0.0f, the position loop folds each output's
 * product into its own partial (positions ascending), and at the block's
 * end each partial is added into the output's double acc<j>[r], whose
 * initial value is the generic skeleton's. That is graph_contract_fold's
 * order for every output: the grouping changes which instructions
 * interleave, never an output's sequence of roundings, so the bits do not
 * depend on the group, the range or the thread count. Each output's offsets
 * are unravelled once (g<r>_<a>); its loads in the position loop are the
 * generic ones at o<a>_0 = g<r>_<a> (invariant loads are re-read there, and
 * the compiler hoists them). */
/* Outputs per group: scalar chains; vector rows (a multiple of 8; 32 ran
 * 1.4-4x slower than 16 at sides 1024 and 2048, benches/measured/62-matvec.md) */
enum { CG_CONTRACT_ROWS = 8, CG_VECTOR_ROWS = 16 };

static bool rows_fit(const cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    if (lay->strategy != CG_REDUCE_INNER || lay->gemm_m >= 0 || lay->nred != 1) return false;
    if (kn->row || kn->npasses != 1 || kn->nreds < 1 || lay->err_buf >= 0)
        return false;
    int cx, cy;
    for (int j = 0; j < kn->nreds; j++)
        if (!fuse_red_contraction(kn, j, &cx, &cy)) return false;
    for (int a = 0; a < lay->naccess; a++)
        if (lay->access[a].param_gather >= 0 || lay->access[a].param_split >= 0) return false;
    for (int t = 0; t < kn->nstores; t++)
        if (kn->stores[t].pos) return false;
    return true;
}

/* Whether access a does not move along the kept axes (a matvec's vector):
 * its offset is the same for every output, so the group reads it once per
 * position. The strides' zero pattern is structure, in the kernel text. */
static bool same_for_outputs(const cg_layout *lay, const cg_access *a) {
    for (int ax = 0; ax < lay->nkept; ax++)
        if (a->strides[ax] != 0) return false;
    return true;
}

/* The plain load access of pass 0's expression i (a float32 buffer read
 * at a contiguous position, nothing computed), or NULL. */
static const cg_access *plain_load(const cg_emitter *e, int i) {
    const fn_expr *x = &e->kn->passes[0].fn->exprs[i];
    if (x->kind != EXPR_PARAM) return NULL;
    const cg_access *a = cg_load_access(e->lay, 0, x->param);
    if (!a || a->buf < 0 || a->dtype != LF_F32 || a->inner != CG_INNER_CONTIGUOUS || a->param_steps >= 0) return NULL;
    if (e->s->slots[e->lay->buf_slot[a->buf]].dtype != LF_F32) return NULL;
    return a;
}

/* Vector rows (lanes of 8 outputs, CG_VECTOR_ROWS / 8 chains): for a kernel
 * whose one contraction multiplies a plain load that moves with the outputs
 * (the matrix, *mat) by a plain load that does not (the vector, *vec), the
 * group loads 8 positions of each of its 8 rows, transposes the 8 x 8 tile
 * in registers, and folds column k into lane r's chain with one vector FMA
 * per position: lane r computes fmaf(A[r, k], v[k], cp_r) for k ascending,
 * graph_contract_fold's step, with no change of order. */
static bool vector_rows_fit(const cg_emitter *e, const cg_access **mat, const cg_access **vec) {
    int cx, cy;
    if (e->kn->nreds != 1 || !fuse_red_contraction(e->kn, 0, &cx, &cy)) return false;
    const cg_access *x = plain_load(e, cx), *y = plain_load(e, cy);
    if (!x || !y) return false;
    bool xs = same_for_outputs(e->lay, x), ys = same_for_outputs(e->lay, y);
    if (xs == ys) return false;
    *mat = xs ? y : x;
    *vec = xs ? x : y;
    return true;
}

/* The 8-lane float vector, its FMA and an unaligned load, once per unit. */
static void vector_rows_defs(cg_emitter *e) {
    cg_printf(e->t, "#ifndef LF_ROWS_DEFS\n#define LF_ROWS_DEFS\n"
                    "/* contraction rows: one lane per output, one fused multiply-add per step */\n"
                    "typedef float lf_v8 __attribute__((vector_size(32)));\n"
                    "#if defined(__GNUC__) && defined(__FMA__) && defined(__AVX__)\n"
                    "LF_INLINE lf_v8 lf_v8fma(lf_v8 a, lf_v8 b, lf_v8 c) { return __builtin_ia32_vfmaddps256(a, b, c); }\n"
                    "#else\n"
                    "LF_INLINE lf_v8 lf_v8fma(lf_v8 a, lf_v8 b, lf_v8 c) {\n"
                    "    for (int i = 0; i < 8; i++) c[i] = fmaf(a[i], b[i], c[i]);\n"
                    "    return c;\n"
                    "}\n"
                    "#endif\n"
                    "LF_INLINE lf_v8 lf_v8load(const float *p) { lf_v8 v; __builtin_memcpy(&v, p, sizeof v); return v; }\n"
                    "/* c[k] lane r = r[r] lane k (an 8 x 8 transpose: unpack, shuffle, lane swap) */\n"
                    "LF_INLINE void lf_v8tr(const lf_v8 *r, lf_v8 *c) {\n"
                    "#if defined(__has_builtin) && __has_builtin(__builtin_shufflevector)\n"
                    "#define LF_SH __builtin_shufflevector\n"
                    "    lf_v8 t[8], s[8];\n"
                    "    for (int i = 0; i < 4; i++) {\n"
                    "        t[2 * i] = LF_SH(r[2 * i], r[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13);\n"
                    "        t[2 * i + 1] = LF_SH(r[2 * i], r[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);\n"
                    "    }\n"
                    "    for (int i = 0; i < 2; i++) {\n"
                    "        s[4 * i] = LF_SH(t[4 * i], t[4 * i + 2], 0, 1, 8, 9, 4, 5, 12, 13);\n"
                    "        s[4 * i + 1] = LF_SH(t[4 * i], t[4 * i + 2], 2, 3, 10, 11, 6, 7, 14, 15);\n"
                    "        s[4 * i + 2] = LF_SH(t[4 * i + 1], t[4 * i + 3], 0, 1, 8, 9, 4, 5, 12, 13);\n"
                    "        s[4 * i + 3] = LF_SH(t[4 * i + 1], t[4 * i + 3], 2, 3, 10, 11, 6, 7, 14, 15);\n"
                    "    }\n"
                    "    for (int i = 0; i < 4; i++) {\n"
                    "        c[i] = LF_SH(s[i], s[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);\n"
                    "        c[i + 4] = LF_SH(s[i], s[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);\n"
                    "    }\n"
                    "#undef LF_SH\n"
                    "#else\n"
                    "    for (int k = 0; k < 8; k++)\n"
                    "        for (int i = 0; i < 8; i++) c[k][i] = r[i][k];\n"
                    "#endif\n"
                    "}\n"
                    "#endif\n");
}

/* Block k0..k1 of CG_VECTOR_ROWS outputs: CG_VECTOR_ROWS / 8 independent
 * vector chains (one would wait on the FMA latency again). */
static void emit_vector_block(cg_emitter *e, const cg_access *mat, const cg_access *vec) {
    int m = (int)(mat - e->lay->access), v = (int)(vec - e->lay->access), G = CG_VECTOR_ROWS / 8;
    for (int g = 0; g < G; g++) cg_line(e, "lf_v8 cp%d = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};", g);
    cg_line(e, "int64_t jj = k0;");
    cg_open_block(e, "for (; jj + 8 <= k1; jj += 8) {");
    cg_line(e, "lf_v8 r[8], t[8];");
    for (int g = 0; g < G; g++) {
        for (int r = 0; r < 8; r++) cg_line(e, "r[%d] = lf_v8load(b%d + g%d_%d + jj);", r, mat->buf, 8 * g + r, m);
        cg_line(e, "lf_v8tr(r, t);");
        for (int k = 0; k < 8; k++)
            cg_line(e, "{ const float s = b%d[g0_%d + jj + %d]; cp%d = lf_v8fma(t[%d], (lf_v8){s, s, s, s, s, s, s, s}, cp%d); }",
                    vec->buf, v, k, g, k, g);
    }
    cg_close_block(e);
    cg_open_block(e, "for (; jj < k1; jj++) {");
    cg_line(e, "const float s = b%d[g0_%d + jj];", vec->buf, v);
    cg_line(e, "const lf_v8 sv = {s, s, s, s, s, s, s, s};");
    for (int g = 0; g < G; g++) {
        char t[512];
        int n = 0;
        for (int r = 0; r < 8; r++)
            n += snprintf(t + n, sizeof t - (size_t)n, "%sb%d[g%d_%d + jj]", r ? ", " : "", mat->buf, 8 * g + r, m);
        cg_line(e, "cp%d = lf_v8fma((lf_v8){%s}, sv, cp%d);", g, t, g);
    }
    cg_close_block(e);
    for (int g = 0; g < G; g++)
        for (int r = 0; r < 8; r++) cg_line(e, "acc0[%d] += (double)cp%d[%d];", 8 * g + r, g, r);
}

/* Outputs [out, out + R) while they fit in [out, end), then out += R. */
static void emit_rows(cg_emitter *e, int R) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1, na = lay->naccess;
    cg_open_block(e, "for (; out + %d <= end; out += %d) {", R, R);
    for (int r = 0; r < R; r++) {
        for (int a = 0; a < na; a++) cg_line(e, "lf_idx g%d_%d;", r, a);
        cg_open_block(e, "{ /* output out + %d */", r);
        char flat[32];
        cg_fmt(flat, sizeof flat, "out + %d", r);
        cg_unravel(e, flat, 0, lay->nkept);
        for (int a = 0; a < na; a++) cg_line(e, "g%d_%d = o%d_0;", r, a, a);
        cg_close_block(e);
    }
    for (int j = 0; j < kn->nreds; j++) {
        cg_line(e, "double acc%d[%d]; /* n%d, contraction */", j, R, kn->reds[j].node->id);
        cg_line(e, "for (int l = 0; l < %d; l++) acc%d[l] = %s;", R, j, cg_red_init(&kn->reds[j]));
    }
    cg_line(e, "const int64_t K = P[%d];", lay->param_extent + inner);
    cg_open_block(e, "for (int64_t k0 = 0; k0 < K; k0 += %d) {", LF_CONTRACT_BLOCK);
    cg_line(e, "const int64_t k1 = K - k0 < %d ? K : k0 + %d;", LF_CONTRACT_BLOCK, LF_CONTRACT_BLOCK);
    const cg_access *mat, *vec;
    if (R == CG_VECTOR_ROWS && vector_rows_fit(e, &mat, &vec)) {
        emit_vector_block(e, mat, vec);
    } else {
        for (int j = 0; j < kn->nreds; j++)
            for (int r = 0; r < R; r++) cg_line(e, "float cp%d_%d = 0.0f;", j, r);
        cg_open_block(e, "for (int64_t jj = k0; jj < k1; jj++) {");
        e->contract_rows = true;
        for (int r = 0; r < R; r++) {
            char slot[16];
            cg_fmt(slot, sizeof slot, "%d", r);
            cg_open_block(e, "{");
            for (int a = 0; a < na; a++)
                cg_line(e, "const lf_idx o%d_0 = g%d_%d;", a, same_for_outputs(lay, &lay->access[a]) ? 0 : r, a);
            cg_hoist_invariants(e, 0);
            cg_emit_pass_body(e, 0, "jj", ACC_SCALAR, slot, NULL);
            cg_close_block(e);
        }
        e->contract_rows = false;
        cg_close_block(e);
        for (int j = 0; j < kn->nreds; j++)
            for (int r = 0; r < R; r++) cg_line(e, "acc%d[%d] += (double)cp%d_%d;", j, r, j, r);
    }
    cg_close_block(e);
    for (int r = 0; r < R; r++) {
        char slot[16];
        cg_fmt(slot, sizeof slot, "%d", r);
        cg_open_block(e, "{ /* output out + %d: result, epilogue */", r);
        for (int a = 0; a < na; a++) cg_line(e, "const lf_idx o%d_0 = g%d_%d;", a, r, a);
        cg_declare_results(e, NULL);
        cg_finish_into(e, 0, slot, NULL);
        cg_emit_body(e, kn->npasses, NULL, ACC_SCALAR, "e");
        cg_close_block(e);
    }
    cg_close_block(e);
}

bool cg_emit_contract_rows(cg_emitter *e) {
    if (!rows_fit(e)) return false;
    const cg_access *mat, *vec;
    if (vector_rows_fit(e, &mat, &vec)) vector_rows_defs(e);
    cg_open_block(e, "%s void lf_k_run(void *const *restrict B, const int64_t *restrict P, int64_t begin, int64_t end) {",
                  e->d->entry);
    e->level = 0;
    e->scalars_local = false;
    cg_declare_buffers(e);
    cg_line(e, "/* contraction rows: %d outputs' fmaf chains at a time (emit_contract.c) */", CG_CONTRACT_ROWS);
    cg_line(e, "int64_t out = begin;");
    if (vector_rows_fit(e, &mat, &vec)) emit_rows(e, CG_VECTOR_ROWS);
    emit_rows(e, CG_CONTRACT_ROWS);
    emit_rows(e, 1);
    cg_close_block(e);
    return true;
}

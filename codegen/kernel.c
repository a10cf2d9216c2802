/* codegen/kernel.c: cg_emit_kernel, the one place that knows both dialects'
 * skeletons: prints the dialect's prelude and the shared helpers, a comment
 * naming the kernel's strategy and graph nodes, then hands the kernel to the
 * dialect's skeleton (emit_c.c or emit_cuda.c). See codegen/emit.h.
 */
#include "codegen/emit.h"

static const char *strategy_name(cg_strategy s) {
    switch (s) {
    case CG_ELEMENTWISE: return "elementwise";
    case CG_REDUCE_FULL: return "full reduction";
    case CG_REDUCE_INNER: return "inner reduction";
    case CG_REDUCE_OUTER: return "outer reduction";
    case CG_SCAN: return "scan";
    }
    return "?";
}

void cg_emit_kernel(const fuse_schedule *s, const cg_layout *lay, const cg_dialect *d, cg_text *out) {
    cg_emitter e = {.t = out, .s = s, .lay = lay, .kn = lay->kernel, .d = d};
    const fuse_kernel *kn = lay->kernel;
    cg_printf(out, "%s%s", d->prelude, cg_prelude_helpers);
    if (d->vector_math && !d->cuda) cg_c_vmath_defs(out, kn); /* after the part every kernel shares */
    cg_emit_ufn_defs(out, lay, d); /* user functions (lf_fn_c) */
    cg_printf(out, "/* kernel: %s over %d loop axes", strategy_name(lay->strategy), lay->ndim);
    cg_printf(out, "; graph nodes:");
    for (int i = 0; i < kn->nnodes; i++) cg_printf(out, " n%d", kn->nodes[i]);
    cg_printf(out, " */\n");
    if (d->cuda) cg_emit_cuda(&e);
    else cg_emit_c(&e);
}

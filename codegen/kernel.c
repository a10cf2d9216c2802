/* codegen/kernel.c: cg_emit_kernel, the one place that picks a skeleton:
 * prints the dialect's prelude and the shared helpers, the dialect's
 * per-kernel definitions, a comment naming the kernel's strategy and graph
 * nodes, the dialect's kernel head, then the skeleton the dialect's table
 * gives for the kernel's kind (fuse_kernel_kind; the tables are in emit_c.c
 * and emit_cuda.c). No dialect is named here: a new dialect is a new
 * cg_dialect with its own table. See codegen/emit.h.
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
    if (d->kernel_defs) d->kernel_defs(out, kn); /* after the part every kernel shares */
    cg_emit_ufn_defs(out, lay, d); /* user functions (lf_fn_c) */
    cg_printf(out, "/* kernel: %s over %d loop axes", strategy_name(lay->strategy), lay->ndim);
    cg_printf(out, "; graph nodes:");
    for (int i = 0; i < kn->nnodes; i++) cg_printf(out, " n%d", kn->nodes[i]);
    cg_printf(out, " */\n");
    if (d->kernel_head) d->kernel_head(&e);
    d->skeleton[kn->kind](&e);
}

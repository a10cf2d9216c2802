/* fusion/plan_inplace.c: which outputs may be written straight into the
 * buffer of one of the program's inputs (x = x*0.5 + 1 evaluated into x).
 *
 * Output slot o may share memory with input slot j when writing o in place
 * cannot change a value any kernel still reads from j:
 *  - o is stored by kernel k = o's def at each point of k's iteration space,
 *    at that point's row-major position: an elementwise kernel, or a row
 *    kernel's row pass (not an epilogue, a scan or a scatter), over exactly
 *    as many elements as j holds, with j's dtype;
 *  - every load of j in k reads, at each point, the element that point
 *    stores (a FUSE_SRC_SLOT load through the identity map of k's space;
 *    never a gather of j, an epilogue load or another offset), so a point
 *    reads its own element before it writes it, and no other point reads it.
 *    Row kernels: a row's passes finish before its row pass writes, and
 *    rows are disjoint;
 *  - no kernel after k loads j (scatter destinations included), and no
 *    output is j itself (it would be copied from j after k ran).
 * Kernels before k may read j freely: they finish before k starts.
 *
 * A backend that is asked to write output i into a buffer the program
 * reads calls fuse_plan_in_place for that pair before codegen: it marks
 * both slots may_alias, so codegen declares their pointers without
 * restrict (an in-place kernel is then not undefined behaviour in C), and
 * keeps the restrict of every other program. Each eval then decides with
 * fuse_output_in_place, which repeats the test for the buffers passed.
 */
#include "fusion/plan.h"

#include <string.h>

/* Whether load l of kernel kn reads, at each point, the element that point's
 * row-major position names. */
static bool identity_load(const fuse_kernel *kn, const fuse_load *l) {
    if (l->src != FUSE_SRC_SLOT || l->map.nsteps != 1) return false;
    fuse_step id = fuse_identity_step(kn->ndim, kn->shape);
    return fuse_step_equal(&l->map.steps[0], &id);
}

/* Whether kernel kn stores slot o at every point's own position. */
static bool stores_pointwise(const fuse_kernel *kn, int o) {
    if (kn->kind == FUSE_KERNEL_SCAN || kn->kind == FUSE_KERNEL_SCATTER || kn->kind == FUSE_KERNEL_SORT) return false;
    bool found = false;
    for (int j = 0; j < kn->nstores; j++) {
        if (kn->stores[j].slot != o) continue;
        if (kn->redmask ? !kn->stores[j].row : kn->stores[j].row) return false;
        found = true;
    }
    return found;
}

bool fuse_in_place_ok(const fuse_schedule *s, int o, int j) {
    const fuse_slot *so = &s->slots[o], *sj = &s->slots[j];
    if (so->kind != FUSE_SLOT_OUTPUT || sj->kind != FUSE_SLOT_INPUT) return false;
    if (so->dtype != sj->dtype || so->numel != sj->numel || so->def < 0) return false;
    for (int i = 0; i < s->nouts; i++)
        if (s->out_slot[i] == j) return false;
    const fuse_kernel *def = &s->kernels[so->def];
    if (def->numel != so->numel || !stores_pointwise(def, o)) return false;
    for (int k = so->def; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        if (kn->kind == FUSE_KERNEL_SCATTER && kn->scat_dst_slot == j) return false;
        for (int f = 0; f < kn->npasses + 2; f++) {
            int n;
            const fuse_load *ls = fuse_kernel_fn_loads(kn, f, &n, NULL);
            for (int q = 0; q < n; q++) {
                if (ls[q].slot != j || (ls[q].src != FUSE_SRC_SLOT && ls[q].src != FUSE_SRC_GATHER)) continue;
                /* in k itself: only identity loads of the passes (f < npasses)
                   and the row pass (f == npasses + 1), never the epilogue */
                if (k != so->def || f == kn->npasses || !identity_load(kn, &ls[q])) return false;
            }
        }
    }
    return true;
}

const lf_buffer *fuse_plan_in_place(fuse_schedule *s, int i, const lf_buffer *dst) {
    const lf_buffer *target = fuse_in_place_target(s, dst);
    int o = s->out_slot[i];
    if (!target || s->slots[o].kind != FUSE_SLOT_OUTPUT || s->slots[o].output != i) return target;
    for (int j = 0; j < s->nslots; j++)
        if (s->slots[j].kind == FUSE_SLOT_INPUT && fuse_slot_buffer(&s->slots[j]) == dst && fuse_in_place_ok(s, o, j))
            s->slots[o].may_alias = s->slots[j].may_alias = true;
    return target;
}

bool fuse_output_in_place(const fuse_schedule *s, int i, const lf_buffer *dst) {
    int o = s->out_slot[i];
    if (s->slots[o].kind != FUSE_SLOT_OUTPUT || s->slots[o].output != i || !s->slots[o].may_alias) return false;
    bool any = false;
    for (int j = 0; j < s->nslots; j++) {
        if (s->slots[j].kind != FUSE_SLOT_INPUT || fuse_slot_buffer(&s->slots[j]) != dst) continue;
        if (!s->slots[j].may_alias || !fuse_in_place_ok(s, o, j)) return false;
        any = true;
    }
    return any;
}

const lf_buffer *fuse_in_place_target(const fuse_schedule *s, const lf_buffer *dst) {
    for (int j = 0; j < s->nslots; j++)
        if (s->slots[j].kind == FUSE_SLOT_INPUT && fuse_slot_buffer(&s->slots[j]) == dst) return dst;
    return NULL;
}

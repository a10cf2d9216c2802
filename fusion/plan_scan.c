/* fusion/plan_scan.c: the scan rules of plan.c's top comment ("Scans").
 *
 * A scan (lf_scan) is planned as a reduction kernel with one reduced axis,
 * the scanned one, whose output space is the whole iteration space:
 *
 *   map -> scan: the scan is a root whose kernel loops over its input's
 *     space; the input's elementwise producers are inlined into the body
 *     (pass 0), so the scanned value is computed in registers (as map ->
 *     reduce).
 *   scan -> map: an elementwise root over the scan's shape that reads the
 *     scan (the latest fold it reads) only at its own position joins the
 *     scan kernel as its epilogue, which runs at every element right after
 *     that element's fold, before the store: cumsum(x*x)/n is one kernel
 *     and the scan itself is stored only if something outside the kernel
 *     reads it.
 *   What does not fuse: a consumer that reads the scan at another position
 *     (a shifted slice, a reversed view, a broadcast) needs values of other
 *     elements, so it is a kernel of its own reading the stored scan; no
 *     other reduction or scan joins a scan kernel (its one pass is the
 *     scan's), and a scan joins no kernel (its running value is sequential
 *     along the axis, so sharing a pass with a reduction would give that
 *     reduction the scan's loop order, and a row pass would need the whole
 *     row's scan first); elementwise siblings over the same space do not
 *     merge into it horizontally.
 *
 * The helpers here let the shared planner treat NODE_REDUCE and NODE_SCAN
 * alike where the rules are the same (roots, instances, loads, building).
 */
#include "fusion/plan.h"


lf_reduce_op fuse_fold_op(const lf_node *n) { return n->kind == NODE_SCAN ? n->u.scan.op : n->u.reduce.op; }

uint32_t fuse_fold_mask(const lf_node *n) {
    return n->kind == NODE_SCAN ? 1u << n->u.scan.axis : n->u.reduce.axes;
}

bool fuse_scan_allows(const planner *p, int e, const unit *u, role r) {
    if (p->g->nodes[e]->kind == NODE_SCAN) return false; /* a scan starts its own kernel */
    return !u->scan || r == ROLE_EPI;
}

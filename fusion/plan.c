/* fusion/plan.c: the fusion planner: graph + outputs -> schedule.
 *
 * The planner decides which nodes are kernel roots (their value is computed
 * by a kernel of their own and, usually, stored), inlines everything else
 * into the kernels that use it, and writes the buffer plan. The rules:
 *
 *   Dead nodes. Only nodes reachable from the outputs are considered.
 *   Roots. Every output; every node marked with lf_node_materialize (input
 *     nodes are buffers already); every reduction.
 *   Views and broadcasting never materialize (unless they are outputs or
 *     marked): a use of a view or of a broadcast input is a composed index
 *     map (fuse_map), folded to one affine step whenever that is exact.
 *   Vertical elementwise. A map/zipwith/select/cast node that is not a root
 *     is inlined into each kernel that uses it, with its fn rebuilt into the
 *     kernel's composed body; constants become run-time scalars of their
 *     dtype (EXPR_SCALAR, fuse_kernel.scalars: the value is read when the
 *     kernel runs, never part of it, so lf_scalar_set needs no new plan or
 *     kernel; no rule looks at a constant's value, none specializes x*1);
 *     inputs and iotas become loads.
 *   Random nodes are sources like iotas: never a root unless an output or
 *     marked (or fusion is off), never stored otherwise; each use is a
 *     FUSE_SRC_IOTA load whose index map yields the element's flat index in
 *     the random node's own shape (through any view or broadcast), from which
 *     the kernel computes Philox4x32-10 of (seed, index) in registers. The
 *     seed is a kernel parameter (P, as iota's start and step: a new seed
 *     does not recompile); the distribution and dtype are structure (they
 *     pick the helper the source calls).
 *   map -> reduce. A reduction kernel loops over its input's shape; the
 *     input's elementwise producers are inlined into the body, so the value
 *     folded is computed in registers and never stored.
 *   MULTIPLE CONSUMERS. A non-root elementwise node P has one "instance" per
 *     distinct (kernel, index map) pair that uses it; roots merged into one
 *     kernel (an epilogue, the passes of a row kernel, horizontal siblings,
 *     see below) count as one kernel. If P has more than one instance, P is
 *     recomputed in each when it is cheap, and made a root (materialized
 *     once, loaded everywhere) otherwise. Cheap means: its fused expression
 *     (its own fn plus every producer inlined beneath it, counted as a tree)
 *     has at most CHEAP_OPS (8) operations and casts, and none of them is
 *     transcendental (** and every float function: sqrt, exp, log, sin,
 *     hypot, erf, ...; fma is not). The decision is iterated bottom-up: each
 *     round makes roots only of the expensive shared nodes with no other
 *     such node beneath them, since materializing a node makes the nodes
 *     above it cheaper. Wide sharing: an expensive node that more than
 *     SHARE_CUT (16) kernels inline (more roots than a merged kernel
 *     usually holds, so the node is a candidate of the rule already) is
 *     made a root when a fresh instance walk reaches it (top down, so every kernel
 *     inlining it is known and none has inlined what is beneath it yet)
 *     instead of waiting for the candidates beneath it: a chain of row
 *     normalisations (x = x / sum(x, axis 1, keepdims), repeated) would
 *     otherwise inline, in every reduction's kernel, the whole chain
 *     beneath it (quadratic instances and memory) and settle it one level
 *     a round. Nodes it makes roots cut the chain into bands of about
 *     SHARE_CUT reductions, in which the rule above then runs as before
 *     (issue 26, item 1; benches/measured/20-scale.md gives the plans it
 *     changes: fewer or as many kernels and bytes in the scale bench's
 *     row normalisations, about the same in its mixes). Graphs where
 *     fewer than 17 kernels inline any one node are planned as before. Inside one kernel, a node used at one index map is
 *     computed once per fn (hash-consing) and recomputed in each pass that
 *     uses it, however expensive: storing it would be the full-size
 *     temporary a row kernel exists to avoid. When such a node has a
 *     transcendental op and is computed both in a pass and in the row pass
 *     (softmax's exp(x - max)), the kernel records a row keep
 *     (plan_keep.c): a backend may store the pass's value in a row-sized
 *     buffer in cache and read it back in the row pass (the C backend does
 *     for rows of up to CG_KEEP_BYTES).
 *   Kernels are formed in node order: each root either joins an earlier
 *     kernel (the rules below, tried in this order) or starts its own. A
 *     root joins kernel K only if every other value it loads is computed by
 *     a kernel before K (so K can run at its place), every fn of K stays
 *     within the load caps (LF_MAX_ARGS distinct buffers, a slot read at
 *     several index maps counting once, and GRAPH_MAX_PARAMS distinct
 *     loads; fusion.h) and K within FUSE_MAX_STORES roots (so its stores,
 *     i.e. buffers, stay few); otherwise the rules fall back to a kernel of
 *     its own, and what it reads from K is stored.
 *   reduce -> map (epilogue). An elementwise root E that has the shape of
 *     the root reduction of the reduction kernel K of the latest reduction E
 *     reads, and reads K's reductions only at their own positions, joins K
 *     as an epilogue that runs once per output element. A reduction is
 *     stored only if something outside its kernel needs it.
 *   reduce -> broadcast -> map (row kernels: softmax, layer norm). A
 *     reduction R whose input space and reduced axes equal those of an
 *     earlier reduction kernel K, and that reads K's reductions only
 *     broadcast over the reduced axes (the "outer" map: keepdims, or
 *     expand_dims and broadcasting; any set of reduced axes), joins K as a
 *     pass after the latest pass whose results it reads (at most
 *     FUSE_MAX_PASSES passes, LF_MAX_ARGS reductions). An elementwise root E
 *     over K's input space that reads K's reductions only through the outer
 *     map joins K's row pass, which runs over each row after the epilogue
 *     and writes full-size values. Between passes only per-row values live.
 *   Horizontal / multi-output. A reduction over the same space and axes as
 *     an earlier reduction kernel K, reading none of K's results, joins K's
 *     first pass when it shares a load (same source, same index map) with K
 *     or when both it and a reduction of K are outputs: sum(x) and max(x)
 *     are one pass. An elementwise root joins the earliest kernel over the
 *     same space whose body (elementwise kernel) or row pass (row kernel)
 *     shares a load with it, or computes an output when it is an output too:
 *     evaluating x+y and x*y together is one kernel with two stores. A
 *     reduction (not a contraction) that would start a kernel of its own
 *     takes over the earliest open elementwise kernel over its input space
 *     that shares a load with it, when it reads none of that kernel's roots
 *     and no kernel before it does: the elementwise roots are computed in
 *     the reduction's pass 0 and stored at each position (fuse_store.pos),
 *     so an elementwise output and a reduction of the same input (the
 *     demo's pdf and sum of squares) read it once (plan_merge.c).
 *   Splitting. A root whose own kernel would pass a load cap (more than
 *     LF_MAX_ARGS buffers or GRAPH_MAX_PARAMS loads in an fn) makes a root
 *     of its inlined node that gathers the most loads while fitting, and
 *     the plan is redone. (Merges never pass the caps: a root that would is
 *     not merged.) So a 9-, 25- or 49-tap stencil over one input (slices of
 *     x combined) is one kernel; nine different inputs are two. The first
 *     kernel past a cap (in node order) gives its node each round; a later
 *     one gives its own in the same round when nothing it inlines is
 *     inlined by an earlier kernel past a cap (its list, and so its victim,
 *     is then the one it has once the earlier kernels are settled; a chain
 *     of row normalisations is split in each band of the wide-sharing rule
 *     at once instead of one kernel a round).
 *   Size cap. A kernel has at most FUSE_MAX_OPS (500) operations: the ops
    and casts of the fns of its inlined map nodes, each counted once per
    instance (distinct node and index map), which is what the emitter prints
    (hash-consing only makes it smaller); not a tree count. A root whose
    instances have more is split: walking them in node order, the map node
    just before the count would pass the cap becomes a root (stored, loaded
    by the rest) and the count restarts, so a chain of N ops is ceil(N/cap)
    kernels; a merge that would pass the cap is not made. Why 500: gcc -O3
    time grows faster than the body (a chain of v*0.999+0.001 maps, one
    kernel, this machine: 250 ops 0.075 s, 500 0.12 s, 1000 0.24 s, 2000
    0.54 s, 4000 1.6 s, 20,000 14.7 s); up to about 1000 ops the time per op
    is flat (0.24 ms), 500 leaves room for costlier bodies, and one stored
    temporary per 500 ops costs nothing next to the arithmetic. One node
    whose own fn has more than the cap is a kernel of its own, unsplit.
  Gather (plan_gather.c). A gather x[idx] is a load whose index is data:
 *     never a root unless an output or marked (or fusion is off), each use
 *     a FUSE_SRC_GATHER load in the consumer's fn, so the gather's
 *     consumers fuse around it (exp(x[idx]) * w is one kernel). x must be
 *     in memory (an input or a root: its positions are data), and so must
 *     idx (a load's value cannot depend on the fn it feeds, so an index
 *     computed by a map is stored first and read as a load: not fused,
 *     for that reason). A gather some use of which does not visit all of
 *     its elements (a slice) is made a root, so every index is checked.
 *     Out-of-range indices raise the kernel's error flag (no out-of-bounds
 *     read; the value is 0) and fail the eval (LF_ERR_INDEX).
 *   Scatter (plan_scatter.c). A scatter (and bincount) is a store whose
 *     index is data: always a root, a kernel of its own over the positions
 *     that nothing joins (its store is a combine into partials, then dst),
 *     with the producers of idx and values inlined (map -> scatter: a
 *     histogram of floor(x*256) is one kernel reading x once). dst is a
 *     slot or a constant (bincount's zeros: a run-time scalar, no kernel).
 *   Small reductions. A sum or product over at most SMALL_REDUCE (8)
 *     elements per output element of a cheap input (as the multiple-
 *     consumer rule counts it: at most 8 operations, none transcendental)
 *     that is not an output or marked is no root (unless the load-cap
 *     split picks it): each use inlines it as an unrolled fold of its input at the
 *     reduced positions (in the reference's order: the identity, then
 *     each element converted to the accumulator dtype, then the result
 *     rounded to the node's dtype once, so values are bit-identical). A
 *     contraction over a tiny axis (A = Vd @ C with 3 columns) is then
 *     elementwise and fuses into its consumer (the top-k that reads it)
 *     instead of being stored. An input that is not cheap only because of
 *     inlined maps much smaller than the sum (each not cheap by itself,
 *     together at most 1/8 of the sum's elements: read broadcast, as
 *     spca's normalized random samples Cn [3, S] under A [p, S]) still
 *     qualifies: those maps become roots, so the expensive part is
 *     computed once per its own element and a temporary at most 1/8 the
 *     size of the sum is stored instead of the sum. Roots and marked
 *     nodes under the input are loads (they cost nothing to inline).
 *   Contractions (plan_contract.c). A float32 sum over one axis of a float32
 *     product (graph_contraction: matmul as a zip-reduce, batched, matvec)
 *     folds the product's operands with fmaf in blocks (lazyfuse.h), so its
 *     product map is never a leaf in its kernel: computed there from its
 *     operands, also when the map is a root (an output, or fusion off); a
 *     small one is inlined as an fma chain unless its product is an
 *     output. The kernel is an
 *     ordinary reduction kernel (prologue maps inlined into its pass,
 *     elementwise consumers joined as its epilogue: relu(A @ B + bias) is
 *     one kernel); codegen prints it as a packed GEMM when it has that one
 *     reduction (codegen/emit_contract.c).
 *   Sort (plan_sort.c). A sort, argsort or topk node is always a root
 *     with a kernel of its own over its input's space, the sorted axis
 *     innermost; its input's elementwise producers are inlined (map ->
 *     sort: the keys are computed in the sort's first pass, never stored
 *     apart); a backend sorts each row of keys in its own work memory and
 *     writes the first k values or positions to the node's slot. A sibling
 *     (same input, axis, k and order, the other output: topk's values and
 *     indices) shares the kernel; nothing else joins it. A consumer reads
 *     the sorted slot; a gather by argsort's indices is a load in the
 *     consumer (the payload is never stored sorted apart).
 *   Fusion off. Every needed node except inputs, views and constants (values,
 *     not ops: a run-time scalar of the kernels that use them) is a root: one
 *     kernel per op with full temporaries (the unfused baseline).
 *
 * A planning round finds the instances (a fresh walk that makes roots by
 * wide sharing ends the round there: the costs above them change), forms
 * the kernels (merges), then applies the multiple-consumer rule and
 * splitting (the load limit, one root a round per independent kernel past
 * it; else the size cap, every split point of every kernel at once); a
 * round that adds a root is redone, so the last round's merges hold for
 * the final roots.
 *
 * Cost. Planning is linear in the instances and kernels it makes (times
 * the rounds): instances are found in a hash table keyed by (node, kernel,
 * index map); a kernel's instances are listed in node order without sorting;
 * kernels with FUSE_MAX_STORES roots leave the list joins scan, elementwise
 * kernels whose body is at a load cap are parked in an index by buffer
 * (only a root reading one could join them), so the order in which joins
 * try kernels is unchanged; a kernel's roots are chained for building it;
 * the traffic statistics are computed once here (counted in plan_seconds).
 * The rounds remain (the multiple-consumer rule adds one level of shared
 * nodes a round, the load cap one root a round in each kernel past it whose
 * list no earlier such kernel shares: a stencil pyramid of depth
 * D takes about D/3, an accumulation over N inputs N/7), and each round is
 * kept to what it changes where that was done (issue 26, item 1):
 * pass 1 re-derives only the kernels holding a node whose root status
 * changed, below the highest such node, in a fresh walk's order
 * (plan_vertical.c, find_instances; fuse_schedule.inst_work counts it);
 * the costs are recomputed only upward from the changed nodes
 * (fuse_compute_costs); what depends only on a kernel's instance list is
 * kept until the list changes (fuse_kernel_changed: the victim search's
 * "fits", a root's leaf summary, own loads and latest fold root, whether a
 * node's instances differ in map); the scratch arenas keep their chunks
 * across rounds. A root's scans for the kernels it might join read that
 * summary of its distinct leaf loads (at most GRAPH_MAX_PARAMS + 1) and
 * skip the kernels before the one computing the latest slot it reads
 * (plan_merge.c): one scan costs a constant, not the root's instances.
 * The merges resume from the lowest node whose root status changed: the
 * steps of the roots below it are the last round's (a root's step reads
 * only its own list and what the roots before it made), those above are
 * undone through a log of every write to the merge state and made again
 * (fuse_plan_merges; fuse_schedule.merge_work counts the steps). A
 * kernel's latest fold root (join_epilogue) is kept with its list, and a
 * leaf's load counts for the victim search are set when it is derived.
 * The victim search's counts of every instance are kept with the lists
 * (computed for the re-derived part and carried up through each
 * instance's users while they change; every count past a cap is one
 * value, so a change stops a few levels up) and each kernel's candidates
 * sit in a heap (plan_merge.c; fuse_schedule.victim_work counts it). The
 * nodes the rounds make roots are recorded (fuse_make_root: roots are
 * only added), so find_instances, the costs and the merges visit those
 * only; the loops over kernels visit the needed roots through a bitset
 * (fuse_next_root); each kernel's load leaves are kept in an array of
 * their own (fuse_load_leaf), so a root's own loads and leaf summary do
 * not walk its inlined instances. The shared rule is kept across rounds
 * (plan_vertical.c, fuse_add_shared_roots): it evaluates again only the
 * nodes whose instances or costs changed, those it made roots, those whose
 * candidacy rests on the merges' units, and the candidates whose witness
 * (a candidate beneath, which blocks them) stopped being one; a full
 * evaluation follows a fresh walk or a root made by another rule
 * (fuse_schedule.shared_work counts it). The merges' search for a kernel
 * to join starts at the lowest host of the root's whole leaf summary and
 * reaches it along the open list or the needed roots, whichever is
 * shorter (plan_merge.c, lowest_host and skip_to).
 * A chain of row normalisations, or any graph with many reductions
 * above one long inlined chain, would derive in its first round every
 * reduction's chain beneath it (quadratic instances: 1.07 M at 2,000
 * nodes) and then settle it one shared level and one load-cap victim a
 * round; the wide-sharing rule cuts such chains into bands when the walk
 * reaches them (so a kernel inlines at most about SHARE_CUT reductions'
 * worth of chain), and the load cap takes a victim in every independent
 * kernel a round, so those bands settle together. What stays: each
 * re-derived list is copied whole (O(its length) a round: 10% of
 * diamond:30000 under perf). The instances' index maps are stored once
 * per distinct map (plan_vertical.c, own_map; fuse_schedule.maps_stored
 * counts them): the broadcast read of a sum is one map in every kernel
 * above it.
 *
 * Invariants (see fusion.h for what a schedule guarantees): instance
 * records live in a scratch arena kept across rounds (reset when the records
 * taken back outnumber the live ones), merge records (units, load lists,
 * the parked index) in another (p->mar, reset by a full merge: when the
 * records of undone steps outnumber the live ones, or when a fresh
 * instance walk resets the maps their loads point at), the undo log in
 * two graph_realloc'd arrays;
 * the kernels' instance lists are graph_malloc'd and freed with the plan; the kernels'
 * fns live in a private graph (schedule->arena) that no user sees, so a
 * failed fn allocation never marks the user's graph as failed; every
 * allocation failure returns LF_ERR_NOMEM with everything freed.
 *
 *   Scans (fusion/plan_scan.c). A scan is a root and a reduction kernel
 *     of its own: its one reduced axis is the scanned axis and its output
 *     space is the whole space. map -> scan: the scan's elementwise
 *     producers are inlined into its body, so the scanned value is computed
 *     in registers and never stored (as map -> reduce). scan -> map: an
 *     elementwise root over the scan's shape whose latest fold read is the
 *     scan, read only at its own position, joins the scan kernel as its
 *     epilogue, which runs at every element right after that element's fold
 *     and before the store (cumsum(x*x)/n is one kernel, no temporary; the
 *     scan is stored only when something outside its kernel reads it). Not
 *     fused, and why: a consumer reading the scan at another position (a
 *     shifted slice, a reversed view, a broadcast) needs other elements'
 *     results, so it is a kernel of its own reading the stored scan; no
 *     reduction or scan joins a scan kernel and a scan joins none (the scan
 *     owns its kernel's one pass and loop order; a row pass would need the
 *     whole row's scan first); elementwise siblings over the same space do
 *     not merge into it horizontally (not implemented: they would need the
 *     scan's sequential loop).
 *
 * Files: this one holds the rules (above), the planning rounds (fuse_plan)
 * and manual control; the rounds' steps live next to it, one family a file
 * (fusion/plan.h lists them): plan_maps.c (scratch arenas, index maps),
 * plan_vertical.c (instances, costs, the multiple-consumer rule),
 * plan_merge.c (epilogues, passes, horizontal merges, load caps),
 * plan_build.c (pass 2: the schedule),
 * plan_scan.c, plan_gather.c, plan_scatter.c, plan_sort.c, plan_contract.c,
 * plan_keep.c (row keeps) and plan_inplace.c (outputs written in place). A
 * new rule family gets a file of its own, and its rule a paragraph above.
 */
#include "fusion/plan.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

lf_status fuse_nomem(planner *p) {
    return graph_error(p->g->ctx, LF_ERR_NOMEM, "eval: out of memory while planning fusion");
}

bool fuse_make_root(planner *p, int id) {
    if (p->root[id]) return true;
    p->root[id] = true;
    p->rchg[p->nrchg++] = id;
    if (p->needed[id]) p->rbits[id >> 6] |= (uint64_t)1 << (id & 63);
    return true;
}

int fuse_next_root(const planner *p, int id) {
    if (id >= p->nn) return p->nn;
    int w = id >> 6;
    uint64_t b = p->rbits[w] & (~(uint64_t)0 << (id & 63));
    while (!b) {
        if (++w >= (p->nn + 63) >> 6) return p->nn;
        b = p->rbits[w];
    }
    int r = (w << 6) + __builtin_ctzll(b);
    return r < p->nn ? r : p->nn;
}

static int int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int fuse_new_roots(planner *p, int *cur, int *out) {
    int n = p->nrchg - *cur;
    memcpy(out, p->rchg + *cur, (size_t)n * sizeof *out);
    *cur = p->nrchg;
    qsort(out, (size_t)n, sizeof *out, int_cmp);
    return n;
}

/* A node whose use in kernel k is a load or a scalar, not inlined code. */
bool fuse_is_leaf(const planner *p, const lf_node *n, int k) {
    if (n->kind == NODE_INPUT || n->kind == NODE_CONST || n->kind == NODE_IOTA || n->kind == NODE_RANDOM)
        return true;
    if (n->kind == NODE_GATHER) return true; /* a load (plan_gather.c) */
    if (!p->root[n->id] || n->id == k) return false;
    return !fuse_contracts_map(p, k, n); /* plan_contract.c */
}
/* ---- the planner ----------------------------------------------------------------------------------- */

/* Frees what a kernel owns (its fns belong to the schedule's arena). */
static void loads_free(fuse_load *ls, int n) {
    if (ls)
        for (int j = 0; j < n; j++) graph_free(ls[j].map.steps);
    graph_free(ls);
}

static void kernel_free(fuse_kernel *kn) {
    loads_free(kn->loads, kn->nloads);
    loads_free(kn->epi_loads, kn->nepi_loads);
    loads_free(kn->row_loads, kn->nrow_loads);
    graph_free(kn->body_etype);
    graph_free(kn->body_ctype);
    graph_free(kn->epi_etype);
    graph_free(kn->epi_ctype);
    graph_free(kn->row_etype);
    graph_free(kn->row_ctype);
    graph_free(kn->scalars);
    if (kn->passes)
        for (int q = 1; q < kn->npasses; q++) { /* passes[0] is the body */
            loads_free(kn->passes[q].loads, kn->passes[q].nloads);
            graph_free(kn->passes[q].etype);
            graph_free(kn->passes[q].ctype);
        }
    graph_free(kn->passes);
    graph_free(kn->reds);
    graph_free(kn->stores);
    graph_free(kn->nodes);
    memset(kn, 0, sizeof *kn);
}


void fuse_schedule_free(fuse_schedule *s) {
    if (!s) return;
    for (int k = 0; k < s->nkernels; k++) kernel_free(&s->kernels[k]);
    graph_free(s->kernels);
    graph_free(s->slots);
    graph_free(s->out_slot);
    graph_free(s->block_bytes);
    if (s->arena) {
        while (s->arena->fns) {
            lf_fn *f = s->arena->fns;
            s->arena->fns = f->next;
            graph_fn_destroy(f);
        }
        graph_free(s->arena);
    }
    graph_free(s);
}

static lf_status plan(planner *p, fuse_schedule *s, int n, lf_node *const *outs) {
    lf_graph *g = p->g;
    int nn = g->nnodes;
    scratch *K = &p->keep;
    p->needed = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->needed);
    p->root = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->root);
    p->output = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->output);
    p->ops = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->ops);
    p->fnops = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->fnops);
    p->trans = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->trans);
    p->cand = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->cand);
    p->merged_into = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->merged_into);
    p->role = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->role);
    p->pass = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->pass);
    p->slot_of = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->slot_of);
    p->host = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->host);
    p->oslot = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->oslot);
    p->next_member = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->next_member);
    p->first = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->first);
    p->ninst = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->ninst);
    p->iroot = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->iroot);
    p->klist = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->klist);
    p->kcount = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kcount);
    p->kfits = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kfits);
    p->kops = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kops);
    p->kops64 = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kops64);
    p->cmap = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->cmap);
    p->lsum = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->lsum);
    p->kfold = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kfold);
    p->kown = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kown);
    p->mdiff = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->mdiff);
    p->mdirty = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->mdirty);
    p->gc_ids = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->gc_ids);
    p->vheap = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->vheap);
    p->kleaf = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kleaf);
    p->kleafn = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kleafn);
    p->kleafcap = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kleafcap);
    if (!p->kleaf || !p->kleafn || !p->kleafcap) return fuse_nomem(p);
    p->vlen = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->vlen);
    p->vcap = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->vcap);
    p->rchg = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->rchg);
    p->rbits = fuse_scratch_calloc(K, ((size_t)nn + 63) / 64 + 1, sizeof *p->rbits);
    p->itop = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->itop);
    p->mlist = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->mlist);
    p->inml = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->inml);
    p->bmark = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->bmark);
    p->bwit = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->bwit);
    if (!p->vheap || !p->vlen || !p->vcap || !p->rchg || !p->rbits || !p->itop || !p->mlist || !p->inml ||
        !p->bmark || !p->bwit)
        return fuse_nomem(p);
    p->swit = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->swit);
    p->wfirst = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->wfirst);
    p->sdl = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->sdl);
    p->insdl = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->insdl);
    p->ulist = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->ulist);
    p->inul = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->inul);
    p->sbmark = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->sbmark);
    if (!p->swit || !p->wfirst || !p->sdl || !p->insdl || !p->ulist || !p->inul || !p->sbmark) return fuse_nomem(p);
    for (int id = 0; id < nn; id++) p->wfirst[id] = -1;
    p->sfull = true;
    if (!p->cmap || !p->lsum || !p->kfits || !p->kfold || !p->kown || !p->mdiff || !p->mdirty || !p->gc_ids)
        return fuse_nomem(p);
    if (!p->first || !p->ninst || !p->iroot || !p->klist || !p->kcount || !p->kops || !p->kops64)
        return fuse_nomem(p);
    if (!p->host || !p->oslot || !p->fnops || !p->next_member) return fuse_nomem(p);
    if (!p->needed || !p->root || !p->output || !p->ops || !p->trans || !p->cand ||
        !p->merged_into || !p->role || !p->pass || !p->slot_of)
        return fuse_nomem(p);
    /* dead-node elimination and the fixed roots */
    for (int id = 0; id < nn; id++) p->output[id] = -1;
    for (int i = 0; i < n; i++) {
        p->needed[outs[i]->id] = p->root[outs[i]->id] = true;
        if (p->output[outs[i]->id] < 0) p->output[outs[i]->id] = i;
    }
    for (int id = nn - 1; id >= 0; id--) {
        if (!p->needed[id]) continue;
        const lf_node *x = g->nodes[id];
        for (int k = 0; k < x->ninputs; k++) p->needed[x->inputs[k]->id] = true;
        bool inlined = p->fusion && !p->root[id] && !x->materialize && !fuse_contract_stored(p, x) && fuse_small_reduce(p, x);
        if ((fuse_is_fold(x) && !inlined) || (x->materialize && x->kind != NODE_INPUT) ||
            (!p->fusion && x->kind != NODE_VIEW && x->kind != NODE_INPUT && x->kind != NODE_CONST))
            p->root[id] = true;
    }
    fuse_contract_maps(p);
    s->unfused_temp_bytes = 0;
    for (int id = 0; id < nn; id++) {
        const lf_node *x = g->nodes[id];
        if (p->needed[id] && p->output[id] < 0 && x->kind != NODE_INPUT &&
            ((x->kind != NODE_VIEW && x->kind != NODE_CONST) || x->materialize))
            s->unfused_temp_bytes += (size_t)x->numel * lf_dtype_size(x->dtype);
    }
    for (int id = 0; id < nn; id++) /* each map's own operations (the split rule) */
        if (p->needed[id] && g->nodes[id]->kind == NODE_MAP) {
            const lf_fn *f = g->nodes[id]->u.map.fn;
            int c = 0;
            for (int e = 0; e < f->nexprs; e++) c += f->exprs[e].kind == EXPR_OP || f->exprs[e].kind == EXPR_CAST || f->exprs[e].kind == EXPR_CALL;
            p->fnops[id] = c ? c : 1;
        }
    p->kind = fuse_scratch_calloc(K, (size_t)nn, sizeof *p->kind);
    p->ioff = fuse_scratch_calloc(K, (size_t)nn + 1, sizeof *p->ioff);
    if (!p->kind || !p->ioff) return fuse_nomem(p);
    for (int id = 0; id < nn; id++) {
        p->kind[id] = (unsigned char)g->nodes[id]->kind;
        p->ioff[id + 1] = p->ioff[id] + (p->needed[id] ? g->nodes[id]->ninputs : 0);
    }
    if (!(p->iids = fuse_scratch_calloc(K, (size_t)p->ioff[nn] + 1, sizeof *p->iids))) return fuse_nomem(p);
    for (int id = 0; id < nn; id++)
        for (int k = 0; k < p->ioff[id + 1] - p->ioff[id]; k++) p->iids[p->ioff[id] + k] = g->nodes[id]->inputs[k]->id;
    for (int id = 0; id < nn; id++) { /* what fuse_gather_roots and fuse_contract_roots look at */
        const lf_node *x = g->nodes[id];
        if (p->needed[id] && (x->kind == NODE_GATHER || graph_contraction(x, NULL))) p->gc_ids[p->ngc++] = id;
    }
    fuse_gather_fixed_roots(p);
    fuse_scatter_fixed_roots(p);
    fuse_sort_fixed_roots(p);
    for (int id = 0; id < nn; id++) /* the needed roots so far; the rounds add theirs (fuse_make_root) */
        if (p->needed[id] && p->root[id]) p->rbits[id >> 6] |= (uint64_t)1 << (id & 63);
    /* rounds: instances, kernels (merges), shared expensive nodes, splits */
    for (;;) {
        lf_status st;
        p->rounds++;
        if (p->fusion && !fuse_compute_costs(p)) return fuse_nomem(p);
        if ((st = fuse_find_instances(p)) != LF_OK) return st;
        if (p->wcut) { /* roots made by the walk: the costs above them first */
            p->wcut = false;
            continue;
        }
        if ((st = fuse_plan_merges(p)) != LF_OK) return st;
        if (p->fusion && fuse_gather_roots(p)) continue;
        if (p->fusion && fuse_contract_roots(p)) continue;
        if (p->fusion) {
            int added = fuse_add_shared_roots(p);
            if (added < 0) return fuse_nomem(p);
            if (added) continue;
        }
        int victims = fuse_find_victims(p);
        if (victims < 0) return fuse_nomem(p);
        if (victims) {
            continue;
        }
        if (!fuse_split_big(p)) break;
    }
    /* each kernel's roots, so that building it visits only them */
    for (int id = 0; id < nn; id++) p->next_member[id] = -1;
    for (int id = nn - 1; id >= 0; id--) { /* each goes right after its kernel's root */
        if (!p->needed[id] || !p->root[id] || p->merged_into[id] < 0) continue;
        int k = p->merged_into[id];
        p->next_member[id] = p->next_member[k];
        p->next_member[k] = id;
    }
    /* the schedule */
    lf_status st = fuse_plan_slots(p, s, n, outs);
    if (st != LF_OK) return st;
    int nk = 0;
    for (int id = 0; id < nn; id++) nk += p->needed[id] && p->root[id] && p->merged_into[id] < 0;
    s->kernels = graph_calloc((size_t)(nk ? nk : 1), sizeof *s->kernels);
    if (!s->kernels) return fuse_nomem(p);
    for (int id = 0; id < nn; id++) {
        if (!p->needed[id] || !p->root[id] || p->merged_into[id] >= 0) continue;
        fuse_kernel *kn = &s->kernels[s->nkernels++];
        if ((st = fuse_build_kernel(p, s, id, kn)) != LF_OK) return st;
        if (kn->nstores == 0) { /* nothing of it is needed (cannot happen for needed roots) */
            kernel_free(kn);
            s->nkernels--;
        }
    }
    if ((st = fuse_plan_memory(p, s)) != LF_OK) return st;
    return fuse_plan_traffic(p, s);
}

lf_status fuse_plan(lf_graph *g, int n, lf_node *const *outs, bool fusion, fuse_schedule **out) {
    double t0 = graph_now_seconds();
    *out = NULL;
    fuse_schedule *s = graph_calloc(1, sizeof *s);
    if (!s) return graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory while planning fusion");
    s->graph = g;
    s->fused = fusion;
    s->arena = graph_calloc(1, sizeof *s->arena);
    if (!s->arena) {
        graph_free(s);
        return graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory while planning fusion");
    }
    s->arena->ctx = g->ctx; /* private: not linked into the context's graph list */
    planner p;
    memset(&p, 0, sizeof p);
    p.g = g;
    p.nn = g->nnodes;
    p.fusion = fusion;
    lf_status st = plan(&p, s, n, outs);
    fuse_scratch_free(&p.tmp);
    fuse_scratch_free(&p.iar);
    graph_free(p.iq.h);
    graph_free(p.idone);
    for (int k = 0; p.klist && k < p.nn; k++) graph_free(p.klist[k]);
    for (int k = 0; p.vheap && k < p.nn; k++) graph_free(p.vheap[k]);
    for (int k = 0; p.kleaf && k < p.nn; k++) graph_free(p.kleaf[k]);
    graph_free(p.vq.h);
    graph_free(p.sedge_x);
    graph_free(p.sedge_next);
    fuse_scratch_free(&p.mar);
    graph_free(p.mrecs);
    graph_free(p.mbuf);
    fuse_scratch_free(&p.keep);
    if (st != LF_OK) {
        fuse_schedule_free(s);
        /* a failed fn allocation records its own message; make sure it says so */
        graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory while planning fusion");
        return LF_ERR_NOMEM;
    }
    s->plan_seconds = graph_now_seconds() - t0;
    s->scan_work = p.scan_work;
    s->inst_work = p.inst_work;
    s->merge_work = p.merge_work;
    s->victim_work = p.victim_work;
    s->shared_work = p.shared_work;
    s->maps_stored = p.maps_stored;
    s->scan_max = p.scan_max;
    s->rounds = p.rounds;
    *out = s;
    return LF_OK;
}

/* ---- manual control ------------------------------------------------------------------------------------ */

lf_status lf_node_materialize(lf_graph *g, lf_node *n) {
    if (!graph_check_args(g, "node_materialize", 1, &n))
        return g ? (g->status != LF_OK ? g->status : LF_ERR_NULL) : LF_ERR_NULL;
    if (!n->materialize) { /* cached programs of g are stale */
        g->version++;
        graph_programs_clear(g);
    }
    n->materialize = true;
    return LF_OK;
}

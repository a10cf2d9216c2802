/* fusion/plan.h: the fusion planner's internals, shared by the files that
 * make it up (private to fusion/; the planner's interface is fusion.h).
 *
 *   plan.c          the rules (its top comment), the planning rounds, manual control
 *   plan_maps.c     the scratch arena and index maps
 *   plan_vertical.c pass 1: instances of inlined nodes (vertical fusion), the
 *                   multiple-consumer rule, loads
 *   plan_merge.c    forming kernels: epilogues, row kernels, horizontal and
 *                   multi-output merges, splitting (load and size caps)
 *   plan_build.c    pass 2: the buffer plan, building each kernel, the memory
 *                   plan, traffic statistics and printing
 *
 *   plan_scan.c, plan_gather.c, plan_scatter.c, plan_sort.c, plan_keep.c: one rule family each
 *
 * A rule family of its own (scan, gather/scatter, sort) goes in a file of
 * its own next to these, opening with its rule as plan.c's top comment
 * states it.
 */
#ifndef LF_FUSION_PLAN_H
#define LF_FUSION_PLAN_H

#include "fusion/fusion.h"

enum { CHEAP_OPS = 8, COST_CAP = 1 << 20 };
/* A fresh instance walk makes an expensive inlined map a root at once when
 * more than SHARE_CUT kernels inline it (plan.c, "Wide sharing"). */
enum { SHARE_CUT = 16 };

/* ---- plan_maps.c: scratch arena and index maps ---- */

typedef union chunk {
    struct {
        union chunk *next;  /* older chunk */
        size_t used, cap;   /* bytes used and available after the header */
    } h;
    max_align_t align;      /* keeps the data after the header aligned */
} chunk;

typedef struct scratch {
    chunk *head;            /* newest chunk */
    chunk *spare;           /* chunks of earlier uses, emptied by fuse_scratch_reset */
} scratch;

void *fuse_scratch_alloc(scratch *a, size_t bytes);
void *fuse_scratch_calloc(scratch *a, size_t n, size_t size);
void fuse_scratch_free(scratch *a);
/* Empties a (everything allocated from it is gone) but keeps its chunks for
 * the next allocations: a planning round's arena costs no fresh pages (and
 * no page faults) when the last round's chunks suffice. */
void fuse_scratch_reset(scratch *a);
fuse_step fuse_make_step(int ndim, const int64_t *shape, int64_t offset, const int64_t *strides);
/* The identity linearization of a shape (row-major). */
fuse_step fuse_identity_step(int ndim, const int64_t *shape);
bool fuse_step_equal(const fuse_step *a, const fuse_step *b);
/* The step of view node n (its offset and strides; a remapped view's
 * remap, which keeps it from folding with its neighbours). */
fuse_step fuse_view_step(const lf_node *n);
bool fuse_map_equal(const fuse_map *a, const fuse_map *b);
fuse_map *fuse_map_identity(scratch *a, const lf_node *n);
/* m followed by step (which unravels m's result by its own shape), folded. */
fuse_map *fuse_map_compose(scratch *a, const fuse_map *m, const fuse_step *step);
/* Gives map m, just made by fuse_map_compose or fuse_map_identity on a with
 * nothing allocated from a since, back to a (m is gone). */
void fuse_map_release(scratch *a, fuse_map *m);
/* Mixes v into hash h (the instance table's and the parked loads' hashes). */
uint64_t fuse_hash_mix(uint64_t h, uint64_t v);
/* Mixes every step of map m into h. */
uint64_t fuse_map_hash(uint64_t h, const fuse_map *m);

/* ---- planner state ----------------------------------------------------------------- */

/* One use of a node inside one kernel, at one index map. */
typedef struct inst inst;
struct inst {
    const lf_node *node;     /* the node computed (inlined) or loaded (leaf) */
    int kernel;              /* id of the root whose kernel this is in */
    const fuse_map *map;     /* kernel loop index -> element of node (scratch) */
    inst *in[LF_MAX_ARGS];   /* instances of the inputs (inlined nodes only) */
    inst *next_node;         /* next instance of the same node (newest first) */
    inst *prev_node;         /* the one before it, NULL for p->first[node] */
    inst *next_hash;         /* next in its bucket of the instance table */
    uint64_t seq;            /* creation order (find_instances' walk order) */
    int creator;             /* node being processed when it was made (a
                                seed: its own node) */
    uint64_t hash;           /* of (node, kernel, map) */
    int expr;                /* pass 2: expression id in the kernel's fn */
    bool leaf;               /* fuse_is_leaf in its kernel (set by derive; a
                                leaf's nload, nbuf and nkey too: they depend
                                only on its node's kind and root status,
                                which a kept instance's keep) */
    int nload;               /* loads at or beneath this instance (victims) */
    int nbuf;                /* victims: their buffers, an upper bound */
    const void *nkey;        /* victims: the one slot all those loads read
                                (pload.key), NULL when none yet (constants
                                only), a sentinel (KEY_MIXED, plan_merge.c)
                                when several or not slots. nload and nbuf
                                are capped at GRAPH_MAX_PARAMS + 1 and
                                LF_MAX_ARGS + 1 (only "fits" and the order of
                                fitting ones are asked) and kept up to date
                                with the lists (fuse_victim_counts) */
    bool dead;               /* taken back (remove_inst); the record stays in p->iar */
    struct iuse *users;      /* the instances whose in[] holds this one (a
                                record per use; plan_vertical.c keeps it to
                                the live ones where it reads it) */
    uint64_t vmark;          /* p->vstamp when queued for new victim counts */
};

/* One use of an instance: its user (plan_vertical.c, the victim counts). */
typedef struct iuse {
    inst *user;
    struct iuse *next;
} iuse;

/* An entry of a kernel's victim candidates (fuse_find_victims): an inlined
 * instance that fitted with nload loads when it was pushed; valid while it
 * still does with the same count. */
typedef struct vcand {
    int nload, id;           /* the order: more loads, then the higher node */
    inst *i;
} vcand;

/* A load being collected: source identity and index map. */
typedef struct pload {
    fuse_src src;            /* kind */
    const void *key;         /* buffer (inputs) or node (others): identity */
    const lf_node *node;     /* the node loaded */
    const fuse_map *map;     /* index map (scratch) */
} pload;

/* A binary heap of instances (plan_vertical.c's inst_heap_push / _pop);
 * the order is the caller's: first(a, b) says a comes out before b. */
typedef struct inst_heap {
    inst **h;
    size_t len, cap;
} inst_heap;

typedef struct planner {
    lf_graph *g;             /* graph planned */
    int nn;                  /* its node count */
    bool fusion;             /* fusion on */
    scratch keep;            /* arrays that live for the whole plan */
    scratch tmp;             /* merge records and lists of one round */
    scratch iar;             /* instance records, maps, the instance table
                                (kept across rounds, see find_instances) */
    bool *iroot;             /* root[] when the instances were derived */
    size_t ilive, idead;     /* instances kept and taken back since iar was reset */
    uint64_t iseq;           /* the next instance's seq */
    int cur_node;            /* the node whose instances are being processed */
    bool ipush;              /* add_inst queues what it makes (rederive) */
    inst_heap iq;            /* rederive's queue: by (node, seq), the largest first */
    inst **idone;            /* rederive: the instances it processed, in order */
    size_t idlen, idcap;
    uint64_t inst_work;      /* instances processed by find_instances over
                                all rounds: fuse_schedule.inst_work */
    int64_t *kops64;         /* per root: kops uncapped (kept across rounds) */
    bool ivalid;             /* instances of an earlier round are kept */
    bool wcut;               /* the last fresh walk made roots (wide sharing):
                                the round is redone with the costs above them */
    bool *needed;            /* reachable from an output */
    bool *root;              /* kernel root */
    int *output;             /* first output index of the node, -1 */
    int *ops;                /* fused expression size (MAP nodes), capped at
                                CHEAP_OPS + 1 (only "more than CHEAP_OPS" is
                                ever asked) */
    int *fnops;              /* operations of the node's own fn (MAP nodes) */
    int *kops;               /* per root: operations of its instances (round) */
    bool *trans;             /* fused expression has a transcendental op */
    bool *croot;             /* root[] when the costs were last computed */
    bool costs_valid;        /* ops, trans and croot hold a computation */
    int *uoff, *users;       /* per needed node: the needed maps and views
                                that read it, users[uoff[id] .. uoff[id+1]) */
    int *cheap_heap;         /* fuse_compute_costs' queue of nodes (a min-heap) */
    bool *queued;            /* in that queue */
    bool *cand;              /* expensive shared node (this round) */
    inst **first;            /* per node: its instances (round) */
    int *ninst;              /* per node: instance count (round) */
    inst **htab;             /* instances by (node, kernel, map): buckets (round) */
    size_t hcap, hcount;     /* buckets (a power of two) and instances in them */
    const fuse_map **mtab;   /* the instances' composed maps, one record per
                                distinct map (open addressing, in p->iar,
                                reset with it): a map read by many kernels
                                (a row normalisation's sum, broadcast, in
                                every kernel above it) is stored once */
    size_t mtcap, mtcount;   /* its slots (a power of two) and maps */
    uint64_t maps_stored;    /* maps recorded in mtab, all rounds:
                                fuse_schedule.maps_stored */
    inst ***klist;           /* per root: its kernel's instances by node id */
    int *kcount;             /* per root: their number */
    inst ***kleaf;           /* per root: the leaves of its list that are
                                loads (leaf, nload), in reverse list order,
                                so that a round's change (the nodes at or
                                below the highest changed one: the end of
                                this array) is cut off and appended to in
                                place; read with fuse_load_leaf */
    int *kleafn, *kleafcap;  /* their number and room */
    int *kfold;              /* per root: the latest fold root among its
                                list's nodes but itself (join_epilogue), -1
                                none; kept with the list (find_instances) */
    struct ownloads **kown;  /* per root: its own loads (start_unit), NULL
                                until asked since the list changed */
    bool *mdiff;             /* per node: two of its instances have different
                                maps (valid when !mdirty) */
    bool *mdirty;            /* per node: its instances changed since mdiff */
    unsigned char *kind;     /* per node: its kind (node_kind), read without
                                touching the node (the rounds' passes) */
    int *ioff, *iids;        /* per needed node: its inputs' ids,
                                iids[ioff[id] .. ioff[id+1]) */
    int *gc_ids;             /* the needed gathers and contractions */
    int ngc;
    vcand **vheap;           /* per root: its victim candidates, a max-heap
                                by (nload, id) with stale entries dropped
                                when they reach the top (plan_merge.c) */
    int *vlen, *vcap;        /* their lengths and capacities */
    bool vfail;              /* a victim heap ran out of memory */
    uint64_t vstamp;         /* the current propagation of victim counts */
    inst_heap vq;            /* its queue: by node id, the smallest first */
    int *rchg;               /* the nodes the rounds made roots, in order
                                (fuse_make_root; roots are only added) */
    int nrchg;
    int icur, ccur, mcur;    /* how much of rchg find_instances,
                                fuse_compute_costs and the merges have read */
    uint64_t *rbits;         /* the needed roots, a bit per node: the loops
                                over kernels visit them only (fuse_next_root) */
    int *itop;               /* find_instances: per kernel, its highest
                                changed node + 1 (zero between calls) */
    int *mlist;              /* nodes with two instances or more since they
                                were listed, the shared rule's candidates
                                (fuse_add_shared_roots keeps it) */
    int nmlist;
    bool *inml;              /* per node: in mlist */
    unsigned *bmark;         /* the shared rule: per node, the call (bstamp)
                                that found bwit, the candidate inlined
                                beneath it (-1: none) */
    int *bwit;
    unsigned bstamp;
    /* The shared rule kept across rounds (fuse_add_shared_roots): cand[] is
       every node's candidacy as of its last evaluation, exact for all nodes
       after each call; a candidate that was not made a root has a witness,
       a candidate beneath it (swit), and sits in that witness's list of
       dependents (an edge log: wfirst per witness, sedge_x / sedge_next per
       edge, stale entries skipped by swit). Between two calls with only
       this rule's roots in between, a node is evaluated again only if it is
       in the dirty list (its instances or costs changed, or it was made a
       root), in ulist (its candidacy rests on the merges' units), or is a
       dependent of a node that stopped being a candidate. */
    int *swit;               /* per candidate: its witness */
    int *wfirst;             /* per node: its first dependent edge, -1 */
    int *sedge_x, *sedge_next;
    size_t nsedge, capsedge;
    int *sdl;                /* the dirty list: nodes to evaluate again */
    int nsdl;
    bool *insdl;
    int *ulist;              /* expensive shared-count nodes whose instances
                                all have one map: candidacy by units */
    int nulist;
    bool *inul;
    unsigned *sbmark;        /* per node: queued for the blocked check (bstamp) */
    bool sfull;              /* the next call evaluates every listed node */
    int scur;                /* p->nrchg after the last call */
    uint64_t shared_work;    /* fuse_schedule.shared_work */
    bool *kfits;             /* per root: its loads were found within the
                                caps (fuse_find_victims) and its list has not
                                changed since (find_instances clears it) */
    int *merged_into;        /* root -> the root of the kernel it joined, -1 */
    int *host;               /* per root: root id of the kernel computing it */
    unsigned char *role;     /* per root: its part in its kernel (role) */
    int *pass;               /* per reduce root: its pass in its kernel */
    struct unit **unit;      /* per kernel root: its merge record (round) */
    struct unit *units;      /* the open kernels of the round, by root id */
    struct unit *units_tail; /* the last of them */
    struct unit *parked;     /* elementwise kernels whose body loads are full */
    struct park **pidx;      /* parked kernels by each of their loads (buckets) */
    size_t pcap, pcount;     /* buckets (a power of two) and entries */
    int *oslot;              /* per node: its output slot, -1 */
    int *slot_of;            /* per node: slot holding its value, -1 */
    int *next_member;        /* per root: the next root of its kernel (node
                                order, from the kernel's own root), -1 */
    int *cmap;               /* per map: 1 + id of a needed contraction whose
                                product it is, else 0 (plan_contract.c) */
    struct leafsum **lsum;   /* per root: its distinct leaf loads, made on
                                first use (plan_merge.c) in p->keep and kept
                                until its list changes (fuse_kernel_changed
                                empties it) */
    scratch mar;             /* merge records (units, their load lists, the
                                parked index): kept across rounds, reset
                                with a full merge (fuse_plan_merges) */
    bool *mroot;             /* root[] when the merges were last formed */
    bool mvalid;             /* the merges of an earlier round are kept */
    size_t *mmark;           /* per root: undo records before its merge step */
    size_t *mmbytes;         /* per root: p->mbytes before its merge step */
    struct mrec *mrecs;      /* the undo log: old bytes of every merge-state
                                write, in order (plan_merge.c) */
    size_t nmrec, capmrec;
    unsigned char *mbuf;     /* the old bytes themselves */
    size_t nmbuf, capmbuf;
    bool mfail;              /* the undo log ran out of memory */
    size_t mbytes, mwaste;   /* bytes taken from p->mar, and of them those of
                                merge steps undone since it was reset */
    uint64_t victim_work;    /* fuse_schedule.victim_work */
    uint64_t merge_work;     /* roots the merges processed over all rounds:
                                fuse_schedule.merge_work */
    uint64_t scan_work;      /* instances and loads the merges' scans of roots
                                visited (all rounds): fuse_schedule.scan_work */
    int rounds;              /* planning rounds: fuse_schedule.rounds */
    uint64_t scan_max;       /* the most of them one scan_root visited
                                (its root's summary, made once a round,
                                not counted): fuse_schedule.scan_max */
} planner;

/* A root's part in the kernel it belongs to. */
typedef enum role {
    ROLE_BODY,   /* elementwise kernel: its body (the root and its siblings) */
    ROLE_PASS,   /* reduction kernel: a reduction folded in pass p->pass[id] */
    ROLE_EPI,    /* reduction kernel: the epilogue */
    ROLE_ROW,    /* reduction kernel: the row pass */
    ROLE_POS     /* reduction kernel: an elementwise root computed in pass 0
                    and stored at each position (fuse_store.pos) */
} role;

/* A kernel being formed: its root and what has joined it, with the loads of
 * each of its fns so far (room for GRAPH_MAX_PARAMS + 1 each; a root's own
 * list past the caps of fuse_loads_fit is "full": it will be split). */
typedef struct unit {
    int host;                      /* root id of the kernel */
    bool red;                      /* reduction kernel */
    int ndim;                      /* iteration space */
    int64_t shape[LF_MAX_DIMS];
    uint32_t mask;                 /* reduced axes */
    const lf_node *out;            /* reduction: the root reduce node */
    int npasses;                   /* reduction passes (elementwise: 1, the body) */
    int npl[FUSE_MAX_PASSES];      /* loads of each pass (ACC included) */
    pload *pl[FUSE_MAX_PASSES];
    int nrow;                      /* row pass loads (ACC included), row NULL: none */
    pload *row;
    int nepi;                      /* epilogue loads, ACC excluded */
    pload *epi;                    /* NULL until the first epilogue joins */
    int nreds;                     /* reductions */
    int nroots;                    /* roots in it (each stores at most once) */
    int nops;                      /* operations of its roots' instances */
    bool out_red, out_row;         /* a reduction / a body or row root is an output */
    bool parked;                   /* off the open list: elementwise, body loads
                                      at a cap (LF_MAX_ARGS buffers or
                                      GRAPH_MAX_PARAMS loads), so only a root
                                      whose first load's buffer it has (found
                                      by the index) can join */
    bool closed;                   /* FUSE_MAX_STORES roots: nothing joins */
    bool scan;                     /* a scan kernel (plan_scan.c): only epilogues join */
    struct unit *next, *prev;      /* the open list (by root id), or the parked list */
} unit;

/* An entry of the index of parked kernels: one of its body buffers. */
typedef struct park {
    uint64_t hash;                 /* of the load's source and key (no map) */
    const pload *load;             /* the first load of that buffer in u->pl[0] */
    unit *u;
    struct park *next;             /* in its bucket */
} park;

/* ---- plan.c ---- */
lf_status fuse_nomem(planner *p);
/* The t-th load leaf of kernel k's list, in list order (t < p->kleafn[k]). */
static inline inst *fuse_load_leaf(const planner *p, int k, int t) { return p->kleaf[k][p->kleafn[k] - 1 - t]; }
/* Makes node id a root (rounds only; roots are never taken back there),
 * recording it for the incremental steps (p->rchg, p->rbits). Returns true. */
bool fuse_make_root(planner *p, int id);
/* The first needed root at or after id, or p->nn (p->rbits). */
int fuse_next_root(const planner *p, int id);
/* The nodes made roots since *cur (p->rchg), ascending, into out (room for
 * p->nn); moves *cur to the end. Returns how many. */
int fuse_new_roots(planner *p, int *cur, int *out);
/* A node whose use in kernel k is a load or a scalar, not inlined code. */
bool fuse_is_leaf(const planner *p, const lf_node *n, int k);

/* ---- plan_vertical.c ---- */
/* Walks the needed nodes top-down, giving each root a seed instance and
 * propagating every inlined instance to its inputs; then lists each
 * kernel's instances in node order (within a node, newest first).
 *
 * Incremental across rounds, per kernel: a kernel's instances depend only
 * on its own seed and the root status of the nodes it reaches, so only the
 * kernels with an instance of a node whose root status changed (and the
 * kernels of new roots) change, and in each only the instances at or below
 * the highest such node T: those made while processing nodes at or below
 * T are taken back, the others (made by nodes above T) are kept, and the
 * kernel's nodes T..0 are processed again in the order a fresh walk
 * processes them (node, then newest first), so its list is the one a
 * fresh walk makes. The records taken back stay in p->iar until it is
 * reset (a fresh walk), which happens when they outnumber the live ones. */
lf_status fuse_find_instances(planner *p);
/* Size and transcendence of each map node's fused expression, bottom-up.
 * Incremental: after the first call, only the maps above a node whose root
 * status changed since the last call are computed again, upward through
 * their users while a value changes (false: out of memory). */
bool fuse_compute_costs(planner *p);
/* Makes roots of the expensive shared nodes that have no other such node
 * beneath them. Returns how many. */
int fuse_add_shared_roots(planner *p);
/* The root of the kernel that root k's code is part of. */
int fuse_unit_of(const planner *p, int k);
/* The load a leaf instance stands for (false for constants). grp is the root
 * of the reduction kernel whose fn is being built or checked (-1 for none):
 * its reductions are read as FUSE_SRC_ACC. */
bool fuse_leaf_load(const planner *p, const inst *i, int grp, pload *out);
int fuse_find_load(const pload *ls, int n, const pload *l);
/* The two caps on an fn's loads (fusion.h): at most LF_MAX_ARGS distinct
 * buffers and GRAPH_MAX_PARAMS distinct loads. A buffer is a slot (all its
 * loads, at any index map, count once); every other source counts per
 * distinct load as a load does (an iota or random at each map, a gather,
 * a reduction's ACC). */
/* Whether load l (not in ls[0..n)) would add a buffer to ls. */
bool fuse_new_buffer(const pload *ls, int n, const pload *l);
/* The buffers of the distinct loads ls[0..n). */
int fuse_count_buffers(const pload *ls, int n);
/* Whether an fn with nloads distinct loads of nbufs buffers is within both caps. */
bool fuse_loads_fit(int nloads, int nbufs);
/* Distinct loads of kernel k's instances (skipping a reduction's seed) into
 * ls (room for GRAPH_MAX_PARAMS + 1), their buffers into *nbufs; stops as
 * soon as they no longer fit (fuse_loads_fit). Returns the loads counted. */
int fuse_count_loads(const planner *p, int k, pload *ls, int *nbufs);

/* ---- plan_merge.c ---- */
/* Root k's instance list changed (or went): forgets what was derived from
 * it (kfits, kown, its leaf summary; kfold is kept by find_instances). */
void fuse_kernel_changed(planner *p, int k);
/* Forms the kernels of this round: every needed root, in node order, joins
 * an earlier kernel or starts its own (see the rules at the top). */
lf_status fuse_plan_merges(planner *p);
/* Makes roots because kernels have too many loads; returns how many (0
 * when all kernels fit, -1: out of memory). The victim of a kernel past a
 * cap is the inlined map node (or small reduction) whose subtree gathers
 * the most loads (counted as a tree, so an upper bound) while still fitting
 * in one kernel: the first such kernel's (in node order) always, a later
 * one's in the same round when nothing it inlines is inlined by an earlier
 * kernel past a cap (plan.c, "Splitting"). */
int fuse_find_victims(planner *p);
/* A leaf instance's load count, buffers and slot key for fuse_find_victims. */
void fuse_victim_leaf(const planner *p, inst *i);
/* A non-leaf instance's counts from its inputs' (capped, see inst.nload),
 * and i offered to its kernel's candidates if it is one; whether the counts
 * changed. */
bool fuse_victim_counts(planner *p, inst *i);
/* Offers instance i to its kernel's victim candidates if it is one (false
 * only when out of memory: p->vfail). */
bool fuse_victim_offer(planner *p, inst *i);
/* Splits the kernels with more than FUSE_MAX_OPS operations: walking a
 * kernel's inlined map instances in node order (producers first) and
 * counting their fns' operations, the last node before the count would pass
 * the cap becomes a root and the count restarts after it. Returns how many
 * roots it made. */
int fuse_split_big(planner *p);

/* ---- plan_build.c ---- */
/* The buffer plan: input, output and temporary slots. */
lf_status fuse_plan_slots(planner *p, fuse_schedule *s, int n, lf_node *const *outs);
/* Builds the kernel of root k (and of the roots that joined it) into kn. */
lf_status fuse_build_kernel(planner *p, fuse_schedule *s, int k, fuse_kernel *kn);
/* Slot lifetimes and the sharing of memory blocks between temporaries. */
lf_status fuse_plan_memory(planner *p, fuse_schedule *s);
/* The traffic statistics of lazyfuse.h (bytes_read: per kernel, per slot it
 * loads, the largest min(slot bytes, loop iterations x element size) over
 * its loads of that slot), in one walk over the loads. */
lf_status fuse_plan_traffic(planner *p, fuse_schedule *s);

/* ---- plan_scan.c ---- */
/* Whether n is a reduction-like root that seeds a kernel of its own
 * (NODE_REDUCE or NODE_SCAN). */
static inline bool fuse_is_fold(const lf_node *n) { return n->kind == NODE_REDUCE || n->kind == NODE_SCAN; }
/* The fold's op and its reduced axes (a scan: its axis). */
lf_reduce_op fuse_fold_op(const lf_node *n);
uint32_t fuse_fold_mask(const lf_node *n);
/* Whether root e may join unit u as an epilogue or pass under the scan
 * rules: a scan unit takes only epilogues, a scan joins nothing. */
bool fuse_scan_allows(const planner *p, int e, const struct unit *u, role r);
/* The instance of n in kernel k at map m, made if new (plan_vertical.c's
 * add_inst, for the rule families in files of their own). */
inst *fuse_add_inst(planner *p, const lf_node *n, int k, const fuse_map *m);

/* ---- plan_gather.c ---- */
/* x and idx of every needed gather become roots unless they are inputs. */
void fuse_gather_fixed_roots(planner *p);
/* Makes roots of the gathers some use of which does not visit every
 * element (so that every index is checked). Returns how many. */
int fuse_gather_roots(planner *p);
/* A gather instance's inputs: x at the base map and idx at its map (both
 * leaves), into i->in[0], i->in[1]. false when out of memory. */
bool fuse_gather_instances(planner *p, inst *i);
/* Fills the FUSE_SRC_GATHER load ld for pload l among an fn's loads
 * (slot, map, gidx, gextent, gstride). false when out of memory. */
bool fuse_gather_load(planner *p, const pload *loads, int nloads, const pload *l, fuse_load *ld);

/* ---- plan_scatter.c ---- */
/* dst of every needed scatter becomes a root unless it is an input or a
 * constant; every scatter is a root. */
void fuse_scatter_fixed_roots(planner *p);
/* A scatter's own instance: idx and values at the positions' maps, dst at
 * its base map, into i->in[1], i->in[2], i->in[0]. false when out of memory. */
bool fuse_scatter_instances(planner *p, inst *i);
/* The scatter kernel's space and fields, after its body is built. */
void fuse_scatter_kernel(planner *p, int k, fuse_kernel *kn);

/* ---- plan_vertical.c: small reductions inlined ---- */
/* Reductions over at most SMALL_REDUCE elements (sum or product) of a
 * cheap input (at most CHEAP_OPS operations, none transcendental, once its
 * small expensive parts are roots) are inlined into their consumers as an
 * unrolled fold when not a root (plan.c's rule "Small reductions"); the
 * load-cap split may make one a root again (fuse_find_victims). */
enum { SMALL_REDUCE = 8 };
/* Whether n is such a reduction; when it is, makes roots of the small
 * expensive maps its input reads (planning's first step: n not a root,
 * not marked, its product map not an output). */
bool fuse_small_reduce(planner *p, const lf_node *n);
/* The instances an instance of n uses: n's inputs, or for an inlined small
 * reduction one per reduced position. */
int fuse_inst_inputs(const planner *p, const inst *i);

/* ---- plan_keep.c ---- */
/* Records kernel kn's row keeps (kn built, its fns' instances still
 * numbered). false when out of memory. */
bool fuse_row_keeps(planner *p, int k, fuse_kernel *kn);

/* ---- plan_contract.c ---- */
/* Sets cmap[] for the product map of every needed contraction. */
void fuse_contract_maps(planner *p);
/* Makes a root of every inlined small contraction whose product map is a
 * root; whether it made one. */
bool fuse_contract_roots(planner *p);
/* Whether contraction r's product map is an output (then r is a root). */
bool fuse_contract_stored(const planner *p, const lf_node *r);
/* Whether root n (a map) is computed, not loaded, in kernel k: k is a
 * contraction whose product map is n. */
bool fuse_contracts_map(const planner *p, int k, const lf_node *n);
/* An inlined small contraction (instance i of the reduce node, its cnt
 * inputs' instances already emitted into f): the fma chain of its
 * operands from 0.0, plus 0.0. The expression id, or -1 (out of memory). */
int fuse_small_contraction(lf_fn *f, const inst *i, int cnt);

/* ---- plan_sort.c ---- */
/* Every needed sort node becomes a root. */
void fuse_sort_fixed_roots(planner *p);
/* A sort's own instance: x at the map from that space to x's elements, into
 * i->in[0]. false when out of memory. */
bool fuse_sort_instances(planner *p, inst *i);
/* An earlier sort root whose kernel sort root e joins (same input, axis, k
 * and order, the other output), or -1. */
int fuse_sort_sibling(const planner *p, int e);
/* The sort kernel's space and fields, after its body is built. */
void fuse_sort_kernel(planner *p, int k, fuse_kernel *kn);

#endif /* LF_FUSION_PLAN_H */

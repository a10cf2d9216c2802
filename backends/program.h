/* backends/program.h: a compiled program, the part every compiled backend
 * shares, and the pipeline written once for all of them (program_eval):
 *
 *     program cache lookup (program_find) -> on a miss the backend's build:
 *     plan and in-place decision (program_plan) -> per kernel: layout, then
 *     codegen (program_emit) and the kernel cache keyed on the emitted text
 *     (backends/kcache.h) -> compile the misses -> the backend's run ->
 *     statistics (program_stats)
 *
 * The build is written once too (program_build): a backend supplies parts
 * (program_parts: its program struct, kernel cache, dialect, per-kernel
 * preparation, compile of a batch of misses, binding, run).
 *
 * A backend's program struct starts with a `program` (the header below) and
 * adds what it built: its kernels' layouts, parameters and compiled code,
 * its temporaries' memory. The graph's program cache (graph.h,
 * g->programs) holds these structs with the backend's free function; the
 * header says which outputs, into which buffers, under which fusion setting
 * it computes, so the lookup is the same for every backend.
 *
 * What must stay true: a program is found only for the graph version it was
 * planned for, the same outputs, the same fusion setting, the same outputs
 * written into their own inputs (fuse_in_place_target) and the same owner
 * (the backend's state that holds its memory); codegen is called from here,
 * never from the kernel cache.
 */
#ifndef LF_BACKENDS_PROGRAM_H
#define LF_BACKENDS_PROGRAM_H

#include "backends/kcache.h"
#include "codegen/codegen.h"
#include "fusion/fusion.h"
#include "graph/graph.h"

typedef struct program {
    const void *owner;              /* the backend state it belongs to */
    int version;                    /* graph version planned */
    bool fused;                     /* fusion on */
    int n;                          /* outputs */
    int *out_ids;                   /* their node ids */
    const lf_buffer **inplace;      /* per output: the input buffer it was planned to
                                       be written into (fuse_plan_in_place), else
                                       NULL; part of the program's identity (an eval
                                       of x = f(x) and one of y = f(x) are two
                                       programs: only the first drops restrict on x) */
    fuse_schedule *s;               /* the plan */
    lf_eval_stats stats;            /* schedule statistics (fuse_schedule_stats) */
} program;

/* The cached program of g that computes outs into dsts, built by the
 * backend whose programs free_fn frees and whose state is owner; marks it
 * most recently used. NULL when there is none. */
void *program_find(lf_graph *g, void (*free_fn)(void *), const void *owner, int n, lf_node *const *outs,
                   lf_buffer *const *dsts);

/* A kernel of a program being built that missed the memory cache
 * (program_build hands the backend's compile a list of them). */
typedef struct program_miss {
    int k;                          /* its kernel number */
    const lf_node *root;            /* the node that defines it (messages name
                                       it: graph_node_str) */
    const cg_layout *lay;           /* its layout (the backend's kernel holds it) */
    kcache_entry *e;                /* its entry (entry_size bytes), not in the
                                       memory cache yet */
    cg_text src;                    /* its full source (compile may free it) */
    bool done;                      /* compile loaded it (from disk or compiled)
                                       and kcache_add'ed e */
} program_miss;

/* What a compiled backend supplies to the pipeline (program_eval,
 * program_build): the parts that differ, the way tinygrad's Compiled takes
 * an allocator, a renderer, a compiler and a runtime. state is the
 * backend's state of the context, the programs' owner.
 *
 *   create       a zeroed program struct of the backend (starting with a
 *                `program`) with its own fields that free needs set; NULL
 *                when out of memory
 *   free         frees one (any part may be missing: a failed build frees it)
 *   cache        the context's in-memory kernel cache
 *   dialect      the codegen dialect kernels are emitted in
 *   prepare      after planning: the program's temporaries and per-kernel
 *                arrays (p->s is the schedule); NULL: nothing to prepare
 *   prepare_kernel  kernel k's layout lay (the backend owns it from this
 *                call on, even when it fails): parameters, scratch, partials
 *   compile      loads misses m[0..nm) in kernel order: from the disk cache
 *                or compiled, each kcache_add'ed and marked done; counts disk
 *                hits, compiles and compiler runs in *st. On failure the
 *                status of the first kernel that could not be built (its
 *                message names it), and program_build discards every miss
 *                not done
 *   discard      frees what a miss's entry that is not done holds beyond
 *                the kcache entry itself (NULL: nothing); then kcache_discard
 *   bind         kernel k of p runs entry e (in the memory cache)
 *   finish       after every kernel is bound: what needs the kernels' code
 *                (NULL: nothing); counts what it compiles in *st
 *   run          the program's kernels on dsts; no output buffer changes
 *                unless it returns LF_OK
 *
 * An interpreted backend (the CPU's schedule interpreter, backends/host.c)
 * sets create, free and run only: without a dialect the build stops after
 * the plan (no layouts, no codegen, nothing to compile).
 *
 * build and run add to *st what this eval did (cache hits, compile time,
 * outputs in place, bytes staged). what names the kernel kind in messages
 * and in LF_DEBUG=source: "kernel", "CUDA kernel". */
typedef struct program_parts {
    const char *what;
    size_t entry_size;
    program *(*create)(void *state);
    void (*free)(void *p);
    kcache *(*cache)(void *state);
    const cg_dialect *(*dialect)(const void *state);
    lf_status (*prepare)(lf_ctx *ctx, void *state, program *p);
    lf_status (*prepare_kernel)(lf_ctx *ctx, void *state, program *p, int k, cg_layout *lay);
    lf_status (*compile)(lf_ctx *ctx, void *state, program_miss *m, int nm, lf_eval_stats *st);
    void (*discard)(kcache_entry *e);
    void (*bind)(program *p, int k, kcache_entry *e);
    lf_status (*finish)(lf_ctx *ctx, void *state, program *p, lf_eval_stats *st);
    lf_status (*run)(lf_ctx *ctx, void *state, void *p, lf_buffer *const *dsts, lf_eval_stats *st);
} program_parts;

/* A new program for outs of g into dsts, written once for every compiled
 * backend: create -> program_plan -> prepare -> per kernel: layout,
 * prepare_kernel, program_emit, the memory cache (a hit, or a kernel equal
 * to an earlier miss of this program, counts as a memory hit) -> compile
 * the misses -> bind every kernel -> finish. compile_seconds is the time
 * from the first layout to the end of finish. On failure nothing is left
 * behind (the misses are discarded, the program freed). */
lf_status program_build(lf_graph *g, const program_parts *parts, void *state, int n, lf_node *const *outs,
                        lf_buffer *const *dsts, program **out, lf_eval_stats *st);

/* A backend's eval, written once: the graph's program for these outputs
 * (program_find) or a new one (program_build, kept in the graph's program
 * cache once its first run succeeded: a failed eval leaves the cache as it
 * was), run (parts->run), the statistics (program_stats) into *stats
 * (zeroed by the caller). */
lf_status program_eval(lf_graph *g, const program_parts *parts, void *state, int n, lf_node *const *outs,
                       lf_buffer *const *dsts, lf_eval_stats *stats);

/* Fills the header p (zeroed by the caller) for outs of g into dsts:
 * fuse_plan, the in-place decision of each output, the schedule's
 * statistics (LF_DEBUG=schedule prints the schedule). On failure the
 * status is the planner's or LF_ERR_NOMEM ("eval: out of memory"), and
 * program_release(p) frees what was made. */
lf_status program_plan(lf_graph *g, const void *owner, int n, lf_node *const *outs, lf_buffer *const *dsts,
                       program *p);

/* Frees what the header holds (not p itself). */
void program_release(program *p);

/* Emits kernel k of s (layout lay) in dialect d into *src (LF_DEBUG=source
 * prints it under "/ * ---- lazyfuse <what> <k> ---- * /"); what names the
 * kernel kind: "kernel", "CUDA kernel". LF_ERR_NOMEM ("eval: out of memory
 * generating <what> <k>") leaves nothing to free. */
lf_status program_emit(lf_ctx *ctx, const fuse_schedule *s, const cg_layout *lay, const cg_dialect *d, int k,
                       const char *what, cg_text *src);

/* An eval's statistics: the program's schedule statistics with this run's
 * (*run: program reuse, kernel cache hits, compile time, outputs in place,
 * bytes staged) merged in; a reused program's planning time is 0. */
void program_stats(const program *p, const lf_eval_stats *run, lf_eval_stats *out);

#endif /* LF_BACKENDS_PROGRAM_H */

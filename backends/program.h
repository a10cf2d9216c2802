/* backends/program.h: a compiled program, the part every compiled backend
 * shares, and the pipeline written once for all of them (program_eval):
 *
 *     program cache lookup (program_find) -> on a miss the backend's build:
 *     plan and in-place decision (program_plan) -> per kernel: layout, then
 *     codegen (program_emit) and the kernel cache keyed on the emitted text
 *     (backends/kcache.h) -> compile the misses -> the backend's run ->
 *     statistics (program_stats)
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

/* What a compiled backend supplies to program_eval: its programs' free
 * function, build (a program for outs of g into dsts: program_plan, then
 * per kernel a layout, program_emit and the backend's cache lookup, the
 * misses compiled; *out a struct that starts with a `program`) and run (the
 * program's kernels on dsts; no output buffer changes unless it returns
 * LF_OK). state is the backend's state of the context, the programs'
 * owner. build and run add to *st what this eval did (cache hits, compile
 * time, outputs in place, bytes staged). */
typedef struct program_parts {
    void (*free)(void *p);
    lf_status (*build)(lf_graph *g, void *state, int n, lf_node *const *outs, lf_buffer *const *dsts, void **out,
                       lf_eval_stats *st);
    lf_status (*run)(lf_ctx *ctx, void *state, void *p, lf_buffer *const *dsts, lf_eval_stats *st);
} program_parts;

/* A compiled backend's eval, written once: the graph's program for these
 * outputs (program_find) or a new one (parts->build, then kept in the
 * graph's program cache), run (parts->run), the statistics (program_stats)
 * into *stats (zeroed by the caller). */
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

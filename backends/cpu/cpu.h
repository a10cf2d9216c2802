/* backends/cpu/cpu.h: the compiled CPU backend.
 *
 * verify -> plan -> codegen (C) -> compile or cache hit -> run on the pool
 * (the pipeline is backends/program.c's program_eval; cpu.c supplies its
 * build and run).
 *
 * A context's CPU state (made on first use, freed with the context) holds
 * the thread pool, the compiler probe and the in-memory kernel cache. A
 * graph holds a program per output set (its cache of GRAPH_PROGRAMS, least
 * recently used dropped): the schedule, each kernel's layout, parameters
 * and compiled functions, and the temporaries' memory, so a re-evaluation of
 * outputs of the same graph evaluated lately plans, emits and looks up
 * nothing. Output buffers are bound at each run, never kept.
 *
 * What must stay true: everything that can fail (planning, compiling,
 * loading, allocating) happens before the first kernel runs, so a failed
 * eval changes no buffer; a kernel writes a user's output buffer in place
 * only when no kernel of the schedule reads that buffer and no other output
 * names it, else the result goes through fresh memory and is copied.
 */
#ifndef LF_CPU_H
#define LF_CPU_H

#include "graph/graph.h"

/* The CPU backend (graph/backend.h): host memory, compiled kernels, the
 * schedule interpreter as fallback (backends/host.h). Its state (ctx->state
 * [LF_BACKEND_CPU]) is made on first use, by any context whose ctx->backend
 * is CPU. */
extern const graph_backend cpu_backend;

/* Replaces the context's thread pool by one of `threads` threads (a test
 * hook: results must not depend on it). */
lf_status cpu_set_threads(lf_ctx *ctx, int threads);

#endif

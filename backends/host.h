/* backends/host.h: evaluation on the host without compiled kernels, shared
 * by the backends: the REFERENCE backend (graph/eval_ref.c's oracle), the
 * CPU backend's fallback (fusion/interp.c's schedule interpreter, when no C
 * compiler works or compiling is off), and the CUDA backend's index-error
 * message.
 *
 * What must stay true: the host evaluators return fresh arrays that are
 * copied into the outputs only after the whole evaluation succeeded, so a
 * failed eval changes no buffer; on a context whose buffers live on a device
 * (a test switching ctx->backend on a CUDA context) they run on host copies
 * of the graph's input buffers made for that one call.
 */
#ifndef LF_HOST_H
#define LF_HOST_H

#include "fusion/fusion.h"
#include "graph/graph.h"

/* The REFERENCE backend: the node-by-node oracle (graph/eval_ref.c). */
extern const graph_backend host_reference_backend;

/* Evaluates outs[0..n) into dsts on the host: with the reference evaluator
 * when reference is set, else with the schedule interpreter on the graph's
 * cached program for these outputs (planned on the first eval, as the
 * compiled backends' programs are). Fills *stats on success. */
lf_status host_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts, lf_eval_stats *stats,
                    bool reference);

/* Frees an interpreted program (the graph's program cache holds the CPU
 * fallback's programs with it; lf_eval's LF_DEBUG=fusion line knows them by it). */
void host_program_free(void *p);

/* A device kernel raised the index-error flag (no output was written): the
 * reference evaluator on host copies of the inputs names the first bad
 * index, as it would have on the host. Returns LF_ERR_INDEX; the context's
 * message is the reference's, or the device's own when the reference fails
 * otherwise. */
lf_status host_index_error_message(lf_graph *g, int n, lf_node *const *outs);

/* The host's description: "<CPU model>, N CPUs" (a backend's device_name). */
int host_device_name(const lf_ctx *ctx, char *buf, size_t cap);

/* $LF_DEBUG=fusion's lines for an eval's statistics: with the schedule
 * printed when s is given, else the program line of a compiled backend. */
void host_print_stats(const lf_eval_stats *st, const fuse_schedule *s, bool fused, const char *backend);

#endif

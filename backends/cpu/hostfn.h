/* backends/cpu/hostfn.h: the host compiler of user functions (graph_host_cc
 * of graph/graph.h), on the CPU backend's compiler path (cc.c).
 *
 * backends/driver.c points every context's ctx->hostcc at it. A context
 * keeps each distinct host translation unit compiled and loaded once
 * (ctx->hostfns, a list), until lf_ctx_destroy calls close.
 */
#ifndef LF_CPU_HOSTFN_H
#define LF_CPU_HOSTFN_H

#include "graph/graph.h"

extern const graph_host_cc cpu_hostcc;

#endif

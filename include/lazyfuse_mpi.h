/* lazyfuse_mpi.h: sharded arrays over MPI (liblazyfuse-mpi, issue 32).
 *
 * A separate library: liblazyfuse keeps no MPI dependency; a program that
 * shards links liblazyfuse-mpi (built when Meson finds MPI) and MPI.
 *
 * Model (SPMD). Every rank runs the same program and builds the same graph
 * with the ordinary builders of lazyfuse.h, on a context made by
 * lf_ctx_new_mpi. A SHARDED buffer is a global array cut into one block per
 * rank along one axis (stated per buffer): rank r holds rows
 * start_r .. start_r + count_r - 1 of that axis, and its lf_buffer has the
 * block's shape. Any other buffer of the context is REPLICATED: every rank
 * holds the whole array, with the same values. A graph is built over what
 * each rank holds, so a node over sharded data has the block's extent on the
 * sharded axis; lf_mpi_eval gives it its global meaning:
 *
 *   - elementwise maps (and zipwith, select, cast, const, ...) over sharded
 *     and replicated operands: local, no communication. A replicated operand
 *     must have extent 1 on the sharded axis (or not reach it by
 *     broadcasting); otherwise the eval is refused (its rows would not be
 *     the block's);
 *   - a reduction that keeps the sharded axis, or a scan along another axis:
 *     local (fused as lf_eval fuses it);
 *   - lf_take of a replicated table by sharded indices: local; the output is
 *     sharded like the indices;
 *   - sort, argsort, top-k along an unsharded axis: local (each row lies in
 *     the block);
 *   - lf_take along axis 0 of a table SHARDED along axis 0 (and lf_gather of
 *     a 1-d sharded array), by sharded or replicated indices that may name
 *     any row: the indices are checked against the global extent on every
 *     rank (a bad one fails the eval collectively, below), each rank sends
 *     the row numbers it needs to the ranks that hold them (MPI_Alltoall of
 *     the counts, MPI_Alltoallv of 8-byte row numbers) and the holders send
 *     the rows back (MPI_Alltoallv). The output has the indices' place:
 *     sharded like them, or replicated;
 *   - lf_topk / lf_argtopk along the sharded axis: each rank selects its
 *     block's k best per row on the host (stored input, global positions),
 *     an MPI_Allgather collects every rank's k candidates, and every rank
 *     keeps the k best in lf_sort's stable order (value, then global
 *     position: ties, -0.0 and +0.0, NaNs go to the lower global position,
 *     as in one process). Its result is replicated (a replicated output
 *     buffer). The graph is built over blocks, so lf_topk's builder checks
 *     k against the rank's block: k must be at most the smallest block (an
 *     empty block allows only k = 0), and every rank must build the same k
 *     (checked; else LF_ERR_INVALID on every rank);
 *   - lf_sort / lf_argsort along the sharded axis, into a SHARDED buffer
 *     with the input's blocks (which tells them from a top-k: lf_topk with
 *     k equal to the block into a sharded buffer is refused): a sample sort.
 *     Each rank sorts its block's elements on the host by the strict key
 *     (row of the batched axes, value in lf_sort's order, global position),
 *     P - 1 regular samples per rank are allgathered and every rank picks
 *     the same P - 1 splitters; each sorted run is cut at the splitters and
 *     sent to the bucket's rank (MPI_Alltoall of counts, MPI_Alltoallv of
 *     24-byte keys); each rank sorts what it got (a contiguous range of the
 *     global order, placed by an allgather of bucket sizes) and sends every
 *     element to the rank whose block holds its sorted position (a second
 *     MPI_Alltoallv of 16-byte (offset, value) records). argsort gives
 *     global positions. Rank r's block of the output is rows start_r ..
 *     of the one-process sort;
 *   - a reduction over the sharded axis (it must be the first of the reduced
 *     axes): the rank's block is folded locally, then combined across ranks
 *     in rank order, which is the order of positions: integer and bool sum
 *     and prod, min, max, argmin and argmax by an MPI_Allgather of the
 *     ranks' partials folded in rank order (exact: these folds are
 *     associative; for min, max and integer sum and prod the partial is the
 *     local backend's own fused kernel on the block, for argmin and argmax a
 *     host fold of the stored input); float sum, prod and mean (and the mean
 *     of integers) by a relay: rank r folds its block, on the host, starting
 *     from rank r-1's running value, received with MPI_Recv; the last rank
 *     broadcasts the result; a float sum's order cannot be regrouped. Its
 *     result is replicated: every rank gets it;
 *   - a contraction (lazyfuse.h, "Contractions": a float32 sum over one
 *     axis of a product x * y) over the sharded axis, e.g. X^T X or X^T v
 *     with the samples of X and v sharded along axis 0: a relay of the
 *     contraction's accumulator (a float partial of the current
 *     LF_CONTRACT_BLOCK block, its count, and the double of the blocks
 *     before: 16 bytes per output element): rank r receives rank r-1's,
 *     folds its block of the product (the map's inputs stored by the local
 *     eval, the map's fn evaluated on the host) with fmaf, passes them on;
 *     the last rank broadcasts. The blocks of the fmaf chain count from the
 *     start of the whole axis, wherever the rank boundaries fall, so the
 *     result is lazyfuse.h's contraction value, which every backend
 *     computes. Its result is replicated. A contraction whose contracted
 *     axis is not the sharded one (its kept axis is sharded) is local. The
 *     operands reach the product without views (see NOT SUPPORTED): X^T X is
 *     written over two sharded buffers X [n, d, 1] and X [n, 1, d];
 *   - lf_scatter (every op) and lf_bincount into a REPLICATED 1-d dst
 *     whose indices are sharded along axis 0 (at least the values' rank, so
 *     that their axis 0 is the positions' axis 0) and whose values are
 *     sharded with the same blocks or replicated without extent on that
 *     axis (a constant weight, bincount's counts): a histogram of sharded
 *     samples. The indices are checked on every rank first (a bad one fails
 *     the eval collectively, below, naming its global position); then a
 *     relay of lazyfuse.h's scatter state in position order: the running
 *     result, the current LF_SCATTER_BLOCK block's partial and the count of
 *     positions in that block (2 dst elements + 1 scalars of 8 bytes): rank
 *     r receives rank r-1's, folds its block's positions on the host with
 *     the reference's combine, flushing the partial into the result where a
 *     block of global positions ends (blocks count from the first global
 *     position, wherever the rank boundaries fall), passes it on; the last
 *     rank flushes and broadcasts. Integer ops other than SET (counts,
 *     integer weights, min, max, prod) combine exactly in any grouping
 *     (they wrap or select), so they run in parallel instead: each rank's
 *     partial from the identity, an MPI_Allgather, the partials combined
 *     into dst in rank order. Its result is replicated;
 *   - a scan along the sharded axis: inclusive integer, bool, min and max
 *     scans in parallel: the local backend's own scan of the block (fused),
 *     an MPI_Allgather of each rank's row totals, and every element folded
 *     with the totals of the ranks before it, in rank order (exact: these
 *     folds are associative); float sum and prod scans and exclusive scans
 *     by a relay of the scan's state (graph_scan_state: running value,
 *     block total, block offset and position) from rank to rank, folded on
 *     the host, so LF_SCAN_BLOCK blocks fall where they fall in one
 *     process, at any block boundary. The output is sharded like its
 *     input.
 *
 * DETERMINISM. Every result is bit-identical to the same graph built over
 * the whole arrays and evaluated by one process, at any rank count and any
 * block sizes (empty blocks included), with these exact meanings:
 *   - local results (elementwise, reductions and scans along unsharded axes,
 *     takes) are the local backend's, element for element, so they equal a
 *     one-process eval on the same backend; a take across ranks and a top-k
 *     along the sharded axis move or select values without arithmetic, so
 *     they equal a one-process eval on any backend;
 *   - scans along the sharded axis, and reductions over it, follow the
 *     reference evaluator's definition (lazyfuse.h: scans in LF_SCAN_BLOCK
 *     blocks; reductions folded in row-major order of the reduced positions,
 *     in double for floats). Integer, bool, min, max, argmin and argmax
 *     reductions and every scan are the same on every backend, so these
 *     equal a one-process eval on any backend. A FLOAT sum, prod or mean
 *     over the sharded axis equals a one-process eval on
 *     LF_BACKEND_REFERENCE; a one-process CPU or CUDA eval sums in its own
 *     fixed lanes and blocks and may differ from it in the last bits. A
 *     contraction over the sharded axis has one value on every backend
 *     (lazyfuse.h), so it equals a one-process eval on any backend. A
 *     scatter or bincount of sharded positions (every op, float add
 *     included) follows lazyfuse.h's scatter order exactly (position order
 *     within LF_SCATTER_BLOCK blocks of global positions, partials added in
 *     block order), which every backend computes, so it equals a
 *     one-process eval on any backend.
 *   No MPI reduction operator is used for values (MPI_Allreduce leaves the
 *   order open); only the ordered relay and allgathers folded in rank order.
 *
 * Cost (what is communicated per eval; docs/mpi.md has the table and a
 * model for N machines): elementwise, local reductions, local sorts and
 * takes of a replicated table: nothing but the status agreements (three
 * MPI_Allreduce MINLOC of two ints, one more per output computed across
 * ranks, and a broadcast of the message when an eval fails).
 * A reduction over the sharded axis: one partial per output element per
 * rank (allgather), or a relay of one accumulator (24 bytes) per output
 * element through every rank plus one broadcast. A scan: one accumulator
 * per row per rank (allgather), or a relay of one state (96 bytes) per
 * row. A contraction over the sharded axis: a relay of 16 bytes per output
 * element through every rank plus one broadcast (serial, like the float
 * relays; its host fold evaluates the product's fn per element of the
 * block). A take across ranks: an MPI_Alltoall of one int per rank pair, 8
 * bytes per index to its holder and the row (the table's row bytes) back:
 * (8 + row bytes) per index whose row another rank holds. A top-k along the
 * sharded axis: an allgather of k candidates (16 bytes each: value and
 * position) per row per rank, and the candidates' host selection (a heap
 * of the k best over the block's stored rows: O(n log k) per block). A sort along the
 * sharded axis: (P - 1) samples of 24 bytes per rank allgathered, then
 * every element moves twice, 24 bytes to its bucket and 16 bytes to its
 * place (about 40 bytes per element, less what stays on its rank), plus two
 * MPI_Alltoall of counts and an allgather of P sizes; two host sorts of
 * about n / P keys per rank. A scatter or bincount of sharded positions: a
 * relay of (2 m + 1) * 8 bytes (m: dst elements) through every rank plus a
 * broadcast of 8 m bytes, its host fold serial across ranks (floats and
 * SET), or an allgather of 8 m bytes per rank (integer ops, in parallel);
 * one scalar host combine per position on the stored idx and values. The relay is SERIAL across ranks: rank r folds after rank r-1 has,
 * so the host fold of a float reduction or scan over the sharded axis does
 * not speed up with more ranks (the fused work before it, the input's map,
 * does). A parallel scheme (per-rank partials
 * of the LF_SCAN_BLOCK blocks, with a halo for blocks that straddle ranks)
 * is the next step (docs/mpi.md). Host folds (the relays, argmin and
 * argmax) run the reference evaluator's scalar fold, element by element:
 * tens of ns per element, far slower than a kernel, after the fold's input
 * was stored by the local eval. Outputs are computed into temporaries and
 * copied (through host memory) into their buffers after the agreement.
 *
 * NOT SUPPORTED (yet): on sharded operands, views (reshape, permute,
 * slice, broadcast_to, expand_dims, pad, concat), gathers other than the
 * two takes above (take_along_axis of a sharded n-d array, a take along
 * another axis of a sharded table), scatters and bincounts other than the
 * one above (into a sharded or n-d dst, or with indices sharded along
 * another axis), random and iota meeting a sharded
 * operand along its axis, two sharded operands with different blocks, a
 * reduction over the sharded axis that also reduces an axis before it, and
 * any node that uses the result of a reduction (a contraction included) or
 * scan over the sharded axis, of a take or a scatter across ranks, of a top-k or a sort
 * along it (evaluate that result first, into a replicated or sharded buffer,
 * and feed it to a second graph; this includes lf_scan_dtype into a
 * narrower dtype than the scan's own, which is a scan and then a cast). lf_mpi_eval refuses each with
 * LF_ERR_BACKEND and a message naming the node and the operation:
 * "mpi: node 5 (slice f32[4,3]) reads sharded data: a view (reshape, ...)
 * is not supported on sharded arrays yet". It never returns a wrong answer
 * for them.
 * min, max, argmin and argmax over the sharded axis need a non-empty block
 * on every rank: lf_reduce refuses an empty set when the graph is built.
 *
 * ERRORS are collective: lf_mpi_eval is called by every rank of the
 * communicator, and when it fails on any rank (a bad index in one rank's
 * block, an unsupported node, a bad output buffer), it fails on every rank
 * with the status and lf_errmsg of the lowest failing rank, prefixed with
 * "rank R: " (positions in a local take's index message are within that
 * rank's block; a take across ranks names the global position of the bad
 * index in the index array: "rank 1: node 2 (take f32[9,2,2]): index 45 out
 * of range for axis 0 of size 38 at position [14,1]", the node shown with
 * the rank's block shape; a scatter or bincount across
 * ranks gives one process's message exactly after "rank R: ", e.g. "node 3
 * (scatter add f32[13]): index 15 out of range for axis 0 of size 13 at
 * position [299]", the position in the global positions),
 * and no rank's output buffers change. Outputs are computed into
 * temporaries, copied to host memory, and copied into the output buffers
 * only after every rank agreed that all of that succeeded (allocation
 * failures included: checked by failing each allocation of an eval in turn
 * on one rank). The last copy allocates nothing; on the CPU and reference
 * backends it cannot fail (a device backend's copy could, and then ranks
 * before the failing one would have written: not reachable today, the
 * MPI path runs on host backends only in the tests). Every byte between processes goes through
 * MPI, on a duplicate of the communicator made by lf_ctx_new_mpi.
 *
 * Threads and MPI: call these from the thread that initialised MPI (any
 * MPI thread level). lf_ctx_new_mpi, lf_mpi_buffer_new_sharded and
 * lf_mpi_eval are collective; the others are local.
 */
#ifndef LAZYFUSE_MPI_H
#define LAZYFUSE_MPI_H

#include <mpi.h>

#include "lazyfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A context over comm (collective on comm; comm is duplicated). opt as
 * lf_ctx_new's, for the local backend of each rank. NULL on failure with
 * the reason in lf_errmsg(NULL) (then on every rank). */
LF_API lf_ctx *lf_ctx_new_mpi(MPI_Comm comm, const lf_ctx_options *opt);
/* Destroys a context made by lf_ctx_new_mpi (and its buffers, graphs and
 * the duplicated communicator). Not collective. NULL is a no-op. Use it,
 * not lf_ctx_destroy, for such a context: liblazyfuse-mpi keeps what it
 * knows of the context (communicator, blocks) under the context's address
 * and drops it here. */
LF_API void lf_ctx_destroy_mpi(lf_ctx *ctx);
/* This rank and the rank count of an MPI context; -1 for another context. */
LF_API int lf_mpi_rank(const lf_ctx *ctx);
LF_API int lf_mpi_size(const lf_ctx *ctx);

/* A sharded buffer of global shape `shape`, cut along `axis` (negative
 * counts from the end; ndim >= 1): counts[r] rows of that axis on rank r
 * (counts non-negative, summing to the axis' extent, the same array on
 * every rank), or NULL for the balanced split (the first extent % size
 * ranks get one row more; ranks beyond the extent get empty blocks). The
 * returned lf_buffer has the block's shape and is used with lazyfuse.h's
 * calls (lf_input, lf_buffer_write of the block's bytes, ...). Collective:
 * every rank passes the same arguments (checked; a mismatch fails on every
 * rank, LF_ERR_INVALID). Errors: LF_ERR_NULL, LF_ERR_AXIS, LF_ERR_SHAPE
 * (counts that do not sum to the extent, a negative count), LF_ERR_STATE
 * (not an MPI context). Free it with lf_mpi_buffer_free (or with the
 * context), never with lf_buffer_free: its blocks are kept under the
 * buffer's address until lf_mpi_buffer_free. */
LF_API lf_buffer *lf_mpi_buffer_new_sharded(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape, int axis,
                                            const int64_t *counts);
/* Frees a buffer of an MPI context (sharded or not); NULL is a no-op. */
LF_API void lf_mpi_buffer_free(lf_ctx *ctx, lf_buffer *b);
/* Where b lies: *axis the sharded axis (-1 for a replicated buffer), *start
 * and *count this rank's rows of it, *global the axis' global extent (for a
 * replicated buffer: 0, the extent of axis 0 (1 for 0-d), same). Any out
 * pointer may be NULL. LF_ERR_STATE for a buffer of another context. */
LF_API lf_status lf_mpi_buffer_block(const lf_ctx *ctx, const lf_buffer *b, int *axis, int64_t *start,
                                     int64_t *count, int64_t *global);

/* Evaluates n outputs of g on every rank (collective), as lf_eval does, with
 * the meaning stated at the top of this header. A sharded output needs a
 * sharded buffer with the output's blocks (the blocks of the sharded
 * operands it derives from, along the axis that carries them); a replicated
 * output (a reduction over the sharded axis, or a node of replicated
 * operands only) needs a replicated buffer. */
LF_API lf_status lf_mpi_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts);

#ifdef __cplusplus
}
#endif
#endif /* LAZYFUSE_MPI_H */

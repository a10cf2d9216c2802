/* backends/cpu/sort_kernel.h: running a sort kernel (fusion/plan_sort.c) on
 * the CPU: the generated key pass, the sort runtime (backends/cpu/sort.h),
 * then the slots. See sort_kernel.c. */
#ifndef LF_CPU_SORT_KERNEL_H
#define LF_CPU_SORT_KERNEL_H

#include "backends/cpu/pool.h"
#include "codegen/codegen.h"

typedef struct cpu_sort_job {
    const cg_layout *lay;          /* the sort kernel's layout (lay->kernel->sort) */
    cg_sort_fn keys;               /* lf_k_run: keys of flat positions into B[wbuf];
                                      returns whether a value there is one its key
                                      does not give back (-0.0, a NaN not canonical) */
    cg_run_fn raw;                 /* lf_k_raw: values of flat positions into B[wbuf] */
    void *const *B;                /* the kernel's buffers as bound for this eval */
    const int64_t *P;              /* its parameters */
    void *values;                  /* the values node's slot memory, or NULL */
    void *indices;                 /* the indices node's slot memory, or NULL */
    struct cpu_sort_cache *cache;  /* the context's kept work memory (backends/cpu/sort.h), or NULL */
} cpu_sort_job;

/* Runs the job: rows in cache-sized chunks on the pool's threads (each
 * chunk's keys computed into the thread's own memory, sorted or selected
 * there, its entries written out), or, for fewer long rows than threads,
 * all keys at once, sorted across the pool. Results are the same for any
 * thread count (a stable sort's order is unique). LF_ERR_NOMEM (message
 * recorded on ctx) when work memory cannot be had; the slots may then be
 * partly written (the backend stages the outputs of a sort kernel). */
lf_status cpu_run_sort(lf_ctx *ctx, cpu_pool *pool, int64_t parallel_min, const cpu_sort_job *job);

#endif

/* backends/cpu/unit.h: several kernels in one translation unit, and several
 * units compiled at once (the cold path of the CPU backend, cpu.c).
 *
 * A compiler run costs a fixed part (driver, cc1 reading the prelude's
 * helpers, as, ld: about 28 ms at -O3 here) and a part per kernel (about
 * 16 ms), so the kernels a program misses are compiled together: one unit
 * holds the C prelude once, then each kernel's functions with its "lf_k_"
 * names renamed to a prefix of its own (cpu.c derives it from the kernel's
 * disk key, so an object names its kernels by what they are, wherever it
 * is stored). The kernels' own sources are never changed: they stay the
 * cache keys.
 *
 * What must stay true: a unit's text is the prelude of its first kernel
 * followed by every kernel's text after that prelude, in order, with
 * "lf_k_" replaced where it starts an identifier and nowhere else; every
 * kernel of a unit must start with the same prelude (cg_emit_kernel prints
 * the dialect's, a constant); cpu_units_compile runs cc_compile, which is
 * thread-safe, on the pool's threads, one unit per thread.
 */
#ifndef LF_CPU_UNIT_H
#define LF_CPU_UNIT_H

#include "backends/cpu/pool.h"

#include <stdbool.h>
#include <stddef.h>

/* One unit to compile. */
typedef struct cpu_unit {
    char *text;                     /* the unit's source (cpu_unit_source) */
    int first, count;               /* its kernels: the caller's items [first, first + count) */
    void *so;                       /* the compiled object (graph_malloc'd), when rc is 0 */
    size_t len;                     /* its bytes */
    char *log;                      /* cc_compile's message when rc is -1 (NULL: out of memory) */
    int rc;                         /* cc_compile's result: 0 compiled, -1 failed */
    const void *obj;                /* an object to link in (cc_compile_with), NULL none */
    size_t obj_len;                 /* its bytes */
} cpu_unit;

/* The source of a unit of n kernels: srcs[i] is kernel i's whole source,
 * starting with the same prelude_len bytes of prelude as every other;
 * prefixes[i] replaces "lf_k_" at the start of an identifier in kernel i's
 * text after the prelude. graph_malloc'd; NULL when out of memory. */
char *cpu_unit_source(size_t prelude_len, int n, const char *const *srcs, const char *const *prefixes);

/* Compiles units[0..n) (each unit's text and object) with cc_compile_with(flags, libs,
 * timeout_s), filling so, len, log and rc: one unit per pool thread, all at
 * once when the pool has as many threads (the calling thread compiles
 * unit 0). */
void cpu_units_compile(cpu_pool *pool, cpu_unit *units, int n, const char *const *flags,
                       const char *const *libs, double timeout_s);

#endif

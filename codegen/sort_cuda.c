/* codegen/sort_cuda.c: the CUDA sort module (sort, argsort and top-k on the
 * device) and its launch plans.
 *
 * The backend runs three steps per sort node: a generated kernel writes each
 * row's keys (order-preserving unsigned integers, graph_sort_key: uint32 or
 * uint64, descending already folded in) into a dense device array
 * K[nrows][n]; the launches planned here sort every row stably ascending
 * (equal keys keep their position order) and write the first k entries of
 * each row, keys_out[r*k + j] (K's width) and pos_out[r*k + j] (int64
 * position in the row), either optional; a generated pass then gathers the
 * values through pos_out (or maps keys_out back). The module is fixed: one
 * text (cg_cuda_sort_source) for every graph, compiled once per context.
 *
 * Three paths, chosen from the shape alone (cg_cuda_plan_sort):
 *  - BLOCK, n <= 16 * threads (4096 keys at 256 threads): a block per row,
 *    one launch for all rows (grid-stride over rows). The block sorts its
 *    row in shared memory with a stable LSD radix sort of 4-bit digits (8
 *    passes for 32-bit keys, 16 for 64-bit; a pass whose digit is the same
 *    for the whole row is skipped): per pass, per-thread digit counts
 *    (thread t holds items 16t.., blocked), one exclusive block scan of the
 *    (digit, thread) counts, a scatter through a padded shared exchange.
 *  - SELECT, 1 <= k <= LF_TOPK_SELECT (64) and longer rows: a block per row,
 *    one launch. Each thread keeps the k least (key, position) of its
 *    contiguous part of the row, sorted in local memory (one read of the
 *    row), then the lists merge pairwise in shared memory; threads per
 *    block = min(256, 2048 / k) rounded down to a power of two (32 at k =
 *    64), so the candidates fit. A single very long row is read by one block
 *    only: fine for batches, slow for one row of millions (the RADIX path
 *    would then be faster; not chosen automatically yet).
 *  - RADIX, anything else (k > 64 and n > 16 * threads): a global LSD radix
 *    sort of 8-bit digits, 4 passes (32-bit keys) or 8 (64-bit), three
 *    launches a pass, all rows at once (segmented: a tile of 16 * threads
 *    keys never crosses a row): lf_sort_hist counts each tile's digits,
 *    lf_sort_scan scans each row's (digit, tile) counts (a block per row),
 *    lf_sort_scatter sorts each tile by the digit in shared memory (two
 *    4-bit block passes: stable) and writes each key to its row position.
 *    Keys and positions ping-pong between two scratch buffers; the last
 *    pass writes only the first k of each row into the outputs. Scratch:
 *    2 * nrows * n * (key bytes + 8) + nrows * 256 * tiles * 8.
 *
 * Why our own kernels and not CUB (cub::DeviceSegmentedSort,
 * cub::BlockRadixSort, whose headers ship with the toolkit): (1) the tests
 * run every kernel on the host emulation of tests/cuda_emu.c in CI without
 * a GPU; CUB is built on warp shuffles, inline PTX and libcu++ and cannot
 * run there, so its use would be checked only on a GPU; (2) NVRTC compiles
 * CUB only with the toolkit's include tree at run time (a dependency the
 * backend does not have: it loads libnvrtc alone), and its templates add
 * their own compile time (not measured; this module takes about 4 s with
 * NVRTC on a busy 2-core machine, once per device, then the disk cache
 * can hold it); (3) CUB's device-wide sorts are
 * host-launched (cub::DeviceRadixSort needs the runtime API, not the driver
 * API this backend uses), so only its block primitives would be usable
 * anyway. Fusion is unaffected by the choice: the key map and the payload
 * gather live in the generated passes around these launches.
 *
 * What the CUDA backend does with it (backends/cuda/sort.c): compile
 * cg_cuda_sort_source() once per context like a kernel (cuda_module_load:
 * NVRTC with cs->arch / cs->ptx, disk-cache key from its text,
 * cuModuleLoadData) and keep the module until the context goes; per sort
 * kernel, at program build, cg_cuda_plan_sort(nrows, n, k,
 * graph_sort_key_wide(x's dtype), false, true, &plan) and
 * cg_cuda_plan_sort_write, and look up each launch's entry
 * (cuModuleGetFunction); per eval, before its first launch (cuda.h:
 * everything fallible first), allocate the key pass's work area
 * (cg_cuda_sort_work_bytes: K, then V when the kernel has a values node),
 * pos_out (nrows * k int64) and plan.scratch_bytes (no zeroing needed), and
 * fill the words (cg_cuda_sort_fill_args, cg_cuda_sort_write_args). At run
 * time, on the context's stream: the generated key pass (emit_cuda.c:
 * writes K and V), then for l in 0 .. nlaunches: cuLaunchKernel(fn[l],
 * grid, block, shared_bytes, stream, {words + l * nwords}), then the output
 * pass lf_sort_write (indices = pos_out, values = V[row, pos_out], moved as
 * bits, into the nodes' slots). The work area, the scratch and pos_out go
 * back to the caching allocator once the output pass is queued (stream
 * order). Checked on the host emulation (tests/test_cuda_codegen.c: whole
 * schedules with sorts; tests/test_cuda_sort.c: every path) and against a
 * fake driver (tests/test_cuda.c); never run on a GPU yet.
 *
 * What must stay true:
 *  - results depend on nothing but the keys: a stable sort's first k are
 *    unique, and grids come from the shape alone (no sm_count), so every
 *    path and every device gives the same bits;
 *  - every kernel takes ONE by-value lf_args of LF_SORT_WORDS 8-byte words
 *    (cg_cuda_sort_fill_args), like the generated kernels; launch l reads
 *    its own words (the RADIX passes differ in shift and buffers);
 *  - no dynamic shared memory (every launch's shared_bytes is 0; static
 *    shared memory is at most 44 KB per block, under the 48 KB that needs
 *    no opt-in) and no scratch initialisation: every scratch word read was
 *    written by an earlier launch of the plan;
 *  - blocks are multiples of 32 threads, at most 256 (the block scan rakes
 *    over 32 threads; LF_MAXT sizes the shared arrays).
 */
#include "codegen/codegen.h"

#include <string.h>

/* The module (NVRTC: no #include). Kept as one string so the library needs
 * no file at run time; its own comments say what each kernel does. */
static const char SORT_SOURCE[] =
    "/* lazyfuse: the sort module (codegen/sort_cuda.c). Stable ascending sort of\n"
    " * unsigned keys per row, first k entries. Arguments: lf_args words (see\n"
    " * cg_cuda_sort_fill_args). */\n"
    "typedef unsigned long long lf_u64;\n"
    "typedef long long lf_i64;\n"
    "enum {\n"
    "    LF_W_KEYS, LF_W_KOUT, LF_W_POUT, LF_W_NROWS, LF_W_N, LF_W_K, LF_W_SRCK, LF_W_SRCP, LF_W_DSTK, LF_W_DSTP,\n"
    "    LF_W_HIST, LF_W_TILES, LF_W_SHIFT, LF_W_NWORDS\n"
    "};\n"
    "struct lf_args { lf_u64 w[LF_W_NWORDS]; };\n"
    "#define LF_IPT 16                            /* items per thread of a block sort */\n"
    "#define LF_MAXT 256                          /* threads per block, at most */\n"
    "#define LF_XCAP (LF_MAXT * LF_IPT)           /* items of a block sort, at most */\n"
    "#define LF_XSIZE (LF_XCAP + LF_XCAP / 32)    /* the exchange, one pad per 32 */\n"
    "#define LF_PAD(i) ((i) + ((i) >> 5))\n"
    "#define LF_SEL_CAP 2048                      /* top-k: candidates a block merges */\n"
    "#define LF_SEL_K 64                          /* top-k: k at most */\n"
    "#define LF_POS_NONE 0x7fffffffffffffffLL\n"
    "\n"
    "template <typename K> __device__ __forceinline__ K lf_kmax() { return (K)~(K)0; }\n"
    "\n"
    "/* Exclusive scan, in place, of the 16 * blockDim.x counts a[] (thread t\n"
    " * sums a[16t .. 16t+16), then a raking scan of the sums over 32 threads).\n"
    " * blockDim.x: a multiple of 32. Starts and ends with the block in step. */\n"
    "__device__ __forceinline__ void lf_scan_counts(unsigned *a, unsigned *tot, unsigned *rake) {\n"
    "    const int t = threadIdx.x, per = blockDim.x / 32;\n"
    "    unsigned s = 0;\n"
    "    for (int i = 0; i < 16; i++) s += a[16 * t + i];\n"
    "    tot[t] = s;\n"
    "    __syncthreads();\n"
    "    if (t < 32) {\n"
    "        unsigned r = 0;\n"
    "        for (int i = 0; i < per; i++) r += tot[t * per + i];\n"
    "        rake[t] = r;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (t == 0) {\n"
    "        unsigned r = 0;\n"
    "        for (int i = 0; i < 32; i++) {\n"
    "            unsigned v = rake[i];\n"
    "            rake[i] = r;\n"
    "            r += v;\n"
    "        }\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (t < 32) {\n"
    "        unsigned r = rake[t];\n"
    "        for (int i = 0; i < per; i++) {\n"
    "            unsigned v = tot[t * per + i];\n"
    "            tot[t * per + i] = r;\n"
    "            r += v;\n"
    "        }\n"
    "    }\n"
    "    __syncthreads();\n"
    "    unsigned r = tot[t];\n"
    "    for (int i = 0; i < 16; i++) {\n"
    "        unsigned v = a[16 * t + i];\n"
    "        a[16 * t + i] = r;\n"
    "        r += v;\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n"
    "\n"
    "/* Stable block sort by key bits [lo, hi) (4-bit LSD passes). Thread t holds\n"
    " * items t*ipt .. t*ipt+ipt-1 (blocked) in key[], pos[]; the block sorts\n"
    " * ipt * blockDim.x items (at most LF_XCAP). On return the sorted items are\n"
    " * in the exchange xk[], xp[] at LF_PAD(sorted index); the counts of a pass\n"
    " * alias xk. A pass whose digit is the same for every item is skipped (a\n"
    " * block-uniform test), except the last, which fills the exchange. */\n"
    "template <typename K>\n"
    "__device__ __forceinline__ void lf_block_sort(K *key, unsigned short *pos, int ipt, int lo, int hi, K *xk,\n"
    "                                              unsigned short *xp, unsigned *tot, unsigned *rake) {\n"
    "    const int t = threadIdx.x, T = blockDim.x;\n"
    "    const unsigned N = (unsigned)(ipt * T);\n"
    "    unsigned *cnt = (unsigned *)xk;\n"
    "    for (int b = lo; b < hi; b += 4) {\n"
    "        const bool last = b + 4 >= hi;\n"
    "        unsigned c[16];\n"
    "        for (int d = 0; d < 16; d++) c[d] = 0;\n"
    "        for (int j = 0; j < ipt; j++) c[(unsigned)(key[j] >> b) & 15u]++;\n"
    "        __syncthreads(); /* the exchange's readers are done */\n"
    "        for (int d = 0; d < 16; d++) cnt[d * T + t] = c[d];\n"
    "        __syncthreads();\n"
    "        lf_scan_counts(cnt, tot, rake);\n"
    "        bool skip = false;\n"
    "        for (int d = 0; d < 16; d++) {\n"
    "            c[d] = cnt[d * T + t];\n"
    "            unsigned s = cnt[d * T], e = d < 15 ? cnt[(d + 1) * T] : N;\n"
    "            if (s == 0 && e == N) skip = true;\n"
    "        }\n"
    "        __syncthreads(); /* the counts are read: the exchange may be written */\n"
    "        if (skip && !last) continue;\n"
    "        for (int j = 0; j < ipt; j++) {\n"
    "            unsigned o = c[(unsigned)(key[j] >> b) & 15u]++;\n"
    "            xk[LF_PAD(o)] = key[j];\n"
    "            xp[LF_PAD(o)] = pos[j];\n"
    "        }\n"
    "        __syncthreads();\n"
    "        if (!last)\n"
    "            for (int j = 0; j < ipt; j++) {\n"
    "                int i = t * ipt + j;\n"
    "                key[j] = xk[LF_PAD(i)];\n"
    "                pos[j] = xp[LF_PAD(i)];\n"
    "            }\n"
    "    }\n"
    "}\n"
    "\n"
    "/* Rows of at most LF_IPT * blockDim.x keys: one block per row (grid-stride\n"
    " * over rows), the row sorted in shared memory, the first k written. */\n"
    "template <typename K> __device__ __forceinline__ void lf_sort_block(const lf_args &a) {\n"
    "    __shared__ K xk[LF_XSIZE];\n"
    "    __shared__ unsigned short xp[LF_XSIZE];\n"
    "    __shared__ unsigned tot[LF_MAXT], rake[32];\n"
    "    const K *keys = (const K *)a.w[LF_W_KEYS];\n"
    "    K *kout = (K *)a.w[LF_W_KOUT];\n"
    "    lf_i64 *pout = (lf_i64 *)a.w[LF_W_POUT];\n"
    "    const lf_i64 nrows = (lf_i64)a.w[LF_W_NROWS], n = (lf_i64)a.w[LF_W_N], k = (lf_i64)a.w[LF_W_K];\n"
    "    const int t = threadIdx.x, T = blockDim.x, ipt = (int)((n + T - 1) / T), N = ipt * T;\n"
    "    K key[LF_IPT];\n"
    "    unsigned short pos[LF_IPT];\n"
    "    for (lf_i64 r = blockIdx.x; r < nrows; r += gridDim.x) {\n"
    "        const K *row = keys + r * n;\n"
    "        for (int i = t; i < N; i += T) xk[LF_PAD(i)] = i < n ? row[i] : lf_kmax<K>();\n"
    "        __syncthreads();\n"
    "        for (int j = 0; j < ipt; j++) {\n"
    "            key[j] = xk[LF_PAD(t * ipt + j)];\n"
    "            pos[j] = (unsigned short)(t * ipt + j);\n"
    "        }\n"
    "        lf_block_sort<K>(key, pos, ipt, 0, 8 * (int)sizeof(K), xk, xp, tot, rake);\n"
    "        for (int j = t; j < k; j += T) {\n"
    "            if (kout) kout[r * k + j] = xk[LF_PAD(j)];\n"
    "            if (pout) pout[r * k + j] = xp[LF_PAD(j)];\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n"
    "\n"
    "/* Top-k, 1 <= k <= LF_SEL_K, blockDim.x * k <= LF_SEL_CAP: one block per\n"
    " * row. Thread t keeps the k least (key, position) of its contiguous part\n"
    " * of the row, sorted, in local memory; the lists then merge pairwise in\n"
    " * shared memory (log2(blockDim.x) rounds; (key, position) order, so ties\n"
    " * keep the lower position). */\n"
    "template <typename K> __device__ __forceinline__ void lf_sort_select(const lf_args &a) {\n"
    "    __shared__ K ck[LF_SEL_CAP];\n"
    "    __shared__ lf_i64 cp[LF_SEL_CAP];\n"
    "    const K *keys = (const K *)a.w[LF_W_KEYS];\n"
    "    K *kout = (K *)a.w[LF_W_KOUT];\n"
    "    lf_i64 *pout = (lf_i64 *)a.w[LF_W_POUT];\n"
    "    const lf_i64 nrows = (lf_i64)a.w[LF_W_NROWS], n = (lf_i64)a.w[LF_W_N];\n"
    "    const int k = (int)a.w[LF_W_K], t = threadIdx.x, T = blockDim.x;\n"
    "    K mk[LF_SEL_K];\n"
    "    lf_i64 mp[LF_SEL_K];\n"
    "    for (lf_i64 r = blockIdx.x; r < nrows; r += gridDim.x) {\n"
    "        const K *row = keys + r * n;\n"
    "        const lf_i64 lo = n / T * t + (n % T) * t / T, hi = n / T * (t + 1) + (n % T) * (t + 1) / T;\n"
    "        int c = 0;\n"
    "        for (lf_i64 i = lo; i < hi; i++) {\n"
    "            const K v = row[i];\n"
    "            if (c == k && !(v < mk[k - 1])) continue;\n"
    "            int j = c < k ? c++ : k - 1;\n"
    "            for (; j > 0 && mk[j - 1] > v; j--) {\n"
    "                mk[j] = mk[j - 1];\n"
    "                mp[j] = mp[j - 1];\n"
    "            }\n"
    "            mk[j] = v;\n"
    "            mp[j] = i;\n"
    "        }\n"
    "        for (int j = 0; j < k; j++) {\n"
    "            ck[t * k + j] = j < c ? mk[j] : lf_kmax<K>();\n"
    "            cp[t * k + j] = j < c ? mp[j] : LF_POS_NONE;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        for (int s = 1; s < T; s <<= 1) {\n"
    "            if ((t & (2 * s - 1)) == 0) {\n"
    "                K *ak = ck + t * k;\n"
    "                lf_i64 *ap = cp + t * k;\n"
    "                const K *bk = ck + (t + s) * k;\n"
    "                const lf_i64 *bp = cp + (t + s) * k;\n"
    "                for (int j = 0; j < k; j++) {\n"
    "                    mk[j] = ak[j];\n"
    "                    mp[j] = ap[j];\n"
    "                }\n"
    "                int i = 0, j = 0;\n"
    "                for (int o = 0; o < k; o++) {\n"
    "                    if (mk[i] < bk[j] || (mk[i] == bk[j] && mp[i] <= bp[j])) {\n"
    "                        ak[o] = mk[i];\n"
    "                        ap[o] = mp[i++];\n"
    "                    } else {\n"
    "                        ak[o] = bk[j];\n"
    "                        ap[o] = bp[j++];\n"
    "                    }\n"
    "                }\n"
    "            }\n"
    "            __syncthreads();\n"
    "        }\n"
    "        for (int j = t; j < k; j += T) {\n"
    "            if (kout) kout[r * k + j] = ck[j];\n"
    "            if (pout) pout[r * k + j] = cp[j];\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n"
    "\n"
    "/* Long rows, one LSD pass over 8 key bits from LF_W_SHIFT: rows are cut in\n"
    " * tiles of LF_IPT * blockDim.x keys; a block per (row, tile), grid-stride.\n"
    " * hist: digit counts of each tile, hist[(row * 256 + digit) * tiles + tile]\n"
    " * (every entry written). */\n"
    "template <typename K> __device__ __forceinline__ void lf_sort_hist(const lf_args &a) {\n"
    "    __shared__ unsigned h[256];\n"
    "    const K *src = (const K *)a.w[LF_W_SRCK];\n"
    "    lf_u64 *hist = (lf_u64 *)a.w[LF_W_HIST];\n"
    "    const lf_i64 nrows = (lf_i64)a.w[LF_W_NROWS], n = (lf_i64)a.w[LF_W_N], tiles = (lf_i64)a.w[LF_W_TILES];\n"
    "    const int shift = (int)a.w[LF_W_SHIFT], t = threadIdx.x, T = blockDim.x;\n"
    "    const lf_i64 tile_n = (lf_i64)T * LF_IPT;\n"
    "    for (lf_i64 b = blockIdx.x; b < nrows * tiles; b += gridDim.x) {\n"
    "        const lf_i64 r = b / tiles, tile = b % tiles, base = tile * tile_n;\n"
    "        const lf_i64 cnt = n - base < tile_n ? n - base : tile_n;\n"
    "        for (int d = t; d < 256; d += T) h[d] = 0;\n"
    "        __syncthreads();\n"
    "        const K *p = src + r * n + base;\n"
    "        for (lf_i64 i = t; i < cnt; i += T) atomicAdd(&h[(unsigned)(p[i] >> shift) & 255u], 1u);\n"
    "        __syncthreads();\n"
    "        lf_u64 *o = hist + r * 256 * tiles + tile;\n"
    "        for (int d = t; d < 256; d += T) o[d * tiles] = h[d];\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n"
    "\n"
    "/* Exclusive scan of each row's 256 * tiles counts in (digit, tile) order,\n"
    " * in place: each (digit, tile)'s first destination in the row. A block per\n"
    " * row (grid-stride), 16 * blockDim.x entries a round. */\n"
    "extern \"C\" __global__ void __launch_bounds__(LF_MAXT) lf_sort_scan(const lf_args a) {\n"
    "    __shared__ lf_u64 tot[LF_MAXT], rake[33];\n"
    "    lf_u64 *hist = (lf_u64 *)a.w[LF_W_HIST];\n"
    "    const lf_i64 nrows = (lf_i64)a.w[LF_W_NROWS], m = 256 * (lf_i64)a.w[LF_W_TILES];\n"
    "    const int t = threadIdx.x, T = blockDim.x, per = T / 32;\n"
    "    for (lf_i64 r = blockIdx.x; r < nrows; r += gridDim.x) {\n"
    "        lf_u64 *h = hist + r * m, carry = 0;\n"
    "        for (lf_i64 base = 0; base < m; base += (lf_i64)T * 16) {\n"
    "            const lf_i64 my = base + (lf_i64)t * 16;\n"
    "            lf_u64 s = 0;\n"
    "            for (int i = 0; i < 16; i++)\n"
    "                if (my + i < m) s += h[my + i];\n"
    "            tot[t] = s;\n"
    "            __syncthreads();\n"
    "            if (t < 32) {\n"
    "                lf_u64 x = 0;\n"
    "                for (int i = 0; i < per; i++) x += tot[t * per + i];\n"
    "                rake[t] = x;\n"
    "            }\n"
    "            __syncthreads();\n"
    "            if (t == 0) {\n"
    "                lf_u64 x = carry;\n"
    "                for (int i = 0; i < 32; i++) {\n"
    "                    lf_u64 v = rake[i];\n"
    "                    rake[i] = x;\n"
    "                    x += v;\n"
    "                }\n"
    "                rake[32] = x;\n"
    "            }\n"
    "            __syncthreads();\n"
    "            if (t < 32) {\n"
    "                lf_u64 x = rake[t];\n"
    "                for (int i = 0; i < per; i++) {\n"
    "                    lf_u64 v = tot[t * per + i];\n"
    "                    tot[t * per + i] = x;\n"
    "                    x += v;\n"
    "                }\n"
    "            }\n"
    "            __syncthreads();\n"
    "            lf_u64 x = tot[t];\n"
    "            for (int i = 0; i < 16; i++)\n"
    "                if (my + i < m) {\n"
    "                    lf_u64 v = h[my + i];\n"
    "                    h[my + i] = x;\n"
    "                    x += v;\n"
    "                }\n"
    "            carry = rake[32];\n"
    "            __syncthreads();\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "/* The pass's stable scatter: each (row, tile) block sorts its tile by the\n"
    " * 8-bit digit in shared memory (two 4-bit passes), then writes item i of\n"
    " * the sorted tile, digit d, to its row's position hist[d, tile] + i -\n"
    " * (first index of d in the sorted tile): into dst (keys and positions), or,\n"
    " * in the last pass (LF_W_DSTK 0), into the outputs when below k. Positions\n"
    " * come from LF_W_SRCP, or are the iota in the first pass (0). */\n"
    "template <typename K> __device__ __forceinline__ void lf_sort_scatter(const lf_args &a) {\n"
    "    __shared__ K xk[LF_XSIZE];\n"
    "    __shared__ unsigned short xp[LF_XSIZE];\n"
    "    __shared__ unsigned tot[LF_MAXT], rake[32], first[256];\n"
    "    const K *src = (const K *)a.w[LF_W_SRCK];\n"
    "    const lf_i64 *srcp = (const lf_i64 *)a.w[LF_W_SRCP];\n"
    "    K *dst = (K *)a.w[LF_W_DSTK], *kout = (K *)a.w[LF_W_KOUT];\n"
    "    lf_i64 *dstp = (lf_i64 *)a.w[LF_W_DSTP], *pout = (lf_i64 *)a.w[LF_W_POUT];\n"
    "    const lf_u64 *hist = (const lf_u64 *)a.w[LF_W_HIST];\n"
    "    const lf_i64 nrows = (lf_i64)a.w[LF_W_NROWS], n = (lf_i64)a.w[LF_W_N], k = (lf_i64)a.w[LF_W_K];\n"
    "    const lf_i64 tiles = (lf_i64)a.w[LF_W_TILES];\n"
    "    const int shift = (int)a.w[LF_W_SHIFT], t = threadIdx.x, T = blockDim.x, N = T * LF_IPT;\n"
    "    K key[LF_IPT];\n"
    "    unsigned short pos[LF_IPT];\n"
    "    for (lf_i64 b = blockIdx.x; b < nrows * tiles; b += gridDim.x) {\n"
    "        const lf_i64 r = b / tiles, tile = b % tiles, base = tile * N;\n"
    "        const int cnt = (int)(n - base < N ? n - base : N);\n"
    "        const K *p = src + r * n + base;\n"
    "        for (int i = t; i < N; i += T) xk[LF_PAD(i)] = i < cnt ? p[i] : lf_kmax<K>();\n"
    "        __syncthreads();\n"
    "        for (int j = 0; j < LF_IPT; j++) {\n"
    "            key[j] = xk[LF_PAD(t * LF_IPT + j)];\n"
    "            pos[j] = (unsigned short)(t * LF_IPT + j);\n"
    "        }\n"
    "        lf_block_sort<K>(key, pos, LF_IPT, shift, shift + 8, xk, xp, tot, rake);\n"
    "        for (int i = t; i < cnt; i += T) {\n"
    "            const unsigned d = (unsigned)(xk[LF_PAD(i)] >> shift) & 255u;\n"
    "            if (i == 0 || d != ((unsigned)(xk[LF_PAD(i - 1)] >> shift) & 255u)) first[d] = (unsigned)i;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        const lf_u64 *o = hist + r * 256 * tiles + tile;\n"
    "        for (int i = t; i < cnt; i += T) {\n"
    "            const K v = xk[LF_PAD(i)];\n"
    "            const int j = xp[LF_PAD(i)];\n"
    "            const unsigned d = (unsigned)(v >> shift) & 255u;\n"
    "            const lf_i64 g = (lf_i64)o[d * tiles] + (i - (lf_i64)first[d]);\n"
    "            const lf_i64 q = srcp ? srcp[r * n + base + j] : base + j;\n"
    "            if (dst) {\n"
    "                dst[r * n + g] = v;\n"
    "                dstp[r * n + g] = q;\n"
    "            } else if (g < k) {\n"
    "                if (kout) kout[r * k + g] = v;\n"
    "                if (pout) pout[r * k + g] = q;\n"
    "            }\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n"
    "\n"
    "/* The output pass: per entry e = r*k + j of the sorted positions pos (the\n"
    " * plan's pos_out), row r = (o, i) with o = r / inner, i = r % inner, writes\n"
    " * at = o*k*inner + i + j*inner (graph_sort_row_base: the node's dense\n"
    " * layout, the sorted axis at stride inner): iout[at] = pos[e] and vout[at]\n"
    " * = V[r*n + pos[e]] (elements of LF_W_ESIZE bytes: 1, 4 or 8, moved as\n"
    " * bits). Either output may be 0 (not wanted). Grid-stride over entries. */\n"
    "#define LF_W_VALS LF_W_KEYS   /* V: the key pass's values, [nrows][n] */\n"
    "#define LF_W_VOUT LF_W_KOUT   /* the values node's slot, or 0 */\n"
    "#define LF_W_IOUT LF_W_DSTP   /* the indices node's slot, or 0 */\n"
    "#define LF_W_INNER LF_W_TILES /* product of the extents after the axis */\n"
    "#define LF_W_ESIZE LF_W_SHIFT /* bytes of a value */\n"
    "extern \"C\" __global__ void __launch_bounds__(LF_MAXT) lf_sort_write(const lf_args a) {\n"
    "    const lf_i64 *pos = (const lf_i64 *)a.w[LF_W_POUT];\n"
    "    const unsigned char *V = (const unsigned char *)a.w[LF_W_VALS];\n"
    "    unsigned char *vout = (unsigned char *)a.w[LF_W_VOUT];\n"
    "    lf_i64 *iout = (lf_i64 *)a.w[LF_W_IOUT];\n"
    "    const lf_i64 nrows = (lf_i64)a.w[LF_W_NROWS], n = (lf_i64)a.w[LF_W_N], k = (lf_i64)a.w[LF_W_K];\n"
    "    const lf_i64 inner = (lf_i64)a.w[LF_W_INNER], es = (lf_i64)a.w[LF_W_ESIZE];\n"
    "    const lf_i64 total = nrows * k, stride = (lf_i64)gridDim.x * blockDim.x;\n"
    "    for (lf_i64 e = (lf_i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {\n"
    "        const lf_i64 r = e / k, j = e - r * k, o = r / inner, i = r - o * inner;\n"
    "        const lf_i64 at = o * k * inner + i + j * inner, p = pos[e];\n"
    "        if (iout) iout[at] = p;\n"
    "        if (!vout) continue;\n"
    "        const lf_i64 src = r * n + p;\n"
    "        if (es == 8) ((lf_u64 *)vout)[at] = ((const lf_u64 *)V)[src];\n"
    "        else if (es == 4) ((unsigned *)vout)[at] = ((const unsigned *)V)[src];\n"
    "        else vout[at] = V[src];\n"
    "    }\n"
    "}\n"
    "\n"
    "#define LF_ENTRY(name, fn, K) \\\n"
    "    extern \"C\" __global__ void __launch_bounds__(LF_MAXT) name(const lf_args a) { fn<K>(a); }\n"
    "LF_ENTRY(lf_sort_block32, lf_sort_block, unsigned)\n"
    "LF_ENTRY(lf_sort_block64, lf_sort_block, lf_u64)\n"
    "LF_ENTRY(lf_sort_select32, lf_sort_select, unsigned)\n"
    "LF_ENTRY(lf_sort_select64, lf_sort_select, lf_u64)\n"
    "LF_ENTRY(lf_sort_hist32, lf_sort_hist, unsigned)\n"
    "LF_ENTRY(lf_sort_hist64, lf_sort_hist, lf_u64)\n"
    "LF_ENTRY(lf_sort_scatter32, lf_sort_scatter, unsigned)\n"
    "LF_ENTRY(lf_sort_scatter64, lf_sort_scatter, lf_u64)\n";

enum {
    W_KEYS, W_KOUT, W_POUT, W_NROWS, W_N, W_K, W_SRCK, W_SRCP, W_DSTK, W_DSTP, W_HIST, W_TILES, W_SHIFT,
    NWORDS
};
_Static_assert((int)NWORDS == (int)CG_CUDA_SORT_WORDS, "lf_args of the sort module");

enum {
    DEFAULT_THREADS = 256, /* threads per block (LF_MAXT in the module) */
    IPT = 16,              /* keys per thread of a block sort (LF_IPT) */
    SEL_CAP = 2048,        /* top-k candidates a block merges (LF_SEL_CAP) */
    GRID_CAP = 1 << 20     /* blocks of a launch at most; kernels grid-stride */
};

const char *cg_cuda_sort_source(void) { return SORT_SOURCE; }

static void add(cg_cuda_sort_plan *plan, const char *entry, int64_t blocks, int threads, int pass) {
    cg_cuda_sort_launch *l = &plan->launch[plan->nlaunches++];
    l->entry = entry;
    l->grid[0] = (unsigned)(blocks < 1 ? 1 : blocks > GRID_CAP ? GRID_CAP : blocks);
    l->grid[1] = l->grid[2] = 1;
    l->block[0] = (unsigned)threads;
    l->block[1] = l->block[2] = 1;
    l->shared_bytes = 0;
    l->pass = pass;
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

bool cg_cuda_plan_sort_with(int64_t nrows, int64_t n, int64_t k, bool wide, bool want_keys, bool want_pos,
                            cg_cuda_sort_path path, int threads, cg_cuda_sort_plan *plan) {
    memset(plan, 0, sizeof *plan);
    if (threads <= 0) threads = DEFAULT_THREADS;
    if (threads < 32 || threads > DEFAULT_THREADS || (threads & (threads - 1))) return false;
    if (nrows < 0 || n < 0 || k < 0 || k > n) return false;
    plan->nrows = nrows;
    plan->n = n;
    plan->k = k;
    plan->wide = wide;
    plan->want_keys = want_keys;
    plan->want_pos = want_pos;
    plan->nwords = CG_CUDA_SORT_WORDS;
    if (path == CG_SORT_AUTO)
        path = n <= (int64_t)IPT * threads ? CG_SORT_BLOCK : k <= LF_TOPK_SELECT ? CG_SORT_SELECT : CG_SORT_RADIX;
    if (path == CG_SORT_BLOCK && n > (int64_t)IPT * threads) return false;
    if (path == CG_SORT_SELECT && k > LF_TOPK_SELECT) return false;
    plan->path = path;
    plan->threads = threads;
    if (nrows == 0 || k == 0 || (!want_keys && !want_pos)) return true; /* nothing to launch */
    if (path == CG_SORT_BLOCK) {
        add(plan, wide ? "lf_sort_block64" : "lf_sort_block32", nrows, threads, -1);
    } else if (path == CG_SORT_SELECT) {
        int t = threads;
        while ((int64_t)t * k > SEL_CAP) t /= 2;
        plan->threads = t;
        add(plan, wide ? "lf_sort_select64" : "lf_sort_select32", nrows, t, -1);
    } else {
        int64_t tile = (int64_t)IPT * threads, tiles = (n + tile - 1) / tile;
        size_t elems = (size_t)nrows * (size_t)n, kb = wide ? 8 : 4;
        plan->tiles = tiles;
        plan->scratch_keys[0] = 0;
        plan->scratch_keys[1] = align256(elems * kb);
        plan->scratch_pos[0] = 2 * plan->scratch_keys[1];
        plan->scratch_pos[1] = plan->scratch_pos[0] + align256(elems * 8);
        plan->scratch_hist = plan->scratch_pos[1] + align256(elems * 8);
        plan->scratch_bytes = plan->scratch_hist + (size_t)nrows * 256 * (size_t)tiles * 8;
        int passes = wide ? 8 : 4;
        for (int p = 0; p < passes; p++) {
            add(plan, wide ? "lf_sort_hist64" : "lf_sort_hist32", nrows * tiles, threads, p);
            add(plan, "lf_sort_scan", nrows, threads, p);
            add(plan, wide ? "lf_sort_scatter64" : "lf_sort_scatter32", nrows * tiles, threads, p);
        }
    }
    return true;
}

void cg_cuda_plan_sort(int64_t nrows, int64_t n, int64_t k, bool wide, bool want_keys, bool want_pos,
                       cg_cuda_sort_plan *plan) {
    bool ok = cg_cuda_plan_sort_with(nrows, n, k, wide, want_keys, want_pos, CG_SORT_AUTO, 0, plan);
    (void)ok;
}

size_t cg_cuda_sort_values_offset(int64_t numel, bool wide) {
    return align256((size_t)numel * (wide ? 8 : 4));
}

size_t cg_cuda_sort_work_bytes(int64_t numel, bool wide, size_t value_size) {
    return cg_cuda_sort_values_offset(numel, wide) + (value_size ? align256((size_t)numel * value_size) : 0);
}

bool cg_cuda_plan_sort_write(int64_t nrows, int64_t k, int threads, cg_cuda_sort_launch *l) {
    memset(l, 0, sizeof *l);
    if (threads <= 0) threads = DEFAULT_THREADS;
    int64_t total = nrows * k;
    if (nrows <= 0 || k <= 0 || threads < 32 || threads > DEFAULT_THREADS || (threads & (threads - 1))) return false;
    int64_t blocks = (total + threads - 1) / threads;
    l->entry = "lf_sort_write";
    l->grid[0] = (unsigned)(blocks > GRID_CAP ? GRID_CAP : blocks);
    l->grid[1] = l->grid[2] = 1;
    l->block[0] = (unsigned)threads;
    l->block[1] = l->block[2] = 1;
    l->shared_bytes = 0;
    l->pass = -1;
    return true;
}

void cg_cuda_sort_write_args(int64_t nrows, int64_t n, int64_t k, int64_t inner, size_t value_size, uint64_t values,
                             uint64_t pos, uint64_t values_out, uint64_t indices_out, uint64_t *words) {
    memset(words, 0, CG_CUDA_SORT_WORDS * sizeof *words);
    words[W_KEYS] = values_out ? values : 0;
    words[W_KOUT] = values_out;
    words[W_POUT] = pos;
    words[W_NROWS] = (uint64_t)nrows;
    words[W_N] = (uint64_t)n;
    words[W_K] = (uint64_t)k;
    words[W_DSTP] = indices_out;
    words[W_TILES] = (uint64_t)inner;
    words[W_SHIFT] = (uint64_t)value_size;
}

void cg_cuda_sort_fill_args(const cg_cuda_sort_plan *plan, uint64_t keys, uint64_t keys_out, uint64_t pos_out,
                            uint64_t scratch, uint64_t *words) {
    int passes = plan->wide ? 8 : 4;
    for (int l = 0; l < plan->nlaunches; l++) {
        uint64_t *w = words + (size_t)l * CG_CUDA_SORT_WORDS;
        memset(w, 0, CG_CUDA_SORT_WORDS * sizeof *w);
        w[W_KEYS] = keys;
        w[W_KOUT] = plan->want_keys ? keys_out : 0;
        w[W_POUT] = plan->want_pos ? pos_out : 0;
        w[W_NROWS] = (uint64_t)plan->nrows;
        w[W_N] = (uint64_t)plan->n;
        w[W_K] = (uint64_t)plan->k;
        int p = plan->launch[l].pass;
        if (p < 0) continue;
        w[W_SRCK] = p == 0 ? keys : scratch + plan->scratch_keys[(p - 1) & 1];
        w[W_SRCP] = p == 0 ? 0 : scratch + plan->scratch_pos[(p - 1) & 1];
        w[W_DSTK] = p == passes - 1 ? 0 : scratch + plan->scratch_keys[p & 1];
        w[W_DSTP] = p == passes - 1 ? 0 : scratch + plan->scratch_pos[p & 1];
        w[W_HIST] = scratch + plan->scratch_hist;
        w[W_TILES] = (uint64_t)plan->tiles;
        w[W_SHIFT] = (uint64_t)(8 * p);
    }
}

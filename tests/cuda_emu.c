/* tests/cuda_emu.c: the host emulation of CUDA kernels (cuda_emu.h). */
#include "cuda_emu.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Prepended to the CUDA text: what NVRTC provides, for g++. One block runs
 * at a time (its threads are OS threads), so a static array is the block's
 * shared memory. */
static const char EMU_SHIM[] =
    "#include <math.h>\n"
    "#include <string.h>\n"
    "#include <pthread.h>\n"
    "struct lf_dim3 { unsigned x, y, z; };\n"
    "static thread_local lf_dim3 threadIdx, blockIdx;\n"
    "static lf_dim3 blockDim, gridDim;\n"
    "static pthread_barrier_t lf_emu_barrier;\n"
    "#define __global__\n"
    "#define __device__\n"
    "#define __forceinline__ inline\n"
    "#define __launch_bounds__(n)\n"
    "#define __shared__ static\n"
    "#define __syncthreads() pthread_barrier_wait(&lf_emu_barrier)\n"
    "#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)\n"
    "template <typename T> static T __ldcg(const T *p) { T v; __atomic_load(p, &v, __ATOMIC_SEQ_CST); return v; }\n"
    "static unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }\n"
    "static float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }\n"
    "#undef NAN\n#undef INFINITY\n"
    "#define uint8_t lf_uint8_t\n#define int32_t lf_int32_t\n#define uint32_t lf_uint32_t\n"
    "#define int64_t lf_int64_t\n#define uint64_t lf_uint64_t\n"
    "#undef INT32_MAX\n#undef INT32_MIN\n#undef INT64_MAX\n#undef INT64_MIN\n#undef INT64_C\n";

/* Appended: runs one launch, a thread per CUDA thread. The threads are made
 * once per launch and run every block in turn, meeting at the barrier after
 * each (the next block reuses the static shared memory); they start only
 * once all are made, so a failed pthread_create leaves none waiting. */
static const char EMU_TRAILER[] =
    "\n#undef B\n#undef P\n#undef R\n"
    "typedef void (*lf_emu_fn)(const lf_args);\n"
    "struct lf_emu_thread { lf_emu_fn fn; const lf_args *a; unsigned grid, tx, ty; };\n"
    "static pthread_mutex_t lf_emu_mu = PTHREAD_MUTEX_INITIALIZER;\n"
    "static pthread_cond_t lf_emu_cv = PTHREAD_COND_INITIALIZER;\n"
    "static int lf_emu_go; /* 0 wait, 1 run, -1 give up */\n"
    "static void *lf_emu_run(void *p) {\n"
    "    lf_emu_thread *t = (lf_emu_thread *)p;\n"
    "    pthread_mutex_lock(&lf_emu_mu);\n"
    "    while (lf_emu_go == 0) pthread_cond_wait(&lf_emu_cv, &lf_emu_mu);\n"
    "    int go = lf_emu_go;\n"
    "    pthread_mutex_unlock(&lf_emu_mu);\n"
    "    if (go < 0) return 0;\n"
    "    blockIdx.y = blockIdx.z = 0;\n"
    "    threadIdx.x = t->tx; threadIdx.y = t->ty; threadIdx.z = 0;\n"
    "    for (unsigned b = 0; b < t->grid; b++) {\n"
    "        blockIdx.x = b;\n"
    "        t->fn(*t->a);\n"
    "        pthread_barrier_wait(&lf_emu_barrier);\n"
    "    }\n"
    "    return 0;\n"
    "}\n"
    "extern \"C\" int lf_emu_launch(void *fn, unsigned grid, unsigned bx, unsigned by, const void *words) {\n"
    "    lf_args a;\n"
    "    memcpy(&a, words, sizeof a);\n"
    "    gridDim.x = grid; gridDim.y = gridDim.z = 1;\n"
    "    blockDim.x = bx; blockDim.y = by; blockDim.z = 1;\n"
    "    unsigned n = bx * by;\n"
    "    pthread_t th[1024];\n"
    "    lf_emu_thread t[1024];\n"
    "    if (n > 1024 || pthread_barrier_init(&lf_emu_barrier, 0, n)) return -1;\n"
    "    pthread_attr_t attr;\n"
    "    pthread_attr_init(&attr);\n"
    "    pthread_attr_setstacksize(&attr, 1 << 18);\n"
    "    lf_emu_go = 0;\n"
    "    unsigned made = 0;\n"
    "    for (; made < n; made++) {\n"
    "        t[made].fn = (lf_emu_fn)fn; t[made].a = &a; t[made].grid = grid;\n"
    "        t[made].tx = made % bx; t[made].ty = made / bx;\n"
    "        if (pthread_create(&th[made], &attr, lf_emu_run, &t[made])) break;\n"
    "    }\n"
    "    pthread_mutex_lock(&lf_emu_mu);\n"
    "    lf_emu_go = made == n ? 1 : -1;\n"
    "    pthread_cond_broadcast(&lf_emu_cv);\n"
    "    pthread_mutex_unlock(&lf_emu_mu);\n"
    "    for (unsigned i = 0; i < made; i++) pthread_join(th[i], 0);\n"
    "    pthread_attr_destroy(&attr);\n"
    "    pthread_barrier_destroy(&lf_emu_barrier);\n"
    "    return made == n ? 0 : -2;\n"
    "}\n";

/* Compiles the emulated module of CUDA text src; returns its handle. */
void *emu_build(const char *src, const char *dir, int id) {
    char cpp[512], so[512];
    snprintf(cpp, sizeof cpp, "%s/k%d.cc", dir, id);
    snprintf(so, sizeof so, "%s/k%d.so", dir, id);
    FILE *f = fopen(cpp, "w");
    cr_assert(f != NULL);
    fputs(EMU_SHIM, f);
    fputs(src, f);
    fputs(EMU_TRAILER, f);
    cr_assert_eq(fclose(f), 0);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "${CXX:-c++} -std=c++17 -O1 -w -fPIC -shared -pthread -o '%s' '%s' 2>'%s.log'", so,
             cpp, cpp);
    int rc = system(cmd);
    if (rc != 0) {
        char log[4096] = "";
        snprintf(cmd, sizeof cmd, "%s.log", cpp);
        FILE *lf = fopen(cmd, "r");
        if (lf) {
            size_t m = fread(log, 1, sizeof log - 1, lf);
            log[m] = 0;
            fclose(lf);
        }
        cr_assert_fail("host C++ compile of the emulated kernel failed:\n%s\nsource: %s", log, cpp);
    }
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    cr_assert(h != NULL, "dlopen: %s", dlerror());
    unlink(cpp);
    unlink(so);
    snprintf(cmd, sizeof cmd, "%s.log", cpp);
    unlink(cmd);
    return h;
}


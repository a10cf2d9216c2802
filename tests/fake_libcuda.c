/* tests/fake_libcuda.c: a stand-in for libcuda.so.1, for testing the CUDA
 * backend's host logic on machines without a GPU (tests/test_cuda.c loads it
 * through LF_CUDA_LIBRARY).
 *
 * "Device" memory is host memory (a CUdeviceptr is the host address), every
 * "asynchronous" call completes at once, modules and functions are tokens,
 * and a launch runs nothing: it is counted and checked (non-NULL function,
 * one parameter block, non-zero grid and block), then returns
 * $FAKE_CUDA_LAUNCH. Behaviour comes from the environment, read at cuInit:
 *   FAKE_CUDA_INIT=<code>     cuInit's result (100: CUDA_ERROR_NO_DEVICE)
 *   FAKE_CUDA_DEVICES=<n>     device count (default 1)
 *   FAKE_CUDA_MEM=<bytes>     device memory; cuMemAlloc past it returns
 *                             CUDA_ERROR_OUT_OF_MEMORY (default 1 GiB)
 *   FAKE_CUDA_LOAD=<code>     cuModuleLoadData's result (default 0)
 *   FAKE_CUDA_LAUNCH=<code>   cuLaunchKernel's result (default 0)
 *   FAKE_CUDA_CC=<XY>         compute capability (default 90)
 *   FAKE_CUDA_DRIVER=<v>      cuDriverGetVersion (default 12040)
 *   FAKE_CUDA_SYNC_US=<us>    cuStreamSynchronize, cuCtxSynchronize and
 *                             cuEventSynchronize sleep this long first, as
 *                             if kernels were still running (default 0)
 * Streams: the backend's own (cuStreamCreate), the legacy and per-thread
 * default streams ((CUstream)1 and 2) and one "foreign" stream
 * (fake_cuda_foreign_stream(), standing for CuPy's or PyTorch's) are
 * accepted. Events record the host clock; cuEventElapsedTime reports the
 * time between two records. fake_cuda_log() returns the ordering calls made
 * since the last fake_cuda_log_clear() as one string of words
 * ("launch sync:ours record:E1@ours wait:foreign<E1 ctxsync ..."), so a test
 * can check what was ordered after what.
 * Fresh allocations are filled with 0xAB, so code that forgets to zero a
 * buffer is caught. fake_cuda_counters() tells the test what happened.
 * Only the ABI matters here: no CUDA header is included.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100,
       INVALID_DEVICE = 101, INVALID_IMAGE = 200, NOT_FOUND = 500, INVALID_HANDLE = 400,
       LAUNCH_FAILED = 719 };

typedef struct fake_counters {
    long inits, allocs, frees, bad_frees, memsets, htod, dtoh, dtod, syncs, loads, unloads,
        get_functions, launches, retains, releases, streams_created, streams_destroyed, set_current,
        ctx_syncs, events_created, events_destroyed;
    size_t live_bytes;             /* allocated and not freed */
    unsigned last_grid[3], last_block[3];
} fake_counters;

static fake_counters C;
static int initialized, init_result, ndevices = 1, load_result, launch_result, cc = 90,
                                    driver = 12040;
static size_t mem_limit = (size_t)1 << 30;
static long sync_us;

/* ---- the ordering log ---- */
static char oplog[8192];
static size_t oplog_len;

static void logf_op(const char *word) {
    size_t n = strlen(word);
    if (oplog_len + n + 2 >= sizeof oplog) return; /* full: later calls unseen */
    if (oplog_len) oplog[oplog_len++] = ' ';
    memcpy(oplog + oplog_len, word, n);
    oplog_len += n;
    oplog[oplog_len] = 0;
}

__attribute__((visibility("default"))) const char *fake_cuda_log(void) { return oplog; }
__attribute__((visibility("default"))) void fake_cuda_log_clear(void) { oplog_len = 0, oplog[0] = 0; }

static void sync_delay(void) {
    if (sync_us <= 0) return;
    struct timespec ts = {sync_us / 1000000, sync_us % 1000000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {}
}
static int primary_refs;

typedef struct alloc_rec {
    void *p;
    size_t bytes;
    struct alloc_rec *next;
} alloc_rec;
static alloc_rec *allocs;

static int env_int(const char *name, int dflt) {
    const char *e = getenv(name);
    return e && *e ? atoi(e) : dflt;
}

__attribute__((visibility("default"))) void fake_cuda_counters(fake_counters *out) { *out = C; }

#define API __attribute__((visibility("default"))) CUresult

API cuInit(unsigned flags) {
    (void)flags;
    C.inits++;
    init_result = env_int("FAKE_CUDA_INIT", 0);
    ndevices = env_int("FAKE_CUDA_DEVICES", 1);
    load_result = env_int("FAKE_CUDA_LOAD", 0);
    launch_result = env_int("FAKE_CUDA_LAUNCH", 0);
    cc = env_int("FAKE_CUDA_CC", 90);
    driver = env_int("FAKE_CUDA_DRIVER", 12040);
    sync_us = env_int("FAKE_CUDA_SYNC_US", 0);
    const char *m = getenv("FAKE_CUDA_MEM");
    if (m && *m) mem_limit = (size_t)strtoull(m, NULL, 10);
    initialized = init_result == OK;
    return init_result;
}

API cuDriverGetVersion(int *v) {
    if (!v) return INVALID_VALUE;
    *v = driver;
    return OK;
}

API cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case OK: *s = "CUDA_SUCCESS"; return OK;
    case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
    case NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return OK;
    case INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return OK;
    case LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; return OK;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    default: *s = NULL; return INVALID_VALUE;
    }
}

API cuGetErrorString(CUresult r, const char **s) {
    switch (r) {
    case OK: *s = "no error"; return OK;
    case OUT_OF_MEMORY: *s = "out of memory"; return OK;
    case NO_DEVICE: *s = "no CUDA-capable device is detected"; return OK;
    case INVALID_IMAGE: *s = "device kernel image is invalid"; return OK;
    case LAUNCH_FAILED: *s = "unspecified launch failure"; return OK;
    case INVALID_VALUE: *s = "invalid argument"; return OK;
    default: *s = NULL; return INVALID_VALUE;
    }
}

#define NEED_INIT \
    if (!initialized) return NOT_INITIALIZED

API cuDeviceGetCount(int *n) {
    NEED_INIT;
    *n = ndevices;
    return OK;
}

API cuDeviceGet(int *dev, int ordinal) {
    NEED_INIT;
    if (ordinal < 0 || ordinal >= ndevices) return INVALID_DEVICE;
    *dev = ordinal;
    return OK;
}

API cuDeviceGetName(char *name, int len, int dev) {
    NEED_INIT;
    if (dev < 0 || dev >= ndevices || len < 1) return INVALID_VALUE;
    strncpy(name, "Fake CUDA Device", (size_t)len - 1);
    name[len - 1] = 0;
    return OK;
}

API cuDeviceGetAttribute(int *v, int attr, int dev) {
    NEED_INIT;
    if (dev < 0 || dev >= ndevices) return INVALID_DEVICE;
    switch (attr) {
    case 16: *v = 132; return OK;
    case 75: *v = cc / 10; return OK;
    case 76: *v = cc % 10; return OK;
    default: return INVALID_VALUE;
    }
}

API cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    NEED_INIT;
    (void)dev;
    *bytes = mem_limit;
    return OK;
}

static int primary_token;

API cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    NEED_INIT;
    (void)dev;
    C.retains++;
    primary_refs++;
    *ctx = &primary_token;
    return OK;
}

API cuDevicePrimaryCtxRelease_v2(int dev) {
    (void)dev;
    C.releases++;
    if (primary_refs <= 0) return INVALID_VALUE;
    primary_refs--;
    return OK;
}

/* The unversioned name too (lazyfuse-bench's copy line asks for it). */
API cuDevicePrimaryCtxRelease(int dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

API cuCtxSetCurrent(void *ctx) {
    C.set_current++;
    return ctx == &primary_token || !ctx ? OK : INVALID_VALUE;
}

static int stream_token, foreign_token;

__attribute__((visibility("default"))) void *fake_cuda_foreign_stream(void) { return &foreign_token; }

/* Whether s is a stream this driver knows, and its name in the log. */
static const char *stream_name(void *s) {
    if (s == &stream_token) return "ours";
    if (s == &foreign_token) return "foreign";
    if (s == NULL) return "null";
    if (s == (void *)1) return "legacy";
    if (s == (void *)2) return "ptds";
    return NULL;
}

API cuStreamCreate(void **s, unsigned flags) {
    NEED_INIT;
    if (flags != 1) return INVALID_VALUE; /* the backend asks for a non-blocking stream */
    C.streams_created++;
    *s = &stream_token;
    return OK;
}

API cuStreamDestroy_v2(void *s) {
    if (s != &stream_token) return INVALID_VALUE;
    C.streams_destroyed++;
    return OK;
}

API cuStreamSynchronize(void *s) {
    const char *name = stream_name(s);
    if (!name) return INVALID_VALUE;
    sync_delay();
    if (s == &stream_token) C.syncs++;
    char w[64];
    snprintf(w, sizeof w, "sync:%s", name);
    logf_op(w);
    return OK;
}

API cuCtxSynchronize(void) {
    NEED_INIT;
    sync_delay();
    C.ctx_syncs++;
    logf_op("ctxsync");
    return OK;
}

/* Events: a number (for the log) and the host time of the last record. */
typedef struct fake_event {
    int magic, id;
    struct timespec at;
    int recorded;
} fake_event;
static int next_event_id = 1;

API cuEventCreate(void **ev, unsigned flags) {
    NEED_INIT;
    (void)flags;
    fake_event *e = calloc(1, sizeof *e);
    if (!e) return OUT_OF_MEMORY;
    e->magic = 0xe7e7;
    e->id = next_event_id++;
    C.events_created++;
    *ev = e;
    return OK;
}

API cuEventDestroy_v2(void *ev) {
    fake_event *e = ev;
    if (!e || e->magic != 0xe7e7) return INVALID_HANDLE;
    e->magic = 0;
    free(e);
    C.events_destroyed++;
    return OK;
}

API cuEventRecord(void *ev, void *s) {
    fake_event *e = ev;
    const char *name = stream_name(s);
    if (!e || e->magic != 0xe7e7) return INVALID_HANDLE;
    if (!name) return INVALID_VALUE;
    clock_gettime(CLOCK_MONOTONIC, &e->at);
    e->recorded = 1;
    char w[64];
    snprintf(w, sizeof w, "record:E%d@%s", e->id, name);
    logf_op(w);
    return OK;
}

API cuEventSynchronize(void *ev) {
    fake_event *e = ev;
    if (!e || e->magic != 0xe7e7) return INVALID_HANDLE;
    sync_delay();
    clock_gettime(CLOCK_MONOTONIC, &e->at); /* the work "ends" now */
    return OK;
}

API cuEventElapsedTime(float *ms, void *a, void *b) {
    fake_event *e0 = a, *e1 = b;
    if (!ms || !e0 || !e1 || e0->magic != 0xe7e7 || e1->magic != 0xe7e7) return INVALID_HANDLE;
    if (!e0->recorded || !e1->recorded) return INVALID_VALUE;
    *ms = (float)((double)(e1->at.tv_sec - e0->at.tv_sec) * 1e3 + (double)(e1->at.tv_nsec - e0->at.tv_nsec) * 1e-6);
    return OK;
}

API cuStreamWaitEvent(void *s, void *ev, unsigned flags) {
    fake_event *e = ev;
    const char *name = stream_name(s);
    if (!e || e->magic != 0xe7e7) return INVALID_HANDLE;
    if (!name || flags) return INVALID_VALUE;
    char w[64];
    snprintf(w, sizeof w, "wait:%s<E%d", name, e->id);
    logf_op(w);
    return OK;
}

static alloc_rec *find(CUdeviceptr p, size_t bytes) {
    for (alloc_rec *a = allocs; a; a = a->next) {
        uintptr_t lo = (uintptr_t)a->p, q = (uintptr_t)p;
        if (q >= lo && q + bytes <= lo + a->bytes) return a;
    }
    return NULL;
}

API cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    NEED_INIT;
    if (!bytes) return INVALID_VALUE;
    if (bytes > mem_limit || C.live_bytes > mem_limit - bytes) return OUT_OF_MEMORY;
    alloc_rec *a = malloc(sizeof *a);
    void *mem = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!a || !mem) {
        free(a);
        free(mem);
        return OUT_OF_MEMORY;
    }
    memset(mem, 0xAB, bytes);
    a->p = mem;
    a->bytes = bytes;
    a->next = allocs;
    allocs = a;
    C.allocs++;
    C.live_bytes += bytes;
    *p = (CUdeviceptr)(uintptr_t)mem;
    return OK;
}

API cuMemFree_v2(CUdeviceptr p) {
    for (alloc_rec **pa = &allocs; *pa; pa = &(*pa)->next)
        if ((uintptr_t)(*pa)->p == (uintptr_t)p) {
            alloc_rec *a = *pa;
            *pa = a->next;
            C.live_bytes -= a->bytes;
            C.frees++;
            free(a->p);
            free(a);
            return OK;
        }
    C.bad_frees++;
    return INVALID_VALUE;
}

API cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *s) {
    if (s != &stream_token || !find(dst, n) || !src) return INVALID_VALUE;
    C.htod++;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

API cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *s) {
    if (s != &stream_token || !find(src, n) || !dst) return INVALID_VALUE;
    C.dtoh++;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

API cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s) {
    if (s != &stream_token || !find(src, n) || !find(dst, n)) return INVALID_VALUE;
    C.dtod++;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}

/* The synchronous copies lazyfuse-bench's copy line uses (the NULL stream). */
API cuMemsetD32_v2(CUdeviceptr dst, unsigned v, size_t n) {
    if (!find(dst, n * 4)) return INVALID_VALUE;
    C.memsets++;
    for (size_t i = 0; i < n; i++) memcpy((char *)(uintptr_t)dst + 4 * i, &v, 4);
    return OK;
}

API cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    if (!find(src, n) || !find(dst, n)) return INVALID_VALUE;
    C.dtod++;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}

API cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void *s) {
    if (s != &stream_token || !find(dst, n)) return INVALID_VALUE;
    C.memsets++;
    memset((void *)(uintptr_t)dst, v, n);
    return OK;
}

typedef struct fake_module {
    int magic;
    int nfns;
} fake_module;

API cuModuleLoadData(void **mod, const void *image) {
    NEED_INIT;
    if (!image) return INVALID_VALUE;
    if (load_result != OK) return load_result;
    fake_module *m = malloc(sizeof *m);
    if (!m) return OUT_OF_MEMORY;
    m->magic = 0x10ad;
    m->nfns = 0;
    C.loads++;
    *mod = m;
    return OK;
}

API cuModuleUnload(void *mod) {
    fake_module *m = mod;
    if (!m || m->magic != 0x10ad) return INVALID_HANDLE;
    m->magic = 0;
    free(m);
    C.unloads++;
    return OK;
}

API cuModuleGetFunction(void **fn, void *mod, const char *name) {
    fake_module *m = mod;
    if (!m || m->magic != 0x10ad || !name || !*name) return INVALID_HANDLE;
    C.get_functions++;
    *fn = (char *)m + 1 + (m->nfns++ % 7); /* a token inside the module */
    return OK;
}

API cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *s, void **params, void **extra) {
    (void)shared;
    if (!f || s != &stream_token || !params || !params[0] || extra) return INVALID_VALUE;
    if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long)bx * by * bz > 1024) return INVALID_VALUE;
    C.launches++;
    logf_op("launch");
    C.last_grid[0] = gx, C.last_grid[1] = gy, C.last_grid[2] = gz;
    C.last_block[0] = bx, C.last_block[1] = by, C.last_block[2] = bz;
    return launch_result;
}

/* backends/cuda/cuda.h: the CUDA backend.
 *
 * verify -> plan -> codegen (CUDA C++) -> NVRTC or cache hit -> cuModuleLoadData
 * -> launch on the context's stream.
 *
 * Neither libcuda (the driver) nor libnvrtc is linked: api.c loads both with
 * dlopen, so a build with this backend runs on machines without a GPU (the
 * AUTO backend then picks the CPU). A CUDA context holds a cuda_state (made
 * by lf_ctx_new, freed by lf_ctx_destroy after its graphs and buffers): the
 * driver's function table, device 0 (or $LF_CUDA_DEVICE), its retained
 * primary context, one non-blocking stream, the caching allocator, NVRTC and
 * the in-memory module cache. Its buffers live on the device (lf_buffer.dev;
 * lf_buffer.data stays NULL).
 *
 * What must stay true:
 *  - every driver call of a context goes to its one stream, so work is
 *    ordered: a block the allocator hands out again is only touched by work
 *    queued after the work that used it before; memory is given back to the
 *    driver (cuMemFree) only after the stream is synchronized. The one
 *    exception is DLPack's stream protocol (graph/dlpack.c through the
 *    table's stream_order): an event recorded on one stream and waited for
 *    on the other, never a host wait; memory a consumer may still read is
 *    reused only after the export's deleter waited for the whole device;
 *  - a failed eval changes no buffer: everything that can fail (planning,
 *    compiling, loading, allocating, launch planning) happens before the
 *    first launch; a launch the driver refuses after others went out is
 *    reported (LF_ERR_BACKEND), the outputs then hold partial results;
 *  - launches are asynchronous: lf_buffer_read synchronizes the stream and
 *    reports an earlier kernel's fault; lf_buffer_write returns after the
 *    copy, so the host memory may be reused at once;
 *  - the current CUDA context is set on entry to every operation, so a
 *    context may move between threads (one at a time, as lazyfuse.h says);
 *  - libraries are opened with RTLD_NODELETE: they stay mapped after
 *    dlclose, as both keep process-wide state (threads, allocations) that
 *    does not survive an unload.
 */
#ifndef LF_CUDA_H
#define LF_CUDA_H

#include "backends/kcache.h"
#include "graph/graph.h"

#ifdef LF_HAVE_CUDA_HEADERS
#include <cuda.h>
#include <nvrtc.h>
#else
/* The toolkit's headers are absent: the declarations this backend uses, with
 * the ABI of cuda.h and nvrtc.h (CUDA 11.2 and later). */
typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999
};
enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
};
enum { CU_STREAM_NON_BLOCKING = 1 };
enum { CU_EVENT_DISABLE_TIMING = 2 };
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_COMPILATION = 6 };
#endif

/* ==== api.c: the driver and NVRTC, loaded at run time ===================== */

/* The driver functions this backend calls (versioned symbols: cuMemAlloc is
 * cuMemAlloc_v2 since CUDA 3.2, etc.). Field names drop the "cu" so that
 * cuda.h's #defines do not rename them. */
typedef struct cuda_driver {
    void *lib;                     /* dlopen handle */
    char path[512];                /* what was opened (for messages) */
    CUresult (*Init)(unsigned flags);
    CUresult (*DriverGetVersion)(int *version);
    CUresult (*GetErrorName)(CUresult r, const char **s);
    CUresult (*GetErrorString)(CUresult r, const char **s);
    CUresult (*DeviceGetCount)(int *count);
    CUresult (*DeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*DeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*DeviceGetAttribute)(int *value, CUdevice_attribute attr, CUdevice dev);
    CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice dev);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*CtxSetCurrent)(CUcontext ctx);
    CUresult (*StreamCreate)(CUstream *stream, unsigned flags);
    CUresult (*StreamDestroy)(CUstream stream);
    CUresult (*StreamSynchronize)(CUstream stream);
    CUresult (*StreamWaitEvent)(CUstream stream, CUevent ev, unsigned flags);
    CUresult (*EventCreate)(CUevent *ev, unsigned flags);
    CUresult (*EventRecord)(CUevent ev, CUstream stream);
    CUresult (*EventDestroy)(CUevent ev);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*MemFree)(CUdeviceptr ptr);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
    CUresult (*MemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
    CUresult (*MemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream s);
    CUresult (*ModuleLoadData)(CUmodule *mod, const void *image);
    CUresult (*ModuleUnload)(CUmodule mod);
    CUresult (*ModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*LaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_bytes, CUstream s,
                             void **params, void **extra);
} cuda_driver;

/* Opens the driver library: $LF_CUDA_LIBRARY when set (a path), else
 * libcuda.so.1, then libcuda.so; then resolves every function. Returns 0, or
 * -1 with a message in why ("cannot load libcuda.so.1 (...): no NVIDIA
 * driver on this machine", "libcuda.so.1 lacks cuMemAlloc_v2"). */
int cuda_driver_load(cuda_driver *d, char *why, size_t cap);
void cuda_driver_unload(cuda_driver *d);
/* "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected" (name and text
 * from the driver; the number when it knows neither). Returns buf. */
const char *cuda_result_str(const cuda_driver *d, CUresult r, char *buf, size_t cap);

/* The NVRTC functions used. */
typedef struct cuda_nvrtc {
    void *lib;                     /* dlopen handle */
    char path[512];                /* what was opened */
    int major, minor;              /* nvrtcVersion */
    int narchs;                    /* supported sm_XY, ascending (0: unknown) */
    int archs[64];
    nvrtcResult (*Version)(int *major, int *minor);
    nvrtcResult (*GetNumSupportedArchs)(int *n);      /* optional (NVRTC >= 11.2) */
    nvrtcResult (*GetSupportedArchs)(int *archs);     /* optional (NVRTC >= 11.2) */
    const char *(*GetErrorString)(nvrtcResult r);
    nvrtcResult (*CreateProgram)(nvrtcProgram *p, const char *src, const char *name, int nheaders,
                                 const char *const *headers, const char *const *include_names);
    nvrtcResult (*CompileProgram)(nvrtcProgram p, int nopts, const char *const *opts);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram p, size_t *n);
    nvrtcResult (*GetProgramLog)(nvrtcProgram p, char *log);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram p, size_t *n);  /* optional (NVRTC >= 11.1) */
    nvrtcResult (*GetCUBIN)(nvrtcProgram p, char *cubin);    /* optional (NVRTC >= 11.1) */
    nvrtcResult (*GetPTXSize)(nvrtcProgram p, size_t *n);
    nvrtcResult (*GetPTX)(nvrtcProgram p, char *ptx);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *p);
} cuda_nvrtc;

/* Opens libnvrtc: $LF_NVRTC_LIBRARY when set (a path), else libnvrtc.so,
 * libnvrtc.so.13, libnvrtc.so.12, then lib64/libnvrtc.so under $CUDA_HOME,
 * $CUDA_PATH and /usr/local/cuda; resolves the functions and reads the
 * version and supported architectures. Returns 0, or -1 with why. */
int cuda_nvrtc_load(cuda_nvrtc *nv, char *why, size_t cap);
void cuda_nvrtc_unload(cuda_nvrtc *nv);

/* ==== nvrtc.c: compiling kernels ========================================== */

/* The options every kernel is compiled with, after the architecture option:
 * no fused multiply-add contraction (results must match the C backend's IEEE
 * semantics) and C++17. NULL-terminated. */
extern const char *const cuda_nvrtc_options[];

/* What a device of compute capability sm (major*10 + minor) gets from this
 * NVRTC: sm itself as a CUBIN when NVRTC knows sm_<sm> (or cannot list its
 * architectures), else PTX for the newest compute_XY older than sm (the
 * driver compiles it when loading). Returns the arch number and sets *ptx,
 * or 0 when NVRTC knows no architecture at or below sm. */
int cuda_nvrtc_target(const cuda_nvrtc *nv, int sm, bool *ptx);

/* Compiles source (name: for the log) for arch (the --gpu-architecture
 * option is sm_<arch>, or compute_<arch> when ptx). On success returns
 * LF_OK, *image (graph_malloc'd: the CUBIN, or the NUL-terminated PTX) and
 * *len. On failure returns LF_ERR_BACKEND with "nvrtc: ..." in err and the
 * compiler's log in *log (graph_malloc'd, NULL when there is none), or
 * LF_ERR_NOMEM. *log is set on success too when log is non-NULL (warnings;
 * NULL when empty). */
lf_status cuda_nvrtc_compile(const cuda_nvrtc *nv, const char *source, const char *name, int arch,
                             bool ptx, void **image, size_t *len, char **log, char *err,
                             size_t errcap);

/* Whether libnvrtc can be loaded (tests skip NVRTC checks only when it
 * cannot, with why). */
bool cuda_nvrtc_available(char *why, size_t cap);

/* For tests and tools, no GPU needed: loads NVRTC and compiles source to a
 * CUBIN for sm_<sm> (e.g. 90) with the backend's options. Returns LF_OK with
 * *cubin_bytes_out (may be NULL) set; LF_ERR_BACKEND with a message in err
 * ("nvrtc: cannot load libnvrtc...", "nvrtc: NVRTC_ERROR_COMPILATION ...")
 * and, for a compile error, the log in *log_out; LF_ERR_NOMEM. *log_out (may
 * be NULL) is graph_malloc'd or NULL; the caller frees it with graph_free. */
lf_status cuda_nvrtc_compile_for_arch(const char *source, int sm, char **log_out,
                                      size_t *cubin_bytes_out, char *err, size_t errcap);

/* ==== alloc.c: the caching allocator ====================================== */

/* Freed blocks are kept per size class and handed out again; classes are
 * multiples of 512 bytes up to 1 MiB, then four per power of two (at most
 * 25% slack). */
enum { CUDA_SMALL_LIMIT = 1 << 20, CUDA_SMALL_STEP = 512 };

typedef struct cuda_block {
    CUdeviceptr addr;              /* device address */
    struct cuda_block *next;       /* free list of its class */
} cuda_block;

typedef struct cuda_alloc {
    cuda_block **bins;             /* free lists by class index */
    int nbins;
    size_t cached_bytes;           /* bytes in the free lists */
    size_t used_bytes;             /* bytes handed out (class sizes) */
    size_t driver_allocs;          /* cuMemAlloc calls that succeeded */
    size_t reuses;                 /* blocks handed out again */
} cuda_alloc;

struct cuda_state;
/* The class size of a request of bytes (> 0). */
size_t cuda_alloc_class(size_t bytes);
/* Gives out a block of at least bytes (> 0): a cached one of its class, else
 * cuMemAlloc; on CUDA_ERROR_OUT_OF_MEMORY synchronizes, frees every cached
 * block and tries once more. Zeroes the requested bytes (on the stream) when
 * zero is set. Returns CUDA_SUCCESS, the driver's error, or
 * CUDA_ERROR_OUT_OF_MEMORY also when host memory for the bookkeeping runs
 * out (*host_nomem then set). */
CUresult cuda_mem_alloc(struct cuda_state *cs, size_t bytes, bool zero, CUdeviceptr *addr,
                        bool *host_nomem);
/* Returns a block (addr 0 is a no-op) of a request of bytes to the cache. */
void cuda_mem_free(struct cuda_state *cs, CUdeviceptr addr, size_t bytes);
/* Synchronizes the stream and gives every cached block back to the driver. */
void cuda_mem_trim(struct cuda_state *cs);

/* ==== cuda.c: contexts, buffers, eval ===================================== */

enum { CUDA_MODULE_ENTRIES = 2 * CG_CUDA_MAX_LAUNCHES + 4 }; /* entry points cached per module */

/* A loaded module: a generated kernel's (in the context's kcache) or the
 * sort module (cuda_state.sort_module). */
typedef struct cuda_module {
    kcache_entry base;             /* hash, text, chain (backends/kcache.h) */
    CUmodule mod;                  /* loaded module */
    int nentries;                  /* entry points looked up so far */
    const char *entry[CUDA_MODULE_ENTRIES]; /* their names (static strings of codegen/) */
    CUfunction fn[CUDA_MODULE_ENTRIES];
} cuda_module;

typedef struct cuda_state {
    cuda_driver drv;               /* libcuda */
    cuda_nvrtc nv;                 /* libnvrtc */
    int ordinal;                   /* device number */
    CUdevice dev;                  /* the device */
    CUcontext cu;                  /* its primary context (retained) */
    bool retained;                 /* cu must be released */
    CUstream stream;               /* the one stream, non-blocking */
    int sm_count;                  /* multiprocessors */
    int cc_major, cc_minor;        /* compute capability */
    int arch;                      /* NVRTC target (cuda_nvrtc_target) */
    bool ptx;                      /* target is compute_<arch> PTX */
    int driver_version;            /* cuDriverGetVersion: 1000*major + 10*minor */
    size_t total_mem;              /* device memory bytes */
    char name[256];                /* device name */
    char *cache_dir;               /* disk cache folder, NULL if none */
    cuda_alloc alloc;              /* caching allocator */
    kcache modules;                /* in-memory module cache (cuda_module) */
    cuda_module *sort_module;      /* the sort module (sort.c), loaded by the
                                      first eval with a sort, kept until the
                                      context goes; NULL before */
} cuda_state;

/* The CUDA backend's table entry (graph/backend.h): device memory, its
 * state in ctx->state[LF_BACKEND_CUDA] made by open. */
extern const graph_backend cuda_backend;

/* "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB), CUDA driver 12.4, NVRTC
 * 12.4 [/usr/local/cuda/lib64/libnvrtc.so]" (the NVRTC file loaded) into buf (snprintf-like: returns the full length). */
int cuda_device_description(const lf_ctx *ctx, char *buf, size_t cap);

/* Allocator counters of a CUDA context (a test hook). */
void cuda_alloc_stats(const lf_ctx *ctx, cuda_alloc *out);

/* Loads a module from CUDA source src: from the disk cache (keyed by
 * key_text, the NVRTC version, the target and the options), else compiled
 * with NVRTC (name: for its log) and stored there once the driver loaded it.
 * Counts st->kernels_compiled or kernels_disk_hits. what names it in
 * messages ("eval: compiling <what> failed: ..."). */
lf_status cuda_module_load(lf_ctx *ctx, cuda_state *cs, const char *key_text, const char *src, const char *name,
                           const char *what, CUmodule *mod, lf_eval_stats *st);
/* The entry point `entry` of module m, looked up once (then cached in m). */
CUresult cuda_module_function(cuda_state *cs, cuda_module *m, const char *entry, CUfunction *fn);
/* Records a failed device allocation of bytes for `what` (LF_ERR_NOMEM when
 * out of device or host memory, else LF_ERR_BACKEND). */
lf_status cuda_alloc_error(lf_ctx *ctx, cuda_state *cs, CUresult r, bool host_nomem, size_t bytes, const char *what);

/* ==== sort.c: sort kernels on the device ================================== */

/* A sort kernel of a program (fusion/plan_sort.c), run as: the generated key
 * pass (emit_cuda.c: K and V into the work area, bound as store 0's buffer),
 * the sort module's launches (codegen/sort_cuda.c, planned from the shape
 * with want_pos: the first k positions of each row into pos), then its
 * output pass lf_sort_write (indices and values into the slots). */
typedef struct cuda_sort {
    graph_sort_geom gm;            /* rows, extent n, k, inner */
    bool wide;                     /* 64-bit keys */
    size_t value_size;             /* bytes of a value; 0: no values node (no V) */
    int work_buf;                  /* the key pass's buffer bound to the work area */
    int values_slot, indices_slot; /* slots of the values and indices nodes, -1 */
    cg_cuda_sort_plan plan;        /* the module's launches */
    CUfunction fn[CG_CUDA_SORT_MAX_LAUNCHES];
    bool has_write;                /* the output pass runs (nrows * k > 0) */
    cg_cuda_sort_launch write;     /* its launch */
    CUfunction write_fn;
    uint64_t *words;               /* (plan.nlaunches + 1) * CG_CUDA_SORT_WORDS:
                                      the module's launches', then the output pass's */
    size_t work_bytes, pos_bytes, scratch_bytes; /* device memory of a run */
    CUdeviceptr work, pos, scratch; /* held from cuda_sort_acquire to
                                      cuda_sort_release, 0 otherwise */
} cuda_sort;

/* At program build, kernel k of s (layout lay, a sort kernel): loads the
 * sort module once per context (st counts its compile or disk hit), plans
 * the module's launches and the output pass, looks their entries up.
 * LF_ERR_NOMEM, or LF_ERR_BACKEND from NVRTC or the driver; *out is NULL
 * on failure. */
lf_status cuda_sort_prepare(lf_ctx *ctx, cuda_state *cs, const fuse_schedule *s, const cg_layout *lay, int k,
                            cuda_sort **out, lf_eval_stats *st);
/* Frees what cuda_sort_prepare made (NULL is a no-op); memory held since
 * cuda_sort_acquire goes back to the allocator. */
void cuda_sort_free(cuda_state *cs, cuda_sort *so);
/* Before a run's first launch: the work area, the positions and the
 * module's scratch from the caching allocator (none when nothing runs).
 * On failure holds nothing and records the message. */
lf_status cuda_sort_acquire(lf_ctx *ctx, cuda_state *cs, cuda_sort *so);
/* Gives a run's memory back to the allocator (after the run's launches are
 * queued: stream order keeps it from reuse until they are done). */
void cuda_sort_release(cuda_state *cs, cuda_sort *so);
/* Fills the words for this run's addresses (slot_addr: device address of
 * each slot of the schedule). */
void cuda_sort_fill(cuda_sort *so, const uint64_t *slot_addr);
/* Queues the module's launches and the output pass on the stream (after the
 * key pass). Records "eval: launching CUDA kernel k (entry) failed" on a
 * refused launch; `ran` says whether earlier launches of the eval went out. */
lf_status cuda_sort_launch(lf_ctx *ctx, cuda_state *cs, const cuda_sort *so, int k, bool ran);

#endif

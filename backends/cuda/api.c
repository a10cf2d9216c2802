/* backends/cuda/api.c: libcuda and libnvrtc, opened with dlopen.
 *
 * Nothing here is linked at build time: each library is searched for in a
 * fixed order (an environment variable naming a path first, for tests and
 * unusual installs), opened RTLD_LOCAL | RTLD_NODELETE (see cuda.h) and every
 * function this backend calls is resolved at once, so a missing one fails
 * the open with its name instead of crashing later. Versioned driver
 * symbols are named explicitly (cuMemAlloc_v2 ...): they are what cuda.h's
 * macros resolve to and what every driver since CUDA 4.0 exports.
 */
#include "backends/cuda/cuda.h"

#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Copies the last dlerror() (or "?") into buf. */
static void dl_why(char *buf, size_t cap) {
    const char *e = dlerror();
    snprintf(buf, cap, "%s", e ? e : "?");
}

static void *open_lib(const char *path) {
    return dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

/* Resolves name into *slot; false (with why) when the library lacks it. */
static bool sym(void *lib, const char *libname, const char *name, void *slot, bool optional,
                char *why, size_t cap) {
    void *p = dlsym(lib, name);
    if (!p && !optional) {
        snprintf(why, cap, "%s lacks %s (too old a version?)", libname, name);
        return false;
    }
    memcpy(slot, &p, sizeof p);
    return true;
}

/* ---- the driver ------------------------------------------------------------------------- */

int cuda_driver_load(cuda_driver *d, char *why, size_t cap) {
    memset(d, 0, sizeof *d);
    const char *env = getenv("LF_CUDA_LIBRARY");
    char err[512] = "";
    if (env && *env) {
        d->lib = open_lib(env);
        if (!d->lib) {
            dl_why(err, sizeof err);
            snprintf(why, cap, "cannot load %s (LF_CUDA_LIBRARY): %s", env, err);
            return -1;
        }
        snprintf(d->path, sizeof d->path, "%s", env);
    } else {
        static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
        for (int i = 0; names[i] && !d->lib; i++) {
            d->lib = open_lib(names[i]);
            if (!d->lib && i == 0) dl_why(err, sizeof err);
            if (d->lib) snprintf(d->path, sizeof d->path, "%s", names[i]);
        }
        if (!d->lib) {
            snprintf(why, cap, "cannot load libcuda.so.1 (%s): no NVIDIA driver on this machine", err);
            return -1;
        }
    }
    const char *L = d->path;
#define REQ(field, name) \
    if (!sym(d->lib, L, name, &d->field, false, why, cap)) goto fail
    REQ(Init, "cuInit");
    REQ(DriverGetVersion, "cuDriverGetVersion");
    REQ(GetErrorName, "cuGetErrorName");
    REQ(GetErrorString, "cuGetErrorString");
    REQ(DeviceGetCount, "cuDeviceGetCount");
    REQ(DeviceGet, "cuDeviceGet");
    REQ(DeviceGetName, "cuDeviceGetName");
    REQ(DeviceGetAttribute, "cuDeviceGetAttribute");
    REQ(DeviceTotalMem, "cuDeviceTotalMem_v2");
    REQ(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    REQ(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    REQ(CtxSetCurrent, "cuCtxSetCurrent");
    REQ(StreamCreate, "cuStreamCreate");
    REQ(StreamDestroy, "cuStreamDestroy_v2");
    REQ(StreamSynchronize, "cuStreamSynchronize");
    REQ(StreamWaitEvent, "cuStreamWaitEvent");
    REQ(EventCreate, "cuEventCreate");
    REQ(EventRecord, "cuEventRecord");
    REQ(EventDestroy, "cuEventDestroy_v2");
    REQ(CtxSynchronize, "cuCtxSynchronize");
    REQ(MemAlloc, "cuMemAlloc_v2");
    REQ(MemFree, "cuMemFree_v2");
    REQ(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    REQ(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    REQ(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    REQ(MemsetD8Async, "cuMemsetD8Async");
    REQ(ModuleLoadData, "cuModuleLoadData");
    REQ(ModuleUnload, "cuModuleUnload");
    REQ(ModuleGetFunction, "cuModuleGetFunction");
    REQ(LaunchKernel, "cuLaunchKernel");
#undef REQ
    return 0;
fail:
    dlclose(d->lib);
    d->lib = NULL;
    return -1;
}

void cuda_driver_unload(cuda_driver *d) {
    if (d->lib) dlclose(d->lib);
    d->lib = NULL;
}

const char *cuda_result_str(const cuda_driver *d, CUresult r, char *buf, size_t cap) {
    const char *name = NULL, *text = NULL;
    if (d && d->GetErrorName && d->GetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (d && d->GetErrorString && d->GetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    if (name && text) snprintf(buf, cap, "%s: %s", name, text);
    else if (name) snprintf(buf, cap, "%s", name);
    else snprintf(buf, cap, "CUDA error %d", (int)r);
    return buf;
}

/* ---- NVRTC ------------------------------------------------------------------------------ */

/* The candidates after $LF_NVRTC_LIBRARY, in order, into list (at most cap
 * paths of 512 bytes); returns how many. First the dynamic loader's own
 * search (sonames), then the toolkit's lib64/ under $CUDA_HOME, $CUDA_PATH
 * and /usr/local/cuda (the unversioned name is a development link that a
 * runtime-only install lacks, so the versioned ones too), then the NVRTC of
 * pip's wheels (nvidia-cuda-nvrtc: nvidia/cu13/lib for CUDA 13,
 * nvidia/cuda_nvrtc/lib for 12) in the site-packages of $VIRTUAL_ENV,
 * $CONDA_PREFIX, the python3 first on $PATH, ~/.local, /usr/local and /usr. */
enum { NVRTC_MAX_CANDIDATES = 64 };
static int nvrtc_candidates(char (*list)[512], int cap) {
    static const char *const sonames[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
    static const char *const files[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
    int n = 0;
    for (int i = 0; i < 3 && n < cap; i++) snprintf(list[n++], 512, "%s", sonames[i]);
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (int h = 0; h < 3; h++) {
        if (!homes[h] || !*homes[h]) continue;
        for (int i = 0; i < 3 && n < cap; i++) snprintf(list[n++], 512, "%s/lib64/%s", homes[h], files[i]);
    }
    /* prefixes whose lib/python3.*\/site-packages may hold the wheels */
    char prefixes[6][512];
    int np = 0;
    const char *venv = getenv("VIRTUAL_ENV"), *conda = getenv("CONDA_PREFIX"), *home = getenv("HOME");
    if (venv && *venv) snprintf(prefixes[np++], 512, "%s", venv);
    if (conda && *conda) snprintf(prefixes[np++], 512, "%s", conda);
    const char *path = getenv("PATH");
    while (path && *path && np < 3) { /* the first python3 on PATH: its folder's parent */
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        char py[512];
        if (len && len < 400) {
            snprintf(py, sizeof py, "%.*s/python3", (int)len, path);
            if (access(py, X_OK) == 0) {
                snprintf(prefixes[np], 512, "%.*s/..", (int)len, path);
                np++;
                break;
            }
        }
        path = colon ? colon + 1 : NULL;
    }
    if (home && *home) snprintf(prefixes[np++], 512, "%s/.local", home);
    snprintf(prefixes[np++], 512, "/usr/local");
    snprintf(prefixes[np++], 512, "/usr");
    static const char *const wheel_dirs[] = {"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"};
    for (int p = 0; p < np; p++)
        for (int w = 0; w < 2; w++) {
            char pattern[1200];
            snprintf(pattern, sizeof pattern, "%.511s/lib/python3*/site-packages/%s/libnvrtc.so*", prefixes[p],
                     wheel_dirs[w]);
            glob_t g;
            if (glob(pattern, 0, NULL, &g) == 0) {
                /* skip the builtins library (libnvrtc-builtins is another name,
                   but libnvrtc.so.13.0.88.alt and the like are not NVRTC either) */
                for (size_t i = 0; i < g.gl_pathc && n < cap; i++)
                    if (!strstr(g.gl_pathv[i], ".alt") && strlen(g.gl_pathv[i]) < 512)
                        memcpy(list[n++], g.gl_pathv[i], strlen(g.gl_pathv[i]) + 1);
            }
            globfree(&g);
        }
    return n;
}

int cuda_nvrtc_load(cuda_nvrtc *nv, char *why, size_t cap) {
    memset(nv, 0, sizeof *nv);
    const char *env = getenv("LF_NVRTC_LIBRARY");
    char err[512] = "";
    if (env && *env) {
        nv->lib = open_lib(env);
        if (!nv->lib) {
            dl_why(err, sizeof err);
            snprintf(why, cap, "cannot load %s (LF_NVRTC_LIBRARY): %s", env, err);
            return -1;
        }
        snprintf(nv->path, sizeof nv->path, "%s", env);
    } else {
        static char list[NVRTC_MAX_CANDIDATES][512]; /* a few KiB: off the stack */
        static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&list_lock);
        int n = nvrtc_candidates(list, NVRTC_MAX_CANDIDATES);
        for (int i = 0; !nv->lib && i < n; i++) {
            nv->lib = open_lib(list[i]);
            if (!nv->lib && i == 0) dl_why(err, sizeof err);
            if (nv->lib) memcpy(nv->path, list[i], sizeof nv->path); /* both 512 bytes */
        }
        pthread_mutex_unlock(&list_lock);
        if (!nv->lib) {
            snprintf(why, cap,
                     "cannot load libnvrtc (%s; also tried libnvrtc.so.13, libnvrtc.so.12, lib64/ "
                     "of $CUDA_HOME, $CUDA_PATH, /usr/local/cuda and pip's nvidia/cu13/lib): "
                     "install the CUDA toolkit's NVRTC or set LF_NVRTC_LIBRARY",
                     err);
            return -1;
        }
    }
    const char *L = nv->path;
#define REQ(field, name) \
    if (!sym(nv->lib, L, name, &nv->field, false, why, cap)) goto fail
#define OPT(field, name) (void)sym(nv->lib, L, name, &nv->field, true, why, cap)
    REQ(Version, "nvrtcVersion");
    REQ(GetErrorString, "nvrtcGetErrorString");
    REQ(CreateProgram, "nvrtcCreateProgram");
    REQ(CompileProgram, "nvrtcCompileProgram");
    REQ(GetProgramLogSize, "nvrtcGetProgramLogSize");
    REQ(GetProgramLog, "nvrtcGetProgramLog");
    REQ(GetPTXSize, "nvrtcGetPTXSize");
    REQ(GetPTX, "nvrtcGetPTX");
    REQ(DestroyProgram, "nvrtcDestroyProgram");
    OPT(GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
    OPT(GetSupportedArchs, "nvrtcGetSupportedArchs");
    OPT(GetCUBINSize, "nvrtcGetCUBINSize");
    OPT(GetCUBIN, "nvrtcGetCUBIN");
#undef REQ
#undef OPT
    if (nv->Version(&nv->major, &nv->minor) != NVRTC_SUCCESS) {
        snprintf(why, cap, "%s: nvrtcVersion failed", L);
        goto fail;
    }
    int n = 0;
    if (nv->GetNumSupportedArchs && nv->GetSupportedArchs &&
        nv->GetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 &&
        n <= (int)(sizeof nv->archs / sizeof nv->archs[0]) &&
        nv->GetSupportedArchs(nv->archs) == NVRTC_SUCCESS)
        nv->narchs = n;
    return 0;
fail:
    dlclose(nv->lib);
    nv->lib = NULL;
    return -1;
}

void cuda_nvrtc_unload(cuda_nvrtc *nv) {
    if (nv->lib) dlclose(nv->lib);
    nv->lib = NULL;
}

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
#include <stdlib.h>
#include <string.h>

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

/* The candidates after $LF_NVRTC_LIBRARY, in order; false past the last. */
static bool nvrtc_candidate(int i, char *out, size_t cap) {
    static const char *const sonames[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
    static const char *const homes[] = {"CUDA_HOME", "CUDA_PATH", NULL};
    if (i < 3) {
        snprintf(out, cap, "%s", sonames[i]);
        return true;
    }
    i -= 3;
    if (i < 2) {
        const char *h = getenv(homes[i]);
        if (h && *h) snprintf(out, cap, "%s/lib64/libnvrtc.so", h);
        else out[0] = 0; /* unset: skipped */
        return true;
    }
    if (i == 2) {
        snprintf(out, cap, "/usr/local/cuda/lib64/libnvrtc.so");
        return true;
    }
    return false;
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
        char path[512];
        for (int i = 0; !nv->lib && nvrtc_candidate(i, path, sizeof path); i++) {
            if (!path[0]) continue;
            nv->lib = open_lib(path);
            if (!nv->lib && i == 0) dl_why(err, sizeof err);
            if (nv->lib) snprintf(nv->path, sizeof nv->path, "%s", path);
        }
        if (!nv->lib) {
            snprintf(why, cap,
                     "cannot load libnvrtc (%s; also tried libnvrtc.so.13, libnvrtc.so.12 and "
                     "lib64/ of $CUDA_HOME, $CUDA_PATH, /usr/local/cuda): install the CUDA "
                     "toolkit's NVRTC or set LF_NVRTC_LIBRARY",
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

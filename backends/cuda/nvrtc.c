/* backends/cuda/nvrtc.c: compiling kernels with NVRTC.
 *
 * A kernel is compiled for the device's own architecture into a CUBIN, so the
 * driver loads it without a JIT step; only when this NVRTC does not know the
 * device's sm_XY (a GPU newer than the toolkit) does it get PTX for the
 * newest older compute_XY, which the driver compiles at load. Options never
 * include fast math, and -fmad=false keeps the compiler from contracting
 * a*b+c into an fma: the kernels must round as graph/scalar.c does.
 *
 * What must stay true: every nvrtcProgram created is destroyed on every
 * path, and the log of a failed compile reaches the caller.
 */
#include "backends/cuda/cuda.h"

#include <string.h>

const char *const cuda_nvrtc_options[] = {"-fmad=false", "--std=c++17", NULL};

int cuda_nvrtc_target(const cuda_nvrtc *nv, int sm, bool *ptx) {
    *ptx = false;
    if (nv->narchs == 0) return sm; /* cannot ask: try sm_XY itself */
    int best = 0;
    for (int i = 0; i < nv->narchs; i++) {
        if (nv->archs[i] == sm) return sm;
        if (nv->archs[i] < sm && nv->archs[i] > best) best = nv->archs[i];
    }
    *ptx = best != 0;
    return best;
}

/* The program's log, graph_malloc'd; NULL when empty or out of memory. */
static char *program_log(const cuda_nvrtc *nv, nvrtcProgram p) {
    size_t n = 0;
    if (nv->GetProgramLogSize(p, &n) != NVRTC_SUCCESS || n <= 1) return NULL;
    char *log = graph_malloc(n + 1);
    if (!log) return NULL;
    if (nv->GetProgramLog(p, log) != NVRTC_SUCCESS) {
        graph_free(log);
        return NULL;
    }
    log[n] = 0;
    /* drop trailing blank lines */
    size_t len = strlen(log);
    while (len && (log[len - 1] == '\n' || log[len - 1] == '\r' || log[len - 1] == ' ')) log[--len] = 0;
    if (!len) {
        graph_free(log);
        return NULL;
    }
    return log;
}

lf_status cuda_nvrtc_compile(const cuda_nvrtc *nv, const char *source, const char *name, int arch,
                             bool ptx, void **image, size_t *len, char **log, char *err,
                             size_t errcap) {
    *image = NULL;
    *len = 0;
    if (log) *log = NULL;
    if (!ptx && (!nv->GetCUBINSize || !nv->GetCUBIN)) {
        snprintf(err, errcap, "nvrtc: %s %d.%d cannot produce CUBINs (needs NVRTC 11.1 or newer)",
                 nv->path, nv->major, nv->minor);
        return LF_ERR_BACKEND;
    }
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s_%d", ptx ? "compute" : "sm", arch);
    const char *opts[16];
    int nopts = 0;
    opts[nopts++] = archopt;
    for (int i = 0; cuda_nvrtc_options[i]; i++) opts[nopts++] = cuda_nvrtc_options[i];
    nvrtcProgram p = NULL;
    nvrtcResult r = nv->CreateProgram(&p, source, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        snprintf(err, errcap, "nvrtc: creating the program failed: %s", nv->GetErrorString(r));
        return LF_ERR_BACKEND;
    }
    lf_status st = LF_OK;
    r = nv->CompileProgram(p, nopts, opts);
    char *text = program_log(nv, p);
    if (r != NVRTC_SUCCESS) {
        snprintf(err, errcap, "nvrtc: %s (NVRTC %d.%d, %s)", nv->GetErrorString(r), nv->major,
                 nv->minor, archopt);
        st = LF_ERR_BACKEND;
        goto done;
    }
    size_t n = 0;
    r = ptx ? nv->GetPTXSize(p, &n) : nv->GetCUBINSize(p, &n);
    if (r != NVRTC_SUCCESS || n == 0) {
        snprintf(err, errcap, "nvrtc: reading the %s failed: %s", ptx ? "PTX" : "CUBIN",
                 r != NVRTC_SUCCESS ? nv->GetErrorString(r) : "empty");
        st = LF_ERR_BACKEND;
        goto done;
    }
    char *buf = graph_malloc(n);
    if (!buf) {
        snprintf(err, errcap, "nvrtc: out of memory");
        st = LF_ERR_NOMEM;
        goto done;
    }
    r = ptx ? nv->GetPTX(p, buf) : nv->GetCUBIN(p, buf);
    if (r != NVRTC_SUCCESS) {
        graph_free(buf);
        snprintf(err, errcap, "nvrtc: reading the %s failed: %s", ptx ? "PTX" : "CUBIN", nv->GetErrorString(r));
        st = LF_ERR_BACKEND;
        goto done;
    }
    *image = buf;
    *len = n;
done:
    nv->DestroyProgram(&p);
    if (log) *log = text;
    else graph_free(text);
    return st;
}

bool cuda_nvrtc_available(char *why, size_t cap) {
    cuda_nvrtc nv;
    if (cuda_nvrtc_load(&nv, why, cap) != 0) return false;
    cuda_nvrtc_unload(&nv);
    return true;
}

lf_status cuda_nvrtc_compile_for_arch(const char *source, int sm, char **log_out,
                                      size_t *cubin_bytes_out, char *err, size_t errcap) {
    if (log_out) *log_out = NULL;
    if (cubin_bytes_out) *cubin_bytes_out = 0;
    if (!source) {
        snprintf(err, errcap, "nvrtc: source is NULL");
        return LF_ERR_NULL;
    }
    cuda_nvrtc nv;
    char why[1024];
    if (cuda_nvrtc_load(&nv, why, sizeof why) != 0) {
        snprintf(err, errcap, "nvrtc: %s", why);
        return LF_ERR_BACKEND;
    }
    void *image = NULL;
    size_t len = 0;
    lf_status st = cuda_nvrtc_compile(&nv, source, "lazyfuse_kernel.cu", sm, false, &image, &len, log_out,
                                      err, errcap);
    graph_free(image);
    if (st == LF_OK && cubin_bytes_out) *cubin_bytes_out = len;
    cuda_nvrtc_unload(&nv);
    return st;
}

/* backends/procs.c: host tag and process liveness (see procs.h).
 *
 * What must stay true: procs_dead_here never calls a live process dead (any
 * answer of kill() but ESRCH counts as alive), and never calls us dead.
 */
#include "backends/procs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

static char host_tag[PROCS_TAG_LEN + 1];
static pthread_once_t tag_once = PTHREAD_ONCE_INIT;

static uint32_t fnv1a(uint32_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

static void make_tag(void) {
    uint32_t h = 2166136261u;
    char buf[128];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) h = fnv1a(h, buf, (size_t)n);
        close(fd);
    }
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0) {
        uint64_t id[2] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino};
        h = fnv1a(h, id, sizeof id);
    }
    struct utsname u;
    if (uname(&u) == 0) h = fnv1a(h, u.nodename, strlen(u.nodename));
    snprintf(host_tag, sizeof host_tag, "%08x", (unsigned)h);
}

const char *procs_host_tag(void) {
    pthread_once(&tag_once, make_tag);
    return host_tag;
}

bool procs_dead_here(pid_t pid) {
    if (pid <= 0 || pid == getpid()) return false;
    return kill(pid, 0) != 0 && errno == ESRCH;
}

const char *procs_parse_owner(const char *s, pid_t *pid) {
    *pid = 0;
    if (*s < '1' || *s > '9') return NULL;
    char *rest;
    errno = 0;
    long long v = strtoll(s, &rest, 10);
    if (errno || v > INT_MAX || *rest != '-') return NULL;
    const char *tag = procs_host_tag();
    if (strncmp(rest + 1, tag, PROCS_TAG_LEN) || rest[1 + PROCS_TAG_LEN] != '-') return NULL;
    *pid = (pid_t)v;
    return rest + 2 + PROCS_TAG_LEN;
}

/* backends/fileio.h: whole-buffer writes for the backends' files (the disk
 * kernel cache, the compiler's source and log files).
 *
 * What must stay true: a short write is retried until everything is written;
 * EINTR is retried; a write that makes no progress fails with EIO.
 */
#ifndef LF_FILEIO_H
#define LF_FILEIO_H

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

/* Writes exactly n bytes of buf to fd: 0, or -1 with errno set. */
static inline int fileio_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

#endif

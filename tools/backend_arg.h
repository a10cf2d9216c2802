/* tools/backend_arg.h: a backend's name on a command line or in the
 * environment -> its lf_backend id, for the tools, the bench and the tests
 * (one parser instead of one per program). It reads the library's own
 * names (lf_backend_name), so a name the library gives is a name it parses.
 *
 * What must stay true: header-only (the tests, the tools and the bench link
 * different libraries), no policy: which backends a program accepts, and
 * its message for one it does not, stay the program's.
 */
#ifndef LF_TOOLS_BACKEND_ARG_H
#define LF_TOOLS_BACKEND_ARG_H

#include "lazyfuse.h"

#include <stdbool.h>
#include <string.h>

/* Sets *out to the backend called name ("auto", "cpu", "cuda",
 * "reference"); false, *out unchanged, for any other name or NULL. */
static inline bool backend_from_name(const char *name, lf_backend *out) {
    if (!name) return false;
    for (int b = LF_BACKEND_AUTO; b <= LF_BACKEND_REFERENCE; b++)
        if (!strcmp(name, lf_backend_name((lf_backend)b))) {
            *out = (lf_backend)b;
            return true;
        }
    return false;
}

#endif /* LF_TOOLS_BACKEND_ARG_H */

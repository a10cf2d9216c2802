#!/usr/bin/env bash
# tests/install_test.sh: the README's "Using lazyfuse from your program", run.
#
#   install_test.sh BUILD_DIR RELOCATABLE SANITIZE MESON CC...
#
# Installs BUILD_DIR with `meson install --destdir` into a temporary folder,
# then compiles a small program against the staged copy, finding it through
# PKG_CONFIG_PATH alone (the .pc file is relocatable: its prefix is
# ${pcfiledir}/../../..), links it once to the shared library (rpath from
# pkg-config's libdir) and once to the static archive, and runs both.
# RELOCATABLE is the build folder's pkgconfig.relocatable; a folder
# configured before it became the default (false) is checked with
# PKG_CONFIG_SYSROOT_DIR, the README's other way. SANITIZE is b_sanitize: a
# sanitized library needs the same -fsanitize flags in the program. The
# program also fills lf_ctx_options and reads lf_eval_stats through the
# installed header, and must record the soname liblazyfuse.so.MAJOR.
set -euo pipefail

build="$1" reloc="$2" sanitize="$3" meson="$4"
shift 4
cc=("$@")

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lazyfuse-install-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
stage="$tmp/stage"

fail() { echo "install test: $*" >&2; exit 1; }

"$meson" install -C "$build" --no-rebuild --destdir "$stage" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install --destdir failed"; }

pc="$(find "$stage" -name lazyfuse.pc -print -quit)"
[ -n "$pc" ] || fail "no lazyfuse.pc under $stage"
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR
export PKG_CONFIG_PATH="$(dirname "$pc")"
if [ "$reloc" != true ]; then
    echo "install test: $build has pkgconfig.relocatable=false (configured before it became the default);" \
         "checking with PKG_CONFIG_SYSROOT_DIR" >&2
    export PKG_CONFIG_SYSROOT_DIR="$stage"
fi

pkg-config --exists lazyfuse || fail "pkg-config does not find lazyfuse in $PKG_CONFIG_PATH"
libdir="$(pkg-config --variable=libdir lazyfuse)"
[ "$reloc" != true ] || case "$libdir" in
    "$stage"/*|"$(dirname "$pc")"/*) ;;
    *) fail "libdir $libdir is not inside the staged install $stage";;
esac
read -r -a cflags <<<"$(pkg-config --cflags lazyfuse)"
read -r -a libs <<<"$(pkg-config --libs lazyfuse)"
# pkgconf prefixes variables with the sysroot, pkg-config 0.29 only -I and -L
[ "$reloc" = true ] || [ -d "$libdir" ] || libdir="$stage$libdir"
san=()
[ "$sanitize" = none ] || san=("-fsanitize=$sanitize")

cat >"$tmp/prog.c" <<'PROG'
#include <lazyfuse.h>
#include <math.h>
#include <stdio.h>

int main(void) {
    lf_ctx_options o; /* the growable struct, through the installed header's inline init */
    lf_ctx_options_init(&o);
    if (o.struct_size != sizeof o || o.fusion != -1) return 3;
    o.threads = 1;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) {
        fprintf(stderr, "ctx_new: %s\n", lf_errmsg(NULL));
        return 1;
    }
    lf_graph *g = lf_graph_new(ctx);
    lf_buffer *xb = lf_buffer_new(ctx, LF_F64, 1, (int64_t[]){4});
    double x[4] = {0, 1, 2, -1}, y[4];
    lf_buffer_write(xb, x, sizeof x);
    lf_fn *f = lf_fn_parse(g, "(x) -> exp(-x*x/2) / sqrt(2*pi)");
    lf_node *out = lf_map(g, f, lf_input(g, xb));
    lf_buffer *yb = lf_buffer_new_like(ctx, out);
    if (lf_eval(g, 1, &out, &yb) != LF_OK) {
        fprintf(stderr, "eval: %s\n", lf_errmsg(ctx));
        return 1;
    }
    lf_buffer_read(yb, y, sizeof y);
    for (int i = 0; i < 4; i++)
        if (fabs(y[i] - exp(-x[i] * x[i] / 2) / sqrt(2 * M_PI)) > 1e-12) return 2;
    lf_eval_stats st;
    if (lf_ctx_last_stats(ctx, &st) != LF_OK || st.kernels != 1) return 4;
    if (lf_ctx_get_options(ctx).threads != 1) return 5;
    printf("ok %s\n", lf_backend_name(lf_ctx_backend(ctx)));
    lf_buffer_free(yb);
    lf_buffer_free(xb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
    return 0;
}
PROG

export LF_CACHE_DIR="$tmp/cache"
# shared: the library's folder from pkg-config, as the rpath
"${cc[@]}" "${san[@]}" -std=c11 -D_GNU_SOURCE "$tmp/prog.c" "${cflags[@]}" "${libs[@]}" -lm -Wl,-rpath,"$libdir" \
    -o "$tmp/prog_shared" || fail "compiling against the shared library failed"
"$tmp/prog_shared" || fail "the program linked to the shared library failed"
grep -q "$stage" <(ldd "$tmp/prog_shared") || fail "prog_shared does not load the staged liblazyfuse.so"
# the soname is liblazyfuse.so.MAJOR (README, "Versioning and ABI"), and the
# program records it
major="$(pkg-config --modversion lazyfuse)"
major="${major%%.*}"
needed="$(LC_ALL=C readelf -d "$tmp/prog_shared" | sed -n 's/.*Shared library: \[\(liblazyfuse[^]]*\)\].*/\1/p')"
[ "$needed" = "liblazyfuse.so.$major" ] ||
    fail "prog_shared needs '$needed', expected liblazyfuse.so.$major (version $(pkg-config --modversion lazyfuse))"
# static: the archive by name, then the libraries of Libs.private
"${cc[@]}" "${san[@]}" -std=c11 -D_GNU_SOURCE "$tmp/prog.c" "${cflags[@]}" "$libdir/liblazyfuse.a" -lm -lpthread -ldl \
    -o "$tmp/prog_static" || fail "compiling against the static library failed"
"$tmp/prog_static" || fail "the program linked to the static library failed"
! ldd "$tmp/prog_static" | grep -q liblazyfuse || fail "prog_static needs liblazyfuse.so"
[ "$(pkg-config --static --libs lazyfuse | tr ' ' '\n' | grep -c -e -lm -e -lpthread -e -ldl)" = 3 ] ||
    fail "pkg-config --static --libs lacks -lm -lpthread -ldl: $(pkg-config --static --libs lazyfuse)"
echo "install test: shared and static programs built from $PKG_CONFIG_PATH run"

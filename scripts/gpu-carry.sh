#!/usr/bin/env bash
# scripts/gpu-carry.sh: makes .gpu-carry/, what a machine without apt needs to
# build and run the tests (Criterion and DLPack), from Debian's packages.
#
#   bash scripts/gpu-carry.sh            (re)make .gpu-carry/ in the tree's root
#
# On a machine that lacks libcriterion-dev, libdlpack-dev and maybe pkg-config
# (a GPU machine's image, say), copy the tree with .gpu-carry/ in it, then:
#
#   . .gpu-carry/env.sh && meson setup build-gpu -Dcuda=enabled && ninja -C build-gpu
#
# The packages are libcriterion-dev, libcriterion3, libdlpack-dev and those
# owning every shared library libcriterion.so.3 loads, found with ldd and
# dpkg -S on the installed library (glibc's, libgcc's and libstdc++'s left
# out: the target has them). They are fetched with apt-get download (apt-get
# update only when that fails), unpacked with dpkg -x and laid out as
#
#   include/           criterion/ and dlpack/ headers
#   lib/               the shared libraries and their links (libcriterion.so too)
#   lib/common/        those of them that most systems have already (zlib,
#                      OpenSSL, Kerberos, PCRE2, libffi, ...): env.sh puts
#                      this folder on LD_LIBRARY_PATH only when the target's
#                      loader lacks one of them, so the image's own copies
#                      (which its Python, compilers and CUDA tools load) win
#   lib/pkgconfig/     criterion.pc, its prefix relative to itself (${pcfiledir})
#   env.sh             for bash to source: CPATH, LIBRARY_PATH, LD_LIBRARY_PATH
#                      and PKG_CONFIG_PATH into this folder, wherever it lies
#   MANIFEST           package, version and architecture of each package, and
#                      the newest glibc symbol version the libraries need
#
# The libraries are this machine's distribution's builds: the target's glibc
# must be at least the one MANIFEST names (Debian 12's 2.36 runs on Ubuntu
# 24.04's 2.39). Needs apt-get, dpkg, ldd and objdump; installs
# libcriterion-dev and libdlpack-dev here first when missing (through
# scripts/apt.sh). The folder is removed and remade on every run, and its
# size is printed last.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/.gpu-carry"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'gpu-carry: %s\n' "$*" >&2; exit 1; }

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"

have_apt || die "needs apt-get and dpkg (a Debian or Ubuntu machine)"
for tool in dpkg-deb ldd objdump; do
    command -v "$tool" >/dev/null 2>&1 || die "needs $tool"
done
apt_install libcriterion-dev libdlpack-dev

MULTIARCH="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
[ -n "$MULTIARCH" ] || die "cannot tell the multiarch triplet (dpkg-architecture, gcc -print-multiarch)"

# The package owning file $1: dpkg knows each file by the path its package
# ships, which on a merged-/usr system may differ from ldd's path by a /usr
# prefix or a symbolic link, so each spelling is tried.
owner() {
    local path="$1" real candidate pkg
    real="$(readlink -f "$path")"
    for candidate in "$path" "$real" "/usr$path" "/usr$real" "${path#/usr}" "${real#/usr}"; do
        pkg="$(dpkg-query -S "$candidate" 2>/dev/null | sed -n '/^diversion /d; s/: .*//p' | head -n 1)" || true
        if [ -n "$pkg" ]; then
            echo "$pkg"
            return 0
        fi
    done
    return 1
}

# ---- the package list ------------------------------------------------------

criterion_so="$(dpkg-query -L libcriterion3 | grep -m 1 '/libcriterion\.so\.3$')" ||
    die "libcriterion3 installs no libcriterion.so.3"
lddout="$(ldd "$criterion_so")"
if grep -q 'not found' <<<"$lddout"; then
    die "ldd $criterion_so: $(grep 'not found' <<<"$lddout" | tr -s ' \t\n' ' ')"
fi

packages=(libcriterion-dev libcriterion3 libdlpack-dev)
while read -r lib; do
    pkg="$(owner "$lib")" || die "no package owns $lib (dpkg -S)"
    case "${pkg%%:*}" in
    libc6 | libgcc-s1 | libstdc++6 | libcriterion3) ;;
    *) packages+=("$pkg") ;;
    esac
done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$lddout")
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
say "packages: ${packages[*]}"

# ---- download and unpack ---------------------------------------------------

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# apt-get download drops root for the _apt user, who must be able to write here.
chmod 0777 "$tmp"
mkdir "$tmp/debs" "$tmp/root"
chmod 0777 "$tmp/debs"

download() { (cd "$tmp/debs" && apt-get download "${packages[@]}"); }
if ! download; then
    say "apt-get download failed; apt-get update, then again"
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update
    download
fi

rm -rf "$DEST"
mkdir -p "$DEST/include" "$DEST/lib/pkgconfig"
{
    echo "# .gpu-carry/: made by scripts/gpu-carry.sh on $(date -u +%Y-%m-%d) from these packages"
    echo "# package version architecture"
} >"$DEST/MANIFEST"
for deb in "$tmp"/debs/*.deb; do
    dpkg-deb -f "$deb" Package Version Architecture | awk -F': ' '{ printf "%s%s", (NR > 1 ? " " : ""), $2 } END { print "" }' >>"$DEST/MANIFEST"
    dpkg-deb -x "$deb" "$tmp/root"
done

# ---- lay out ---------------------------------------------------------------

for dir in criterion dlpack; do
    [ -d "$tmp/root/usr/include/$dir" ] || die "no usr/include/$dir in the packages"
    cp -a "$tmp/root/usr/include/$dir" "$DEST/include/"
done

# Shared libraries and their links, from both library folders (the links the
# packages ship are relative, so they hold in the one folder); not the static
# archives, plugins or modules.
for dir in "$tmp/root/usr/lib/$MULTIARCH" "$tmp/root/lib/$MULTIARCH"; do
    [ -d "$dir" ] || continue
    find "$dir" -maxdepth 1 \( -type f -o -type l \) -name 'lib*.so*' -exec cp -a -t "$DEST/lib/" {} +
done
[ -e "$DEST/lib/libcriterion.so" ] || die "no libcriterion.so in the packages"
dangling="$(find "$DEST/lib" -xtype l)"
[ -z "$dangling" ] || die "links that point nowhere: $dangling"
# The common ones, with their links, into lib/common/.
mkdir -p "$DEST/lib/common"
for stem in libz libssl libcrypto libgssapi_krb5 libk5crypto libkrb5 libkrb5support libkeyutils libcom_err \
    libpcre2-8 libffi; do
    find "$DEST/lib" -maxdepth 1 -name "$stem.so*" -exec mv -t "$DEST/lib/common/" {} +
done

# criterion.pc, its prefix relative to its own folder; the static-linking
# fields go (Requires.private names .pc files not carried, Libs.private a
# static archive of the build machine): only the shared library is here.
pc="$tmp/root/usr/lib/$MULTIARCH/pkgconfig/criterion.pc"
[ -f "$pc" ] || die "no criterion.pc in libcriterion-dev"
{
    echo "# Rewritten by scripts/gpu-carry.sh: prefix relative to this file, shared library only."
    # shellcheck disable=SC2016 # ${pcfiledir} and ${prefix} are pkg-config's, written as they are
    sed -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' \
        -e 's|^includedir=.*|includedir=${prefix}/include|' \
        -e 's|^libdir=.*|libdir=${prefix}/lib|' \
        -e '/^Requires\.private:/d' -e '/^Libs\.private:/d' "$pc"
} >"$DEST/lib/pkgconfig/criterion.pc"

cat >"$DEST/env.sh" <<'EOF'
# .gpu-carry/env.sh: made by scripts/gpu-carry.sh. Source it from bash
# (". .gpu-carry/env.sh") before meson setup, ninja and running the tests:
# the compiler then finds the carried headers (CPATH) and libraries
# (LIBRARY_PATH), the loader the libraries (LD_LIBRARY_PATH) and pkg-config
# criterion.pc (PKG_CONFIG_PATH). Paths come from this file's own place, so
# the folder works wherever the tree is copied.
gpu_carry="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
export CPATH="$gpu_carry/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$gpu_carry/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
# lib/common/ holds libraries most systems have (zlib, OpenSSL, ...): on the
# loader's path only when the system lacks one of them, so that every other
# program keeps the system's own copies
gpu_carry_ld="$gpu_carry/lib"
for gpu_carry_f in "$gpu_carry"/lib/common/*.so.*; do
    gpu_carry_f="${gpu_carry_f##*/}"
    case "$gpu_carry_f" in *.so.*.*) continue ;; esac # sonames only
    if ! /sbin/ldconfig -p 2>/dev/null | grep -q "^[[:space:]]$gpu_carry_f "; then
        gpu_carry_ld="$gpu_carry_ld:$gpu_carry/lib/common"
        break
    fi
done
export LD_LIBRARY_PATH="$gpu_carry_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset gpu_carry_ld gpu_carry_f
export PKG_CONFIG_PATH="$gpu_carry/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
unset gpu_carry
EOF

glibc="$(objdump -T "$DEST"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n 1)"
echo "# needs glibc symbols up to $glibc" >>"$DEST/MANIFEST"

say "$DEST: $(wc -l <"$DEST/MANIFEST" | awk '{ print $1 - 3 }') packages, needs $glibc"
du -sh "$DEST"

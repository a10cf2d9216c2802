# scripts/apt.sh: installing Debian packages; sourced by quickstart.sh and
# bench.sh, which define say and die and decide what a machine without
# apt-get gets.
#
#   have_apt                 apt-get and dpkg-query are both here
#   apt_install PACKAGE...   installs those not installed yet: apt-get update
#                            first (the lists may be stale or absent on a fresh
#                            machine), through sudo when not root

have_apt() {
    command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1
}

installed() {
    case "$(dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null || true)" in
    *"install ok installed"*) return 0 ;;
    *) return 1 ;;
    esac
}

apt_install() {
    local missing=() p
    for p in "$@"; do
        installed "$p" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need root or sudo to install: ${missing[*]}"
        sudo=(sudo env DEBIAN_FRONTEND=noninteractive)
    fi
    local apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600)
    say "installing ${missing[*]}"
    "${apt[@]}" update
    "${apt[@]}" install -y --no-install-recommends "${missing[@]}"
}

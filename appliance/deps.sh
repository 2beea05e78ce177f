#!/bin/sh
# deps.sh -- install the Debian packages presto-nfs needs, only those missing.
# Run as root on Debian 12. Idempotent: a second run installs nothing.
set -eu

# build and run
PKGS="build-essential pkg-config rpcsvc-proto libtirpc-dev libpmem-dev libsodium-dev libisal-dev \
libsqlite3-dev libmicrohttpd-dev libjansson-dev libcmocka-dev libnfs-dev libnfs-utils \
rpcbind nfs-common procps iproute2 util-linux e2fsprogs python3"
# the console's chart library comes from the npm registry: Node.js and npm
# (the machine image may bring its own Node.js; Debian's otherwise)
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
# extra packages the tests (PRESTO_DEPS=test: a browser, qemu for the kernel
# client, gdb to stop the server at a chosen point) or the benchmark need
[ "${PRESTO_DEPS:-}" = test ] && PKGS="$PKGS chromium qemu-system-x86 busybox-static binutils bindfs gdb"
PKGS="$PKGS ${PRESTO_EXTRA_PKGS:-}"

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in
	*" installed") ;;
	*) missing="$missing $p" ;;
	esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# An update is needed on a fresh machine whose package lists are empty or old.
apt-get update -qq || true
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing

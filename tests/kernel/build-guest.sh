#!/bin/sh
# build-guest.sh -- build the qemu guest that mounts an NFS export with the
# real Linux kernel NFS client (issue 8).
#
# Output, under $PRESTO_KERNEL_BUILD (default tests/kernel/build/):
#   kernel/VERSION         the Debian kernel package the guest boots
#   kernel/vmlinuz         its kernel
#   kernel/modules/*.ko    the modules the guest needs (virtio net + NFSv3)
#   kernel/modules.load    their insmod order, dependencies first
#   initrd.img             busybox-static + modules + guest-init.sh + workload.sh
#
# The kernel comes from `apt-get download` of the linux-image-6.1.0-NN-amd64
# that Debian's linux-image-amd64 currently depends on; it is unpacked with
# dpkg-deb -x into the build folder and never installed on the host. It is
# downloaded once and kept (cached between runs); the initramfs is rebuilt
# whenever one of its inputs is newer. PRESTO_KERNEL_PKG=linux-image-... pins
# a package instead of resolving it. A failed download is an error (exit 1):
# the test must fail loudly when it cannot get its kernel.
#
# Prints the build folder's path on its last line of stdout.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${PRESTO_KERNEL_BUILD:-$here/build}
mkdir -p "$build"
build=$(cd "$build" && pwd)

say() { echo "build-guest: $*" >&2; }
# one build at a time in a build folder (two test runs may start together)
exec 9>"$build/.lock"
flock -w 300 9 || { echo "build-guest: ERROR: $build is locked" >&2; exit 1; }
die() {
	echo "build-guest: ERROR: $*" >&2
	[ -n "${dl:-}" ] && rm -rf "$dl" "$kdir.new"
	exit 1
}

# --- host packages --------------------------------------------------------
# qemu-system-x86 runs the guest, busybox-static is its userland, binutils'
# objcopy reads module dependencies. appliance/deps.sh installs only what is
# missing (and refuses politely when not root).
need=""
for p in qemu-system-x86 busybox-static binutils; do
	case "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" in
	*" installed") ;;
	*) need="$need $p" ;;
	esac
done
if [ -n "$need" ]; then
	say "installing$need"
	PRESTO_EXTRA_PKGS="$need" sh "$top/appliance/deps.sh" >&2 ||
		die "could not install$need"
fi
busybox=/bin/busybox   # busybox-static's, so the guest needs no libc
"$busybox" --help 2>&1 | head -1 | grep -q '^BusyBox' || die "$busybox is not busybox"

# --- kernel ---------------------------------------------------------------
kdir=$build/kernel

resolve_pkg() {
	if [ -n "${PRESTO_KERNEL_PKG:-}" ]; then
		echo "$PRESTO_KERNEL_PKG"
		return
	fi
	# linux-image-amd64 Depends: linux-image-6.1.0-NN-amd64
	apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -1
}

pkg=$(resolve_pkg)
if [ -z "$pkg" ]; then
	say "linux-image-amd64 unknown to apt: apt-get update"
	apt-get update -qq >&2 || true
	pkg=$(resolve_pkg)
fi
if [ -z "$pkg" ]; then
	# No package lists at all: a cached kernel still does.
	[ -f "$kdir/VERSION" ] || die "cannot resolve linux-image-amd64 to a kernel package (no apt lists, no network?)"
	pkg=$(cat "$kdir/VERSION")
	say "cannot resolve linux-image-amd64; using the cached $pkg"
fi

if [ ! -f "$kdir/VERSION" ] || [ "$(cat "$kdir/VERSION")" != "$pkg" ] ||
   [ ! -s "$kdir/vmlinuz" ] || [ ! -s "$kdir/modules.load" ]; then
	say "fetching $pkg (apt-get download, not installed)"
	dl=$build/download
	rm -rf "$dl" "$kdir.new"
	mkdir -p "$dl" "$kdir.new/modules"
	# _apt cannot write into a root-owned folder: let apt download as root
	# without the sandbox warning.
	if ! (cd "$dl" && apt-get download -o APT::Sandbox::User=root "$pkg" >&2); then
		say "download failed; apt-get update and retry"
		apt-get update -qq >&2 || true
		(cd "$dl" && apt-get download -o APT::Sandbox::User=root "$pkg" >&2) ||
			die "apt-get download $pkg failed (no network?)"
	fi
	deb=$(ls "$dl"/*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || die "apt-get download $pkg produced no .deb"
	dpkg-deb -x "$deb" "$dl/x" || die "dpkg-deb -x $deb failed"
	vmlinuz=$(ls "$dl"/x/boot/vmlinuz-* 2>/dev/null | head -1)
	[ -n "$vmlinuz" ] || die "no /boot/vmlinuz-* in $deb"
	modroot=$(ls -d "$dl"/x/lib/modules/* 2>/dev/null | head -1)
	[ -d "$modroot" ] || die "no /lib/modules/* in $deb"
	cp "$vmlinuz" "$kdir.new/vmlinuz"

	# The .deb has no modules.dep: read each module's depends= from its
	# .modinfo section and order the insmods depth first.
	find "$modroot/kernel" -name '*.ko*' >"$dl/all-modules"
	modfile() { # NAME -> path of its .ko (names use _ where files may use -)
		grep -E "/$(echo "$1" | sed 's/[-_]/[-_]/g')\.ko(\.xz|\.zst|\.gz)?$" "$dl/all-modules" | head -1
	}
	plain() { # FILE -> uncompressed copy in $kdir.new/modules, path on stdout
		b=$(basename "$1")
		case "$b" in
		*.ko.xz) b=${b%.xz}; xz -dc "$1" >"$kdir.new/modules/$b" ;;
		*.ko.zst) b=${b%.zst}; zstd -qdc "$1" >"$kdir.new/modules/$b" ;;
		*.ko.gz) b=${b%.gz}; gzip -dc "$1" >"$kdir.new/modules/$b" ;;
		*) cp "$1" "$kdir.new/modules/$b" ;;
		esac
		echo "$kdir.new/modules/$b"
	}
	seen=" "
	: >"$kdir.new/modules.load"
	# dash and busybox sh have local; the recursion needs it
	# shellcheck disable=SC3043
	visit() {
		local m f ko deps d
		m=$(echo "$1" | tr - _)
		case "$seen" in *" $m "*) return 0 ;; esac
		seen="$seen$m "
		f=$(modfile "$m")
		if [ -z "$f" ]; then
			if grep -Eq "/$(echo "$m" | sed 's/[-_]/[-_]/g')\.ko$" "$modroot/modules.builtin"; then
				return 0   # built into this kernel
			fi
			die "module $m: not in $pkg and not built in"
		fi
		ko=$(plain "$f")
		deps=$(objcopy -O binary --only-section=.modinfo "$ko" /dev/stdout |
			tr '\0' '\n' | sed -n 's/^depends=//p' | tr ',' ' ')
		for d in $deps; do
			visit "$d"
		done
		basename "$ko" >>"$kdir.new/modules.load"
	}
	# roots: the virtio NIC qemu gives the guest, and the NFSv3 client
	for m in virtio_pci virtio_net nfsv3; do
		visit "$m"
	done
	echo "$pkg" >"$kdir.new/VERSION"
	rm -rf "$kdir"
	mv "$kdir.new" "$kdir"
	rm -rf "$dl"
	say "kernel $pkg; modules: $(tr '\n' ' ' <"$kdir/modules.load")"
fi

# --- initramfs ------------------------------------------------------------
initrd=$build/initrd.img
stale=""
[ -s "$initrd" ] || stale=1
for f in "$here/guest-init.sh" "$here/workload.sh" "$kdir/modules.load" "$busybox" "$0"; do
	[ "$f" -nt "$initrd" ] && stale=1
done
if [ -n "$stale" ]; then
	root=$build/initramfs
	rm -rf "$root"
	mkdir -p "$root/bin" "$root/sbin" "$root/proc" "$root/sys" "$root/dev" \
		"$root/tmp" "$root/mnt" "$root/lib/modules" "$root/etc" "$root/root"
	cp "$busybox" "$root/bin/busybox"
	for a in $("$busybox" --list); do
		[ "$a" = busybox ] || ln -s busybox "$root/bin/$a"
	done
	cp "$kdir"/modules/*.ko "$root/lib/modules/"
	cp "$kdir/modules.load" "$root/lib/modules/modules.load"
	cp "$here/guest-init.sh" "$root/init"
	cp "$here/workload.sh" "$root/bin/workload.sh"
	chmod 0755 "$root/init" "$root/bin/workload.sh"
	echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
	echo "root:x:0:" >"$root/etc/group"
	# /dev/console must exist before devtmpfs is mounted, for init's output
	mknod -m 600 "$root/dev/console" c 5 1 2>/dev/null || true
	(cd "$root" && find . | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null | gzip -1 >"$initrd.new") ||
		die "cpio of the initramfs failed"
	mv "$initrd.new" "$initrd"
	rm -rf "$root"
	say "initramfs $(du -k "$initrd" | cut -f1) KiB"
fi
echo "$build"

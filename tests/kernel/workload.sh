#!/bin/sh
# workload.sh -- the checks the kernel-client guest runs on its NFS mount
# (tests/kernel, issue 8). Runs inside the guest under busybox sh; every check
# is made here, by the guest, on what the Linux NFS client shows it.
#
# Environment (set by guest-init.sh from the kernel command line):
#   NFSPORT MNTPORT EXPORT   where the server is (host 10.0.2.2, TCP)
#   MODE                     basic: the workload below
#                            restart: the workload, then files written and
#                              fsynced, then "PRESTO-KERNEL: restart-now" for
#                              the host to SIGKILL and restart the server while
#                              the mount stays (hard mount); the guest waits for
#                              the host's marker file .presto-restarted in the
#                              export and checks every file written before the
#                              kill (presto on, issue 8's later part)
#   MOUNTOPTS                extra mount options
#
# Output: "ok N - name" / "not ok N - name" with the reason indented below,
# and last "PRESTO-KERNEL-RESULT passed=N failed=N".
export PATH=/bin:/sbin
SERVER=10.0.2.2
M=/mnt
W=$M/w          # the workload's own folder on the mount
T=/tmp/k        # local (tmpfs) reference copies
mkdir -p $T

opts="vers=3,proto=tcp,port=$NFSPORT,mountport=$MNTPORT,mountproto=tcp,nolock"
[ -n "${MOUNTOPTS:-}" ] && opts="$opts,$MOUNTOPTS"

pass=0
fail=0
n=0
# run NAME FUNCTION...: one check; the function prints its reason on failure
run() {
	name=$1
	shift
	n=$((n + 1))
	t0=$(date +%s)
	"$@" >$T/out 2>&1
	rc=$?
	dt=$(($(date +%s) - t0))
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		echo "ok $n - $name (${dt}s)"
	else
		fail=$((fail + 1))
		echo "not ok $n - $name (${dt}s)"
		sed -e 's/^/#   /' $T/out | head -n 30
	fi
	return $rc
}

# eq WHAT GOT WANT
eq() {
	[ "$2" = "$3" ] && return 0
	echo "$1: got '$2', want '$3'"
	return 1
}

# drop the client's caches so the next access asks the server
drop() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

md5() { md5sum <"$1" | cut -d' ' -f1; }

do_mount() {
	mount -t nfs -o "$opts" "$SERVER:$EXPORT" $M || return 1
	grep -q " $M nfs " /proc/mounts || { echo "not in /proc/mounts:"; cat /proc/mounts; return 1; }
}

t_mount() {
	do_mount || return 1
	grep " $M nfs " /proc/mounts
	mkdir $W || return 1
}

t_small_files() {
	mkdir $W/small $T/small || return 1
	i=1
	while [ $i -le 300 ]; do
		# sizes from a few bytes to ~7 KiB
		seq $i $((i + (i * 37) % 1200)) >$T/small/f$i
		cat $T/small/f$i >$W/small/f$i || { echo "write f$i failed"; return 1; }
		i=$((i + 1))
	done
	drop
	eq "entries" "$(ls $W/small | wc -l)" 300 || return 1
	i=1
	while [ $i -le 300 ]; do
		cmp $T/small/f$i $W/small/f$i || return 1
		i=$((i + 1))
	done
}

t_big_write() {
	dd if=/dev/urandom of=$T/big bs=1M count=16 2>/dev/null || return 1
	dd if=$T/big of=$W/big bs=64k conv=fsync 2>&1 | tail -1
	[ -s $W/big ] || return 1
	drop
	eq "size" "$(stat -c %s $W/big)" 16777216 || return 1
	eq "md5 after drop_caches" "$(md5 $W/big)" "$(md5 $T/big)"
}

t_big_remount() {
	umount $M || return 1
	do_mount || return 1
	eq "md5 after remount" "$(md5 $W/big)" "$(md5 $T/big)"
}

# apply the same edit to the local reference and the NFS file, then compare
edit_both() {
	"$@" $T/edit && "$@" $W/edit || { echo "edit '$*' failed"; return 1; }
	drop
	eq "size after $1" "$(stat -c %s $W/edit)" "$(stat -c %s $T/edit)" || return 1
	eq "md5 after $1" "$(md5 $W/edit)" "$(md5 $T/edit)"
}
overwrite_mid() { dd if=$T/patch of="$1" bs=1 seek=300001 conv=notrunc 2>/dev/null; }
append() { cat $T/patch >>"$1"; }
shrink() { truncate -s 700003 "$1"; }
grow() { truncate -s 2100000 "$1"; }

t_overwrite_middle() {
	dd if=$T/big of=$T/edit bs=1k count=1024 2>/dev/null
	cp $T/edit $W/edit || return 1
	dd if=/dev/urandom of=$T/patch bs=1 count=5000 2>/dev/null
	edit_both overwrite_mid
}
t_append() { edit_both append; }
t_truncate_shrink() { edit_both shrink; }
t_truncate_grow() {
	edit_both grow || return 1
	# the extension reads back as zeros
	eq "tail bytes" "$(dd if=$W/edit bs=1 skip=2099990 2>/dev/null | od -An -tx1 | tr -d ' \n')" \
		"00000000000000000000"
}

t_mkdir() {
	mkdir $W/d1 && mkdir -p $W/d1/d2/d3 || return 1
	drop
	[ -d $W/d1/d2/d3 ] || { echo "d1/d2/d3 missing"; return 1; }
	eq "type" "$(stat -c %F $W/d1)" "directory"
}

t_rename_file() {
	echo one >$W/r1 || return 1
	ino=$(stat -c %i $W/r1)
	mv $W/r1 $W/r2 || return 1
	drop
	[ ! -e $W/r1 ] || { echo "r1 still there"; return 1; }
	eq "content" "$(cat $W/r2)" one || return 1
	eq "inode" "$(stat -c %i $W/r2)" "$ino"
}

t_rename_dir() {
	mkdir -p $W/da/sub && echo deep >$W/da/sub/f || return 1
	mv $W/da $W/db || return 1
	drop
	[ ! -e $W/da ] || { echo "da still there"; return 1; }
	eq "content" "$(cat $W/db/sub/f)" deep || return 1
	# and into another directory
	mv $W/db $W/d1/dc || return 1
	drop
	eq "content after move" "$(cat $W/d1/dc/sub/f)" deep
}

t_rename_over() {
	echo new >$W/src && echo old >$W/dst || return 1
	ino=$(stat -c %i $W/src)
	mv -f $W/src $W/dst || return 1
	drop
	[ ! -e $W/src ] || { echo "src still there"; return 1; }
	eq "content" "$(cat $W/dst)" new || return 1
	eq "inode" "$(stat -c %i $W/dst)" "$ino" || return 1
	eq "entries named src/dst" "$(ls $W | grep -c -e '^src$' -e '^dst$')" 1
}

t_symlink() {
	echo target >$W/symtarget || return 1
	ln -s symtarget $W/sym && ln -s ../no/such/place $W/dangling || return 1
	drop
	eq "readlink" "$(readlink $W/sym)" symtarget || return 1
	eq "readlink dangling" "$(readlink $W/dangling)" ../no/such/place || return 1
	eq "type" "$(stat -c %F $W/sym)" "symbolic link" || return 1
	eq "through the link" "$(cat $W/sym)" target
}

t_hardlink() {
	echo linked >$W/h1 || return 1
	ln $W/h1 $W/h2 || return 1
	drop
	eq "nlink h1" "$(stat -c %h $W/h1)" 2 || return 1
	eq "nlink h2" "$(stat -c %h $W/h2)" 2 || return 1
	eq "same inode" "$(stat -c %i $W/h2)" "$(stat -c %i $W/h1)" || return 1
	rm $W/h1 || return 1
	drop
	eq "nlink after rm h1" "$(stat -c %h $W/h2)" 1 || return 1
	eq "content" "$(cat $W/h2)" linked
}

t_chmod() {
	echo m >$W/mode && chmod 0751 $W/mode || return 1
	mkdir $W/mdir && chmod 1777 $W/mdir || return 1
	drop
	eq "file mode" "$(stat -c %a $W/mode)" 751 || return 1
	eq "dir mode" "$(stat -c %a $W/mdir)" 1777
}

t_chown() {
	echo o >$W/owned && chown 1234:5678 $W/owned || return 1
	drop
	eq "owner" "$(stat -c %u:%g $W/owned)" 1234:5678 || return 1
	chgrp 42 $W/owned || return 1
	drop
	eq "group" "$(stat -c %u:%g $W/owned)" 1234:42
}

t_utimes() {
	echo t >$W/times || return 1
	touch -d '2001-02-03 04:05:06' $W/times || return 1
	drop
	eq "mtime" "$(stat -c %Y $W/times)" 981173106 || return 1
	eq "atime" "$(stat -c %X $W/times)" 981173106 || return 1
	touch -m -d '2010-01-01 00:00:00' $W/times || return 1
	drop
	eq "mtime only" "$(stat -c %Y $W/times)" 1262304000 || return 1
	eq "atime kept" "$(stat -c %X $W/times)" 981173106
}

t_mkfifo() {
	mkfifo $W/fifo || return 1
	drop
	[ -p $W/fifo ] || { echo "not a fifo: $(stat -c %F $W/fifo)"; return 1; }
	eq "type" "$(stat -c %F $W/fifo)" "fifo"
}

t_rmdir_notempty() {
	mkdir $W/full && echo x >$W/full/x || return 1
	out=$(rmdir $W/full 2>&1) && { echo "rmdir of a non-empty directory succeeded"; return 1; }
	case "$out" in
	*"Directory not empty"*) ;;
	*) echo "want ENOTEMPTY, got: $out"; return 1 ;;
	esac
	[ -f $W/full/x ] || { echo "x lost"; return 1; }
	rm $W/full/x && rmdir $W/full || return 1
	[ ! -e $W/full ] || { echo "full still there"; return 1; }
}

t_tar() {
	# a tree of 400 files in 20 folders, with a symlink, made locally
	rm -rf $T/tree && mkdir $T/tree || return 1
	d=0
	while [ $d -lt 20 ]; do
		mkdir $T/tree/dir$d
		f=0
		while [ $f -lt 20 ]; do
			seq $d $((d * 20 + f * 13 % 500)) >$T/tree/dir$d/file$f
			f=$((f + 1))
		done
		d=$((d + 1))
	done
	ln -s dir0/file0 $T/tree/link
	(cd $T/tree && find . -type f | sort | xargs md5sum) >$T/tree.md5
	tar -cf $T/tree.tar -C $T tree || return 1
	tar -xf $T/tree.tar -C $W || return 1
	drop
	eq "files" "$(find $W/tree -type f | wc -l)" 400 || return 1
	eq "link" "$(readlink $W/tree/link)" dir0/file0 || return 1
	(cd $W/tree && md5sum -c $T/tree.md5 | grep -v ': OK$'; exit 0)
	(cd $W/tree && md5sum -c -s $T/tree.md5) || { echo "md5 check failed"; return 1; }
}

t_rm_rf() {
	rm -rf $W/tree || return 1
	drop
	[ ! -e $W/tree ] || { echo "tree still there: $(find $W/tree | head)"; return 1; }
}

t_df() {
	df -P -k $M || return 1
	set -- $(df -P -k $M | tail -1)
	# Filesystem 1K-blocks Used Available Use% Mounted-on
	[ "$2" -gt 0 ] 2>/dev/null || { echo "size '$2'"; return 1; }
	[ "$4" -ge 0 ] 2>/dev/null || { echo "available '$4'"; return 1; }
	eq "mounted on" "$6" $M
}

t_many() {
	mkdir $W/many || return 1
	i=1
	while [ $i -le 2000 ]; do
		: >$W/many/entry-$i || { echo "create entry-$i failed"; return 1; }
		i=$((i + 1))
	done
	drop
	ls -l $W/many >$T/ls-l || return 1
	eq "ls -l regular files" "$(grep -c '^-' $T/ls-l)" 2000 || return 1
	seq 1 2000 | sed 's/^/entry-/' | sort >$T/want
	ls $W/many | sort >$T/got
	cmp $T/want $T/got || { diff $T/want $T/got | head; return 1; }
}

t_many_rm() {
	rm -rf $W/many || return 1
	drop
	[ ! -e $W/many ] || return 1
}

t_umount() {
	umount $M || return 1
	! grep -q " $M nfs " /proc/mounts || { echo "still mounted"; return 1; }
}

# --- restart (presto on; issue 8's later part) -------------------------------
t_restart_write() {
	mkdir $W/persist $T/persist || return 1
	i=1
	while [ $i -le 50 ]; do
		dd if=/dev/urandom of=$T/persist/p$i bs=1k count=$((i * 7 % 300 + 1)) 2>/dev/null
		dd if=$T/persist/p$i of=$W/persist/p$i bs=4k conv=fsync 2>/dev/null ||
			{ echo "write p$i failed"; return 1; }
		i=$((i + 1))
	done
	sync
}

t_restart_wait() {
	# to the console itself: run() keeps a check's output until it ends
	echo "PRESTO-KERNEL: restart-now" >/dev/console
	i=0
	while [ $i -lt 120 ]; do
		drop
		[ -e $M/.presto-restarted ] && return 0
		sleep 1
		i=$((i + 1))
	done
	echo "no .presto-restarted from the host after 120 s"
	return 1
}

t_restart_check() {
	i=1
	while [ $i -le 50 ]; do
		cmp $T/persist/p$i $W/persist/p$i || return 1
		i=$((i + 1))
	done
	eq "big md5" "$(md5 $W/big)" "$(md5 $T/big)" || return 1
	eq "edit md5" "$(md5 $W/edit)" "$(md5 $T/edit)" || return 1
	echo after >$W/after && drop && eq "write after restart" "$(cat $W/after)" after
}

echo "PRESTO-KERNEL: workload mode=$MODE mount -o $opts $SERVER:$EXPORT"
if run "mount -t nfs vers=3 tcp" t_mount; then
	run "300 small files read back after drop_caches" t_small_files
	run "16 MiB dd conv=fsync, md5 after drop_caches" t_big_write
	run "16 MiB file md5 after remount" t_big_remount
	run "overwrite in the middle" t_overwrite_middle
	run "append" t_append
	run "truncate (shrink)" t_truncate_shrink
	run "truncate (grow, zeros)" t_truncate_grow
	run "mkdir" t_mkdir
	run "rename a file" t_rename_file
	run "rename a directory" t_rename_dir
	run "rename over an existing file" t_rename_over
	run "symlink and readlink" t_symlink
	run "hard link: link count and inode" t_hardlink
	run "chmod" t_chmod
	run "chown and chgrp as root" t_chown
	run "utimes (touch -d)" t_utimes
	run "mkfifo" t_mkfifo
	run "rmdir of a non-empty directory: ENOTEMPTY" t_rmdir_notempty
	run "tar extract of 400 files, md5 check" t_tar
	run "rm -rf of the extracted tree" t_rm_rf
	run "df on the mount" t_df
	run "ls -l of a directory of 2000 entries" t_many
	run "rm -rf of 2000 entries" t_many_rm
	if [ "$MODE" = restart ]; then
		run "files written and fsynced before the kill" t_restart_write &&
			run "server SIGKILLed and restarted under a hard mount" t_restart_wait &&
			run "every file written before the kill intact" t_restart_check
	fi
	run "umount" t_umount
fi
if [ $fail -gt 0 ]; then
	echo "PRESTO-KERNEL: kernel messages about NFS/RPC:"
	dmesg | grep -v -e 'ommand line' -e 'nfsport=' -e 'RPC: Registered' |
		grep -i -e nfs -e rpc -e lockd | tail -n 20 | sed 's/^/#   /'
fi
echo "PRESTO-KERNEL-RESULT passed=$pass failed=$fail"

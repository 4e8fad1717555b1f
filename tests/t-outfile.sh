#!/bin/sh
# Where cfc and cfrt-calibrate write (cli/outfile.c): a device node or a
# FIFO is written through and stays what it was, a symbolic link is
# followed and kept, the input is never overwritten, a write error (a
# full disk) is an error with no file left, several outputs appear all
# or none. Devices are private copies made with mknod in a temporary
# directory: never the machine's own /dev/null or /dev/full.
. tests/lib.sh
t=$B/tests/outfile
rm -rf "$t"
mkdir -p "$t"

# mknod needs CAP_MKNOD and a file system that allows device nodes
if mknod "$t/probe" c 1 3 2>/dev/null && [ -c "$t/probe" ] && echo x >"$t/probe" 2>/dev/null; then
	rm -f "$t/probe"
	mknod "$t/null" c 1 3
	mknod "$t/full" c 1 7
	devices=1
else
	rm -f "$t/probe"
	echo "SKIP outfile: device nodes (mknod) cannot be made here"
	devices=0
fi

if [ $devices = 1 ]; then
	"$CFC" examples/mlp.cf --emit=c -o "$t/null" 2>"$t/null.err"; rc=$?
	check "outfile: -o a character device (null) exits 0 and it stays a device" sh -c \
		"[ $rc -eq 0 ] && [ -c '$t/null' ] && [ ! -s '$t/null.err' ]"
	check "outfile: no header or temporary left beside the device" sh -c \
		"[ -z \"\$(ls '$t' | grep -v -e '^null' -e '^full\$')\" ]"
	"$CFC" examples/mlp.cf --emit=c -o "$t/full" 2>"$t/full.err"; rc=$?
	check "outfile: -o a full device (ENOSPC) exits 1 and says so" sh -c \
		"[ $rc -eq 1 ] && grep -q \"^cfc: error: cannot write $t/full: No space left on device\" '$t/full.err'"
	check "outfile: the full device stays a device, nothing left beside it" sh -c \
		"[ -c '$t/full' ] && [ -z \"\$(ls '$t' | grep -v -e '^null' -e '^full')\" ]"
	# a kind with no header, one with its header beside (mlp.h written to a device too)
	"$CFC" examples/mlp.cf --emit=graph -o "$t/full" 2>/dev/null; rc=$?
	check "outfile: --emit=graph to the full device exits 1" sh -c "[ $rc -eq 1 ] && [ -c '$t/full' ]"
	"$CFC" examples/mlp.cf --emit=png -o "$t/null" 2>/dev/null; rc=$?
	check "outfile: a picture to the device node, which stays one" sh -c "[ $rc -eq 0 ] && [ -c '$t/null' ]"
	# a symbolic link to a device: followed, the device stays
	ln -s null "$t/to-null"
	"$CFC" examples/mlp.cf --emit=graph -o "$t/to-null"; rc=$?
	check "outfile: a symbolic link to a device is written through" sh -c \
		"[ $rc -eq 0 ] && [ -L '$t/to-null' ] && [ -c '$t/null' ]"
	# standard output on a full device
	"$CFC" examples/mlp.cf --emit=graph -o - >"$t/full" 2>"$t/stdout.err"; rc=$?
	check "outfile: -o - on a full device exits 1 and says so" sh -c \
		"[ $rc -eq 1 ] && grep -q '^cfc: error: cannot write to standard output: No space left on device' '$t/stdout.err'"
	# several kinds into a directory whose second file is a full device:
	# none of the regular files appears
	mkdir "$t/d"
	mknod "$t/d/mlp.h" c 1 7
	"$CFC" examples/mlp.cf --emit=c,h,ref -o "$t/d" 2>"$t/multi.err"; rc=$?
	check "outfile: -o DIR with a full device among its files: exit 1, no file left" sh -c \
		"[ $rc -eq 1 ] && [ \"\$(ls -A '$t/d')\" = mlp.h ] && [ -c '$t/d/mlp.h' ] &&
		 grep -q 'cannot write $t/d/mlp.h: No space left on device' '$t/multi.err'"
	# cfrt-calibrate: the same rules (a quick run on one rank)
	CAL=$B/cfrt-calibrate
	if [ -x "$CAL" ]; then
		mpirun --allow-run-as-root --oversubscribe --timeout 120 -n 1 "$CAL" --quick --type f32 \
			-o "$t/null" >"$t/cal.out" 2>&1; rc=$?
		check "outfile: cfrt-calibrate -o a device: exit 0, still a device" sh -c \
			"[ $rc -eq 0 ] && [ -c '$t/null' ] && [ -z \"\$(ls '$t' | grep 'null.tmp')\" ]"
		mpirun --allow-run-as-root --oversubscribe --timeout 120 -n 1 "$CAL" --quick --type f32 \
			-o "$t/full" >"$t/calfull.out" 2>&1; rc=$?
		check "outfile: cfrt-calibrate -o a full device: non-zero exit, says so, still a device" sh -c \
			"[ $rc -ne 0 ] && [ -c '$t/full' ] &&
			 grep -q 'cfrt-calibrate: cannot write $t/full: No space left on device' '$t/calfull.out'"
	fi
fi

# a symbolic link to a regular file: the file is replaced, the link stays
printf 'old\n' >"$t/target"
ln -s target "$t/link"
"$CFC" examples/mlp.cf --emit=graph -o "$t/link"; rc=$?
"$CFC" examples/mlp.cf --emit=graph -o "$t/direct.graph"
check "outfile: a symbolic link is followed: its target replaced, the link kept" sh -c \
	"[ $rc -eq 0 ] && [ -L '$t/link' ] && [ \"\$(readlink '$t/link')\" = target ] &&
	 [ -f '$t/target' ] && [ ! -L '$t/target' ] && cmp -s '$t/target' '$t/direct.graph'"
# a chain of links, and a dangling one (its target is created)
ln -s link "$t/link2"
ln -s sub/new.graph "$t/dangling"
mkdir "$t/sub"
"$CFC" examples/mlp.cf --emit=graph -D S=64 -o "$t/link2"; rc1=$?
"$CFC" examples/mlp.cf --emit=graph -o "$t/dangling"; rc2=$?
check "outfile: a chain of links and a dangling link are followed" sh -c \
	"[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ -L '$t/link2' ] && [ -L '$t/link' ] &&
	 grep -q 'S=64' '$t/target' && [ -L '$t/dangling' ] && cmp -s '$t/sub/new.graph' '$t/direct.graph'"
ln -s loop "$t/loop"
"$CFC" examples/mlp.cf --emit=graph -o "$t/loop" 2>"$t/loop.err"; rc=$?
check "outfile: a link loop is an error" sh -c \
	"[ $rc -eq 1 ] && grep -q 'cannot write $t/loop: Too many levels of symbolic links' '$t/loop.err'"
# a replaced file keeps its mode
printf 'x\n' >"$t/mode.graph"
chmod 0750 "$t/mode.graph"
"$CFC" examples/mlp.cf --emit=graph -o "$t/mode.graph"
check "outfile: a replaced file keeps its mode" sh -c \
	"[ \"\$(stat -c %a '$t/mode.graph')\" = 750 ] && cmp -s '$t/mode.graph' '$t/direct.graph'"

# the input itself, by its name, a symbolic link, a hard link, -o DIR
cp examples/mlp.cf "$t/in.cf"
cp "$t/in.cf" "$t/in.orig"
"$CFC" "$t/in.cf" --emit=c -o "$t/in.cf" 2>"$t/self.err"; rc=$?
check "outfile: -o the input is refused, the input untouched" sh -c \
	"[ $rc -eq 1 ] && cmp -s '$t/in.cf' '$t/in.orig' &&
	 grep -q \"^cfc: error: cannot write $t/in.cf: it is the input $t/in.cf (not overwritten)\" '$t/self.err' &&
	 [ ! -e '$t/in.h' ] && [ -z \"\$(ls '$t' | grep tmp)\" ]"
ln -s in.cf "$t/in-link.cf"
ln "$t/in.cf" "$t/in-hard.cf"
"$CFC" "$t/in.cf" --emit=graph -o "$t/in-link.cf" 2>/dev/null; rc1=$?
"$CFC" "$t/in-link.cf" --emit=graph -o "$t/in-hard.cf" 2>/dev/null; rc2=$?
"$CFC" - --emit=graph -o "$t/./in.cf" <"$t/in.cf" 2>/dev/null; rc3=$?
check "outfile: the input by a symbolic link, a hard link or standard input is refused" sh -c \
	"[ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && [ $rc3 -eq 1 ] && cmp -s '$t/in.cf' '$t/in.orig' && [ -L '$t/in-link.cf' ]"
# a spec named like the file -o DIR would write: mlp.graph
mkdir "$t/dir"
cp examples/mlp.cf "$t/dir/mlp.graph"
"$CFC" "$t/dir/mlp.graph" --emit=ast,graph -o "$t/dir" 2>"$t/dirself.err"; rc=$?
check "outfile: -o DIR whose file would be the input: refused, nothing written" sh -c \
	"[ $rc -eq 1 ] && cmp -s '$t/dir/mlp.graph' examples/mlp.cf && [ ! -e '$t/dir/mlp.ast' ] &&
	 grep -q 'it is the input' '$t/dirself.err'"
# the --profile file is an input too
"$CFC" examples/mlp.cf --profile=tests/fixtures/prof/2026-11-29-Xeon16-lease45-cpu-4ranks.prof --emit=profile -o "$t/p.prof" 2>/dev/null &&
	cp "$t/p.prof" "$t/p.orig" &&
	"$CFC" examples/mlp.cf --profile="$t/p.prof" --emit=profile -o "$t/p.prof" 2>/dev/null; rc=$?
check "outfile: -o the --profile file is refused" sh -c "[ $rc -eq 1 ] && cmp -s '$t/p.prof' '$t/p.orig'"

# a FIFO: written through, stays a FIFO
mkfifo "$t/fifo"
timeout 20 cat "$t/fifo" >"$t/fifo.out" &
"$CFC" examples/mlp.cf --emit=graph -o "$t/fifo"; rc=$?
wait
check "outfile: a FIFO is written through and stays a FIFO" sh -c \
	"[ $rc -eq 0 ] && [ -p '$t/fifo' ] && cmp -s '$t/fifo.out' '$t/direct.graph'"
# several kinds need a directory: a regular file there is an error
"$CFC" examples/mlp.cf --emit=c,h -o "$t/target" 2>"$t/notdir.err"; rc=$?
check "outfile: several kinds into a regular file: refused, the file untouched" sh -c \
	"[ $rc -eq 1 ] && grep -q 'S=64' '$t/target'"

# a build of several variants (-D S=16,32; issue 50): every variant's
# files and the one module appear together or not at all, whichever of
# them fails to be written
"$CFC" examples/mlp.cf -D S=16,32 --emit=c,h,py -o "$t/vars" 2>"$t/vars.err"; rc=$?
check "outfile: -D S=16,32 --emit=c,h,py writes each variant's C and header and one module" sh -c \
	"[ $rc -eq 0 ] && [ \"\$(ls '$t/vars' | tr '\n' ' ')\" = 'mlp.py mlp_S16.c mlp_S16.h mlp_S32.c mlp_S32.h ' ]"
if [ $devices = 1 ]; then
	# the last variant's header, and the module written after every variant
	for f in mlp_S32.h mlp.py; do
		d=$t/vfull-$f
		mkdir "$d"
		mknod "$d/$f" c 1 7
		"$CFC" examples/mlp.cf -D S=16,32 --emit=c,h,py -o "$d" 2>"$d.err"; rc=$?
		check "outfile: -D S=16,32 with $f a full device: exit 1, no variant's file left" sh -c \
			"[ $rc -eq 1 ] && [ \"\$(ls -A '$d')\" = $f ] && [ -c '$d/$f' ] &&
			 grep -q 'cannot write $d/$f: No space left on device' '$d.err'"
	done
fi
# the last variant's C cannot be opened (a directory stands in its place)
mkdir -p "$t/vdir/mlp_S32.c"
"$CFC" examples/mlp.cf -D S=16,32 --emit=c,h -o "$t/vdir" 2>"$t/vdir.err"; rc=$?
check "outfile: -D S=16,32 whose last file cannot be opened: exit 1, no variant's file left" sh -c \
	"[ $rc -eq 1 ] && [ \"\$(ls -A '$t/vdir')\" = mlp_S32.c ] && [ -d '$t/vdir/mlp_S32.c' ] &&
	 grep -q 'mlp_S32.c' '$t/vdir.err'"
# a later variant that does not compile: no directory made, no file
"$CFC" examples/mlp.cf -D S=16,18 --emit=c,h,py -o "$t/vbad" 2>"$t/vbad.err"; rc=$?
check "outfile: -D S=16,18 whose second variant fails: exit 1, no directory, no file" sh -c \
	"[ $rc -eq 1 ] && [ ! -e '$t/vbad' ] && grep -q 'in the variant S=18 of this build' '$t/vbad.err'"

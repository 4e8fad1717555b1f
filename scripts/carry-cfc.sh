#!/bin/sh
# carry-cfc.sh B DIR: a copy of $B/cfc that runs on another x86-64 Linux
# machine without graphviz, flex or bison (the GPU machines, whose glibc
# is as new as this one's or newer): DIR/cfc.bin, the shared libraries it
# loads except glibc's own (DIR/lib), and DIR/cfc, a wrapper that runs it
# with them. On the other machine, `ln -s DIR/cfc B/cfc` (through a path
# from B) lets the bench scripts use it; `make -o B/cfc` keeps make from
# rebuilding it.
set -eu
B=$1 DIR=$2
[ -x "$B/cfc" ] || { echo "carry-cfc: no $B/cfc (make first)" >&2; exit 1; }
rm -rf "$DIR"
mkdir -p "$DIR/lib"
cp "$B/cfc" "$DIR/cfc.bin"
# glibc's libraries come from the machine that runs it: a newer glibc
# runs what an older one linked, and mixing two of them does not load
ldd "$B/cfc" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
	case ${lib##*/} in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
	*) cp -L "$lib" "$DIR/lib/" ;;
	esac
done
cat >"$DIR/cfc" <<'EOF'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/cfc.bin" "$@"
EOF
chmod +x "$DIR/cfc"
echo "carry-cfc: $DIR ($(ls "$DIR/lib" | wc -l) libraries, $(du -sh "$DIR" | cut -f1))"

#!/bin/sh
# cfc reading an input larger than the memory it may have: the growing
# buffer's realloc fails and cfc says it cannot read the input, exit 1,
# no crash, nothing leaked (read_input lost the old buffer when realloc
# failed). Under a sanitizer the address-space limit is left out.
. tests/lib.sh
if [ -n "${SAN:-}" ]; then
	echo "SKIP read_input under a memory limit: not under sanitizers"
	exit 0
fi
d=$B/tests/read-input
mkdir -p "$d"
(ulimit -v 400000 && head -c 600000000 /dev/zero | "$CFC" - >"$d/out" 2>"$d/err")
rc=$?
check "cfc: an input past the memory limit: 'cannot read', exit 1, no crash" \
	sh -c "[ $rc = 1 ] && grep -q '^cfc: error: cannot read' '$d/err'"

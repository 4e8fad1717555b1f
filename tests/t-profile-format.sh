#!/bin/sh
# The profile format is one table, runtime/profile.def (issue 49): cfc's
# reader knows exactly its words (an unknown entry lists them), and every
# line cfc writes (--emit=profile) and cfrt-calibrate writes is one of its
# rows, all rows written by some fixture.
. tests/lib.sh
t=$B/tests/profile-format
rm -rf "$t"
mkdir -p "$t"

words=$(sed -n 's/^PF([A-Z_0-9]*, *"\([a-z_0-9]*\)".*/\1/p' runtime/profile.def | uniq)
list=$(echo $words | sed 's/ /, /g')
printf 'cfprofile 1\nbackend mpi\nranks 2\ngpus 4\nend\n' >"$t/unknown.prof"
"$CFC" examples/mlp.cf --profile="$t/unknown.prof" -o "$t/u.c" 2>"$t/unknown.err"
check "profile-format: an unknown entry lists the words of profile.def" \
	grep -qF "unknown.prof:4:1: error: unknown entry 'gpus' ($list)" "$t/unknown.err"

# every fixture read and written back: each line a row of the table
: >"$t/all"
for f in tests/fixtures/prof/*.prof; do
	"$CFC" examples/mlp.cf --profile="$f" --emit=profile -o "$t/w.prof" 2>/dev/null &&
		cat "$t/w.prof" >>"$t/all"
done
grep -v '^#' "$t/all" | awk '{ print $1 }' | sort -u >"$t/written"
echo $words cfprofile | tr ' ' '\n' | sort -u >"$t/table"
check "profile-format: cfc writes only the table's words, and every one of them" \
	sh -c "[ -s '$t/written' ] && diff -u '$t/table' '$t/written'"
# a calibration's lines: words of the table only
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
$MPIRUN -n 2 "$B/cfrt-calibrate" --quick --check=warn -o "$t/cal.prof" >/dev/null 2>"$t/cal.log"
grep -v '^#' "$t/cal.prof" | awk '{ print $1 }' | sort -u >"$t/cal.words"
check "profile-format: cfrt-calibrate writes the table's words, read back by cfc" \
	sh -c "[ -s '$t/cal.words' ] && [ -z \"\$(comm -23 '$t/cal.words' '$t/table')\" ] &&
	       '$CFC' examples/mlp.cf --profile='$t/cal.prof' -o '$t/cal.c' 2>/dev/null"

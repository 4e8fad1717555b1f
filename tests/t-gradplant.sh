#!/bin/sh
# The driver's gradient check still fails a wrong gradient (issue 48,
# item 3). The driver measures each gradient's error against the larger of
# its own scale and 1e-3 of the largest gradient's (a0d3fdd: a gradient
# that is zero but for rounding agrees with nothing). This suite shows
# that the floor hides no real error. A bug is planted in the generated C
# (CF_STAGE=gen, one line edited, CF_STAGE=link), and tests/gradlib.sh's
# own check (1e-12 against the reference, 1e-6 against finite
# differences) must say FAIL with the error the bug makes:
# - the reference forgets the keys' share of q's gradient in
#   attention(q, q, v), the bug item 3 alleged (rep_attn: d_q + d_q_2
#   becomes d_q): fails against the reference by its own magnitude, while
#   finite differences agree with the parallel gradients;
# - at one query (rep_attn1), where q's and wq's gradients are rounding
#   noise and the floor is what measures them, the reference's d_wq is
#   h9.T @ d_h9 (h9 times v's share of its gradient: an ordinary value
#   where zero is right): error 1;
# - the reference's d_wv off by a relative 1e-6 (an alpha of 1.000001):
#   error 1e-6, not less, where the floor does not apply;
# - the parallel backward with the same two bugs (its d_wq from d_t3,
#   v's share, which it has made by then): fails against the reference
#   and against finite differences.
# Unplanted, the same builds pass the same check (the control).
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/gradplant
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
. tests/gradlib.sh

# replace FILE FROM TO: FROM (a fixed string) occurs once in FILE, on one
# line; that occurrence becomes TO.
replace() {
	[ "$(grep -cF "$2" "$1")" = 1 ] || { echo "   '$2': not once in $1"; return 1; }
	awk -v from="$2" -v to="$3" '{
		i = index($0, from)
		if (i) $0 = substr($0, 1, i - 1) to substr($0, i + length(from))
		print }' "$1" >"$1.new" && mv "$1.new" "$1" && grep -qF "$3" "$1"
}

# planted NAME DIR SPEC FILE FROM TO: SPEC's backward (f64, tp = 2) built
# into DIR with FROM replaced by TO in the generated DIR/FILE, then checked
# by gradlib's grad; its verdict line goes to DIR.verdict, the driver's
# output is DIR.out.
planted() {
	pn=$1 pd=$2 ps=$3 pf=$4 pfrom=$5 pto=$6
	if ! CF_STAGE=gen sh scripts/build-model.sh "$B" "$pd" "$ps" --backward --type=f64 \
	    -D tp=2 >"$pd.gen.log" 2>&1; then
		fail "$pn (generate)"
		tail -n 20 "$pd.gen.log"
		return 1
	fi
	if ! replace "$pd/$pf" "$pfrom" "$pto"; then
		fail "$pn (plant)"
		return 1
	fi
	CF_STAGE=link grad "$pn" "$pd" 2 "$ps" -D tp=2 >"$pd.verdict"
}

# expect NAME DIR WHICH LO HI: the planted build DIR is failed by grad, and
# its driver's error WHICH (a field of its line) lies in [LO, HI].
expect() {
	en=$1 ed=$2
	v=$(field "$3" "$ed.out")
	if grep -q '^FAIL .*(forward ' "$ed.verdict" &&
	    awk -v v="$v" -v lo="$4" -v hi="$5" 'BEGIN { exit !(v != "" && v + 0 >= lo + 0 && v + 0 <= hi + 0) }'; then
		pass "$en ($3 $v)"
	else
		fail "$en ($3 ${v:-missing}, not in [$4, $5])"
		sed 's/^/   | /' "$ed.verdict"
		tail -n 5 "$ed.out" | sed 's/^/   | /'
	fi
}

# the control: the same builds unplanted pass
grad "gradplant: control: rep_attn unplanted passes" "$out/rep_attn" 2 tests/grad/rep_attn.cf -D tp=2
grad "gradplant: control: rep_attn1 unplanted passes" "$out/rep_attn1" 2 tests/grad/rep_attn1.cf -D tp=2

add='cfrt_add(ctx, &d_q_3, &d_q, &d_q_2)'
nokeys='cfrt_copy(ctx, &d_q_3, &d_q)'
wq='cfrt_matmul(ctx, &d_wq, &at, &d_t2, 1.0, 0.0)'
wq_wrong='cfrt_matmul(ctx, &d_wq, &at, &d_h9, 1.0, 0.0)'
# the parallel backward makes d_wq before d_h9 (order.c's 1b: the weight
# gradient that reads d_t2 last first), so its d_wq is planted from
# d_t3, v's share of o's gradient (d_wv's value), made and live there
wq_wrong_par='cfrt_matmul(ctx, &d_wq, &at, &d_t3, 1.0, 0.0)'
wv='cfrt_matmul(ctx, &d_wv, &at, &d_t3, 1.0, 0.0)'
wv_off='cfrt_matmul(ctx, &d_wv, &at, &d_t3, 1.000001, 0.0)'

# -- a wrong reference
d=$out/ref_nokeys
if planted "gradplant: reference without dk" "$d" tests/grad/rep_attn.cf rep_attn_ref.c \
	"$add" "$nokeys"; then
	expect "gradplant: a reference without the keys' share of q's gradient fails against it" \
		"$d" grad_max_rel_err 1e-2 10
	check "gradplant: ... while finite differences agree with the parallel gradients" \
		le "$(field fd_max_rel_err "$d.out")" 1e-6
fi
d=$out/ref1_wq
if planted "gradplant: reference d_wq = h9.T @ d_h9 at one query" "$d" tests/grad/rep_attn1.cf \
	rep_attn1_ref.c "$wq" "$wq_wrong"; then
	expect "gradplant: at one query (the floor measures d_wq) a reference d_wq of h9.T @ d_h9 (v's share) fails, error 1" \
		"$d" grad_max_rel_err 0.999 1.001
fi
d=$out/ref_wv
if planted "gradplant: reference d_wv off by 1e-6" "$d" tests/grad/rep_attn.cf rep_attn_ref.c \
	"$wv" "$wv_off"; then
	expect "gradplant: a reference d_wv off by a relative 1e-6 fails with error 1e-6" \
		"$d" grad_max_rel_err 0.99e-6 1.01e-6
fi
d=$out/ref1_wv
if planted "gradplant: reference d_wv off by 1e-6 at one query" "$d" tests/grad/rep_attn1.cf \
	rep_attn1_ref.c "$wv" "$wv_off"; then
	expect "gradplant: ... and at one query, where the noise of q's gradient is floored" \
		"$d" grad_max_rel_err 0.99e-6 1.01e-6
fi

# -- a wrong parallel backward: against the reference and finite differences
d=$out/par_nokeys
if planted "gradplant: parallel without dk" "$d" tests/grad/rep_attn.cf rep_attn.c \
	"$add" "$nokeys"; then
	expect "gradplant: a parallel backward without the keys' share fails against the reference" \
		"$d" grad_max_rel_err 1e-2 10
	expect "gradplant: ... and against finite differences" "$d" fd_max_rel_err 1e-2 10
fi
d=$out/par1_wq
if planted "gradplant: parallel d_wq = h9.T @ d_t3 at one query" "$d" tests/grad/rep_attn1.cf \
	rep_attn1.c "$wq" "$wq_wrong_par"; then
	expect "gradplant: at one query a parallel d_wq of h9.T @ d_t3 fails against the reference" \
		"$d" grad_max_rel_err 1 1e30
	expect "gradplant: ... and against finite differences" "$d" fd_max_rel_err 1 1e30
fi

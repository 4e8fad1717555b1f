#!/bin/sh
# bench.sh: the CPU benchmark of DESIGN.md section 4 (`make bench`; a
# measurement, not a test). For mlp and attention at fixed sizes on RANKS
# ranks under mpirun:
#  - vanilla, slice(4), fuse(ring), fuse(bidir) side by side, each also
#    linked with its transfers removed (bench/nocomm.c): its compute alone;
#    and the other kinds auto takes, slice(2), fuse(ring, m = 2) and
#    fuse(pairwise), with their transfers only (SCHEDULES lists the rows,
#    ALONE those also timed without transfers);
#  - the same for the backward pass (cfc --backward; the rows of model
#    "mlp backward" and "attention backward" time one backward pass after
#    a forward, from the last rank's start of it to the last one's end,
#    and check every gradient against the serial reference);
#  - fuse(ring) under each CPU progress mode (CFRT_PROGRESS none, panel,
#    thread);
#  - the hand-written MPI + OpenBLAS MLP (bench/mlp_mpi.c), whole, without
#    its two collectives, and the collectives alone; and the same MLP
#    overlapped by hand (mlp_mpi --overlap HAND_CHUNKS: MPI_Iallgather and
#    MPI_Ireduce_scatter_block on chunks of the rows, pipelined with the
#    GEMMs); both are checked against a serial computation every round
#    (max_rel_err above 1e-4 stops the benchmark);
#  - the decomposition loss of the models' GEMMs (bench/gemm_split.c), on
#    one rank: the GEMM's own cost of being cut, free of core sharing;
#  - cfc's cost model: cfrt-calibrate measures the machine first (or
#    PROFILE=FILE names a profile), every row gets cfc --profile's
#    prediction (predicted_ms) and its error against the measured time
#    (pred_err = predicted / measured - 1), and the schedule auto takes
#    on that profile is built and timed like the others (row "auto").
#  - mix rows (MIX=1, the default): every schedule of a model and pass
#    built into one program (scripts/build-mix.sh, bench/mix.c) whose
#    passes go round the schedules in turn, one launch a round; each
#    schedule's median over its passes there is its mix time, and
#    report.awk keeps the median over the rounds (mix_ms). Launches of
#    one program on the GPU machines' Xeon VMs differed by up to 67%
#    (2026-11-28, lease 43), far more than the gaps auto is judged on;
#    passes side by side in one launch meet the same cores in nearly the
#    same state.
# Every run reports medians over ITERS iterations after WARMUP. The runs
# go round ROUNDS times, interleaved, so that a burst of other load hits
# every variant alike; of the rounds the smallest median is kept (other
# jobs only ever add time) and spread = largest / smallest - 1 shows how
# much the rounds differed; the median of the rounds is kept beside it
# (median_ms; a VM whose speed wanders from run to run, 16-core Xeon,
# 2026-11-28: one program's rounds 25-36 ms, whatever the binding, and
# cfc's prediction, made from calibrated medians, near their median).
# The time is the span from the first rank's
# start to the last rank's end (span_ms): with more ranks than cores, the
# slowest rank's own time (time_ms of the driver, kept as rank_ms) misses
# the time ranks wait for a core.
#   ECT(s)      = time(s) - best unsplit compute alone (the smaller of
#                 vanilla without transfers and the hand-written compute)
#   overlap(s)  = 1 - ECT(s) / ECT(vanilla), left empty when vanilla
#                 exposes less than 5% of the compute (a ratio of noise)
#   decomp(s)   = compute alone of s / best unsplit compute alone - 1
# Writes $B/bench/results.csv and prints the table (and the mix's passes,
# $B/bench/passes.txt: bench/paired.awk). Needs $B/cfc,
# $B/libcfrt.a and the tools in $B/bench/tools (bench/bench.mk builds them).
# BUILD=gen (needs PROFILE=FILE, measured on the target machine) only
# predicts and generates the C of every model; BUILD=link then links and
# runs that C, with the predictions gen made, on a machine without cfc
# (a GPU machine: copy $B/bench/models and $B/bench/predicted.txt there).
# With CALIBRATE=1, BUILD=link calibrates that machine first, in the same
# lease as its runs (a VM's speed drifts between leases); BUILD=report
# then predicts here on that profile (PROFILE=FILE, with the runs.txt
# and header.txt of the link run in $B/bench) and writes the table; the
# auto row keeps the schedules gen took.
# BUILD=0 reuses the models built by an earlier run (another machine with
# the same MPI and OpenBLAS needs no compiler then); BENCH_CPUS=0,1 runs
# every rank on those cores only (taskset), to play a smaller machine;
# OMPI_MCA_* in the environment reach every run and are listed. SHORT=1
# runs only the rows the cost model is judged on (every schedule and auto
# with their transfers, and the hand-written MLP): no compute alone, no
# progress modes, no GEMM pieces; for a lease too short for the whole
# benchmark. Before
# each run the script waits while other processes keep the cores busy (at
# most QUIET_WAIT seconds in all), and it records their CPU share.
# AUTO_MARGINS="0 1": also auto with cfc --auto-margin=0 and =1 (rows
# auto@0 and auto@1, built, timed, mixed and judged as auto is; their
# compute alone only where ALONE names them), to time auto's margin
# against the default 2% in the same runs.
set -u
: "${B:=build}" "${ITERS:=9}" "${WARMUP:=2}" "${ROUNDS:=5}" "${RANKS:=4}"
: "${BUILD:=1}" "${BENCH_CPUS:=}" "${QUIET_WAIT:=60}" "${SHORT:=0}" "${MIX:=1}"
: "${HAND_CHUNKS:=4}"
: "${MLP_SIZES:=-D B=2 -D S=1024 -D D=512}"
: "${ATT_SIZES:=-D B=2 -D S=1024 -D D=512 -D H=8}"
out=$B/bench
tools=$out/tools
t_start=$(date +%s)
# since: the seconds since the benchmark started, for the progress lines
since() { echo "+$(($(date +%s) - t_start)) s"; }
ncpu=$(getconf _NPROCESSORS_ONLN)
csv=$out/results.csv
[ "$BUILD" = report ] || rm -rf "$csv" "$out/runs.log" "$out/runs.txt" "$out/passes.txt"
case $BUILD in 0 | link | report) ;; *) rm -rf "$out/models" ;; esac
mkdir -p "$out/models"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 300"
[ -z "$BENCH_CPUS" ] || MPIRUN="taskset -c $BENCH_CPUS $MPIRUN --bind-to none"
# Single-copy shared memory (CMA) where this machine allows it, unless the
# caller names a mechanism. Without it every large message is copied
# through shared-memory fragments inside both ranks' MPI calls, and a
# schedule whose collectives move under compute waits for its peer's next
# call (mlp, 2 ranks on the 2-core development machine: slice(4) 74.2 ms
# against vanilla's 63.9 without, 62.9 against 60.8 with CMA). CMA needs
# ptrace rights that containers often lack: there it fails with "Read -1"
# messages, so a short calibration on 2 ranks tries it first.
if [ -z "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" ]; then
	OMPI_MCA_btl_vader_single_copy_mechanism=none
	case $BUILD in
	gen | report) ;;
	*)
		if OMPI_MCA_btl_vader_single_copy_mechanism=cma $MPIRUN --timeout 60 -n 2 \
			"$B/cfrt-calibrate" --quick -o "$out/cma-probe.prof" >"$out/cma-probe.log" 2>&1 &&
			! grep -q 'Read -1\|errno' "$out/cma-probe.log"; then
			OMPI_MCA_btl_vader_single_copy_mechanism=cma
		fi
		;;
	esac
fi
export OMPI_MCA_btl_vader_single_copy_mechanism
# the schedule rows, in the table's order, and those of them also timed
# with their transfers removed
: "${SCHEDULES:=vanilla slice(2) slice(4) fuse(ring) fuse(ring,m=2) fuse(bidir) fuse(pairwise) auto}"
: "${ALONE:=vanilla slice(4) fuse(ring) fuse(bidir) auto}"
: "${AUTO_MARGINS:=}"
for p in $AUTO_MARGINS; do SCHEDULES="$SCHEDULES auto@$p"; done
tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }
# full CMD...: CMD unless SHORT (a row that SHORT leaves out)
full() { [ "$SHORT" != 0 ] || "$@"; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"; }
size_of() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
die() { echo "bench: $*" >&2; exit 1; }
# alone SCHEDULE: whether its compute alone is timed (not with SHORT)
alone() { [ "$SHORT" = 0 ] && case " $ALONE " in *" $1 "*) true ;; *) false ;; esac; }
# margin_of SCHEDULE: auto@P's --auto-margin=P, else nothing (as in
# bench/gpu/bench.sh: a row's --schedule is "${s%@*}")
margin_of() { case $1 in auto@*) echo "--auto-margin=${1#auto@}" ;; esac; }

# build MODEL SCHEDULE SIZES...: $dir/run and $dir/run-nocomm; with BWD=1
# (the models "MODEL backward") compiled with --backward.
build() {
	m=$1 s=$2
	shift 2
	dir=$out/models/$m-$(tag "$s")
	echo "  building $m$([ "${BWD:-0}" = 1 ] && echo " backward") under $s ($(since))"
	if [ "${BWD:-0}" = 1 ]; then
		dir=$out/models/$m-bwd-$(tag "$s")
		set -- "$@" --backward
	fi
	# shellcheck disable=SC2046 # one word or none
	[ "${s%@*}" != auto ] || set -- "$@" --profile="$prof" $(margin_of "$s")
	sh scripts/build-model.sh "$B" "$dir" "examples/$m.cf" "$@" \
		-D tp="$RANKS" --schedule="${s%@*}" >"$dir.log" 2>&1 ||
		{ cat "$dir.log" >&2; die "building $m with $s failed"; }
	alone "$s" || return 0
	CF_RUN=run-nocomm CF_NOCOMM=1 sh scripts/build-model.sh \
		"$B" "$dir" "examples/$m.cf" "$@" -D tp="$RANKS" --schedule="${s%@*}" \
		>>"$dir.log" 2>&1 ||
		{ cat "$dir.log" >&2; die "linking $m with $s without transfers failed"; }
}

# predict MODEL SCHEDULE SIZES...: cfc's prediction on the profile of the
# pass the bench row times (the backward's with BWD=1), appended to
# predicted.txt as "KEY|ms|compute alone ms"; for auto, the schedules it took.
predict() {
	m=$1 s=$2
	shift 2
	key="$m" pass="pass"
	if [ "${BWD:-0}" = 1 ]; then
		key="$m backward" pass="backward pass"
		set -- "$@" --backward
	fi
	# shellcheck disable=SC2046 # one word or none
	x=$("$B/cfc" "examples/$m.cf" "$@" -D tp="$RANKS" --schedule="${s%@*}" $(margin_of "$s") \
		--profile="$prof" --explain) || die "predicting $m with $s failed"
	ms=$(echo "$x" | sed -n "s/^$pass: predicted \([0-9.]*\) ms.*/\1/p")
	cms=$(echo "$x" | sed -n "s/^$pass: predicted .* (compute alone \([0-9.]*\) ms).*/\1/p")
	echo "$key,$s,none|${ms:--}|${cms:--}" >>"$out/predicted.txt"
	[ "${s%@*}" != auto ] || echo "  $key: $s takes $(echo "$x" |
		sed -n 's/.*auto: \([^ ]*\), predicted .*/\1/p' | sort | uniq -c |
		awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')"
}

# The machine's CPU seconds so far: "busy total" over all cores.
cpu_now() {
	awk -v hz="$(getconf CLK_TCK)" '/^cpu / {
		printf "%.2f %.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz,
		       ($2 + $3 + $4 + $5 + $6 + $7 + $8 + $9) / hz }' /proc/stat
}

# children_cpu: CPU seconds of this shell's finished children (mpirun and
# its ranks). Called directly, never in $(...): `times` in a subshell
# counts the subshell's children only.
child_cpu() {
	times >"$out/times.txt"
	children_cpu=$(sed -n 2p "$out/times.txt" | tr 'ms' '  ' |
		awk '{ printf "%.2f\n", 60 * $1 + $2 + 60 * $3 + $4 }')
}

# Other jobs on the machine distort every number. Before a run, wait while
# they keep more than a quarter of a core busy, up to QUIET_WAIT seconds
# for the whole benchmark.
waited=0
wait_quiet() {
	while [ "$waited" -lt "$QUIET_WAIT" ]; do
		a=$(cpu_now)
		sleep 1
		b=$(cpu_now)
		echo "$a $b" | awk '{ exit !(($3 - $1) > 0.25 * ($4 - $2) / ncpu) }' \
			ncpu="$ncpu" || return 0
		waited=$((waited + 2))
		sleep 1
	done
}

# launch KEY CMD...: one run of CMD under mpirun, its output in $log and
# runs.log; other: the share of the machine's CPU that processes other
# than this run's used meanwhile.
launch() {
	key=$1
	shift
	log=$out/models/last.out
	wait_quiet
	child_cpu
	c0=$children_cpu m0=$(cpu_now)
	$MPIRUN -n "$RANKS" "$@" >"$log" 2>&1 ||
		{ cat "$log" >&2; die "$key: $* failed"; }
	child_cpu
	c1=$children_cpu m1=$(cpu_now)
	other=$(echo "$m0 $m1 $c0 $c1" | awk '{ o = ($3 - $1 - ($6 - $5)) / ($4 - $2)
		printf "%.2f\n", o < 0 ? 0 : o }')
	echo "$key: $(cat "$log") other_cpu=$other" >>"$out/runs.log"
}

# record KEY FILE: FILE's line of a driver (or of bench/mix.c) appended to
# runs.txt as "KEY|span_ms|time_ms|max_rel_err|other" (err "-" when not
# checked; a backward's KEY: its backward_span_ms, backward_ms and
# grad_max_rel_err), and printed.
record() {
	span=$(field span_ms "$2") t=$(field time_ms "$2")
	err=$(field max_rel_err "$2")
	case $1 in
	*" backward,"*) # the backward's span after the forwards', the slowest
		# rank's own backward, and the gradients' error. The span: a
		# fused forward ends its ranks 0.35-3.8 ms apart on the Xeon
		# VM (vanilla's 0.01-0.04, lease 62), and the rank that ends
		# first waits for the others in its backward, a wait that the
		# forward's span counts already (cfc's prediction of a pass,
		# too, adds each region's last end)
		span=$(field backward_span_ms "$2") t=$(field backward_ms "$2")
		err=$(field grad_max_rel_err "$2") ;;
	esac
	echo "$1|$span|$t|${err:--}|$other" >>"$out/runs.txt"
	printf '  %-42s span_ms=%9s time_ms=%9s other_cpu=%s%s\n' "$1" "$span" \
		"$t" "$other" "${err:+ max_rel_err=$err}"
}

# run KEY CMD...: one run of CMD under mpirun, recorded; KEY being
# "model,variant,progress,comm or nocomm".
run() {
	launch "$@"
	record "$key" "$log"
}

# mix KEY DIR: one run of DIR/run, every schedule of model KEY ("mlp",
# "mlp backward") in one job, their passes interleaved (bench/mix.c);
# records each schedule's line as "KEY,SCHEDULE,none,mix", and its passes
# (--passes) as "KEY|r|SCHEDULE|ms,ms,..." in passes.txt (bench/paired.awk).
# Round r opens schedule r - 1 first (the entry opened first runs slower:
# bench/mix.c).
mix() {
	k=$1
	# shellcheck disable=SC2086 # the schedules are words
	launch "$k,mix" "$2/run" --iters "$ITERS" --warmup "$WARMUP" --first $((r - 1)) --check \
		--passes $SCHEDULES
	# each entry's passes, for bench/paired.awk
	grep '^passes variant=' "$log" | while read -r _ v ms; do
		echo "$k|$r|${v#variant=}|${ms#ms=}" >>"$out/passes.txt"
	done
	one=$out/models/mix-line.out
	grep '^variant=' "$log" | while read -r l; do
		echo " $l" >"$one"
		record "$k,$(field variant "$one"),none,mix" "$one"
	done
}

# rounds_order: $SCHEDULES, round r opening at its r-th (wrapping). On
# the GPU machines' Xeon VMs, with auto launched last in every round, its
# mlp backward ran 5-26% behind vanilla's in all 6 rounds of three runs
# (lease 59 and 61), and -2.2..+5.9% launched in turn with it (lease 62).
rounds_order() {
	# shellcheck disable=SC2086 # the schedules are words
	set -- $SCHEDULES
	k=$(((r - 1) % $#))
	while [ "$k" -gt 0 ]; do
		x=$1
		shift
		set -- "$@" "$x"
		k=$((k - 1))
	done
	echo "$@"
}

# model_round MODEL: one run of every variant of MODEL.
model_round() {
	m=$1
	for s in $(rounds_order); do
		d=$out/models/$m-$(tag "$s")
		! alone "$s" || run "$m,$s,none,nocomm" "$d/run-nocomm" --iters "$ITERS" --warmup "$WARMUP"
		run "$m,$s,none,comm" "$d/run" --iters "$ITERS" --warmup "$WARMUP" --check
	done
	[ "$MIX" = 0 ] || mix "$m" "$out/models/$m-mix"
	[ "$SHORT" = 0 ] || return 0
	for p in panel thread; do
		export CFRT_PROGRESS=$p
		run "$m,fuse(ring),$p,comm" -x CFRT_PROGRESS "$out/models/$m-fuse_ring/run" \
			--iters "$ITERS" --warmup "$WARMUP" --check
		unset CFRT_PROGRESS
	done
}

# bwd_round MODEL: one run of every variant of MODEL's backward pass.
bwd_round() {
	m=$1
	for s in $(rounds_order); do
		d=$out/models/$m-bwd-$(tag "$s")
		! alone "$s" || run "$m backward,$s,none,nocomm" "$d/run-nocomm" --iters "$ITERS" \
			--warmup "$WARMUP"
		run "$m backward,$s,none,comm" "$d/run" --iters "$ITERS" --warmup "$WARMUP" --check
	done
	[ "$MIX" = 0 ] || mix "$m backward" "$out/models/$m-bwd-mix"
}

# ---- header: what machine, when, how loaded (BUILD=report: the one
# the runs wrote) ----
[ "$BUILD" = report ] || {
	echo "# CommFuse CPU benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "# machine: $(env -u OMP_NUM_THREADS nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/^Mem:/ { print $2 " GiB" }'), $(uname -sr)"
	echo "# $(mpirun --version 2>&1 | head -n 1), OpenBLAS $(pkg-config --modversion openblas) (1 thread per rank)"
	echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)${BENCH_CPUS:+; ranks on cores $BENCH_CPUS only}"
	env | grep '^OMPI_MCA_' | sort | sed 's/^/# /'
	echo "# $RANKS ranks; best of $ROUNDS rounds of the median of $ITERS iterations after $WARMUP warm-up$([ "$SHORT" = 0 ] || echo "; SHORT: the schedule rows and the hand-written MLP only")$([ "$MIX" = 0 ] || echo "; each round also every schedule in one job, passes interleaved (mix)")"
	echo "# mlp $MLP_SIZES; attention $ATT_SIZES"
} | tee "$out/header.txt"

# ---- the machine's profile for cfc's cost model (PROFILE=FILE: one
# measured before) ----
prof=${PROFILE:-$out/machine.prof}
[ "$BUILD" != gen ] || [ -n "${PROFILE:-}" ] ||
	die "BUILD=gen needs PROFILE=FILE, the target machine's profile"
if [ "$BUILD" = report ]; then
	[ -n "${PROFILE:-}" ] && [ -s "$out/runs.txt" ] && [ -s "$out/header.txt" ] ||
		die "BUILD=report needs PROFILE=FILE and the runs and header of BUILD=link in $out"
	sed -i '/^# profile: /d' "$out/header.txt"
elif [ "$BUILD" = link ] && [ "${CALIBRATE:-0}" = 0 ]; then
	[ -s "$out/predicted.txt" ] || die "BUILD=link needs the predictions of BUILD=gen"
	prof=$out/machine.prof
elif [ -z "${PROFILE:-}" ] || [ "$BUILD" = link ]; then
	prof=$out/machine.prof
	echo "calibrating (cfrt-calibrate on $RANKS ranks: minutes; its progress in $out/calibrate.log) ($(since))"
	$MPIRUN -n "$RANKS" "$B/cfrt-calibrate" -o "$prof" >"$out/calibrate.log" 2>&1 ||
		{ cat "$out/calibrate.log" >&2; die "cfrt-calibrate failed"; }
	sed 's/^/  /' "$out/calibrate.log"
fi
echo "# profile: $prof ($(sed -n 's/^# measured in /measured in /p' "$prof"))" >>"$out/header.txt"
# every_model CMD: CMD MODEL SCHEDULE SIZES... for every schedule, both
# models and both passes (BWD=1: the backward).
every_model() {
	for s in $SCHEDULES; do
		for bwd in 0 1; do
			BWD=$bwd "$1" mlp "$s" $MLP_SIZES
			BWD=$bwd "$1" attention "$s" $ATT_SIZES
		done
	done
}
if [ "$BUILD" != link ]; then
	rm -f "$out/predicted.txt"
	echo "predicting (cfc --profile)"
	every_model predict
fi

# build_mixes: per model and pass, the program that runs every schedule's
# build in one job, their passes interleaved (scripts/build-mix.sh)
build_mixes() {
	[ "$MIX" != 0 ] || return 0
	for m in mlp attention; do
		for b in "" -bwd; do
			dirs=
			for s in $SCHEDULES; do dirs="$dirs $out/models/$m$b-$(tag "$s")"; done
			# shellcheck disable=SC2086 # the directories are words
			sh scripts/build-mix.sh "$B" "$out/models/$m$b-mix/run" $dirs \
				>"$out/models/$m$b-mix.log" 2>&1 ||
				{ cat "$out/models/$m$b-mix.log" >&2; die "building the mix of $m$b failed"; }
		done
	done
}
case $BUILD in
0 | report) ;;
gen | link)
	echo "building ($BUILD)"
	export CF_STAGE=$BUILD
	every_model build
	unset CF_STAGE
	[ "$BUILD" = gen ] || build_mixes ;;
*)
	echo "building"
	every_model build
	build_mixes ;;
esac
if [ "$BUILD" = gen ]; then
	[ "$prof" -ef "$out/machine.prof" ] || cp "$prof" "$out/machine.prof"
	echo "generated: $out/models, $out/predicted.txt, $out/machine.prof"
	exit 0
fi
mb=$(size_of B "$MLP_SIZES") mS=$(size_of S "$MLP_SIZES") mD=$(size_of D "$MLP_SIZES")
# the overlapped baseline's chunks: at most HAND_CHUNKS, a divisor of a
# rank's B*S/N rows
hk=$HAND_CHUNKS
while [ "$hk" -gt 1 ] && [ $((mb * mS / RANKS % hk)) != 0 ]; do hk=$((hk - 1)); done
# hand_checked KEY: the hand-written run just recorded computed right
hand_checked() {
	e=$(field max_rel_err "$log")
	awk -v e="${e:-nan}" 'BEGIN { exit !(e + 0 == e && e <= 1e-4) }' ||
		die "$1: max_rel_err ${e:-missing} against the serial computation"
}
[ "$BUILD" = report ] && ROUNDS=0
for r in $(seq "$ROUNDS"); do
	echo "round $r of $ROUNDS ($(since))"
	model_round mlp
	model_round attention
	bwd_round mlp
	bwd_round attention
	full run "mlp,mpi+openblas (hand),mpi,nocomm" "$tools/mlp_mpi" "$mb" "$mS" "$mD" \
		--iters "$ITERS" --warmup "$WARMUP" --compute-only
	run "mlp,mpi+openblas (hand),mpi,comm" "$tools/mlp_mpi" "$mb" "$mS" "$mD" \
		--iters "$ITERS" --warmup "$WARMUP" --check
	hand_checked "the hand-written MLP"
	run "mlp,mpi+openblas overlapped (hand),mpi,comm" "$tools/mlp_mpi" "$mb" "$mS" \
		"$mD" --iters "$ITERS" --warmup "$WARMUP" --check --overlap "$hk"
	hand_checked "the hand-written overlapped MLP"
	full run "mlp,its collectives alone (hand),mpi,xfer" "$tools/mlp_mpi" "$mb" \
		"$mS" "$mD" --iters "$ITERS" --warmup "$WARMUP" --comm-only
done

# ---- decomposition loss of single GEMMs, one rank ----
# The per-rank GEMMs: mlp [B*S, D] x [D, 4D/N] (its second GEMM costs the
# same), attention's projections [B*S, D] x [D, D/N]; in N pieces and in
# B*N (what a schedule that cuts S issues: N slices of each batch entry).
gemm_rows() { # MODEL M K N PIECES...
	m=$1
	shift
	g=$out/models/gemm-$m.out
	$MPIRUN -n 1 "$tools/gemm_split" "$@" --iters 21 --warmup 3 >"$g" 2>&1 ||
		{ cat "$g" >&2; die "gemm_split failed"; }
	sed 's/^/  /' "$g"
	sed -n 's/^gemm m=\([0-9]*\) k=\([0-9]*\) n=\([0-9]*\) pieces=\([0-9]*\) time_ms=\([^ ]*\) .*/\1 \2 \3 \4 \5/p' \
		"$g" | while read -r gm gk gn gp gt; do
		echo "$m,gemm ${gm}x${gk}x${gn} in $gp,-,gemm|$gt|$gt|-|-" >>"$out/runs.txt"
	done
}
if [ "$BUILD" != report ] && [ "$SHORT" = 0 ]; then
	echo "GEMM decomposition loss (1 rank)"
	n=$RANKS
	gemm_rows mlp $((mb * mS)) "$mD" $((4 * mD / n)) "$n" $((mb * n))
	ab=$(size_of B "$ATT_SIZES") as=$(size_of S "$ATT_SIZES") ad=$(size_of D "$ATT_SIZES")
	gemm_rows attention $((ab * as)) "$ad" $((ad / n)) "$n" $((ab * n))
fi
if [ "$BUILD" != report ]; then
	echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg) (this run's own $RANKS ranks count in it); waited ${waited} s for other jobs" |
		tee -a "$out/header.txt"
fi

# ---- best rounds, derived metrics, CSV and table ----
awk -F'|' -v ranks="$RANKS" -v pred="$out/predicted.txt" -f bench/stats.awk -f bench/report.awk \
	"$out/runs.txt" >"$csv" ||
	die "report failed"
echo
cat "$out/header.txt"
python3 -c 'import csv, sys
r = list(csv.reader(open(sys.argv[1])))
w = [max(len(x[i]) for x in r if i < len(x)) for i in range(len(r[0]))]
for x in r:
    print("  ".join(c.ljust(w[i]) for i, c in enumerate(x)).rstrip())' "$csv"
echo
# the cores of the machine that ran (BUILD=report: the header's)
cores=$(sed -n 's/^# machine: \([0-9]*\) cores.*/\1/p' "$out/header.txt")
if [ "$RANKS" -gt "${cores:-1}" ]; then
	cat <<EOF
notes: $RANKS ranks on $cores cores. The ranks' compute competes for
the cores, so "compute alone" is itself measured with the ranks sharing
them. Transfers are CPU work too: shared-memory MPI (vader, single-copy
mechanism $OMPI_MCA_btl_vader_single_copy_mechanism) copies in MPI calls on the same cores (without
single-copy the sender copies into shared buffers, the receiver out of
them), and a rank waiting for a message spins in MPI while a rank that
still computes waits for a core. Nothing is idle to hide the transfers
behind; a schedule can win only by making ranks wait less, and the
numbers move with the scheduler (compare the rounds in runs.log).
EOF
	echo
fi
awk -F, -f bench/stats.awk -f bench/summary.awk "$csv" | tee "$out/summary.txt"
# auto against the others round by round in the mix (BUILD=report: where
# the link run's passes.txt was brought too)
[ ! -s "$out/passes.txt" ] ||
	awk -F'|' -f bench/stats.awk -f bench/paired.awk "$out/passes.txt" | tee -a "$out/summary.txt"
echo
echo "results: $csv (every run: $out/runs.log); $(since)"

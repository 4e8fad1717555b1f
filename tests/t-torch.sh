#!/bin/sh
# The torch layer (NAME.Layer of the module cfc --emit=py writes,
# docs/TORCH.md) under mpirun on CPU tensors: the Llama block of
# examples/llama.cf against the same block written in plain PyTorch
# (examples/torch/llama_ref.py), same weights and inputs, forward and every
# gradient within 1e-5 (f32) at tp = 1, 2 and 4 and on a tp x dp grid;
# gradient accumulation over two micro-batches = one batch of both; wrong
# tensors and groups raise naming them and the job goes on; the training
# example gives plain PyTorch's losses step by step. tests/torch/check.py
# is the program each rank runs. Needs Debian's /usr/bin/python3 with
# python3-torch (scripts/install-deps.sh installs it); torch.compile's
# custom ops need torch >= 2.4: a SKIP line says so on older torch.
. tests/lib.sh
t=$B/tests/torch
rm -rf "$t"
mkdir -p "$t"
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
. tests/torchlib.sh

torch_python torch
echo "torch: using $PY, torch $("$PY" -c 'import torch; print(torch.__version__)')"

# model DIR SPEC [cfc args...]: llama.py and libllama.so in DIR.
model() {
	md=$1 ms=$2
	shift 2
	mkdir -p "$md"
	{ "$CFC" "$ms" "$@" --emit=h,c,ref,py -o "$md" &&
		torch_lib "$md" "$md/llama.c" "$md/llama_ref.c"
	} >"$md.log" 2>&1 || { cat "$md.log"; return 1; }
}

# trun LOG N DIR ARGS...: tests/torch/check.py DIR ARGS on N ranks.
trun() {
	tl=$1 tn=$2
	shift 2
	env $PYENV $MPIRUN -n "$tn" "$PY" tests/torch/check.py "$@" --log "$tl" >"$tl.out" 2>&1
	echo "rc=$?" >>"$tl.out"
	cat "$tl.out"
}

# all_ok LOG N COUNT: each of N ranks wrote COUNT lines, all ok.
all_ok() {
	for r in $(seq 0 $(($2 - 1))); do
		[ -f "$1.$r" ] && [ "$(grep -c ' ok$' "$1.$r")" -eq "$3" ] &&
			! grep -q FAIL "$1.$r" || return 1
	done
	grep -q '^rc=0$' "$1.out"
}

# -- the Llama block at tp = 1, 2, 4: forward, d_x, every weight's .grad
for n in 1 2 4; do
	model "$t/tp$n" examples/llama.cf -D tp=$n --backward --accumulate
done
trun "$t/tp1" 1 "$t/tp1" --grad autograd
check "torch: llama at tp = 1 (grad=autograd: torch accumulates): forward and every gradient = plain PyTorch's within 1e-5" \
	all_ok "$t/tp1" 1 6
trun "$t/tp2" 2 "$t/tp2" --accum --errors
check "torch: llama at tp = 2: forward and every gradient = plain PyTorch's within 1e-5" \
	all_ok "$t/tp2" 2 11
check "torch: ... two micro-batches accumulated into .grad = one batch of both" \
	grep -q "2 micro-batches accumulated in .grad = one batch of both .* ok$" "$t/tp2.0"
check "torch: ... wrong tensors, autocast and groups raise naming them; the layer runs on" \
	grep -q "after the errors the layer runs on: .* ok$" "$t/tp2.1"
trun "$t/tp4" 4 "$t/tp4"
check "torch: llama at tp = 4: forward and every gradient = plain PyTorch's within 1e-5" \
	all_ok "$t/tp4" 4 6
sed -n 's/^note: skip: /SKIP /p' "$t/tp2.out" | head -n 1

# -- a 2 x 2 grid (tp x dp), the groups passed as a torch gloo group (tp)
# and an mpi4py communicator (dp), checked
model "$t/grid" tests/torch/llama_dp.cf --backward --accumulate
trun "$t/grid" 4 "$t/grid" --groups --accum
check "torch: llama on a tp x dp = 2 x 2 grid: forward, every gradient, accumulation = plain PyTorch's; groups checked" \
	all_ok "$t/grid" 4 11

# -- the training example (examples/torch/train.py): 2 Llama blocks
# between an embedding and a loss, AdamW, 8 steps; the generated layer at
# tp = 2 under mpirun against the plain-PyTorch block on one process
"$PY" examples/torch/train.py --impl=torch >"$t/train_ref.out" 2>&1
env $PYENV $MPIRUN -n 2 "$PY" examples/torch/train.py --impl=cfc --dir "$t/tp2" \
	>"$t/train_cfc.out" 2>&1
paste "$t/train_ref.out" "$t/train_cfc.out"
# same LOSSES A B: 8 steps in each, every one within 1e-5 relative, and
# the loss falls to under half its start
same_losses() {
	awk '$1 == "step" { n[FILENAME]++; v[FILENAME, $2] = $4; f[FILENAME] = 1 }
		END {
			if (length(f) != 2) exit 1
			for (k in f) { if (n[k] != 8) exit 1; if (!a) a = k; else b = k }
			for (s = 0; s < 8; s++) {
				x = v[a, s]; y = v[b, s]; d = x - y; if (d < 0) d = -d
				if (d > 1e-5 * x) { printf "step %d: %s vs %s\n", s, x, y; exit 1 }
			}
			if (!(v[a, 7] < v[a, 0] / 2)) { print "the loss does not fall"; exit 1 }
		}' "$1" "$2"
}
check "torch: examples/torch/train.py: the generated layer at tp = 2 gives plain PyTorch's losses step by step (1e-5), falling" \
	same_losses "$t/train_ref.out" "$t/train_cfc.out"

#!/bin/sh
# The single-GPU part of the training benchmark (issue 10): forward and
# backward of the MLP block (case b: bench/mlp_sbd.cf, [S, B, D], bf16) at
# tp = 1, generated code against PyTorch autograd (bench/gpu/torch_train.py,
# eager and torch.compile) on the same sizes: bench/gpu/block1.sh mlp,
# which see (GEN_ONLY=DIR / GEN=DIR for C generated on a development
# machine, ITERS, OUT). B = 16 (not case b's 32): at tp = 1 the hidden
# activation of B = 32 has 2^31 elements, more than a count of the
# runtime's transfers can hold, and cfc refuses it.
exec sh bench/gpu/block1.sh mlp

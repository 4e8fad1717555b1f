// A C++ program that CMake builds (tests/e2e/cmake-cxx/CMakeLists.txt)
// against the C that cfc_generate made of examples/mlp.cf with tp = 2: the
// forward pass on the 2 ranks of MPI_COMM_WORLD against the serial
// reference on each rank, on the same data (cfrt_fill_global: a shard
// holds those elements of the whole tensor); prints each rank's max
// relative error of its shard of y and exits 1 when one is over 1e-5.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "mlp.h"

namespace {

struct Tensor {
	int nd, split;
	std::vector<int64_t> dims, rank_dims;
	uint64_t seed; // 0: an output, not filled
	void *buf = nullptr;

	int64_t numel(bool whole) const
	{
		int64_t n = 1;
		for (int64_t d : whole ? dims : rank_dims)
			n *= d;
		return n;
	}

	// This rank's shard (whole: all of it) of f32, filled from seed.
	void alloc(cfrt_ctx *ctx, bool whole)
	{
		std::vector<int64_t> off(nd, 0);
		const std::vector<int64_t> &d = whole ? dims : rank_dims;
		CFRT_TRY(ctx, cfrt_alloc(ctx, &buf, static_cast<size_t>(numel(whole)) * sizeof(float)));
		if (!seed)
			return;
		if (!whole && split >= 0)
			off[split] = cfrt_rank(ctx) * rank_dims[split];
		cfrt_view v = cfrt_view_contig(buf, CFRT_F32, nd, d.data());
		CFRT_TRY(ctx, cfrt_fill_global(ctx, &v, seed, dims.data(), off.data()));
	}
};

std::vector<Tensor> model()
{
	return {
		{MLP_x_NDIM, MLP_x_SPLIT, MLP_x_DIMS, MLP_x_RANK_DIMS, MLP_x_SEED},
		{MLP_w1_NDIM, MLP_w1_SPLIT, MLP_w1_DIMS, MLP_w1_RANK_DIMS, MLP_w1_SEED},
		{MLP_w2_NDIM, MLP_w2_SPLIT, MLP_w2_DIMS, MLP_w2_RANK_DIMS, MLP_w2_SEED},
		{MLP_y_NDIM, MLP_y_SPLIT, MLP_y_DIMS, MLP_y_RANK_DIMS, 0},
	};
}

// The forward pass (whole: the reference) on fresh tensors.
std::vector<Tensor> run(cfrt_ctx *ctx, bool whole)
{
	std::vector<Tensor> t = model();
	void *ws;
	for (Tensor &x : t)
		x.alloc(ctx, whole);
	mlp_weights w = {t[1].buf, t[2].buf};
	mlp_io io = {t[0].buf, t[3].buf};
	CFRT_TRY(ctx, cfrt_alloc(ctx, &ws, whole ? mlp_ref_workspace_bytes() : mlp_workspace_bytes()));
	CFRT_TRY(ctx, whole ? mlp_ref_forward(ctx, &w, &io, ws) : mlp_forward(ctx, &w, &io, ws));
	cfrt_free(ctx, ws);
	return t;
}

} // namespace

int main(int argc, char **argv)
{
	cfrt_ctx *ctx, *rctx;

	MPI_Init(&argc, &argv);
	CFRT_TRY(nullptr, cfrt_init(&ctx, MPI_COMM_WORLD, MLP_GROUP_SIZE, "mlp"));
	CFRT_TRY(nullptr, cfrt_init(&rctx, MPI_COMM_SELF, 1, "mlp_ref"));
	std::vector<Tensor> t = run(ctx, false), rt = run(rctx, true);
	const Tensor &y = t[3], &ry = rt[3];
	std::vector<float> a(y.numel(false)), b(ry.numel(true));
	CFRT_TRY(ctx, cfrt_download(ctx, a.data(), y.buf, a.size() * sizeof(float)));
	CFRT_TRY(rctx, cfrt_download(rctx, b.data(), ry.buf, b.size() * sizeof(float)));
	double md = 0, mr = 0;
	for (size_t i = 0; i < a.size(); i++) {
		int64_t g = 0, mul = 1, k = static_cast<int64_t>(i);
		for (int d = y.nd - 1; d >= 0; d--) {
			int64_t x = k % y.rank_dims[d];
			k /= y.rank_dims[d];
			if (d == y.split)
				x += cfrt_rank(ctx) * y.rank_dims[d];
			g += x * mul;
			mul *= y.dims[d];
		}
		md = std::max(md, static_cast<double>(std::fabs(a[i] - b[g])));
		mr = std::max(mr, static_cast<double>(std::fabs(b[g])));
	}
	double err = md / mr;
	std::printf("cmake c++ app: rank=%d max_rel_err=%.3e\n", cfrt_rank(ctx), err);
	for (size_t k = 0; k < t.size(); k++) {
		cfrt_free(ctx, t[k].buf);
		cfrt_free(rctx, rt[k].buf);
	}
	cfrt_finalize(rctx);
	cfrt_finalize(ctx);
	MPI_Finalize();
	return err <= 1e-5 ? 0 : 1;
}

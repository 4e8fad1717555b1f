// A C++ application of the generated C (C++17): the mlp model compiled
// with --backward, its forward and backward on 2 ranks, and the serial
// reference of both on rank 0's whole tensors; the output and every
// gradient are compared shard by shard. The generated header and cfrt.h
// are included as they are: their declarations are extern "C".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "mlp.h"

namespace {

// One tensor of the model: its global and per-rank dims, split dim, and
// a buffer from cfrt_alloc (whole, or this rank's shard).
struct Tensor {
	int nd, split;
	std::vector<int64_t> dims, rank_dims;
	void *buf = nullptr;

	int64_t numel(bool whole) const
	{
		int64_t n = 1;
		for (int64_t d : whole ? dims : rank_dims)
			n *= d;
		return n;
	}
};

#define TENSOR(n) Tensor{MLP_##n##_NDIM, MLP_##n##_SPLIT, MLP_##n##_DIMS, MLP_##n##_RANK_DIMS}

void alloc(cfrt_ctx *ctx, Tensor &t, bool whole)
{
	CFRT_TRY(ctx, cfrt_alloc(ctx, &t.buf, (size_t)t.numel(whole) * sizeof(float)));
}

// This rank's shard (or all) of the global tensor t filled from seed.
void fill(cfrt_ctx *ctx, Tensor &t, bool whole, uint64_t seed)
{
	std::vector<int64_t> off(t.nd, 0);
	alloc(ctx, t, whole);
	if (!whole && t.split >= 0)
		off[t.split] = cfrt_rank(ctx) * t.rank_dims[t.split];
	cfrt_view v = cfrt_view_contig(t.buf, CFRT_F32, t.nd, whole ? t.dims.data() : t.rank_dims.data());
	CFRT_TRY(ctx, cfrt_fill_global(ctx, &v, seed, t.dims.data(), off.data()));
}

struct Model {
	Tensor x = TENSOR(x), w1 = TENSOR(w1), w2 = TENSOR(w2), y = TENSOR(y);
	Tensor dy = TENSOR(d_y), dx = TENSOR(d_x), dw1 = TENSOR(d_w1), dw2 = TENSOR(d_w2);

	// forward then backward, whole (the reference) or on this rank's shards
	void run(cfrt_ctx *ctx, bool whole)
	{
		fill(ctx, x, whole, 1), fill(ctx, w1, whole, 2), fill(ctx, w2, whole, 3);
		fill(ctx, dy, whole, 4);
		for (Tensor *t : {&y, &dx, &dw1, &dw2})
			alloc(ctx, *t, whole);
		mlp_weights w{w1.buf, w2.buf};
		mlp_io io{x.buf, y.buf};
		mlp_grads g{};
		g.d_y = dy.buf, g.d_x = dx.buf, g.d_w1 = dw1.buf, g.d_w2 = dw2.buf;
		void *saved, *ws, *bws;
		CFRT_TRY(ctx, cfrt_alloc(ctx, &saved, whole ? mlp_ref_saved_bytes() : mlp_saved_bytes()));
		CFRT_TRY(ctx, cfrt_alloc(ctx, &ws, whole ? mlp_ref_workspace_bytes() : mlp_workspace_bytes()));
		CFRT_TRY(ctx, cfrt_alloc(ctx, &bws, whole ? mlp_ref_backward_workspace_bytes()
		                                          : mlp_backward_workspace_bytes()));
		if (whole) {
			CFRT_TRY(ctx, mlp_ref_forward(ctx, &w, &io, saved, ws));
			CFRT_TRY(ctx, mlp_ref_backward(ctx, &w, &io, saved, &g, bws));
		} else {
			CFRT_TRY(ctx, mlp_forward(ctx, &w, &io, saved, ws));
			CFRT_TRY(ctx, mlp_backward(ctx, &w, &io, saved, &g, bws));
		}
		for (void *p : {saved, ws, bws})
			cfrt_free(ctx, p);
	}
};

// max |mine - ref| / max |ref| over this rank's shard of a tensor.
double compare(cfrt_ctx *ctx, const Tensor &mine, cfrt_ctx *rctx, const Tensor &ref)
{
	std::vector<float> a((size_t)mine.numel(false)), b((size_t)ref.numel(true));
	double md = 0, mr = 0;
	int r = cfrt_rank(ctx);

	CFRT_TRY(ctx, cfrt_download(ctx, a.data(), mine.buf, a.size() * sizeof(float)));
	CFRT_TRY(rctx, cfrt_download(rctx, b.data(), ref.buf, b.size() * sizeof(float)));
	for (size_t i = 0; i < a.size(); i++) {
		int64_t g = 0, mul = 1, k = (int64_t)i;
		for (int d = mine.nd - 1; d >= 0; d--) {
			int64_t x = k % mine.rank_dims[d];
			k /= mine.rank_dims[d];
			if (d == mine.split)
				x += r * mine.rank_dims[d];
			g += x * mul;
			mul *= mine.dims[d];
		}
		md = std::max(md, (double)std::fabs(a[i] - b[(size_t)g]));
		mr = std::max(mr, (double)std::fabs(b[(size_t)g]));
	}
	return md / mr;
}

} // namespace

int main(int argc, char **argv)
{
	cfrt_ctx *ctx, *rctx;
	int wr;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &wr);
	if (cfrt_init(&ctx, MPI_COMM_WORLD, MLP_GROUP_SIZE, "mlp") != CFRT_OK ||
	    cfrt_init(&rctx, MPI_COMM_SELF, 1, "mlp_ref") != CFRT_OK)
		cfrt_fail(nullptr, CFRT_ESIZE);
	Model m, ref;
	m.run(ctx, false);
	ref.run(rctx, true);
	const char *names[] = {"y", "d_x", "d_w1", "d_w2"};
	const Tensor *mine[] = {&m.y, &m.dx, &m.dw1, &m.dw2}, *want[] = {&ref.y, &ref.dx, &ref.dw1, &ref.dw2};
	for (int k = 0; k < 4; k++) {
		double e = compare(ctx, *mine[k], rctx, *want[k]), worst;
		MPI_Reduce(&e, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (wr == 0)
			std::printf("c++ app: %s max_rel_err=%.3e\n", names[k], worst);
	}
	for (Model *p : {&m, &ref})
		for (Tensor *t : {&p->x, &p->w1, &p->w2, &p->y, &p->dy, &p->dx, &p->dw1, &p->dw2})
			cfrt_free(p == &m ? ctx : rctx, t->buf);
	cfrt_finalize(rctx);
	cfrt_finalize(ctx);
	MPI_Finalize();
	return 0;
}

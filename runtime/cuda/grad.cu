// grad.cu: the backward kernels of the CUDA backend, behind kern.h: the
// grads of the row ops (layer norm, RMS norm, softmax) and the sum over
// leading dims (the reverse scan is kernels.cu's scan run backwards).
// requires: views checked and, for the sum, collapsed (ops.c).
// ensures: like kernels.cu, f32 accumulation (double for F64) and one
// rounding; every element of dx is read (as dy, x) before it is written
// and never after, so dx may be dy or x.
#include "kdev.cuh"

namespace {

// ---- row grads: one block per row ---------------------------------------

// dx of one row of layer norm (rms = 0) or RMS norm (rms = 1), with
// g = dy * gamma (dy when g.p is NULL), as cfrt.h writes it. The row's
// sums are all reduced before any element of dx is written.
template <typename T>
__global__ void norm_grad_rows(kview dx, kview dy, kview x, kview g, int rms,
                               double eps, kview hr)
{
	typedef typename acc<T>::type A;
	__shared__ A sh[32];
	int64_t n = kv_at(dx.dim, dx.nd - 1), r = blockIdx.x;
	const T *px = (const T *)x.p + row_offset(x, r);
	const T *pdy = (const T *)dy.p + row_offset(dy, r);
	const T *pg = (const T *)g.p;
	T *pdx = (T *)dx.p + row_offset(dx, r);
	int64_t sx = kv_at(x.st, x.nd - 1), sdy = kv_at(dy.st, dy.nd - 1);
	int64_t sdx = kv_at(dx.st, dx.nd - 1);
	A mean = 0, var = 0, sg = 0, sgx = 0;
	if (!rms) {
		for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
			mean += to_acc(px[i * sx]);
		mean = block_reduce(mean, sh, false) / A(n);
	}
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		A u = to_acc(px[i * sx]) - mean;
		var += u * u;
	}
	A inv = A(1) / f_sqrt(block_reduce(var, sh, false) / A(n) + A(eps));
	A xs = rms ? A(1) : inv; // xhat = (x - mean) * xs; RMS: x
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		A gi = to_acc(pdy[i * sdy]) * (pg ? to_acc(pg[i * g.st[0]]) : A(1));
		sg += gi;
		sgx += gi * (to_acc(px[i * sx]) - mean) * xs;
	}
	sg = block_reduce(sg, sh, false) / A(n);
	sgx = block_reduce(sgx, sh, false) / A(n);
	T *phr = hr.p ? (T *)hr.p + row_offset(hr, r) : NULL;
	int64_t shr = hr.p ? kv_at(hr.st, hr.nd - 1) : 0;
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		A d = to_acc(pdy[i * sdy]);
		A gi = d * (pg ? to_acc(pg[i * g.st[0]]) : A(1));
		A u = to_acc(px[i * sx]) - mean;
		if (phr) // read before dx is written: dx may be dy or x
			phr[i * shr] = store<T>(d * (u * inv));
		pdx[i * sdx] = store<T>(rms ? inv * gi - u * inv * inv * inv * sgx
		                            : inv * (gi - sg - u * inv * sgx));
	}
}

// The same, for rows whose last dim is contiguous (dx, dy, x; gamma of
// any stride) and at most EPT * blockDim.x long: each thread keeps its
// elements of x and of g = dy * gamma in registers, and the sums the dx
// formula needs (mean first for layer norm; then sum u^2, sum g and
// sum g u) are reduced together, once: x and dy are read once from
// memory, dx written once. The same arithmetic as norm_grad_rows.
const int NG_EPT = 8;

template <typename T>
__global__ void norm_grad_rows_reg(kview dx, kview dy, kview x, kview g,
                                   int rms, double eps, kview hr)
{
	typedef typename acc<T>::type A;
	__shared__ A sh[32];
	int64_t n = kv_at(dx.dim, dx.nd - 1), r = blockIdx.x;
	const T *px = (const T *)x.p + row_offset(x, r);
	const T *pdy = (const T *)dy.p + row_offset(dy, r);
	const T *pg = (const T *)g.p;
	T *pdx = (T *)dx.p + row_offset(dx, r);
	T *phr = hr.p ? (T *)hr.p + row_offset(hr, r) : NULL;
	A xv[NG_EPT], gv[NG_EPT], dv[NG_EPT];
	A mean = 0, var = 0, sg = 0, sgx = 0;
#pragma unroll
	for (int k = 0; k < NG_EPT; k++) {
		int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
		xv[k] = i < n ? to_acc(px[i]) : A(0);
		dv[k] = i < n ? to_acc(pdy[i]) : A(0);
		gv[k] = i < n ? dv[k] * (pg ? to_acc(pg[i * g.st[0]]) : A(1)) : A(0);
		mean += xv[k];
	}
	if (!rms)
		mean = block_reduce(mean, sh, false) / A(n);
	else
		mean = 0;
#pragma unroll
	for (int k = 0; k < NG_EPT; k++) {
		int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
		A u = i < n ? xv[k] - mean : A(0);
		var += u * u;
		sg += gv[k];
		sgx += gv[k] * u;
	}
	A inv = A(1) / f_sqrt(block_reduce(var, sh, false) / A(n) + A(eps));
	A xs = rms ? A(1) : inv;
	sgx = block_reduce(sgx, sh, false) / A(n) * xs;
	if (!rms)
		sg = block_reduce(sg, sh, false) / A(n);
#pragma unroll
	for (int k = 0; k < NG_EPT; k++) {
		int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
		A u = xv[k] - mean;
		if (i < n && phr)
			phr[i] = store<T>(dv[k] * (u * inv));
		if (i < n)
			pdx[i] = store<T>(rms ? inv * gv[k] - u * inv * inv * inv * sgx
			                      : inv * (gv[k] - sg - u * inv * sgx));
	}
}

// The same, a warp a row (WROWS rows a block), for rows of at most 32 NV
// 16-byte vectors (dx, dy, x and hr as kernels.cu's vec_rows wants them;
// gamma absent or contiguous and aligned): lane l holds vectors l, l +
// 32, ... of x and dy in registers, the sums reduced by warp shuffles
// alone, gamma read again for dx (from cache). Each lane has 2 NV loads
// of 16 bytes in flight; norm_grad_rows_reg's scalar loads, a block a
// row, reached a third of HBM on the Llama layer's rows of 4096 (bf16).
// The same arithmetic as norm_grad_rows_reg; n: the row's length, a
// whole number of vectors.
template <typename T, int NV>
__global__ void __launch_bounds__(32 * WROWS)
norm_grad_rows_warp(kview dx, kview dy, kview x, kview g, int64_t rows,
                    int64_t n, int rms, double eps, kview hr)
{
	typedef typename acc<T>::type A;
	const int V = 16 / sizeof(T);
	int lane = threadIdx.x & 31;
	int64_t r = (int64_t)blockIdx.x * WROWS + (threadIdx.x >> 5);
	if (r >= rows) // the whole warp: no barrier follows
		return;
	const T *px = (const T *)x.p + row_offset(x, r);
	const T *pdy = (const T *)dy.p + row_offset(dy, r);
	const T *pg = (const T *)g.p;
	T *pdx = (T *)dx.p + row_offset(dx, r);
	T *phr = hr.p ? (T *)hr.p + row_offset(hr, r) : NULL;
	uint4 vx[NV], vd[NV];
	A mean = 0, var = 0, sg = 0, sgx = 0;
#pragma unroll
	for (int k = 0; k < NV; k++) {
		int64_t c = (int64_t)(k * 32 + lane) * V;
		bool on = c < n;
		vx[k] = on ? *(const uint4 *)(px + c) : make_uint4(0, 0, 0, 0);
		vd[k] = on ? *(const uint4 *)(pdy + c) : make_uint4(0, 0, 0, 0);
	}
	if (!rms)
		mean = warp_row_mean<T, A, NV, V>(vx, n);
#pragma unroll
	for (int k = 0; k < NV; k++) {
		int64_t c = (int64_t)(k * 32 + lane) * V;
		if (c >= n)
			continue;
		uint4 vg = pg ? *(const uint4 *)(pg + c) : vd[k];
		const T *e = (const T *)&vx[k], *ed = (const T *)&vd[k],
		        *eg = (const T *)&vg;
#pragma unroll
		for (int j = 0; j < V; j++) {
			A u = to_acc(e[j]) - mean;
			A gi = to_acc(ed[j]) * (pg ? to_acc(eg[j]) : A(1));
			var += u * u;
			sg += gi;
			sgx += gi * u;
		}
	}
	A inv = A(1) / f_sqrt(warp_sum(var) / A(n) + A(eps));
	A xs = rms ? A(1) : inv;
	sgx = warp_sum(sgx) / A(n) * xs;
	if (!rms)
		sg = warp_sum(sg) / A(n);
#pragma unroll
	for (int k = 0; k < NV; k++) {
		int64_t c = (int64_t)(k * 32 + lane) * V;
		if (c >= n)
			continue;
		uint4 vg = pg ? *(const uint4 *)(pg + c) : vd[k];
		const T *e = (const T *)&vx[k], *ed = (const T *)&vd[k],
		        *eg = (const T *)&vg;
		uint4 wx, wh;
		T *fx = (T *)&wx, *fh = (T *)&wh;
#pragma unroll
		for (int j = 0; j < V; j++) {
			A d = to_acc(ed[j]), u = to_acc(e[j]) - mean;
			A gi = d * (pg ? to_acc(eg[j]) : A(1));
			fh[j] = store<T>(d * (u * inv));
			fx[j] = store<T>(rms ? inv * gi - u * inv * inv * inv * sgx
			                     : inv * (gi - sg - u * inv * sgx));
		}
		if (phr) // every load of the row is done: dx may be dy or x
			*(uint4 *)(phr + c) = wh;
		*(uint4 *)(pdx + c) = wx;
	}
}

// Whether v's rows suit norm_grad_rows_warp (kernels.cu's vec_rows): its
// last dim contiguous, the row and every outer stride whole vectors of V
// elements, its base aligned to 16 bytes.
bool vec_rows_g(const kview &v, int V)
{
	if (v.nd < 1 || v.st[v.nd - 1] != 1 || v.dim[v.nd - 1] % V != 0 ||
	    ((uintptr_t)v.p & 15) != 0)
		return false;
	for (int k = 0; k < v.nd - 1; k++)
		if (v.st[k] % V != 0)
			return false;
	return true;
}

template <typename T>
int norm_grad_warp(cudaStream_t s, int nv, kview dx, kview dy, kview x,
                   kview g, int64_t rows, int64_t n, int rms, double eps,
                   kview hr)
{
	int64_t blocks = (rows + WROWS - 1) / WROWS;
	dim3 gr((unsigned)blocks), th(32 * WROWS);
	switch (nv) {
#define NGW(K) case K: norm_grad_rows_warp<T, K><<<gr, th, 0, s>>>(dx, dy, x, \
		g, rows, n, rms, eps, hr); break;
	NGW(1) NGW(2) NGW(4) NGW(8)
#undef NGW
	default:
		norm_grad_rows_warp<T, 16><<<gr, th, 0, s>>>(dx, dy, x, g, rows, n,
		                                             rms, eps, hr);
	}
	return (int)cudaGetLastError();
}

// dx = y * (dy - sum(dy * y)) on one row.
template <typename T>
__global__ void softmax_grad_rows(kview dx, kview dy, kview y)
{
	typedef typename acc<T>::type A;
	__shared__ A sh[32];
	int64_t n = kv_at(dx.dim, dx.nd - 1), r = blockIdx.x;
	const T *py = (const T *)y.p + row_offset(y, r);
	const T *pdy = (const T *)dy.p + row_offset(dy, r);
	T *pdx = (T *)dx.p + row_offset(dx, r);
	int64_t sy = kv_at(y.st, y.nd - 1), sdy = kv_at(dy.st, dy.nd - 1);
	int64_t sdx = kv_at(dx.st, dx.nd - 1);
	A s = 0;
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
		s += to_acc(pdy[i * sdy]) * to_acc(py[i * sy]);
	s = block_reduce(s, sh, false);
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
		pdx[i * sdx] = store<T>(to_acc(py[i * sy]) *
		                        (to_acc(pdy[i * sdy]) - s));
}

template <typename T>
int rows_grad_type(cudaStream_t s, int op, kview dx, kview dy, kview x,
                   kview g, double eps, kview hr)
{
	int64_t n = dx.dim[dx.nd - 1], rows = numel(dx) / n;
	if (rows > 0x7fffffff) // one block per row
		return (int)cudaErrorInvalidConfiguration;
	const int V = 16 / sizeof(T);
	if (op == KR_SOFTMAX)
		softmax_grad_rows<T><<<(int)rows, row_threads(n), 0, s>>>(dx, dy,
		                                                          x);
	else if (vec_rows_g(dx, V) && vec_rows_g(dy, V) && vec_rows_g(x, V) &&
	         (!hr.p || vec_rows_g(hr, V)) &&
	         (!g.p || (g.st[0] == 1 && ((uintptr_t)g.p & 15) == 0)) &&
	         warp_nv(n / V))
		return norm_grad_warp<T>(s, warp_nv(n / V), dx, dy, x, g, rows, n,
		                         op == KR_RMSNORM, eps, hr);
	else if (dx.st[dx.nd - 1] == 1 && dy.st[dy.nd - 1] == 1 &&
	         x.st[x.nd - 1] == 1 && (!hr.p || hr.st[hr.nd - 1] == 1) &&
	         n <= (int64_t)NG_EPT * 1024) {
		// the fewest threads (a multiple of 32) that hold the row
		int64_t t = ((n + NG_EPT - 1) / NG_EPT + 31) / 32 * 32;
		norm_grad_rows_reg<T><<<(int)rows, (int)(t < 64 ? 64 : t), 0, s>>>(
			dx, dy, x, g, op == KR_RMSNORM, eps, hr);
	} else {
		norm_grad_rows<T><<<(int)rows, row_threads(n), 0, s>>>(
			dx, dy, x, g, op == KR_RMSNORM, eps, hr);
	}
	return (int)cudaGetLastError();
}

// ---- sum over leading dims ----------------------------------------------

// A block takes 32 consecutive elements of dst (threadIdx.x) and splits
// the leading rows among SUM_Y threads each (threadIdx.y), whose partial
// sums are added in a fixed order: the result does not depend on timing.
const int SUM_Y = 16;

// dst[e] = sum over k < nlead of src[e] at lead's offset k; dst and src
// have one index space of n elements (src's trailing dims).
template <typename T>
__global__ void sum_leading_k(kview d, kview s, kview lead, int64_t n,
                              int64_t nlead)
{
	typedef typename acc<T>::type A;
	__shared__ A sh[SUM_Y][32];
	const T *ps = (const T *)s.p;
	for (int64_t base = (int64_t)blockIdx.x * 32; base < n;
	     base += (int64_t)gridDim.x * 32) {
		int64_t e = base + threadIdx.x, os = e < n ? kv_offset(s, s.nd, e) : 0;
		A sum = 0;
		for (int64_t k = threadIdx.y; e < n && k < nlead; k += SUM_Y)
			sum += to_acc(ps[os + kv_offset(lead, lead.nd, k)]);
		sh[threadIdx.y][threadIdx.x] = sum;
		__syncthreads();
		if (threadIdx.y == 0 && e < n) {
			for (int y = 1; y < SUM_Y; y++)
				sum += sh[y][threadIdx.x];
			((T *)d.p)[kv_offset(d, d.nd, e)] = store<T>(sum);
		}
		__syncthreads(); // sh is read before the next round writes it
	}
}

// The fast path: src one run of n contiguous elements per leading index
// (lead one dim of stride ld), dst contiguous. Pass 1: block (x, c) sums
// rows c * rpc .. of its columns, one thread per column, the rows in
// order, into part[c][col]; pass 2 adds the chunks' partials in chunk
// order. Both orders are fixed: the result does not depend on timing.
template <typename T>
__global__ void sum_rows_part(typename acc<T>::type *part, const T *ps,
                              int64_t n, int64_t ld, int64_t rows,
                              int64_t rpc)
{
	typedef typename acc<T>::type A;
	int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	int64_t r0 = (int64_t)blockIdx.y * rpc;
	int64_t r1 = r0 + rpc < rows ? r0 + rpc : rows;
	if (col >= n)
		return;
	A s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	int64_t r = r0;
	for (; r + 4 <= r1; r += 4) {
		s0 += to_acc(ps[r * ld + col]);
		s1 += to_acc(ps[(r + 1) * ld + col]);
		s2 += to_acc(ps[(r + 2) * ld + col]);
		s3 += to_acc(ps[(r + 3) * ld + col]);
	}
	for (; r < r1; r++)
		s0 += to_acc(ps[r * ld + col]);
	part[(int64_t)blockIdx.y * n + col] = (s0 + s1) + (s2 + s3);
}

// The same, 16 bytes of columns a thread where the rows allow (n and ld
// whole vectors, src aligned): a block takes 32 vectors of columns
// (threadIdx.x) and splits its chunk's rows among SUM_VY threads each
// (threadIdx.y), the rows of each in order, their partial sums added in
// y order: a fixed order, as above. sum_rows_part's 2-byte loads, one a
// row, reached a third of HBM on the Llama layer's gamma gradient.
const int SUM_VY = 8;

template <typename T>
__global__ void sum_rows_part_vec(typename acc<T>::type *part, const T *ps,
                                  int64_t n, int64_t ld, int64_t rows,
                                  int64_t rpc)
{
	typedef typename acc<T>::type A;
	const int V = 16 / sizeof(T);
	__shared__ A sh[SUM_VY][32][V];
	int64_t col = ((int64_t)blockIdx.x * 32 + threadIdx.x) * V;
	int64_t r0 = (int64_t)blockIdx.y * rpc;
	int64_t r1 = r0 + rpc < rows ? r0 + rpc : rows;
	A acc_[V];
#pragma unroll
	for (int j = 0; j < V; j++)
		acc_[j] = 0;
	if (col < n) {
#pragma unroll 4
		for (int64_t r = r0 + threadIdx.y; r < r1; r += SUM_VY) {
			uint4 v = *(const uint4 *)(ps + r * ld + col);
			const T *e = (const T *)&v;
#pragma unroll
			for (int j = 0; j < V; j++)
				acc_[j] += to_acc(e[j]);
		}
	}
#pragma unroll
	for (int j = 0; j < V; j++)
		sh[threadIdx.y][threadIdx.x][j] = acc_[j];
	__syncthreads();
	if (threadIdx.y != 0 || col >= n)
		return;
#pragma unroll
	for (int j = 0; j < V; j++) {
		A sum = sh[0][threadIdx.x][j];
		for (int y = 1; y < SUM_VY; y++)
			sum += sh[y][threadIdx.x][j];
		part[(int64_t)blockIdx.y * n + col + j] = sum;
	}
}

template <typename T>
__global__ void sum_rows_fin(T *pd, const typename acc<T>::type *part,
                             int64_t n, int chunks)
{
	typedef typename acc<T>::type A;
	int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (col >= n)
		return;
	A sum = 0;
	for (int c = 0; c < chunks; c++)
		sum += part[(int64_t)c * n + col];
	pd[col] = store<T>(sum);
}

const int SUMR_T = 256;

// The chunks of rows the fast path splits nlead rows of n columns into:
// about 4 blocks per SM in all, 16 rows a chunk at least, at most 256.
inline int sum_rows_chunks(int64_t n, int64_t nlead)
{
	int64_t cb = (n + SUMR_T - 1) / SUMR_T, c = (132 * 4 + cb - 1) / cb;
	if (c > (nlead + 15) / 16)
		c = (nlead + 15) / 16;
	return (int)(c < 1 ? 1 : c > 256 ? 256 : c);
}

inline bool sum_rows_fast(const kview &d, const kview &src, const kview &lead)
{
	return d.nd == 1 && d.st[0] == 1 && src.nd == 1 && src.st[0] == 1 &&
	       lead.nd == 1 && lead.dim[0] > 0;
}

// Whether the fast path takes sum_rows_part_vec: rows of whole 16-byte
// vectors, aligned.
template <typename T>
bool sum_rows_vec(const kview &src, const kview &lead)
{
	const int V = 16 / sizeof(T);
	return src.dim[0] % V == 0 && lead.st[0] % V == 0 &&
	       ((uintptr_t)src.p & 15) == 0;
}

// Its chunks of rows: about 8 blocks per SM in all, 32 rows a chunk at
// least (4 a thread), at most 256 chunks.
inline int sum_vec_chunks(int64_t n, int64_t nlead, int V)
{
	int64_t cb = (n / V + 31) / 32, c = (132 * 8 + cb - 1) / cb;
	if (c > (nlead + 31) / 32)
		c = (nlead + 31) / 32;
	return (int)(c < 1 ? 1 : c > 256 ? 256 : c);
}

template <typename T>
int sum_chunks(const kview &src, const kview &lead)
{
	return sum_rows_vec<T>(src, lead)
		? sum_vec_chunks(src.dim[0], lead.dim[0], 16 / sizeof(T))
		: sum_rows_chunks(src.dim[0], lead.dim[0]);
}

template <typename T>
size_t sum_leading_ws(kview d, kview src, kview lead)
{
	if (!sum_rows_fast(d, src, lead))
		return 0;
	return (size_t)sum_chunks<T>(src, lead) * (size_t)d.dim[0] *
	       sizeof(typename acc<T>::type);
}

template <typename T>
int sum_leading_type(cudaStream_t s, kview d, kview src, kview lead, void *ws)
{
	typedef typename acc<T>::type A;
	if (ws && sum_rows_fast(d, src, lead)) {
		const int V = 16 / sizeof(T);
		int64_t n = d.dim[0], rows = lead.dim[0];
		int c = sum_chunks<T>(src, lead);
		int64_t rpc = (rows + c - 1) / c;
		c = (int)((rows + rpc - 1) / rpc);
		dim3 grid((unsigned)((n + SUMR_T - 1) / SUMR_T), (unsigned)c);
		if (sum_rows_vec<T>(src, lead))
			sum_rows_part_vec<T><<<dim3((unsigned)((n / V + 31) / 32),
			                            (unsigned)c), dim3(32, SUM_VY), 0,
			                       s>>>((A *)ws, (const T *)src.p, n,
			                            lead.st[0], rows, rpc);
		else
			sum_rows_part<T><<<grid, SUMR_T, 0, s>>>((A *)ws,
				(const T *)src.p, n, lead.st[0], rows, rpc);
		sum_rows_fin<T><<<grid.x, SUMR_T, 0, s>>>((T *)d.p, (const A *)ws, n, c);
		return (int)cudaGetLastError();
	}
	int64_t n = numel(d), b = (n + 31) / 32;
	int blocks = (int)(b > MAX_BLOCKS ? MAX_BLOCKS : b);
	sum_leading_k<T><<<blocks, dim3(32, SUM_Y), 0, s>>>(d, src, lead, n,
	                                                     numel(lead));
	return (int)cudaGetLastError();
}

} // namespace

// ---- launchers: type dispatch -------------------------------------------

extern "C" int cfrtk_rows_grad(cudaStream_t s, cfrt_dtype t, int op,
                               kview dx, kview dy, kview x, kview gamma,
                               double eps, kview hr)
{
	BY_TYPE(t, rows_grad_type<T>(s, op, dx, dy, x, gamma, eps, hr));
}

extern "C" int cfrtk_sum_leading(cudaStream_t s, cfrt_dtype t, kview dst,
                                 kview src, kview lead, void *ws)
{
	BY_TYPE(t, sum_leading_type<T>(s, dst, src, lead, ws));
}

extern "C" size_t cfrtk_sum_leading_ws(cfrt_dtype t, kview dst, kview src,
                                       kview lead)
{
	// by the element type: the vector path's chunks depend on its size
	switch (t) {
	case CFRT_F64: return sum_leading_ws<double>(dst, src, lead);
	case CFRT_F32: return sum_leading_ws<float>(dst, src, lead);
	case CFRT_BF16: return sum_leading_ws<__nv_bfloat16>(dst, src, lead);
	case CFRT_F16: return sum_leading_ws<__half>(dst, src, lead);
	}
	return 0;
}

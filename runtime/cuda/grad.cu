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
                               double eps)
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
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		A gi = to_acc(pdy[i * sdy]) * (pg ? to_acc(pg[i * g.st[0]]) : A(1));
		A u = to_acc(px[i * sx]) - mean;
		pdx[i * sdx] = store<T>(rms ? inv * gi - u * inv * inv * inv * sgx
		                            : inv * (gi - sg - u * inv * sgx));
	}
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
                   kview g, double eps)
{
	int64_t n = dx.dim[dx.nd - 1], rows = numel(dx) / n;
	if (rows > 0x7fffffff) // one block per row
		return (int)cudaErrorInvalidConfiguration;
	if (op == KR_SOFTMAX)
		softmax_grad_rows<T><<<(int)rows, row_threads(n), 0, s>>>(dx, dy,
		                                                          x);
	else
		norm_grad_rows<T><<<(int)rows, row_threads(n), 0, s>>>(
			dx, dy, x, g, op == KR_RMSNORM, eps);
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

template <typename T>
int sum_leading_type(cudaStream_t s, kview d, kview src, kview lead)
{
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
                               double eps)
{
	BY_TYPE(t, rows_grad_type<T>(s, op, dx, dy, x, gamma, eps));
}

extern "C" int cfrtk_sum_leading(cudaStream_t s, cfrt_dtype t, kview dst,
                                 kview src, kview lead)
{
	BY_TYPE(t, sum_leading_type<T>(s, dst, src, lead));
}

// kernels.cu: the device kernels of the CUDA backend, behind kern.h.
// Every op computes in float (double for F64) and rounds once to the
// element type, as the MPI backend computes in double and rounds once.
// Kernels walk their index space with grid-stride loops, so any size runs
// with a bounded grid.
#include "kdev.cuh"

namespace {

// Whether op reads its second operand: the BINARY, GRAD and GATE* rows
// of runtime/common/ew.def; its third: the GATE_DA rows (TERNARY).
#define EW_READS_B_SCALAR false
#define EW_READS_B_UNARY false
#define EW_READS_B_BINARY true
#define EW_READS_B_GRAD true
#define EW_READS_B_GATE true
#define EW_READS_B_GATE_DB true
#define EW_READS_B_GATE_DA true
__host__ __device__ constexpr bool reads_b(int op)
{
	switch (op) {
#define EW(name, NAME, kind, fn) case K_##NAME: return EW_READS_B_##kind;
#include "common/ew.def"
#undef EW
	default: return false;
	}
}

#define EW_READS_C_SCALAR false
#define EW_READS_C_UNARY false
#define EW_READS_C_BINARY false
#define EW_READS_C_GRAD false
#define EW_READS_C_GATE false
#define EW_READS_C_GATE_DB false
#define EW_READS_C_GATE_DA true
__host__ __device__ constexpr bool reads_c(int op)
{
	switch (op) {
#define EW(name, NAME, kind, fn) case K_##NAME: return EW_READS_C_##kind;
#include "common/ew.def"
#undef EW
	default: return false;
	}
}

template <int OP> constexpr bool no_arithmetic = false;

template <typename A> __device__ __forceinline__ A silu_of(A x)
{
	return x / (A(1) + f_exp(-x));
}

// The elementwise ops of kern.h's enum kop on accumulator values (z: the
// third operand of a TERNARY row); an op of ew.def without its branch
// here does not compile.
template <int OP, typename A> __device__ __forceinline__ A apply(A x, A y,
                                                                 A z, A arg)
{
	if constexpr (OP == K_COPY) {
		return x;
	} else if constexpr (OP == K_SCALE) {
		return arg == A(0) ? A(0) : arg * x; // 0: a zero fill, NaN or not
	} else if constexpr (OP == K_GELU) {
		return A(0.5) * x * (A(1) + f_tanh(A(0.7978845608028654) *
		                                   (x + A(0.044715) * x * x * x)));
	} else if constexpr (OP == K_SILU) {
		return silu_of(x);
	} else if constexpr (OP == K_RELU) {
		return x > A(0) ? x : A(0);
	} else if constexpr (OP == K_SIGMOID) {
		return A(1) / (A(1) + f_exp(-x));
	} else if constexpr (OP == K_EXP) {
		return f_exp(x);
	} else if constexpr (OP == K_ADD) {
		return x + y;
	} else if constexpr (OP == K_MUL) {
		return x * y;
	} else if constexpr (OP == K_SUB) {
		return x - y;
	} else if constexpr (OP == K_RSUB) {
		return y - x;
	} else if constexpr (OP == K_GELU_GRAD) {
		A c = A(0.7978845608028654), k = A(0.044715);
		A t = f_tanh(c * (y + k * y * y * y));
		return x * (A(0.5) * (A(1) + t) +
		            A(0.5) * y * (A(1) - t * t) * c * (A(1) + A(3) * k * y * y));
	} else if constexpr (OP == K_SILU_GRAD) {
		A s = A(1) / (A(1) + f_exp(-y));
		return x * s * (A(1) + y * (A(1) - s));
	} else if constexpr (OP == K_RELU_GRAD) {
		return y > A(0) ? x : A(0);
	} else if constexpr (OP == K_SIGMOID_GRAD) {
		return x * y * (A(1) - y); // y: the sigmoid
	} else if constexpr (OP == K_SWIGLU) {
		return silu_of(x) * y; // x: a, y: b
	} else if constexpr (OP == K_SWIGLU_DB) {
		return x * silu_of(y); // x: dy, y: a
	} else if constexpr (OP == K_SWIGLU_DA) {
		A s = A(1) / (A(1) + f_exp(-y)); // x: dy, y: a, z: b
		return x * z * (s * (A(1) + y * (A(1) - s)));
	} else {
		static_assert(no_arithmetic<OP>, "an op of ew.def without its arithmetic");
	}
}

// Element offsets in d, a, b and c of index i of the row-major index
// space of d's first nd dims (c's only where op reads it).
template <int OP>
__device__ __forceinline__ void offsets4(int64_t i, int nd, const kview &d,
                                         const kview &a, const kview &b,
                                         const kview &c, int64_t *o)
{
	int64_t x = 0, y = 0, z = 0, w = 0;
	// unrolled over every possible dim (kv_at in kdev.cuh says why)
#pragma unroll
	for (int k = CFRT_MAX_DIMS - 1; k >= 0; k--) {
		if (k >= nd)
			continue;
		int64_t n = d.dim[k], j = i % n;
		i /= n;
		x += j * d.st[k];
		y += j * a.st[k];
		z += j * b.st[k];
		if (reads_c(OP))
			w += j * c.st[k];
	}
	o[0] = x;
	o[1] = y;
	o[2] = z;
	o[3] = w;
}

// The same for d, a and b (rope's lines).
__device__ __forceinline__ void offsets3(int64_t i, int nd, const kview &d,
                                         const kview &a, const kview &b,
                                         int64_t *od, int64_t *oa,
                                         int64_t *ob)
{
	int64_t o[4];
	offsets4<K_COPY>(i, nd, d, a, b, b, o);
	*od = o[0];
	*oa = o[1];
	*ob = o[2];
}

template <typename T, int OP>
__global__ void ew_general(kview d, kview a, kview b, kview c, int64_t n,
                           double arg)
{
	typedef typename acc<T>::type A;
	T *pd = (T *)d.p;
	const T *pa = (const T *)a.p, *pb = (const T *)b.p, *pc = (const T *)c.p;
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += step) {
		int64_t o[4];
		offsets4<OP>(i, d.nd, d, a, b, c, o);
		A y = reads_b(OP) ? to_acc(pb[o[2]]) : A(0);
		A z = reads_c(OP) ? to_acc(pc[o[3]]) : A(0);
		pd[o[0]] = store<T>(apply<OP, A>(to_acc(pa[o[1]]), y, z, A(arg)));
	}
}

// OP on the elements of 16 bytes of a (and of b, c).
template <typename T, int OP>
__device__ __forceinline__ uint4 apply16(uint4 va, uint4 vb, uint4 vc,
                                         double arg)
{
	typedef typename acc<T>::type A;
	const int V = 16 / sizeof(T);
	const T *ea = (const T *)&va, *eb = (const T *)&vb, *ec = (const T *)&vc;
	uint4 vd;
	T *ed = (T *)&vd;
#pragma unroll
	for (int j = 0; j < V; j++)
		ed[j] = store<T>(apply<OP, A>(to_acc(ea[j]), to_acc(eb[j]),
		                              to_acc(ec[j]), A(arg)));
	return vd;
}

// Flat runs, 16 bytes a thread: every pointer 16-byte aligned.
template <typename T, int OP>
__global__ void ew_flat(T *d, const T *a, const T *b, const T *c, int64_t n,
                        double arg)
{
	typedef typename acc<T>::type A;
	const int V = 16 / sizeof(T);
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (int64_t i = first; i < n / V; i += step) {
		uint4 va = ((const uint4 *)a)[i];
		uint4 vb = reads_b(OP) ? ((const uint4 *)b)[i] : va;
		uint4 vc = reads_c(OP) ? ((const uint4 *)c)[i] : va;
		((uint4 *)d)[i] = apply16<T, OP>(va, vb, vc, arg);
	}
	for (int64_t i = n / V * V + first; i < n; i += step) {
		A y = reads_b(OP) ? to_acc(b[i]) : A(0);
		A z = reads_c(OP) ? to_acc(c[i]) : A(0);
		d[i] = store<T>(apply<OP, A>(to_acc(a[i]), y, z, A(arg)));
	}
}

// Rows of unit stride, 16 bytes a thread: the last dim of every view is
// contiguous, its run and every outer stride whole 16-byte vectors (a
// head split or merge: runs of Dh elements, the heads and the sequence
// apart; a column slice of the gate and up projections). vpr: vectors a
// row; the outer dims locate the row.
template <typename T, int OP>
__global__ void ew_rows(kview d, kview a, kview b, kview c, int64_t nvec,
                        int vpr, double arg)
{
	const int V = 16 / sizeof(T);
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < nvec; i += step) {
		int64_t o[4], k = (i % vpr) * V;
		offsets4<OP>(i / vpr, d.nd - 1, d, a, b, c, o);
		uint4 va = *(const uint4 *)((const T *)a.p + o[1] + k);
		uint4 vb = reads_b(OP) ? *(const uint4 *)((const T *)b.p + o[2] + k) : va;
		uint4 vc = reads_c(OP) ? *(const uint4 *)((const T *)c.p + o[3] + k) : va;
		*(uint4 *)((T *)d.p + o[0] + k) = apply16<T, OP>(va, vb, vc, arg);
	}
}

bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

// Whether v's rows suit ew_rows: its last dim contiguous, the row and
// every outer stride whole vectors of V elements, its base aligned.
bool vec_rows(const kview &v, int V)
{
	if (v.nd < 2 || v.st[v.nd - 1] != 1 || v.dim[v.nd - 1] % V != 0 ||
	    v.dim[v.nd - 1] / V > INT_MAX || !aligned16(v.p))
		return false;
	for (int k = 0; k < v.nd - 1; k++)
		if (v.st[k] % V != 0)
			return false;
	return true;
}

template <typename T, int OP>
int ew_run(cudaStream_t s, kview d, kview a, kview b, kview c, double arg)
{
	int64_t n = numel(d);
	constexpr bool binary = reads_b(OP), ternary = reads_c(OP);
	bool flat = d.nd == 1 && d.st[0] == 1 && a.st[0] == 1 &&
	            (!binary || b.st[0] == 1) && (!ternary || c.st[0] == 1) &&
	            aligned16(d.p) && aligned16(a.p) &&
	            (!binary || aligned16(b.p)) && (!ternary || aligned16(c.p));
	const int V = 16 / sizeof(T);
	if (flat)
		ew_flat<T, OP><<<blocks_for(n / V + 1), THREADS, 0,
		                 s>>>((T *)d.p, (const T *)a.p, (const T *)b.p,
		                      (const T *)c.p, n, arg);
	else if (vec_rows(d, V) && vec_rows(a, V) && (!binary || vec_rows(b, V)) &&
	         (!ternary || vec_rows(c, V)))
		ew_rows<T, OP><<<blocks_for(n / V), THREADS, 0, s>>>(
			d, a, b, c, n / V, (int)(d.dim[d.nd - 1] / V), arg);
	else
		ew_general<T, OP><<<blocks_for(n), THREADS, 0, s>>>(d, a, b, c, n,
		                                                    arg);
	return (int)cudaGetLastError();
}

template <typename T>
int ew_type(cudaStream_t s, int op, kview d, kview a, kview b, kview c,
            double arg)
{
	switch (op) {
	case K_COPY: return ew_run<T, K_COPY>(s, d, a, b, c, arg);
#define EW(name, NAME, kind, fn) \
	case K_##NAME: return ew_run<T, K_##NAME>(s, d, a, b, c, arg);
#include "common/ew.def"
#undef EW
	default: return (int)cudaErrorInvalidValue;
	}
}

// ---- rows: norms and softmax, one block per row ------------------------

template <typename T>
__global__ void norm_rows(kview d, kview s, kview g, kview b, int rms,
                          double eps)
{
	typedef typename acc<T>::type A;
	__shared__ A sh[32];
	int64_t n = kv_at(d.dim, d.nd - 1), r = blockIdx.x;
	const T *x = (const T *)s.p + row_offset(s, r);
	T *y = (T *)d.p + row_offset(d, r);
	int64_t sx = kv_at(s.st, s.nd - 1), sy = kv_at(d.st, d.nd - 1);
	A mean = 0, var = 0;
	if (!rms) {
		for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
			mean += to_acc(x[i * sx]);
		mean = block_reduce(mean, sh, false) / A(n);
	}
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		A u = to_acc(x[i * sx]) - mean;
		var += u * u;
	}
	var = block_reduce(var, sh, false) / A(n);
	A inv = A(1) / f_sqrt(var + A(eps));
	const T *pg = (const T *)g.p, *pb = (const T *)b.p;
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		A u = (to_acc(x[i * sx]) - mean) * inv;
		if (pg)
			u *= to_acc(pg[i * g.st[0]]);
		if (pb)
			u += to_acc(pb[i * b.st[0]]);
		y[i * sy] = store<T>(u);
	}
}

// The same, for rows whose last dim is contiguous (d and s; gamma and
// beta of any stride) and at most NR_EPT * blockDim.x long: the row is
// read once into registers, its sums reduced from there. Every element
// is read before any is written, so d may be s.
const int NR_EPT = 8;

template <typename T>
__global__ void norm_rows_reg(kview d, kview s, kview g, kview b, int rms,
                              double eps)
{
	typedef typename acc<T>::type A;
	__shared__ A sh[32];
	int64_t n = kv_at(d.dim, d.nd - 1), r = blockIdx.x;
	const T *x = (const T *)s.p + row_offset(s, r);
	T *y = (T *)d.p + row_offset(d, r);
	A xv[NR_EPT], mean = 0, var = 0;
#pragma unroll
	for (int k = 0; k < NR_EPT; k++) {
		int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
		xv[k] = i < n ? to_acc(x[i]) : A(0);
		mean += xv[k];
	}
	mean = rms ? A(0) : block_reduce(mean, sh, false) / A(n);
#pragma unroll
	for (int k = 0; k < NR_EPT; k++) {
		int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
		A u = i < n ? xv[k] - mean : A(0);
		var += u * u;
	}
	var = block_reduce(var, sh, false) / A(n);
	A inv = A(1) / f_sqrt(var + A(eps));
	const T *pg = (const T *)g.p, *pb = (const T *)b.p;
#pragma unroll
	for (int k = 0; k < NR_EPT; k++) {
		int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
		if (i >= n)
			continue;
		A u = (xv[k] - mean) * inv;
		if (pg)
			u *= to_acc(pg[i * g.st[0]]);
		if (pb)
			u += to_acc(pb[i * b.st[0]]);
		y[i] = store<T>(u);
	}
}

// The same, 16 bytes a thread: rows as vec_rows wants them (d and s), at
// most 1024 vectors long, gamma and beta absent or contiguous and
// aligned. Thread t holds elements [t V, t V + V) of the row in
// registers; one load and one store of 16 bytes each (the scalar loads
// of norm_rows_reg reach a third of HBM on bf16 rows of 4096).
template <typename T>
__global__ void norm_rows_vec(kview d, kview s, kview g, kview b, int rms,
                              double eps)
{
	typedef typename acc<T>::type A;
	const int V = 16 / sizeof(T);
	__shared__ A sh[32];
	int64_t n = kv_at(d.dim, d.nd - 1), r = blockIdx.x;
	int64_t c = (int64_t)threadIdx.x * V;
	bool on = c < n;
	const T *x = (const T *)s.p + row_offset(s, r);
	T *y = (T *)d.p + row_offset(d, r);
	uint4 vx = on ? *(const uint4 *)(x + c) : make_uint4(0, 0, 0, 0);
	const T *ex = (const T *)&vx;
	A xv[V], mean = 0, var = 0;
#pragma unroll
	for (int j = 0; j < V; j++) {
		xv[j] = to_acc(ex[j]);
		mean += xv[j];
	}
	mean = rms ? A(0) : block_reduce(mean, sh, false) / A(n);
#pragma unroll
	for (int j = 0; j < V; j++) {
		A u = on ? xv[j] - mean : A(0);
		var += u * u;
	}
	var = block_reduce(var, sh, false) / A(n);
	A inv = A(1) / f_sqrt(var + A(eps));
	if (!on)
		return;
	uint4 vg = g.p ? *(const uint4 *)((const T *)g.p + c) : vx;
	uint4 vb = b.p ? *(const uint4 *)((const T *)b.p + c) : vx;
	const T *eg = (const T *)&vg, *eb = (const T *)&vb;
	uint4 vd;
	T *ed = (T *)&vd;
#pragma unroll
	for (int j = 0; j < V; j++) {
		A u = (xv[j] - mean) * inv;
		if (g.p)
			u *= to_acc(eg[j]);
		if (b.p)
			u += to_acc(eb[j]);
		ed[j] = store<T>(u);
	}
	*(uint4 *)(y + c) = vd;
}

// The same, a warp a row (WROWS rows a block), for rows of at most 32 NV
// vectors: lane l holds vectors l, l + 32, ... of its row in registers,
// its sums reduced by warp shuffles alone. Each lane has NV loads of 16
// bytes in flight, where norm_rows_vec's block a row, one load a thread
// and two block-wide barriers, reached half of HBM on the Llama layer's
// rows of 4096 (bf16). n: the row's length, a whole number of vectors.
template <typename T, int NV>
__global__ void __launch_bounds__(32 * WROWS)
norm_rows_warp(kview d, kview s, kview g, kview b, int64_t rows, int64_t n,
               int rms, double eps)
{
	typedef typename acc<T>::type A;
	const int V = 16 / sizeof(T);
	int lane = threadIdx.x & 31;
	int64_t r = (int64_t)blockIdx.x * WROWS + (threadIdx.x >> 5);
	if (r >= rows) // the whole warp: no barrier follows
		return;
	const T *x = (const T *)s.p + row_offset(s, r);
	T *y = (T *)d.p + row_offset(d, r);
	uint4 vx[NV];
	A mean = 0, var = 0;
#pragma unroll
	for (int k = 0; k < NV; k++) {
		int64_t c = (int64_t)(k * 32 + lane) * V;
		vx[k] = c < n ? *(const uint4 *)(x + c) : make_uint4(0, 0, 0, 0);
	}
	if (!rms)
		mean = warp_row_mean<T, A, NV, V>(vx, n);
#pragma unroll
	for (int k = 0; k < NV; k++) {
		const T *e = (const T *)&vx[k];
		bool on = (int64_t)(k * 32 + lane) * V < n;
#pragma unroll
		for (int j = 0; j < V; j++) {
			A u = on ? to_acc(e[j]) - mean : A(0);
			var += u * u;
		}
	}
	var = warp_sum(var) / A(n);
	A inv = A(1) / f_sqrt(var + A(eps));
#pragma unroll
	for (int k = 0; k < NV; k++) {
		int64_t c = (int64_t)(k * 32 + lane) * V;
		if (c >= n)
			continue;
		uint4 vg = g.p ? *(const uint4 *)((const T *)g.p + c) : vx[k];
		uint4 vb = b.p ? *(const uint4 *)((const T *)b.p + c) : vx[k];
		const T *e = (const T *)&vx[k], *eg = (const T *)&vg,
		        *eb = (const T *)&vb;
		uint4 vd;
		T *ed = (T *)&vd;
#pragma unroll
		for (int j = 0; j < V; j++) {
			A u = (to_acc(e[j]) - mean) * inv;
			if (g.p)
				u *= to_acc(eg[j]);
			if (b.p)
				u += to_acc(eb[j]);
			ed[j] = store<T>(u);
		}
		*(uint4 *)(y + c) = vd;
	}
}

template <typename T>
int norm_warp_launch(cudaStream_t s, int nv, kview d, kview x, kview g,
                     kview b, int64_t rows, int64_t n, int rms, double eps)
{
	int64_t blocks = (rows + WROWS - 1) / WROWS;
	if (blocks > 0x7fffffff)
		return (int)cudaErrorInvalidConfiguration;
	dim3 gr((unsigned)blocks), th(32 * WROWS);
	switch (nv) {
	case 1: norm_rows_warp<T, 1><<<gr, th, 0, s>>>(d, x, g, b, rows, n, rms, eps); break;
	case 2: norm_rows_warp<T, 2><<<gr, th, 0, s>>>(d, x, g, b, rows, n, rms, eps); break;
	case 4: norm_rows_warp<T, 4><<<gr, th, 0, s>>>(d, x, g, b, rows, n, rms, eps); break;
	case 8: norm_rows_warp<T, 8><<<gr, th, 0, s>>>(d, x, g, b, rows, n, rms, eps); break;
	default: norm_rows_warp<T, 16><<<gr, th, 0, s>>>(d, x, g, b, rows, n, rms, eps); break;
	}
	return (int)cudaGetLastError();
}

// Whether gamma or beta (1-d, or absent) suits norm_rows_vec.
static bool vec_param(const kview &v)
{
	return !v.p || (v.st[0] == 1 && aligned16(v.p));
}

// Softmax of the first `valid` of the n elements at x (stride sx) into y
// (stride sy), zeros after them; one block. Returns their log-sum-exp.
template <typename A, typename S, typename T>
__device__ A softmax_row(const S *x, int64_t sx, T *y, int64_t sy,
                         int64_t n, int64_t valid, A *sh)
{
	A m = -INFINITY, sum = 0;
	for (int64_t i = threadIdx.x; i < valid; i += blockDim.x) {
		A u = to_acc(x[i * sx]);
		m = u > m ? u : m;
	}
	m = block_reduce(m, sh, true);
	for (int64_t i = threadIdx.x; i < valid; i += blockDim.x)
		sum += f_exp(to_acc(x[i * sx]) - m);
	sum = block_reduce(sum, sh, false);
	A inv = A(1) / sum;
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
		y[i * sy] = store<T>(i < valid ? f_exp(to_acc(x[i * sx]) - m) * inv
		                               : A(0));
	return m + f_log(sum);
}

template <typename T>
__global__ void softmax_rows(kview d, kview s)
{
	typedef typename acc<T>::type A;
	__shared__ A sh[32];
	int64_t n = kv_at(d.dim, d.nd - 1), r = blockIdx.x;
	softmax_row<A>((const T *)s.p + row_offset(s, r), kv_at(s.st, s.nd - 1),
	               (T *)d.p + row_offset(d, r), kv_at(d.st, d.nd - 1), n, n, sh);
}

template <typename T>
int rows_type(cudaStream_t s, int op, kview d, kview x, kview g, kview b,
              double eps)
{
	int64_t n = d.dim[d.nd - 1], rows = numel(d) / n;
	if (rows > 0x7fffffff) // one block per row
		return (int)cudaErrorInvalidConfiguration;
	const int V = 16 / sizeof(T);
	bool vec = op != KR_SOFTMAX && vec_rows(d, V) && vec_rows(x, V) &&
	           vec_param(g) && vec_param(b);
	if (op == KR_SOFTMAX)
		softmax_rows<T><<<(int)rows, row_threads(n), 0, s>>>(d, x);
	else if (vec && warp_nv(n / V))
		return norm_warp_launch<T>(s, warp_nv(n / V), d, x, g, b, rows, n,
		                           op == KR_RMSNORM, eps);
	else if (vec && n / V <= 1024) {
		int64_t t = (n / V + 31) / 32 * 32;
		norm_rows_vec<T><<<(int)rows, (int)(t < 64 ? 64 : t), 0, s>>>(
			d, x, g, b, op == KR_RMSNORM, eps);
	} else if (d.st[d.nd - 1] == 1 && x.st[x.nd - 1] == 1 &&
	         n <= (int64_t)NR_EPT * 1024) {
		// the fewest threads (a multiple of 32) that hold the row
		int64_t t = ((n + NR_EPT - 1) / NR_EPT + 31) / 32 * 32;
		norm_rows_reg<T><<<(int)rows, (int)(t < 64 ? 64 : t), 0, s>>>(
			d, x, g, b, op == KR_RMSNORM, eps);
	} else {
		norm_rows<T><<<(int)rows, row_threads(n), 0, s>>>(
			d, x, g, b, op == KR_RMSNORM, eps);
	}
	return (int)cudaGetLastError();
}

// ---- attention softmax over the scores workspace ------------------------

// Row r of the scores (query r % sq of head h0 + r / sq) into its
// probabilities; with lse (klse), its log-sum-exp written there, or read
// from there instead of taking the row's max and sum (P = exp(s - lse)).
template <typename S, typename T>
__global__ void attn_softmax(const S *scores, T *probs, int64_t sq,
                             int64_t sk, int causal, int64_t q_offset,
                             klse lse)
{
	typedef typename acc<S>::type A;
	__shared__ A sh[32];
	int64_t r = blockIdx.x, i = r % sq, q = q_offset + i;
	int64_t valid = causal && q + 1 < sk ? q + 1 : sk;
	const S *x = scores + r * sk;
	T *y = probs + r * sk;
	S *l = lse.p ? (S *)lse.p + lse.b * lse.st[0] +
	               (lse.h0 + r / sq) * lse.st[1] + i * lse.st[2] : NULL;
	if (l && lse.read) {
		A m = to_acc(*l);
		for (int64_t j = threadIdx.x; j < sk; j += blockDim.x)
			y[j] = store<T>(j < valid ? f_exp(to_acc(x[j]) - m) : A(0));
		return;
	}
	A v = softmax_row<A>(x, 1, y, 1, sk, valid, sh);
	if (l && threadIdx.x == 0)
		*l = v;
}

// The backward's dS = P (dP - delta) over the probabilities (in place),
// delta = rowsum(dout * out) of the row's query: row r is query r % sq of
// head h0 + r / sq of batch entry b; masked keys (P = 0) give 0.
template <typename S, typename T>
__global__ void attn_dscores(T *probs, const S *dp, kview dout, kview out,
                             int64_t b, int64_t h0, int64_t sq, int64_t sk,
                             int causal, int64_t q_offset)
{
	typedef typename acc<S>::type A;
	__shared__ A sh[32];
	int64_t r = blockIdx.x, h = h0 + r / sq, i = r % sq;
	const T *g = (const T *)dout.p + b * dout.st[0] + h * dout.st[1] +
	             i * dout.st[2];
	const T *o = (const T *)out.p + b * out.st[0] + h * out.st[1] +
	             i * out.st[2];
	A delta = 0;
	for (int64_t d = threadIdx.x; d < dout.dim[3]; d += blockDim.x)
		delta += to_acc(g[d]) * to_acc(o[d]);
	delta = block_reduce(delta, sh, false);
	int64_t q = q_offset + i, valid = causal && q + 1 < sk ? q + 1 : sk;
	T *p = probs + r * sk;
	const S *x = dp + r * sk;
	for (int64_t j = threadIdx.x; j < sk; j += blockDim.x)
		p[j] = store<T>(j < valid ? to_acc(p[j]) * (to_acc(x[j]) - delta)
		                          : A(0));
}

// ---- scan ---------------------------------------------------------------

// h_t = decay * h_{t-1} + s_t along dim, one thread per line: from the
// first element (rev = 0, cfrt_scan) or from the last (rev = 1, its
// backward). Each element is read before it is written: d may be s.
template <typename T>
__global__ void scan_lines(kview d, kview s, int dim, int64_t lines,
                           double decay, int rev)
{
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     l < lines; l += step) {
		int64_t od = 0, os = 0, r = l;
#pragma unroll
		for (int k = CFRT_MAX_DIMS - 1; k >= 0; k--) {
			if (k >= d.nd || k == dim)
				continue;
			int64_t j = r % d.dim[k];
			r /= d.dim[k];
			od += j * d.st[k];
			os += j * s.st[k];
		}
		const T *x = (const T *)s.p + os;
		T *y = (T *)d.p + od;
		double h = 0; // in double, as the MPI backend: one rounding
		for (int64_t t = 0, n = kv_at(d.dim, dim); t < n; t++) {
			int64_t i = rev ? n - 1 - t : t;
			h = decay * h + (double)to_acc(x[i * kv_at(s.st, dim)]);
			y[i * kv_at(d.st, dim)] = store<T>((typename acc<T>::type)h);
		}
	}
}

// ---- deterministic fill -------------------------------------------------

// cfrt_hash64 and cfrt_uniform of cfrt.h, on the device (same constants;
// the GPU tests compare filled tensors with the CPU backend's).
__device__ __forceinline__ uint64_t hash64(uint64_t seed, uint64_t index)
{
	uint64_t z = seed * 0xD1B54A32D192ED03ull +
	             (index + 1) * 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

struct window {
	int64_t gstride[CFRT_MAX_DIMS]; // row-major strides of the global tensor
	int64_t off[CFRT_MAX_DIMS];
};

// Element i of view d: its offset in d (*od) and its row-major index in
// the global tensor the window w cuts.
__device__ uint64_t window_index(const kview &d, const window &w, int64_t i,
                                 int64_t *od)
{
	uint64_t g = 0;
	*od = 0;
#pragma unroll
	for (int k = CFRT_MAX_DIMS - 1; k >= 0; k--) {
		if (k >= d.nd)
			continue;
		int64_t j = i % d.dim[k];
		i /= d.dim[k];
		*od += j * d.st[k];
		g += (uint64_t)(w.off[k] + j) * (uint64_t)w.gstride[k];
	}
	return g;
}

// cfrt_uniform of cfrt.h: a multiple of 2^-23 in [-1, 1) (exact in every
// type with a 24-bit significand), of 2^-52 for double.
template <typename T> __device__ T uniform(uint64_t h)
{
	float v = (float)(h >> 40) * (1.0f / 8388608.0f) - 1.0f; // exact
	return store<T>((typename acc<T>::type)v);
}

template <> __device__ double uniform<double>(uint64_t h)
{
	return (double)(h >> 11) / 4503599627370496.0 - 1.0;
}

template <typename T>
__global__ void fill_window(kview d, window w, uint64_t seed, int64_t n)
{
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += step) {
		int64_t od;
		uint64_t g = window_index(d, w, i, &od);
		((T *)d.p)[od] = uniform<T>(hash64(seed, g));
	}
}

// The rotation of a pair (x1, x2) by the angle of cos c and sin s: x1 c -
// x2 s and x2 c + x1 s, each one product rounded and one fused
// multiply-add, spelt out so that every rope kernel rounds alike (left to
// the compiler, its contractions may differ between kernels, and the
// kernels' results are checked bit for bit against each other).
__device__ __forceinline__ float rot_lo(float x1, float x2, float c, float s)
{
	return __fmaf_rn(x1, c, -__fmul_rn(x2, s));
}
__device__ __forceinline__ float rot_hi(float x1, float x2, float c, float s)
{
	return __fmaf_rn(x2, c, __fmul_rn(x1, s));
}
__device__ __forceinline__ double rot_lo(double x1, double x2, double c,
                                         double s)
{
	return __fma_rn(x1, c, -__dmul_rn(x2, s));
}
__device__ __forceinline__ double rot_hi(double x1, double x2, double c,
                                         double s)
{
	return __fma_rn(x2, c, __dmul_rn(x1, s));
}

// One thread per pair (j, j + Dh/2) of a row; the angle in double, as the
// MPI backend has it, so that long sequences keep their positions exact.
template <typename T>
__global__ void rope_pairs(kview d, kview a, int64_t n, int64_t half,
                           int64_t rows, int64_t inner, double base,
                           int64_t pos0, double sign)
{
	typedef typename acc<T>::type A;
	T *pd = (T *)d.p;
	const T *pa = (const T *)a.p;
	int nd = d.nd;
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += step) {
		int64_t line = i / half, j = i % half, od, oa, unused;
		offsets3(line, nd - 1, d, a, a, &od, &oa, &unused);
		double ang = (double)(pos0 + line / inner % rows) *
		             pow(base, -2.0 * (double)j / (double)(2 * half));
		A c = A(cos(ang)), sn = A(sign * sin(ang));
		int64_t ld = kv_at(d.st, nd - 1), la = kv_at(a.st, nd - 1);
		A x1 = to_acc(pa[oa + j * la]), x2 = to_acc(pa[oa + (j + half) * la]);
		pd[od + j * ld] = store<T>(rot_lo(x1, x2, c, sn));
		pd[od + (j + half) * ld] = store<T>(rot_hi(x1, x2, c, sn));
	}
}

// The same rotation, one thread per (position p, pair j): the angle's
// cos and sin (the same double arithmetic as rope_pairs, so the same
// bits) once, then every line at that position (outer of them, the dims
// before dim, times inner, those between dim and the last): the lines of
// one position share its angles (all the heads, all the batch), and
// rope_pairs' double pow, cos and sin per pair made it compute-bound.
template <typename T>
__global__ void rope_positions(kview d, kview a, int64_t half, int64_t rows,
                               int64_t inner, int64_t outer, double base,
                               int64_t pos0, double sign)
{
	typedef typename acc<T>::type A;
	T *pd = (T *)d.p;
	const T *pa = (const T *)a.p;
	int nd = d.nd;
	int64_t n = rows * half, step = (int64_t)gridDim.x * blockDim.x;
	int64_t ld = kv_at(d.st, nd - 1), la = kv_at(a.st, nd - 1);
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += step) {
		int64_t p = i / half, j = i % half;
		double ang = (double)(pos0 + p) *
		             pow(base, -2.0 * (double)j / (double)(2 * half));
		A c = A(cos(ang)), sn = A(sign * sin(ang));
		for (int64_t o = 0; o < outer; o++)
			for (int64_t k = 0; k < inner; k++) {
				int64_t line = (o * rows + p) * inner + k, od, oa, unused;
				offsets3(line, nd - 1, d, a, a, &od, &oa, &unused);
				A x1 = to_acc(pa[oa + j * la]);
				A x2 = to_acc(pa[oa + (j + half) * la]);
				pd[od + j * ld] = store<T>(rot_lo(x1, x2, c, sn));
				pd[od + (j + half) * ld] = store<T>(rot_hi(x1, x2, c, sn));
			}
	}
}

// The same rotation over 16-byte vectors, where the last dim of d and a
// is contiguous, Dh/2 a whole number of vectors and every other stride
// and both bases aligned to them (rope_vec_ok). A block takes ppb
// positions from p0 = blockIdx.x * ppb and lpb lines from l0 = blockIdx.y
// * lpb (a line: an index of every dim but dim and the last, row-major;
// nl of them): first the cos and sin of its positions' angles (the same
// double arithmetic as rope_pairs, so the same bits; base^(-2j/Dh) once a
// pair) and its lines' offsets into shared memory, then every (position,
// line, vector) of the block, RV of them a thread at once, loads before
// stores, so that each thread has 2 RV loads of 16 bytes in flight. pst:
// the strides of d and a along dim (kv_at(d.st, dim) here put the views
// on the stack).
// rope_positions' scalar loads, one line after another, and its 64-bit
// divisions per element reached 20% of HBM on the Llama layer's q.
const int RV = 4;

template <typename T>
__global__ void rope_vec(kview d, kview a, int dim, longlong2 pst,
                         int64_t rows, int64_t half, int64_t nl, int ppb,
                         int lpb, double base, int64_t pos0, double sign)
{
	typedef typename acc<T>::type A;
	const int V = 16 / sizeof(T);
	extern __shared__ __align__(16) unsigned char rope_sh[];
	int64_t *lod = (int64_t *)rope_sh, *loa = lod + lpb;
	double *fr = (double *)(loa + lpb);
	A *cs = (A *)(fr + half), *sn = cs + (int64_t)ppb * half;
	int64_t p0 = (int64_t)blockIdx.x * ppb, l0 = (int64_t)blockIdx.y * lpb;
	int np = (int)(rows - p0 < ppb ? rows - p0 : ppb);
	int nb = (int)(nl - l0 < lpb ? nl - l0 : lpb);
	int hv = (int)(half / V);
	for (int j = threadIdx.x; j < half; j += blockDim.x)
		fr[j] = pow(base, -2.0 * (double)j / (double)(2 * half));
	for (int l = threadIdx.x; l < nb; l += blockDim.x) {
		// line l0 + l: its index along every dim but dim and the last
		int64_t i = l0 + l, od = 0, oa = 0;
#pragma unroll
		for (int k = CFRT_MAX_DIMS - 2; k >= 0; k--) {
			if (k >= d.nd - 1 || k == dim)
				continue;
			int64_t j = i % d.dim[k];
			i /= d.dim[k];
			od += j * d.st[k];
			oa += j * a.st[k];
		}
		lod[l] = od;
		loa[l] = oa;
	}
	__syncthreads();
	for (int q = threadIdx.x; q < np * half; q += blockDim.x) {
		int pp = q / (int)half, j = q % (int)half;
		double ang = (double)(pos0 + p0 + pp) * fr[j];
		cs[q] = A(cos(ang));
		sn[q] = A(sign * sin(ang));
	}
	__syncthreads();
	T *pd = (T *)d.p;
	const T *pa = (const T *)a.p;
	int64_t sd = pst.x, sa = pst.y;
	int n = np * nb * hv;
	for (int m0 = threadIdx.x; m0 < n; m0 += RV * blockDim.x) {
		uint4 v1[RV], v2[RV];
		int64_t oa[RV];
#pragma unroll
		for (int u = 0; u < RV; u++) {
			int m = m0 + u * blockDim.x;
			if (m >= n)
				continue;
			int jv = m % hv, r = m / hv, l = r % nb, pp = r / nb;
			oa[u] = loa[l] + (p0 + pp) * sa + jv * V;
			v1[u] = *(const uint4 *)(pa + oa[u]);
			v2[u] = *(const uint4 *)(pa + oa[u] + half);
		}
#pragma unroll
		for (int u = 0; u < RV; u++) {
			int m = m0 + u * blockDim.x;
			if (m >= n)
				continue;
			int jv = m % hv, r = m / hv, l = r % nb, pp = r / nb;
			const A *c = cs + pp * half + jv * V, *s = sn + pp * half + jv * V;
			const T *e1 = (const T *)&v1[u], *e2 = (const T *)&v2[u];
			uint4 w1, w2;
			T *f1 = (T *)&w1, *f2 = (T *)&w2;
#pragma unroll
			for (int e = 0; e < V; e++) {
				A x1 = to_acc(e1[e]), x2 = to_acc(e2[e]);
				f1[e] = store<T>(rot_lo(x1, x2, c[e], s[e]));
				f2[e] = store<T>(rot_hi(x1, x2, c[e], s[e]));
			}
			int64_t od = lod[l] + (p0 + pp) * sd + jv * V;
			*(uint4 *)(pd + od) = w1;
			*(uint4 *)(pd + od + half) = w2;
		}
	}
}

// CFRT_CHECK=finite: *key becomes the least of i * 4 + kind over the
// elements i (row-major over v's dims) that are no finite number, kind 0
// a NaN, 1 +Inf, 2 -Inf; untouched where every element is finite. A
// thread stops at its first: its later indices are larger.
template <typename T>
__global__ void nonfinite(kview v, int64_t n, unsigned long long *key)
{
	typedef typename acc<T>::type A;
	const T *p = (const T *)v.p;
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += step) {
		A x = to_acc(p[kv_offset(v, v.nd, i)]);
		if (isfinite(x))
			continue;
		unsigned long long k = (unsigned long long)i * 4u +
		                       (isnan(x) ? 0u : x > A(0) ? 1u : 2u);
		atomicMin(key, k);
		break;
	}
}

} // namespace

// ---- launchers: type dispatch (kdev.cuh's BY_TYPE) ----------------------

extern "C" int cfrtk_elementwise(cudaStream_t s, cfrt_dtype t, int op,
                                 kview dst, kview a, kview b, double arg)
{
	BY_TYPE(t, ew_type<T>(s, op, dst, a, b, b, arg));
}

extern "C" int cfrtk_elementwise3(cudaStream_t s, cfrt_dtype t, int op,
                                  kview dst, kview a, kview b, kview c)
{
	BY_TYPE(t, ew_type<T>(s, op, dst, a, b, c, 0.0));
}

extern "C" int cfrtk_rows(cudaStream_t s, cfrt_dtype t, int op, kview dst,
                          kview src, kview gamma, kview beta, double eps)
{
	BY_TYPE(t, rows_type<T>(s, op, dst, src, gamma, beta, eps));
}

template <typename T>
static int scan_type(cudaStream_t s, kview d, kview x, int dim, double decay,
                     int rev)
{
	int64_t lines = numel(d) / d.dim[dim];
	scan_lines<T><<<blocks_for(lines), THREADS, 0, s>>>(d, x, dim, lines,
	                                                    decay, rev);
	return (int)cudaGetLastError();
}

extern "C" int cfrtk_scan(cudaStream_t s, cfrt_dtype t, kview dst, kview src,
                          int dim, double decay, int rev)
{
	BY_TYPE(t, scan_type<T>(s, dst, src, dim, decay, rev));
}

enum { ROPE_POS_MIN = 1 << 16 };

// rope_vec's blocks: ppb positions by lpb lines, grid.x by grid.y of
// them, shmem bytes of shared memory.
struct rope_launch {
	dim3 grid;
	int ppb, lpb;
	size_t shmem;
};

// Whether rope_vec takes d = rope(x) (its layout: 16-byte vectors, the
// last dim contiguous, Dh/2 whole vectors, every other stride and both
// bases aligned to them), and its launch: about RV vectors a thread
// (RV * THREADS a block), a block's lines all those of its positions
// where they are fewer (then several positions, their cos and sin
// tables at most 2048 pairs), else a run of the lines of one position.
template <typename T>
static bool rope_vec_plan(const kview &d, const kview &x, int dim,
                          rope_launch *l)
{
	typedef typename acc<T>::type A;
	const int V = 16 / sizeof(T), ITEMS = RV * THREADS;
	int nd = d.nd;
	int64_t half = d.dim[nd - 1] / 2, rows = d.dim[dim];
	if (half == 0 || half % V || half > 2048 || d.st[nd - 1] != 1 ||
	    x.st[nd - 1] != 1 || !aligned16(d.p) || !aligned16(x.p))
		return false;
	for (int k = 0; k < nd - 1; k++)
		if (d.st[k] % V || x.st[k] % V)
			return false;
	int64_t nl = numel(d) / (rows * 2 * half), hv = half / V, ppb = 1, lpb;
	if (nl * hv >= ITEMS) {
		lpb = ITEMS / hv;
	} else {
		lpb = nl;
		ppb = ITEMS / (nl * hv);
		if (ppb > 2048 / half)
			ppb = 2048 / half;
		if (ppb > rows)
			ppb = rows;
		if (ppb < 1)
			ppb = 1;
	}
	int64_t gx = (rows + ppb - 1) / ppb, gy = (nl + lpb - 1) / lpb;
	if (gx > 0x7fffffff || gy > 65535)
		return false;
	l->grid = dim3((unsigned)gx, (unsigned)gy);
	l->ppb = (int)ppb;
	l->lpb = (int)lpb;
	l->shmem = 2 * sizeof(int64_t) * (size_t)lpb + sizeof(double) * half +
	           2 * sizeof(A) * (size_t)(ppb * half);
	return l->shmem <= 48 * 1024;
}

template <typename T>
static int rope_type(cudaStream_t s, kview d, kview x, int dim, double base,
                     int64_t pos0, double sign)
{
	int64_t half = d.dim[d.nd - 1] / 2, n = numel(d) / 2, inner = 1;
	for (int k = dim + 1; k < d.nd - 1; k++) // lines per step along dim
		inner *= d.dim[k];
	int64_t rows = d.dim[dim], lines = n / (half > 0 ? half : 1);
	// where the (position, pair)s fill the GPU (ROPE_POS_MIN of them):
	// 16-byte vectors where the layout allows, else a thread per
	// (position, pair) where each has a few lines to share its angles
	// with; else (and below: the check's reference) a thread per pair
	rope_launch l;
	if (rows * half >= ROPE_POS_MIN && rope_vec_plan<T>(d, x, dim, &l)) {
		rope_vec<T><<<l.grid, THREADS, l.shmem, s>>>(d, x, dim,
			make_longlong2(d.st[dim], x.st[dim]), rows, half, lines / rows,
			l.ppb, l.lpb, base, pos0, sign);
		return (int)cudaGetLastError();
	}
	if (rows * half >= ROPE_POS_MIN && lines / rows >= 2)
		rope_positions<T><<<blocks_for(rows * half), THREADS, 0, s>>>(d, x,
			half, rows, inner, lines / rows / inner, base, pos0, sign);
	else
		rope_pairs<T><<<blocks_for(n), THREADS, 0, s>>>(d, x, n, half, rows,
		                                                inner, base, pos0, sign);
	return (int)cudaGetLastError();
}

extern "C" int cfrtk_rope(cudaStream_t s, cfrt_dtype t, kview dst, kview src,
                          int dim, double base, int64_t pos0, double sign)
{
	BY_TYPE(t, rope_type<T>(s, dst, src, dim, base, pos0, sign));
}

template <typename T>
static int fill_type(cudaStream_t s, kview d, uint64_t seed,
                     const int64_t *gdims, const int64_t *offs)
{
	window w;
	int64_t g = 1;
	for (int k = d.nd - 1; k >= 0; k--) {
		w.gstride[k] = g;
		w.off[k] = offs[k];
		g *= gdims[k];
	}
	int64_t n = numel(d);
	fill_window<T><<<blocks_for(n), THREADS, 0, s>>>(d, w, seed, n);
	return (int)cudaGetLastError();
}

extern "C" int cfrtk_fill(cudaStream_t s, cfrt_dtype t, kview dst,
                          uint64_t seed, const int64_t *gdims,
                          const int64_t *offs)
{
	BY_TYPE(t, fill_type<T>(s, dst, seed, gdims, offs));
}

template <typename S, typename T>
static int attn_type(cudaStream_t s, const void *scores, void *probs,
                     int64_t rows, int64_t sq, int64_t sk, int causal,
                     int64_t q_offset, klse lse)
{
	if (rows > 0x7fffffff)
		return (int)cudaErrorInvalidConfiguration;
	attn_softmax<S, T><<<(int)rows, row_threads(sk), 0, s>>>(
		(const S *)scores, (T *)probs, sq, sk, causal, q_offset, lse);
	return (int)cudaGetLastError();
}

extern "C" int cfrtk_attn_softmax(cudaStream_t s, cfrt_dtype t,
                                  const void *scores, void *probs,
                                  int64_t rows, int64_t sq, int64_t sk,
                                  int causal, int64_t q_offset, klse lse)
{
	if (t == CFRT_F64)
		return attn_type<double, double>(s, scores, probs, rows, sq, sk,
		                                 causal, q_offset, lse);
	BY_TYPE(t, (attn_type<float, T>(s, scores, probs, rows, sq, sk, causal,
	                                q_offset, lse)));
}

template <typename S, typename T>
static int dscores_type(cudaStream_t s, void *probs, const void *dp,
                        kview dout, kview out, int64_t b, int64_t h0,
                        int64_t rows, int64_t sq, int64_t sk, int causal,
                        int64_t q_offset)
{
	if (rows > 0x7fffffff)
		return (int)cudaErrorInvalidConfiguration;
	attn_dscores<S, T><<<(int)rows, row_threads(sk), 0, s>>>(
		(T *)probs, (const S *)dp, dout, out, b, h0, sq, sk, causal,
		q_offset);
	return (int)cudaGetLastError();
}

extern "C" int cfrtk_attn_dscores(cudaStream_t s, cfrt_dtype t, void *probs,
                                  const void *dp, kview dout, kview out,
                                  int64_t b, int64_t h0, int64_t rows,
                                  int64_t sq, int64_t sk, int causal,
                                  int64_t q_offset)
{
	if (t == CFRT_F64)
		return dscores_type<double, double>(s, probs, dp, dout, out, b, h0,
		                                    rows, sq, sk, causal, q_offset);
	BY_TYPE(t, (dscores_type<float, T>(s, probs, dp, dout, out, b, h0, rows,
	                                   sq, sk, causal, q_offset)));
}

template <typename T>
static int nonfinite_type(cudaStream_t s, kview v, unsigned long long *key)
{
	int64_t n = numel(v);
	nonfinite<T><<<blocks_for(n), THREADS, 0, s>>>(v, n, key);
	return (int)cudaGetLastError();
}

extern "C" int cfrtk_nonfinite(cudaStream_t s, cfrt_dtype t, kview v,
                               unsigned long long *key)
{
	BY_TYPE(t, nonfinite_type<T>(s, v, key));
}

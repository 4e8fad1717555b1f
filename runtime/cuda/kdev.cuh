// kdev.cuh: what the kernel files of the CUDA backend (kernels.cu,
// grad.cu) share: launch sizes, the accumulator type of each element type
// (float; double for F64) and its conversions, the math of both, and the
// row helpers (a row's offset, block reductions). Each file gets its own
// copy (an anonymous namespace); BY_TYPE dispatches a launcher on a dtype.
#ifndef CFRT_CUDA_KDEV_CUH
#define CFRT_CUDA_KDEV_CUH

#define OMPI_SKIP_MPICXX 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "kern.h"

namespace {

const int THREADS = 256;
const int64_t MAX_BLOCKS = 132 * 32;

template <typename T> struct acc { typedef float type; };
template <> struct acc<double> { typedef double type; };

__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x)
{
	return __bfloat162float(x);
}
__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_acc(float x);
template <> __device__ __forceinline__ float from_acc<float>(float x)
{
	return x;
}
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(
	float x)
{
	return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_acc<__half>(float x)
{
	return __float2half_rn(x);
}
__device__ __forceinline__ double from_acc_d(double x) { return x; }

template <typename T> __device__ __forceinline__ T store(
	typename acc<T>::type x)
{
	return from_acc<T>(x);
}
template <> __device__ __forceinline__ double store<double>(double x)
{
	return from_acc_d(x);
}

__device__ __forceinline__ float f_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double f_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float f_exp(float x) { return expf(x); }
__device__ __forceinline__ double f_exp(double x) { return exp(x); }
__device__ __forceinline__ float f_log(float x) { return logf(x); }
__device__ __forceinline__ double f_log(double x) { return log(x); }
__device__ __forceinline__ float f_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double f_sqrt(double x) { return sqrt(x); }

inline int64_t numel(const kview &v)
{
	int64_t n = 1;
	for (int d = 0; d < v.nd; d++)
		n *= v.dim[d];
	return n;
}

inline int blocks_for(int64_t n)
{
	int64_t b = (n + THREADS - 1) / THREADS;
	return (int)(b < 1 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

// a[k] of a view's dims or strides, for a k known at run time only, by
// a select unrolled over every possible dim: an array of a view indexed
// at run time is copied to a stack frame of each thread (224-336 bytes,
// ptxas -v), which cost a short call more than its data did (one
// H100: a head split's copy of 16 MiB took 0.103 ms, of 128 MiB 0.205;
// layernorm and softmax, a block a row, moved 50 GB/s against gelu's
// 2600. Without: 0.024 and 0.107 ms, 258 and 308 GB/s).
__device__ __forceinline__ int64_t kv_at(const int64_t (&a)[CFRT_MAX_DIMS], int k)
{
	int64_t x = 0;
#pragma unroll
	for (int i = 0; i < CFRT_MAX_DIMS; i++)
		if (i == k)
			x = a[i];
	return x;
}

// Offset in v of index i of the row-major index space of v's first nd
// dims, unrolled over every possible dim (kv_at says why).
__device__ __forceinline__ int64_t kv_offset(const kview &v, int nd, int64_t i)
{
	int64_t off = 0;
#pragma unroll
	for (int k = CFRT_MAX_DIMS - 1; k >= 0; k--) {
		if (k >= nd)
			continue;
		off += (i % v.dim[k]) * v.st[k];
		i /= v.dim[k];
	}
	return off;
}

// Offset of the first element of row r (rows: every index but the last).
__device__ __forceinline__ int64_t row_offset(const kview &v, int64_t r)
{
	return kv_offset(v, v.nd - 1, r);
}

// Sum (max = 0) or maximum (max = 1) over the block; every thread gets
// it. sh holds a value per warp; blockDim.x is a multiple of 32.
template <typename A>
__device__ A block_reduce(A v, A *sh, bool max)
{
	for (int o = 16; o > 0; o >>= 1) {
		A u = __shfl_xor_sync(0xffffffffu, v, o);
		v = max ? (u > v ? u : v) : v + u;
	}
	__syncthreads(); // sh is free: every thread read the last result
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	A r = sh[0];
	for (int w = 1; w < (int)(blockDim.x >> 5); w++)
		r = max ? (sh[w] > r ? sh[w] : r) : r + sh[w];
	return r;
}

// Sum over the warp; every lane gets it.
template <typename A> __device__ __forceinline__ A warp_sum(A v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// The mean over a row of n elements that a warp holds as NV 16-byte
// vectors of V elements a lane (vector k of lane l: elements
// (k * 32 + l) * V ..), those past n zero; every lane gets it. The
// warp-per-row norms, forward and backward, share it.
template <typename T, typename A, int NV, int V>
__device__ __forceinline__ A warp_row_mean(const uint4 (&vx)[NV], int64_t n)
{
	A mean = 0;
#pragma unroll
	for (int k = 0; k < NV; k++) {
		const T *e = (const T *)&vx[k];
#pragma unroll
		for (int j = 0; j < V; j++)
			mean += to_acc(e[j]);
	}
	return warp_sum(mean) / A(n);
}

// The rows a block of the warp-per-row kernels takes (a warp each).
const int WROWS = 4;

// The vectors a lane holds of a row of nv 16-byte vectors in the
// warp-per-row kernels: 1, 2, 4, 8 or 16 (32 of them a warp per round);
// 0 where the row is longer than 512 vectors.
inline int warp_nv(int64_t nv)
{
	for (int k = 1; k <= 16; k *= 2)
		if (nv <= 32 * k)
			return k;
	return 0;
}

// Threads of a block that takes one row of n elements.
inline int row_threads(int64_t n)
{
	int64_t t = (n + 31) / 32 * 32;
	return (int)(t > THREADS ? THREADS : t < 32 ? 32 : t);
}

} // namespace

// return CALL with T the element type of dtype t.
#define BY_TYPE(t, CALL)                                                  \
	switch (t) {                                                      \
	case CFRT_F32: { typedef float T; return CALL; }                  \
	case CFRT_F64: { typedef double T; return CALL; }                 \
	case CFRT_BF16: { typedef __nv_bfloat16 T; return CALL; }         \
	case CFRT_F16: { typedef __half T; return CALL; }                 \
	}                                                                 \
	return (int)cudaErrorInvalidValue

#endif /* CFRT_CUDA_KDEV_CUH */

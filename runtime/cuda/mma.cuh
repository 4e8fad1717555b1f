// mma.cuh: what the fused attention kernels (flash.cu, flash_bwd.cu)
// share: the tensor-core MMA (m16n8k16, f32 accumulation) and its
// ldmatrix fragment loads, asynchronous 16-byte copies into padded
// shared-memory tiles, the per-warp steps of FlashAttention (scores, mask,
// online softmax, P V, storing rows), and the host-side layout checks of
// their views.
// Included by .cu files only, each getting its own copy.
#ifndef CFRT_CUDA_MMA_CUH
#define CFRT_CUDA_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include "kern.h"

namespace {

// Elements after each shared-memory row: rows are (Dh + 8) * 2 bytes apart,
// 4 words mod 32, so the 8 rows an ldmatrix reads hit distinct banks.
const int PAD = 8;
// Sq, Sk and q_offset stay below this, so row + q_offset fits an int.
const int64_t MAX_ROWS = (int64_t)1 << 30;

// mma_op<T>::run: d += a b on the tensor cores (m16n8k16, f32 accumulate);
// pack: two floats rounded to T, as one 32-bit register. One definition for
// both types: they differ only in the PTX type and the conversion.
template <typename T> struct mma_op;
#define MMA_OP(T, PTX, T2, CVT2)                                               \
	template <> struct mma_op<T> {                                         \
		static __device__ __forceinline__ void run(float (&d)[4],      \
		                                           const uint32_t (&a)[4], \
		                                           uint32_t b0, uint32_t b1) \
		{                                                              \
			asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX \
			             "." PTX ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
			             "{%8,%9}, {%0,%1,%2,%3};\n"               \
			             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
			             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), \
			               "r"(b0), "r"(b1));                     \
		}                                                              \
		static __device__ __forceinline__ uint32_t pack(float lo, float hi) \
		{                                                              \
			T2 v = CVT2(lo, hi);                                   \
			uint32_t u;                                            \
			memcpy(&u, &v, 4);                                     \
			return u;                                              \
		}                                                              \
	};
MMA_OP(__nv_bfloat16, "bf16", __nv_bfloat162, __floats2bfloat162_rn)
MMA_OP(__half, "f16", __half2, __floats2half2_rn)
#undef MMA_OP

__device__ __forceinline__ unsigned smem_addr(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

// Four 8x8 matrices of 16-bit elements; lane l gives the row address of
// matrix l / 8, row l % 8; register i gets matrix i (transposed: .trans).
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
	             "{%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm4t(uint32_t (&r)[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
	             "{%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_addr(p)));
}

// 16 bytes global -> shared, asynchronous; zeros when !ok (nothing read).
__device__ __forceinline__ void cp16(void *s, const void *g, bool ok)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
	             :: "r"(smem_addr(s)), "l"(g), "r"(ok ? 16 : 0));
}

__device__ __forceinline__ void cp_commit()
{
	asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void cp_wait_all()
{
	asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// ROWS rows of DH elements from g (row stride ld) into s (row stride
// DH + PAD), by the block's THREADS threads; rows at or after valid are
// zeros, so padded keys carry no NaN into P V and padded queries give
// finite scores.
template <typename T, int DH, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(T *s, const T *g, int64_t ld,
                                          int valid)
{
	const int CH = DH / 8, N = ROWS * CH; // 16-byte chunks per row, in all
#pragma unroll
	for (int it = 0; it < (N + THREADS - 1) / THREADS; it++) {
		int i = it * THREADS + threadIdx.x, r = i / CH, c = i % CH;
		if (N % THREADS != 0 && i >= N)
			break;
		bool ok = r < valid;
		cp16(s + r * (DH + PAD) + c * 8, ok ? g + r * ld + c * 8 : g, ok);
	}
}

// S (16 x N per warp) = Q K^T: Q the warp's 16 rows as A fragments, K
// the N rows of the tile sk.
template <typename T, int DH, int N>
__device__ __forceinline__ void scores(float (&s)[N / 8][4],
                                       const uint32_t (&qf)[DH / 16][4],
                                       const T *sk, int lane)
{
	const int LD = DH + PAD;
#pragma unroll
	for (int n = 0; n < N / 8; n++)
		s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
	for (int kk = 0; kk < DH / 16; kk++)
#pragma unroll
		for (int nb = 0; nb < N / 16; nb++) {
			// matrices: keys +0..7 / +8..15 x dh +0..7 / +8..15
			uint32_t kf[4];
			ldsm4(kf, sk + (nb * 16 + (lane & 7) + (lane >> 4) * 8) * LD +
			          kk * 16 + ((lane >> 3) & 1) * 8);
			mma_op<T>::run(s[2 * nb], qf[kk], kf[0], kf[1]);
			mma_op<T>::run(s[2 * nb + 1], qf[kk], kf[2], kf[3]);
		}
}

// Masks key j of local query row i (as attn_softmax): j >= sk, and under
// causal j > i + q_offset. Element e of tile n is row r0 + 8 * (e >> 1),
// key n0 + 8 n + 2 (lane % 4) + (e & 1).
template <int N>
__device__ __forceinline__ void mask(float (&s)[N / 8][4], int sk,
                                     int causal, int q_offset, int r0,
                                     int n0, int lane)
{
#pragma unroll
	for (int n = 0; n < N / 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int j = n0 + n * 8 + 2 * (lane & 3) + (e & 1);
			int last = causal ? r0 + 8 * (e >> 1) + q_offset : sk;
			if (j >= sk || j > last)
				s[n][e] = -INFINITY;
		}
}

// Online softmax of the block: per row (r: the thread's rows lane / 4 and
// lane / 4 + 8) the running max m, the thread's part of the running sum l
// (summed over the row's 4 threads at the end) and the NO tiles of O
// rescaled to the new max (none: o may be NULL); s becomes
// exp(scale * (s - m)).
template <int N, int NO>
__device__ __forceinline__ void online_softmax(float (&s)[N / 8][4],
                                               float (*o)[4], float (&m)[2],
                                               float (&l)[2],
                                               float scale_log2)
{
#pragma unroll
	for (int r = 0; r < 2; r++) {
		float mx = m[r];
#pragma unroll
		for (int n = 0; n < N / 8; n++)
			mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
		// a row with every key masked so far keeps m = -inf, p = 0
		float ms = mx == -INFINITY ? 0.f : mx * scale_log2;
		float corr = exp2f(m[r] * scale_log2 - ms);
		m[r] = mx;
		float sum = 0.f;
#pragma unroll
		for (int n = 0; n < N / 8; n++) {
			s[n][2 * r] = exp2f(fmaf(s[n][2 * r], scale_log2, -ms));
			s[n][2 * r + 1] = exp2f(fmaf(s[n][2 * r + 1], scale_log2, -ms));
			sum += s[n][2 * r] + s[n][2 * r + 1];
		}
		l[r] = l[r] * corr + sum;
#pragma unroll
		for (int n = 0; n < NO; n++) {
			o[n][2 * r] *= corr;
			o[n][2 * r + 1] *= corr;
		}
	}
}

// O += A V for 16 rows of V at sv (row stride DH + PAD), A's fragments a
// (16 x 16 per warp).
template <typename T, int DH>
__device__ __forceinline__ void mma_rows(float (&o)[DH / 8][4],
                                         const uint32_t (&a)[4], const T *sv,
                                         int lane)
{
	const int LD = DH + PAD;
#pragma unroll
	for (int nd = 0; nd < DH / 16; nd++) {
		// transposed: keys +0..7 / +8..15 x dh +0..7 / +8..15
		uint32_t vf[4];
		ldsm4t(vf, sv + (lane & 15) * LD + nd * 16 + (lane >> 4) * 8);
		mma_op<T>::run(o[2 * nd], a, vf[0], vf[1]);
		mma_op<T>::run(o[2 * nd + 1], a, vf[2], vf[3]);
	}
}

// P (16 x N per warp, accumulator layout) as the A fragments of the next
// MMA: its values in pairs, rounded to T.
template <typename T, int N>
__device__ __forceinline__ void pack_frags(uint32_t (&f)[N / 16][4],
                                           const float (&p)[N / 8][4])
{
#pragma unroll
	for (int kc = 0; kc < N / 16; kc++) {
		f[kc][0] = mma_op<T>::pack(p[2 * kc][0], p[2 * kc][1]);
		f[kc][1] = mma_op<T>::pack(p[2 * kc][2], p[2 * kc][3]);
		f[kc][2] = mma_op<T>::pack(p[2 * kc + 1][0], p[2 * kc + 1][1]);
		f[kc][3] = mma_op<T>::pack(p[2 * kc + 1][2], p[2 * kc + 1][3]);
	}
}

// O += P V, P (16 x N per warp) in registers, V the N rows of the tile
// sv; P's accumulator layout is the A fragment layout of the next MMA once
// packed in pairs.
template <typename T, int DH, int N>
__device__ __forceinline__ void accumulate(float (&o)[DH / 8][4],
                                           const float (&p)[N / 8][4],
                                           const T *sv, int lane)
{
#pragma unroll
	for (int kc = 0; kc < N / 16; kc++) {
		uint32_t pf[4] = {
			mma_op<T>::pack(p[2 * kc][0], p[2 * kc][1]),
			mma_op<T>::pack(p[2 * kc][2], p[2 * kc][3]),
			mma_op<T>::pack(p[2 * kc + 1][0], p[2 * kc + 1][1]),
			mma_op<T>::pack(p[2 * kc + 1][2], p[2 * kc + 1][3])};
		mma_rows<T, DH>(o, pf, sv + kc * 16 * (DH + PAD), lane);
	}
}

// The same from P packed already (pack_frags).
template <typename T, int DH, int N>
__device__ __forceinline__ void accumulate(float (&o)[DH / 8][4],
                                           const uint32_t (&f)[N / 16][4],
                                           const T *sv, int lane)
{
#pragma unroll
	for (int kc = 0; kc < N / 16; kc++)
		mma_rows<T, DH>(o, f[kc], sv + kc * 16 * (DH + PAD), lane);
}

// The warp's 16 rows of o, row r (the thread's rows lane / 4 and
// lane / 4 + 8) times f[r], rounded to T, staged in the 16 rows at so
// (the warp's own) and stored to go 16 bytes at a time, rows < valid.
template <typename T, int DH>
__device__ __forceinline__ void store_rows(const float (&o)[DH / 8][4],
                                           const float (&f)[2], T *so, T *go,
                                           int64_t ld, int valid, int lane)
{
	const int LD = DH + PAD, CH = DH / 8;
	T *row = so + (lane >> 2) * LD + 2 * (lane & 3);
#pragma unroll
	for (int n = 0; n < DH / 8; n++) {
		uint32_t lo = mma_op<T>::pack(o[n][0] * f[0], o[n][1] * f[0]);
		uint32_t hi = mma_op<T>::pack(o[n][2] * f[1], o[n][3] * f[1]);
		*(uint32_t *)(row + n * 8) = lo;
		*(uint32_t *)(row + 8 * LD + n * 8) = hi;
	}
	__syncwarp();
#pragma unroll
	for (int it = 0; it < CH / 2; it++) { // 16 rows x CH chunks, 32 lanes
		int i = it * 32 + lane, r = i / CH, c = i % CH;
		if (r < valid)
			*(uint4 *)(go + r * ld + c * 8) =
				*(const uint4 *)(so + r * LD + c * 8);
	}
}

// Rows of 16-byte-aligned 16-byte chunks: the pointer and the stride of
// every dim that has more than one entry (dims 0..2) a multiple of 8.
inline bool aligned(const kview &v)
{
	if ((uintptr_t)v.p % 16)
		return false;
	for (int d = 0; d < 3; d++)
		if (v.dim[d] > 1 && v.st[d] % 8)
			return false;
	return true;
}

inline void strides(int64_t *dst, const kview &v)
{
	for (int d = 0; d < 3; d++)
		dst[d] = v.st[d];
}

} // namespace

#endif /* CFRT_CUDA_MMA_CUH */

// mma.cuh: what the fused attention kernels (flash.cu, flash_bwd.cu)
// share: the tensor-core MMA (m16n8k16, f32 accumulation) and its
// ldmatrix fragment loads, asynchronous 16-byte copies into padded
// shared-memory tiles, and the host-side layout checks of their views.
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

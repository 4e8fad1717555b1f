// flash.cu: fused forward attention (FlashAttention-2) for bf16 and f16,
// behind kern.h's cfrtk_flash_attn.
// requires: q, k, v, out passed cfrti_attn_check (row stride in st[2]).
// ensures: out = softmax(q k^T / sqrt(Dh) [+ causal mask]) v, as the
// two-GEMM path of gemm.c computes it, without the scores leaving the chip.
// A CTA takes BM query rows of one (b, h), a warp 16 of them; per block of
// BN keys, S = Q K^T and O += P V run on the tensor cores (mma.sync
// m16n8k16 from ldmatrix fragments, f32 accumulation), the softmax online
// in f32 (running max and sum per row), P rounded to the input type as the
// GEMM path rounds its probabilities. Key blocks wholly above the causal
// diagonal are never loaded; O is normalised and written once, and, when
// asked (cfrt_attention_lse), each row's log-sum-exp from its running max
// and sum.
#define OMPI_SKIP_MPICXX 1
#include <math.h>

#include "kern.h"
#include "mma.cuh"

namespace {

const int BM = 128;           // query rows per CTA
const int BN = 64;            // keys per block
const int THREADS = BM / 16 * 32;

struct attn_args {
	const char *q, *k, *v;
	char *o;
	float *lse;                         // NULL: not written
	int64_t qs[3], ks[3], vs[3], os[3]; // b, h, row strides (elements)
	int64_t ls[3];                      // lse's b, h, row strides
	int nh, nqb;                        // heads, query blocks per head
	int grp;                            // query heads per key/value head
	int sq, sk, causal, q_offset;
	float scale_log2;                   // log2(e) / sqrt(Dh)
};

// The warp's 16 rows of O / l (l summed over each row's 4 threads first),
// staged in its rows of sq (Q is in registers by then); with gl (the
// lse of the warp's first row, row stride ls), each row's natural
// log-sum-exp (m the row's max score, l its sum of exp2 of the scaled
// differences), by the row's first thread.
template <typename T, int DH>
__device__ __forceinline__ void store_out(const float (&o)[DH / 8][4],
                                          const float (&m)[2], float (&l)[2],
                                          float scale_log2, T *so, T *go,
                                          int64_t ld, float *gl, int64_t ls,
                                          int valid, int lane)
{
	float inv[2];
#pragma unroll
	for (int r = 0; r < 2; r++) {
		l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
		l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
		inv[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
		int row = (lane >> 2) + 8 * r;
		if (gl && (lane & 3) == 0 && row < valid)
			gl[row * ls] = (m[r] * scale_log2 + log2f(l[r])) *
			               0.6931471805599453f;
	}
	store_rows<T, DH>(o, inv, so, go, ld, valid, lane);
}

// One CTA: query block qb of head bh. Blocks run head by head (the CTAs
// resident together share K and V in L2), the most causal work first.
// Pipeline (FA2): K_j lands while P V_{j-1} runs, V_j while S_j runs.
template <typename T, int DH>
__global__ void __launch_bounds__(THREADS, 1) flash_fwd(attn_args a)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int LD = DH + PAD;
	T *sq = (T *)smem, *sk = sq + BM * LD, *sv = sk + BN * LD;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int64_t bh = blockIdx.x / a.nqb, b = bh / a.nh, h = bh % a.nh;
	int q0 = (a.nqb - 1 - (int)(blockIdx.x % a.nqb)) * BM;
	const T *gq = (const T *)a.q + b * a.qs[0] + h * a.qs[1] +
	              q0 * a.qs[2];
	const T *gk = (const T *)a.k + b * a.ks[0] + h / a.grp * a.ks[1];
	const T *gv = (const T *)a.v + b * a.vs[0] + h / a.grp * a.vs[1];
	int kend = a.sk;
	if (a.causal)
		kend = min(kend, min(q0 + BM, a.sq) + a.q_offset);
	int nblk = (kend + BN - 1) / BN;

	load_tile<T, DH, BM, THREADS>(sq, gq, a.qs[2], a.sq - q0);
	load_tile<T, DH, BN, THREADS>(sk, gk, a.ks[2], a.sk);
	cp_commit();
	cp_wait_all();
	__syncthreads();
	uint32_t qf[DH / 16][4];
#pragma unroll
	for (int kk = 0; kk < DH / 16; kk++)
		ldsm4(qf[kk], sq + (warp * 16 + (lane & 15)) * LD + kk * 16 +
		              (lane >> 4) * 8);

	float o[DH / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
	for (int n = 0; n < DH / 8; n++)
		o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
	int r0 = q0 + warp * 16 + (lane >> 2); // local query row of s[.][0..1]
	for (int j = 0; j < nblk; j++) {
		int n0 = j * BN;
		load_tile<T, DH, BN, THREADS>(sv, gv + n0 * a.vs[2], a.vs[2], a.sk - n0);
		cp_commit();
		float s[BN / 8][4];
		scores<T, DH, BN>(s, qf, sk, lane);
		if (n0 + BN > a.sk || (a.causal && n0 + BN - 1 > q0 + a.q_offset))
			mask<BN>(s, a.sk, a.causal, a.q_offset, r0, n0, lane);
		online_softmax<BN, DH / 8>(s, o, m, l, a.scale_log2);
		cp_wait_all();
		__syncthreads(); // V_j is in; every warp is done with K_j
		if (j + 1 < nblk) {
			load_tile<T, DH, BN, THREADS>(sk, gk + (n0 + BN) * a.ks[2], a.ks[2],
			                     a.sk - n0 - BN);
			cp_commit();
		}
		accumulate<T, DH, BN>(o, s, sv, lane);
		cp_wait_all();
		__syncthreads(); // K_{j+1} is in; every warp is done with V_j
	}
	T *go = (T *)a.o + b * a.os[0] + h * a.os[1] +
	        (q0 + warp * 16) * a.os[2];
	float *gl = a.lse ? a.lse + b * a.ls[0] + h * a.ls[1] +
	                    (q0 + warp * 16) * a.ls[2] : NULL;
	store_out<T, DH>(o, m, l, a.scale_log2, sq + warp * 16 * LD, go, a.os[2],
	                 gl, a.ls[2], a.sq - q0 - warp * 16, lane);
}

template <typename T, int DH>
int launch(cudaStream_t s, const attn_args &a, int blocks)
{
	const void *f = (const void *)flash_fwd<T, DH>;
	int smem = (BM + 2 * BN) * (DH + PAD) * (int)sizeof(T);
	cudaError_t e = cudaFuncSetAttribute(
		f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
	if (e != cudaSuccess)
		return (int)e;
	flash_fwd<T, DH><<<blocks, THREADS, smem, s>>>(a);
	return (int)cudaGetLastError();
}

template <typename T>
int launch_dh(cudaStream_t s, int64_t dh, const attn_args &a, int blocks)
{
	switch (dh) {
	case 16: return launch<T, 16>(s, a, blocks);
	case 32: return launch<T, 32>(s, a, blocks);
	case 48: return launch<T, 48>(s, a, blocks);
	case 64: return launch<T, 64>(s, a, blocks);
	case 80: return launch<T, 80>(s, a, blocks);
	case 96: return launch<T, 96>(s, a, blocks);
	case 112: return launch<T, 112>(s, a, blocks);
	case 128: return launch<T, 128>(s, a, blocks);
	}
	return (int)cudaErrorNotSupported;
}

} // namespace

extern "C" int cfrtk_flash_attn(cudaStream_t s, cfrt_dtype t, kview out,
                                kview q, kview k, kview v, int causal,
                                int64_t q_offset, kview lse)
{
	int64_t nbh = q.dim[0] * q.dim[1], sq = q.dim[2], sk = k.dim[2];
	int64_t dh = q.dim[3], nqb = (sq + BM - 1) / BM;
	if ((t != CFRT_BF16 && t != CFRT_F16) || sq >= MAX_ROWS ||
	    sk >= MAX_ROWS || sk < 1 || nbh * nqb > 0x7fffffff ||
	    !aligned(out) || !aligned(q) || !aligned(k) || !aligned(v))
		return (int)cudaErrorNotSupported;
	if (nbh * nqb == 0)
		return (int)cudaSuccess;
	attn_args a;
	a.q = q.p;
	a.k = k.p;
	a.v = v.p;
	a.o = out.p;
	a.lse = (float *)lse.p;
	strides(a.ls, lse);
	strides(a.qs, q);
	strides(a.ks, k);
	strides(a.vs, v);
	strides(a.os, out);
	a.nh = (int)q.dim[1];
	a.grp = (int)(q.dim[1] / k.dim[1]);
	a.nqb = (int)nqb;
	a.sq = (int)sq;
	a.sk = (int)sk;
	// every query at or past the last key sees all keys: no mask
	a.causal = causal && q_offset < sk - 1;
	a.q_offset = a.causal ? (int)q_offset : 0;
	a.scale_log2 = (float)(1.4426950408889634 / sqrt((double)dh));
	int blocks = (int)(nbh * nqb);
	if (t == CFRT_BF16)
		return launch_dh<__nv_bfloat16>(s, dh, a, blocks);
	return launch_dh<__half>(s, dh, a, blocks);
}

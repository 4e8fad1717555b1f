// flash_bwd.cu: fused backward attention (FlashAttention-2) for bf16 and
// f16, behind kern.h's cfrtk_flash_attn_grad.
// requires: the views passed cfrti_attn_grad_check (row stride in st[2]).
// ensures: the dq, dk and dv of cfrt_attention_grad that are asked for, as
// the GEMM path of gemm.c computes them, without P or dS leaving the chip,
// in three launches:
//  1. row_stats: per query row the log-sum-exp of its masked scaled scores
//     (S = Q K^T with the running max and sum of the forward kernel) and
//     delta = rowsum(dout * out), f32, into the workspace; given the
//     forward's log-sum-exp (cfrt_attention_grad_lse), lse_stats instead:
//     delta and that lse in log2 units, no score computed;
//  2. flash_bwd: a CTA takes BN keys of one (b, h), a warp 16 of them, and
//     walks the query blocks that see them (causal: from the diagonal on),
//     BM queries at a time, Q and dO of the next block landing while this
//     one runs: S^T = K Q^T, P^T = exp(S^T / sqrt(Dh) - lse),
//     dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - delta),
//     dK += dS^T Q, on the tensor cores from ldmatrix fragments (P^T and
//     dS^T rounded to the input type, and dS^T computed from the rounded
//     P^T, as the GEMM path does; f32 accumulation); dS^T goes through shared memory for dQ += dS K,
//     added to an f32 sum in the workspace with atomics (so dq's rounding
//     may differ from run to run); dk and dv are scaled and written once;
//  3. dq_store: dq = that sum / sqrt(Dh), rounded to the input type.
#define OMPI_SKIP_MPICXX 1
#include <math.h>

#include "kern.h"
#include "mma.cuh"

namespace {

const int BN = 128;               // keys per CTA (flash_bwd)
const int BM = 64;                // queries per step (flash_bwd)
const int THREADS = BN / 16 * 32; // a warp per 16 keys
const int SM = 128;               // query rows per CTA (row_stats)
const int SN = 64;                // keys per block (row_stats)
const int DS_LD = BM + PAD;       // row stride of the dS^T tile
static_assert(SM / 16 * 32 == THREADS && SM * 2 == THREADS,
              "row_stats: a warp per 16 rows, two threads per row's delta");
static_assert(BM / 16 * 2 == THREADS / 32,
              "dQ: each 16 query rows by two warps");

struct grad_args {
	const char *q, *k, *v, *o, *g;      // g: dout
	char *dq, *dk, *dv;                 // NULL: not computed
	int64_t qs[3], ks[3], vs[3], os[3]; // b, h, row strides (elements)
	int64_t gs[3], dqs[3], dks[3], dvs[3];
	float *dq_sum; // [bh][Sq][Dh], zeroed; NULL without dq
	float *lse;    // [bh][Sq]: log2 of the row's sum of exp2(s scale_log2)
	float *delta;  // [bh][Sq]: rowsum(dout * out)
	const float *lse_in; // the forward's natural lse [B,H,Sq], or NULL
	int64_t lis[3];      // its b, h, row strides
	int nh, nqb, nkb; // heads, row_stats' query blocks, key blocks
	int nkh, grp;     // key/value heads, query heads each serves
	int sq, sk, causal, q_offset;
	float scale, scale_log2; // 1 / sqrt(Dh), log2(e) / sqrt(Dh)
};

__device__ __forceinline__ float f32(__nv_bfloat16 x)
{
	return __bfloat162float(x);
}

__device__ __forceinline__ float f32(__half x)
{
	return __half2float(x);
}

// ---- 1. row statistics -------------------------------------------------

// rowsum(dout * out) of row r (local), two threads a row, 16 bytes a load.
template <typename T, int DH>
__device__ __forceinline__ float row_delta(const grad_args &a, int64_t b,
                                           int64_t h, int r, int half)
{
	float d = 0.f;
	if (r < a.sq) {
		const T *o = (const T *)a.o + b * a.os[0] + h * a.os[1] +
		             r * a.os[2] + half * DH / 2;
		const T *g = (const T *)a.g + b * a.gs[0] + h * a.gs[1] +
		             r * a.gs[2] + half * DH / 2;
#pragma unroll
		for (int c = 0; c < DH / 16; c++) {
			uint4 uo = ((const uint4 *)o)[c], ug = ((const uint4 *)g)[c];
			const T *eo = (const T *)&uo, *eg = (const T *)&ug;
#pragma unroll
			for (int e = 0; e < 8; e++)
				d = fmaf(f32(eo[e]), f32(eg[e]), d);
		}
	}
	return d + __shfl_xor_sync(0xffffffffu, d, 1);
}

// One CTA: SM query rows of head bh, the most causal work first. S = Q K^T
// key block by key block (the next one landing meanwhile), masked, into
// the running max and sum of each row as the forward kernel keeps them.
template <typename T, int DH>
__global__ void __launch_bounds__(THREADS, 1) row_stats(grad_args a)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int LD = DH + PAD;
	T *sq = (T *)smem, *sk = sq + SM * LD; // sk: two blocks of SN keys
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int64_t bh = blockIdx.x / a.nqb, b = bh / a.nh, h = bh % a.nh;
	int q0 = (a.nqb - 1 - (int)(blockIdx.x % a.nqb)) * SM;
	const T *gk = (const T *)a.k + b * a.ks[0] + h / a.grp * a.ks[1];
	int kend = a.sk;
	if (a.causal)
		kend = min(kend, min(q0 + SM, a.sq) + a.q_offset);
	int nblk = (kend + SN - 1) / SN;

	load_tile<T, DH, SM, THREADS>(sq, (const T *)a.q + b * a.qs[0] +
	                              h * a.qs[1] + q0 * a.qs[2], a.qs[2],
	                              a.sq - q0);
	load_tile<T, DH, SN, THREADS>(sk, gk, a.ks[2], a.sk);
	cp_commit();
	cp_wait_all();
	__syncthreads();
	uint32_t qf[DH / 16][4];
#pragma unroll
	for (int kk = 0; kk < DH / 16; kk++)
		ldsm4(qf[kk], sq + (warp * 16 + (lane & 15)) * LD + kk * 16 +
		              (lane >> 4) * 8);
	float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
	int r0 = q0 + warp * 16 + (lane >> 2);
	for (int j = 0; j < nblk; j++) {
		int n0 = j * SN;
		if (j + 1 < nblk) {
			load_tile<T, DH, SN, THREADS>(sk + ((j + 1) & 1) * SN * LD,
			                              gk + (n0 + SN) * a.ks[2],
			                              a.ks[2], a.sk - n0 - SN);
			cp_commit();
		}
		float s[SN / 8][4];
		scores<T, DH, SN>(s, qf, sk + (j & 1) * SN * LD, lane);
		if (n0 + SN > a.sk || (a.causal && n0 + SN - 1 > q0 + a.q_offset))
			mask<SN>(s, a.sk, a.causal, a.q_offset, r0, n0, lane);
		online_softmax<SN, 0>(s, NULL, m, l, a.scale_log2);
		cp_wait_all();
		__syncthreads(); // block j + 1 is in; every warp is done with j
	}
	float *lse = a.lse + bh * a.sq;
#pragma unroll
	for (int r = 0; r < 2; r++) {
		l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
		l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
		// no key at all (never for a real row): P = exp2(-inf) = 0
		float v = l[r] > 0.f ? m[r] * a.scale_log2 + log2f(l[r]) : INFINITY;
		if ((lane & 3) == 0 && r0 + 8 * r < a.sq)
			lse[r0 + 8 * r] = v;
	}
	int r = q0 + threadIdx.x / 2;
	float d = row_delta<T, DH>(a, b, h, r, threadIdx.x & 1);
	if ((threadIdx.x & 1) == 0 && r < a.sq)
		a.delta[bh * a.sq + r] = d;
}

// One CTA: SM query rows of head bh, two threads a row: delta, and the
// forward's natural lse times log2(e), the statistics row_stats makes.
template <typename T, int DH>
__global__ void __launch_bounds__(THREADS) lse_stats(grad_args a)
{
	int64_t bh = blockIdx.x / a.nqb, b = bh / a.nh, h = bh % a.nh;
	int r = (int)(blockIdx.x % a.nqb) * SM + threadIdx.x / 2;
	float d = row_delta<T, DH>(a, b, h, r, threadIdx.x & 1);
	if ((threadIdx.x & 1) == 0 && r < a.sq) {
		a.delta[bh * a.sq + r] = d;
		a.lse[bh * a.sq + r] = a.lse_in[b * a.lis[0] + h * a.lis[1] +
		                                r * a.lis[2]] * 1.4426950408889634f;
	}
}

// ---- 2. the backward proper --------------------------------------------

// acc (16 x N per warp) = A B^T for the warp's 16 rows at sa and the N
// rows at sb, both [rows][DH] tiles; A's fragments are loaded per step of
// 16 (registers hold the dK and dV sums).
template <typename T, int DH, int N>
__device__ __forceinline__ void gemm_nt(float (&acc)[N / 8][4], const T *sa,
                                        const T *sb, int lane)
{
	const int LD = DH + PAD;
#pragma unroll
	for (int n = 0; n < N / 8; n++)
		acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
	for (int kk = 0; kk < DH / 16; kk++) {
		uint32_t af[4];
		ldsm4(af, sa + (lane & 15) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
		for (int nb = 0; nb < N / 16; nb++) {
			uint32_t bf[4];
			ldsm4(bf, sb + (nb * 16 + (lane & 7) + (lane >> 4) * 8) * LD +
			          kk * 16 + ((lane >> 3) & 1) * 8);
			mma_op<T>::run(acc[2 * nb], af, bf[0], bf[1]);
			mma_op<T>::run(acc[2 * nb + 1], af, bf[2], bf[3]);
		}
	}
}

// S^T (16 keys x BM queries per warp) becomes P^T = exp2(s scale_log2 -
// lse); element e of tile n is key kr0 + 8 (e >> 1), query column
// c = 8 n + 2 (lane % 4) + (e & 1) of the block at q0. edge: the block
// holds a key >= Sk, a query >= Sq or a causally masked pair, which get 0.
__device__ __forceinline__ void probs(float (&s)[BM / 8][4], const float *lse,
                                      const grad_args &a, int kr0, int q0,
                                      bool edge, int lane)
{
#pragma unroll
	for (int n = 0; n < BM / 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int c = n * 8 + 2 * (lane & 3) + (e & 1), kr = kr0 + 8 * (e >> 1);
			float p = exp2f(fmaf(s[n][e], a.scale_log2, -lse[c]));
			if (edge && (kr >= a.sk || q0 + c >= a.sq ||
			             (a.causal && kr > q0 + c + a.q_offset)))
				p = 0.f;
			s[n][e] = p;
		}
}

// Two elements of T in a register (pack's inverse).
__device__ __forceinline__ float2 unpack(__nv_bfloat16, uint32_t u)
{
	__nv_bfloat162 v;
	memcpy(&v, &u, 4);
	return __bfloat1622float2(v);
}

__device__ __forceinline__ float2 unpack(__half, uint32_t u)
{
	__half2 v;
	memcpy(&v, &u, 4);
	return __half22float2(v);
}

// dP^T becomes dS^T = P^T (dP^T - delta), delta of the query column, from
// P^T as rounded to T (pf: its A fragments, pack_frags' layout), as the
// GEMM path computes dS from its rounded probabilities.
template <typename T>
__device__ __forceinline__ void dscores(float (&ds)[BM / 8][4],
                                        const uint32_t (&pf)[BM / 16][4],
                                        const float *delta, int lane)
{
#pragma unroll
	for (int n = 0; n < BM / 8; n++)
#pragma unroll
		for (int r = 0; r < 2; r++) { // rows lane / 4 and lane / 4 + 8
			float2 p = unpack(T(), pf[n / 2][(n & 1) * 2 + r]);
			int c = n * 8 + 2 * (lane & 3);
			ds[n][2 * r] = p.x * (ds[n][2 * r] - delta[c]);
			ds[n][2 * r + 1] = p.y * (ds[n][2 * r + 1] - delta[c + 1]);
		}
}

// The warp's 16 rows of dS^T (its A fragments f) into its rows of sds.
__device__ __forceinline__ void store_ds(uint16_t *sds,
                                         const uint32_t (&f)[BM / 16][4],
                                         int lane)
{
	uint16_t *row = sds + (lane >> 2) * DS_LD + 2 * (lane & 3);
#pragma unroll
	for (int n = 0; n < BM / 8; n++) {
		*(uint32_t *)(row + n * 8) = f[n / 2][(n & 1) * 2];
		*(uint32_t *)(row + 8 * DS_LD + n * 8) = f[n / 2][(n & 1) * 2 + 1];
	}
}

// dQ of the query block at q0 += dS K: dS (BM x BN) read transposed from
// sds (dS^T, BN rows), K from sk. Warp w takes the 16 queries 16 (w % 4)..
// and the 16-column chunks w / 4, w / 4 + 2, ... of Dh; f32 atomics add
// them into the rows < Sq of the sum.
template <typename T, int DH>
__device__ __forceinline__ void add_dq(float *sum, const T *sds, const T *sk,
                                       int q0, int sq, int warp, int lane)
{
	const int LD = DH + PAD;
	int rg = warp & 3, r = q0 + rg * 16 + (lane >> 2);
	for (int c = warp >> 2; c < DH / 16; c += 2) {
		float o[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
		for (int kc = 0; kc < BN / 16; kc++) {
			// A transposed: keys +0..7 / +8..15 x queries +0..7 / +8..15
			uint32_t af[4], bf[4];
			ldsm4t(af, sds + (kc * 16 + (lane & 7) + (lane >> 4) * 8) *
			           DS_LD + rg * 16 + ((lane >> 3) & 1) * 8);
			ldsm4t(bf, sk + (kc * 16 + (lane & 15)) * LD + c * 16 +
			           (lane >> 4) * 8);
			mma_op<T>::run(o[0], af, bf[0], bf[1]);
			mma_op<T>::run(o[1], af, bf[2], bf[3]);
		}
#pragma unroll
		for (int j = 0; j < 2; j++) {
			float *p = sum + (int64_t)r * DH + c * 16 + j * 8 + 2 * (lane & 3);
			if (r < sq)
				atomicAdd((float2 *)p, make_float2(o[j][0], o[j][1]));
			if (r + 8 < sq)
				atomicAdd((float2 *)(p + 8 * DH),
				          make_float2(o[j][2], o[j][3]));
		}
	}
}

// Q and dO rows q0.. of head (b, h) into the tiles (asynchronous; zeros
// from Sq on), their lse and delta into slse and sdelta (lse +inf from Sq
// on, so that P = 0 there).
template <typename T, int DH>
__device__ __forceinline__ void load_queries(const grad_args &a, int64_t b,
                                             int64_t h, int64_t bh, int q0,
                                             T *sq, T *sg, float *slse,
                                             float *sdelta)
{
	load_tile<T, DH, BM, THREADS>(sq, (const T *)a.q + b * a.qs[0] +
	                              h * a.qs[1] + q0 * a.qs[2], a.qs[2],
	                              a.sq - q0);
	load_tile<T, DH, BM, THREADS>(sg, (const T *)a.g + b * a.gs[0] +
	                              h * a.gs[1] + q0 * a.gs[2], a.gs[2],
	                              a.sq - q0);
	int i = threadIdx.x, r = q0 + i;
	if (i < BM) {
		slse[i] = r < a.sq ? a.lse[bh * a.sq + r] : INFINITY;
		sdelta[i] = r < a.sq ? a.delta[bh * a.sq + r] : 0.f;
	}
}

// One CTA: keys n0..n0+BN of key/value head bk, blocks of a head together
// (they share Q and dO in L2), the most causal work (the first keys)
// first; with grouped-query attention the CTA goes through the query
// heads of its key/value head one after the other, summing their dk, dv.
template <typename T, int DH>
__global__ void __launch_bounds__(THREADS, 1) flash_bwd(grad_args a)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int LD = DH + PAD;
	T *sk = (T *)smem, *sv = sk + BN * LD;
	T *sq = sv + BN * LD, *sg = sq + 2 * BM * LD; // two blocks each
	T *sds = sg + 2 * BM * LD;
	float *slse = (float *)(sds + BN * DS_LD), *sdelta = slse + 2 * BM;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int64_t bk = blockIdx.x / a.nkb, b = bk / a.nkh, kh = bk % a.nkh;
	int n0 = (int)(blockIdx.x % a.nkb) * BN;
	// causal: query i sees key n0 from q_offset + i >= n0 on
	int first = a.causal ? max(0, n0 - a.q_offset) / BM : 0;
	int nqb = (a.sq + BM - 1) / BM;

	load_tile<T, DH, BN, THREADS>(sk, (const T *)a.k + b * a.ks[0] +
	                              kh * a.ks[1] + n0 * a.ks[2], a.ks[2],
	                              a.sk - n0);
	load_tile<T, DH, BN, THREADS>(sv, (const T *)a.v + b * a.vs[0] +
	                              kh * a.vs[1] + n0 * a.vs[2], a.vs[2],
	                              a.sk - n0);
	float dk[DH / 8][4], dv[DH / 8][4];
#pragma unroll
	for (int n = 0; n < DH / 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			dk[n][e] = dv[n][e] = 0.f;
	int kr0 = n0 + warp * 16 + (lane >> 2); // key of p[.][0..1]
	for (int t = 0; t < a.grp; t++) {
		int64_t h = kh * a.grp + t, bh = b * a.nh + h;
		float *dq_sum = a.dq_sum ? a.dq_sum + bh * a.sq * DH : NULL;
		if (first < nqb)
			load_queries<T, DH>(a, b, h, bh, first * BM, sq, sg, slse, sdelta);
		cp_commit();
		cp_wait_all();
		__syncthreads();
		for (int qb = first; qb < nqb; qb++) {
			int cur = (qb - first) & 1, q0 = qb * BM;
			T *cq = sq + cur * BM * LD, *cg = sg + cur * BM * LD;
			if (qb + 1 < nqb) {
				int nx = cur ^ 1;
				load_queries<T, DH>(a, b, h, bh, q0 + BM, sq + nx * BM * LD,
				                    sg + nx * BM * LD, slse + nx * BM,
				                    sdelta + nx * BM);
				cp_commit();
			}
			bool edge = n0 + BN > a.sk || q0 + BM > a.sq ||
			            (a.causal && n0 + BN - 1 > q0 + a.q_offset);
			float p[BM / 8][4], ds[BM / 8][4];
			uint32_t pf[BM / 16][4], dsf[BM / 16][4];
			gemm_nt<T, DH, BM>(p, sk + warp * 16 * LD, cq, lane);
			probs(p, slse + cur * BM, a, kr0, q0, edge, lane);
			pack_frags<T, BM>(pf, p);
			if (a.dv)
				accumulate<T, DH, BM>(dv, pf, cg, lane);
			if (a.dk || dq_sum) {
				gemm_nt<T, DH, BM>(ds, sv + warp * 16 * LD, cg, lane);
				dscores<T>(ds, pf, sdelta + cur * BM, lane);
				pack_frags<T, BM>(dsf, ds);
			}
			if (a.dk)
				accumulate<T, DH, BM>(dk, dsf, cq, lane);
			if (dq_sum) {
				store_ds((uint16_t *)sds + warp * 16 * DS_LD, dsf, lane);
				__syncthreads(); // all of dS^T is in
				add_dq<T, DH>(dq_sum, sds, sk, q0, a.sq, warp, lane);
			}
			cp_wait_all();
			__syncthreads(); // the next block is in; every warp is done
			                 // with this one and with sds
		}
	}
	// staged in the warp's own rows of sk and sv, read by nobody now
	int valid = a.sk - n0 - warp * 16;
	if (a.dk) {
		float f[2] = {a.scale, a.scale};
		store_rows<T, DH>(dk, f, sk + warp * 16 * LD, (T *)a.dk +
		                  b * a.dks[0] + kh * a.dks[1] +
		                  (n0 + warp * 16) * a.dks[2], a.dks[2], valid, lane);
	}
	if (a.dv) {
		float f[2] = {1.f, 1.f};
		store_rows<T, DH>(dv, f, sv + warp * 16 * LD, (T *)a.dv +
		                  b * a.dvs[0] + kh * a.dvs[1] +
		                  (n0 + warp * 16) * a.dvs[2], a.dvs[2], valid, lane);
	}
}

// ---- 3. dq -------------------------------------------------------------

// dq = the f32 sum / sqrt(Dh), 8 elements (16 bytes out) a thread.
template <typename T, int DH>
__global__ void dq_store(grad_args a, int64_t n8)
{
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
	     i += step) {
		int64_t e = i * 8, row = e / DH, c = e % DH;
		int64_t bh = row / a.sq, r = row % a.sq, b = bh / a.nh, h = bh % a.nh;
		float4 x = ((const float4 *)(a.dq_sum + e))[0];
		float4 y = ((const float4 *)(a.dq_sum + e))[1];
		float s = a.scale;
		uint4 u = {mma_op<T>::pack(x.x * s, x.y * s),
		           mma_op<T>::pack(x.z * s, x.w * s),
		           mma_op<T>::pack(y.x * s, y.y * s),
		           mma_op<T>::pack(y.z * s, y.w * s)};
		*(uint4 *)((T *)a.dq + b * a.dqs[0] + h * a.dqs[1] + r * a.dqs[2] +
		           c) = u;
	}
}

// ---- launch ------------------------------------------------------------

template <typename T, int DH>
int launch(cudaStream_t s, const grad_args &a, int64_t nbh)
{
	const int LD = DH + PAD;
	int smem_s = (SM + 2 * SN) * LD * (int)sizeof(T);
	int smem_b = ((2 * BN + 4 * BM) * LD + BN * DS_LD) * (int)sizeof(T) +
	             4 * BM * (int)sizeof(float);
	const void *fs = (const void *)row_stats<T, DH>;
	const void *fb = (const void *)flash_bwd<T, DH>;
	cudaError_t e = a.lse_in ? cudaSuccess : cudaFuncSetAttribute(
		fs, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_s);
	if (e == cudaSuccess)
		e = cudaFuncSetAttribute(
			fb, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_b);
	if (e == cudaSuccess && a.dq_sum)
		e = cudaMemsetAsync(a.dq_sum, 0, (size_t)(nbh * a.sq * DH) *
		                    sizeof(float), s);
	if (e != cudaSuccess)
		return (int)e;
	if (a.lse_in)
		lse_stats<T, DH><<<(int)(nbh * a.nqb), THREADS, 0, s>>>(a);
	else
		row_stats<T, DH><<<(int)(nbh * a.nqb), THREADS, smem_s, s>>>(a);
	flash_bwd<T, DH><<<(int)(nbh / a.grp * a.nkb), THREADS, smem_b, s>>>(a);
	if (a.dq_sum) {
		int64_t n8 = nbh * a.sq * DH / 8, blocks = (n8 + 255) / 256;
		dq_store<T, DH><<<(int)(blocks < 132 * 32 ? blocks : 132 * 32), 256,
		                  0, s>>>(a, n8);
	}
	return (int)cudaGetLastError();
}

template <typename T>
int launch_dh(cudaStream_t s, int64_t dh, const grad_args &a, int64_t nbh)
{
	switch (dh) {
	case 16: return launch<T, 16>(s, a, nbh);
	case 32: return launch<T, 32>(s, a, nbh);
	case 48: return launch<T, 48>(s, a, nbh);
	case 64: return launch<T, 64>(s, a, nbh);
	case 80: return launch<T, 80>(s, a, nbh);
	case 96: return launch<T, 96>(s, a, nbh);
	case 112: return launch<T, 112>(s, a, nbh);
	case 128: return launch<T, 128>(s, a, nbh);
	}
	return (int)cudaErrorNotSupported;
}

// The kernels' conditions (kern.h): type, Dh, sizes, alignment.
bool applies(cfrt_dtype t, const kgrad &g)
{
	int64_t nbh = g.q.dim[0] * g.q.dim[1], sq = g.q.dim[2], sk = g.k.dim[2];
	int64_t dh = g.q.dim[3];
	const kview *need[] = {&g.q, &g.k, &g.v, &g.out, &g.dout};
	const kview *opt[] = {&g.dq, &g.dk, &g.dv};
	bool ok = (t == CFRT_BF16 || t == CFRT_F16) && dh % 16 == 0 &&
	          dh >= 16 && dh <= 128 && sq < MAX_ROWS && sk < MAX_ROWS &&
	          sk >= 1 && nbh * ((sq + SM - 1) / SM) <= 0x7fffffff &&
	          nbh * ((sk + BN - 1) / BN) <= 0x7fffffff;
	for (int i = 0; ok && i < 5; i++)
		ok = aligned(*need[i]);
	for (int i = 0; ok && i < 3; i++)
		ok = !opt[i]->p || aligned(*opt[i]);
	return ok;
}

} // namespace

extern "C" size_t cfrtk_flash_attn_grad_ws(cfrt_dtype t, const kgrad *g)
{
	if (!applies(t, *g))
		return 0;
	int64_t rows = g->q.dim[0] * g->q.dim[1] * g->q.dim[2];
	return (size_t)(rows * (2 + (g->dq.p ? g->q.dim[3] : 0))) * sizeof(float);
}

extern "C" int cfrtk_flash_attn_grad(cudaStream_t s, cfrt_dtype t,
                                     const kgrad *g, int causal,
                                     int64_t q_offset, void *ws)
{
	int64_t nbh = g->q.dim[0] * g->q.dim[1], sq = g->q.dim[2];
	int64_t sk = g->k.dim[2], dh = g->q.dim[3];
	if (!applies(t, *g))
		return (int)cudaErrorNotSupported;
	if (nbh * sq == 0)
		return (int)cudaSuccess;
	grad_args a;
	a.q = g->q.p, a.k = g->k.p, a.v = g->v.p, a.o = g->out.p, a.g = g->dout.p;
	a.dq = g->dq.p, a.dk = g->dk.p, a.dv = g->dv.p;
	a.lse_in = (const float *)g->lse.p;
	strides(a.lis, g->lse);
	strides(a.qs, g->q);
	strides(a.ks, g->k);
	strides(a.vs, g->v);
	strides(a.os, g->out);
	strides(a.gs, g->dout);
	strides(a.dqs, g->dq);
	strides(a.dks, g->dk);
	strides(a.dvs, g->dv);
	float *f = (float *)ws;
	a.dq_sum = a.dq ? f : NULL;
	a.lse = f + (a.dq ? nbh * sq * dh : 0);
	a.delta = a.lse + nbh * sq;
	a.nh = (int)g->q.dim[1];
	a.nkh = (int)g->k.dim[1];
	a.grp = a.nh / a.nkh;
	a.nqb = (int)((sq + SM - 1) / SM);
	a.nkb = (int)((sk + BN - 1) / BN);
	a.sq = (int)sq;
	a.sk = (int)sk;
	// every query at or past the last key sees all keys: no mask
	a.causal = causal && q_offset < sk - 1;
	a.q_offset = a.causal ? (int)q_offset : 0;
	a.scale = (float)(1.0 / sqrt((double)dh));
	a.scale_log2 = (float)(1.4426950408889634 / sqrt((double)dh));
	if (t == CFRT_BF16)
		return launch_dh<__nv_bfloat16>(s, dh, a, nbh);
	return launch_dh<__half>(s, dh, a, nbh);
}

/* verify_cells.c: what the verifier's machine (verify.c) tracks of each
 * slot of each buffer: a cell, the set of ranks whose contributions it
 * holds (a bitset from a pool), copied, rotated, merged and printed.
 * Below verify.c and verify_setup.c, which use it (it calls neither).
 * requires: a V set up by vf_init (its pool sized for its ranks).
 * ensures: a cell's bits are only ever those of the ranks that
 * contributed to it; vf_union reports a contribution counted twice. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "verify.h"

/* ---- buffers and cells (errors: vf_fail, verify_base.c) ---- */

const Buf *
vf_buf(const V *v, int b)
{
	return v->c->bufs.v[b];
}

/* ---- contributor sets ---- */

static uint64_t *
vf_pool(const V *v, int m)
{
	return v->pool + (size_t)m * (size_t)v->W;
}

static int
vf_mask(const Cell *c)
{
	return c->org <= ORG_MULTI ? ORG_MULTI - c->org : -1;
}

void
vf_drop(V *v, Cell *c)
{
	int m = vf_mask(c);

	if (m >= 0) {
		vf_pool(v, m)[0] = (uint64_t)v->freepool;
		v->freepool = m;
	}
	c->org = ORG_NONE;
}

static int
vf_pool_new(V *v)
{
	if (v->freepool >= 0) {
		int m = v->freepool;
		v->freepool = (int)vf_pool(v, m)[0];
		return m;
	}
	v->pool = arena_grow(v->t, v->pool, v->npool, &v->cappool, 64, (size_t)v->W * sizeof *v->pool);
	return v->npool++;
}

static void
vf_bits(const V *v, const Cell *c, uint64_t *out)
{
	memset(out, 0, (size_t)v->W * sizeof *out);
	if (c->org >= 0)
		out[c->org / 64] = 1ULL << (c->org % 64);
	else if (vf_mask(c) >= 0)
		memcpy(out, vf_pool(v, vf_mask(c)), (size_t)v->W * sizeof *out);
	else if (c->org == ORG_ALL)
		for (int q = 0; q < v->N; q++)
			out[q / 64] |= 1ULL << (q % 64);
}

static int
vf_count(const V *v, const uint64_t *b)
{
	int n = 0;

	for (int w = 0; w < v->W; w++)
		n += __builtin_popcountll(b[w]);
	return n;
}

/* Sets the contributors of c from a bitset, in the most compact form (one
 * rank before all: with N = 1 they are the same). */
static void
vf_set_bits(V *v, Cell *c, const uint64_t *b)
{
	int n = vf_count(v, b);

	vf_drop(v, c);
	if (n == 1) {
		for (int w = 0; w < v->W; w++)
			if (b[w])
				c->org = w * 64 + __builtin_ctzll(b[w]);
	} else if (n > 1 && n == v->N) {
		c->org = ORG_ALL;
	} else if (n > 1) {
		int m = vf_pool_new(v);
		c->org = ORG_MULTI - m;
		memcpy(vf_pool(v, m), b, (size_t)v->W * sizeof *b);
	}
}

void
vf_copy(V *v, Cell *dst, const Cell *src)
{
	if (vf_mask(src) < 0) {
		vf_drop(v, dst);
		dst->slice = src->slice;
		dst->org = src->org;
		return;
	}
	vf_bits(v, src, v->t1);
	dst->slice = src->slice;
	vf_set_bits(v, dst, v->t1);
}

/* dst = src turned by d ranks: its slice's owner and every contributor
 * q become q + d (mod N). dst is a fresh cell: drop it after use. */
void
vf_turn(V *v, Cell *dst, const Cell *src, int d)
{
	int N = v->N;

	*dst = (Cell){src->slice < 0 ? -1 : sched_turn(v->c, src->slice, d), ORG_NONE, 0, 0};
	if (src->org >= 0) {
		dst->org = sched_mod(src->org + d, N);
	} else if (src->org == ORG_ALL || src->org == ORG_NONE) {
		dst->org = src->org;
	} else {
		vf_bits(v, src, v->t1);
		memset(v->t2, 0, (size_t)v->W * sizeof *v->t2);
		for (int w = 0; w < v->W; w++)
			for (uint64_t b = v->t1[w]; b; b &= b - 1) {
				int q = sched_mod(w * 64 + __builtin_ctzll(b) + d, N);
				v->t2[q / 64] |= 1ULL << (q % 64);
			}
		vf_set_bits(v, dst, v->t2);
	}
}

/* dst's contributors += src's; 0 when they overlap (counted twice). */
int
vf_union(V *v, Cell *dst, const Cell *src)
{
	int slice = dst->slice;

	if (src->org == ORG_NONE)
		return 1;
	if (dst->org == ORG_NONE) {
		vf_copy(v, dst, src);
		dst->slice = slice;
		return 1;
	}
	vf_bits(v, dst, v->t1);
	vf_bits(v, src, v->t2);
	for (int w = 0; w < v->W; w++) {
		if (v->t1[w] & v->t2[w])
			return 0;
		v->t1[w] |= v->t2[w];
	}
	vf_set_bits(v, dst, v->t1);
	return 1;
}

/* Buffers holding a value produced before the stage start out with this
 * rank's part of every slice they hold. */
int
vf_outside(const Coll *c, const Buf *b)
{
	if (b->kind != BK_VALUE || b->v == c->node->out)
		return 0;
	for (int k = 0; k < c->region.n; k++)
		if (((RNode *)c->region.v[k])->node->out == b->v)
			return 0;
	return 1;
}

/* The result every rank must hold in slot (part, s) of the output. */
int
vf_expect(const V *v, int part, int s)
{
	switch (v->c->node->op) {
	case OP_ALL_GATHER:
		return s / (v->c->nslices / v->N);
	case OP_ALL_TO_ALL:
		return part;
	default:
		return ORG_ALL;
	}
}

/* Does c hold exactly the contributors org (a rank or ORG_ALL)? Sets are
 * canonical, so this compares codes; with N = 1, rank 0 is all. */
int
vf_same(const V *v, const Cell *c, int org)
{
	return c->org == org || (v->N == 1 && org == ORG_ALL && c->org == 0);
}

/* "slice 3 from ranks {0,2}" for messages. */
const char *
vf_cell_str(V *v, const Cell *c, char *buf, size_t n)
{
	if (c->slice < 0)
		return "nothing";
	int k = snprintf(buf, n, "slice %d from ", c->slice);
	if (c->org == ORG_ALL || c->org == ORG_NONE) {
		snprintf(buf + k, n - (size_t)k, c->org == ORG_ALL ? "every rank" : "no rank (zero)");
		return buf;
	}
	vf_bits(v, c, v->t1);
	k += snprintf(buf + k, n - (size_t)k, "ranks {");
	for (int q = 0, first = 1; q < v->N && (size_t)k + 16 < n; q++)
		if (v->t1[q / 64] >> (q % 64) & 1)
			k += snprintf(buf + k, n - (size_t)k, "%s%d", first ? "" : ",", q), first = 0;
	snprintf(buf + k, n - (size_t)k, "}");
	return buf;
}

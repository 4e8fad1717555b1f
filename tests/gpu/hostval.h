/* hostval.h: the GPU checks' reading of device values on the host.
 * host_elem: element j of a host copy h of a buffer of type t (f32, f16
 * or bf16; f64 too), as a double. host_fill: n elements of type t at
 * dev filled on the device (cfrt_fill_uniform, seed) and their copy
 * into h, so that a double reference starts from the values the device
 * holds. */
#ifndef HOSTVAL_H
#define HOSTVAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cfrt.h"

static inline double host_elem(cfrt_dtype t, const void *h, int64_t j)
{
	const unsigned char *p = h;
	uint16_t b;
	uint32_t u;
	float f;
	double d;

	if (t == CFRT_F64) {
		memcpy(&d, p + 8 * j, 8);
		return d;
	}
	if (t == CFRT_F32) {
		memcpy(&f, p + 4 * j, 4);
		return f;
	}
	memcpy(&b, p + 2 * j, 2);
	if (t == CFRT_F16) { /* sign, 5 exponent bits (bias 15), 10 */
		int ex = b >> 10 & 31, man = b & 1023;
		double m = ex ? ldexp(1024 + man, ex - 25) : ldexp(man, -24);
		return ex == 31 ? (man ? NAN : INFINITY) * (b >> 15 ? -1 : 1)
		                : b >> 15 ? -m : m;
	}
	u = (uint32_t)b << 16; /* bf16: the top half of an f32 */
	memcpy(&f, &u, 4);
	return f;
}

static inline void host_fill(cfrt_ctx *ctx, cfrt_dtype t, void *dev, int64_t n, void *h,
                             uint64_t seed)
{
	cfrt_view all = cfrt_view_contig(dev, t, 1, &n);
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &all, seed));
	CFRT_TRY(ctx, cfrt_download(ctx, h, dev, (size_t)n * cfrt_dtype_size(t)));
}

#endif

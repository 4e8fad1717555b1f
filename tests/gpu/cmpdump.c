/* cmpdump: compares two output dumps of the driver (--dump: native
 * doubles, outputs whole, in table order) element by element.
 * usage: cmpdump GOT REF TOL
 * Prints "err=E n=N" with E = max |got - ref| / max |ref| over all elements
 * (a NaN or a length mismatch counts as infinite) and exits 0 when
 * E <= TOL, 1 when not, 2 on a usage or file error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double *load(const char *path, long *n)
{
	FILE *f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0) {
		perror(path);
		exit(2);
	}
	long bytes = ftell(f);
	rewind(f);
	*n = bytes / (long)sizeof(double);
	double *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
	if (!v || fread(v, sizeof *v, (size_t)*n, f) != (size_t)*n) {
		perror(path);
		exit(2);
	}
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	long n, m;
	if (argc != 4) {
		fprintf(stderr, "usage: cmpdump GOT REF TOL\n");
		return 2;
	}
	double *got = load(argv[1], &n), *ref = load(argv[2], &m);
	double tol = atof(argv[3]), diff = 0, big = 0;
	if (n != m || n == 0)
		diff = INFINITY;
	for (long i = 0; n == m && i < n; i++) {
		double d = fabs(got[i] - ref[i]);
		diff = d == d && diff == diff ? fmax(diff, d) : INFINITY;
		big = fmax(big, fabs(ref[i]));
	}
	double err = big > 0 ? diff / big : diff;
	printf("err=%.3e n=%ld\n", err, n);
	free(got);
	free(ref);
	return err <= tol ? 0 : 1;
}

/* util.c: the arena that owns a compilation, growable vectors, fatal errors,
 * the tables generated from ops.def and DTYPES, and the names of roles and
 * topologies.
 * ensures: arena memory is zeroed and lives until arena_free. */
#include <stdlib.h>
#include <string.h>

#include "cf.h"

enum { CHUNK = 64 * 1024 };

typedef struct Block Block;
struct Block {
	Block *next;
	size_t used, cap;
	max_align_t data[];
};

struct Arena {
	Block *head;
	Arena *scratch; /* arena_scratch's, freed with this one */
};

const char *const dtype_name[NDTYPE] = {
	"none",
#define X(id, s, n) s,
	DTYPES(X)
#undef X
};

const int dtype_size[NDTYPE] = {
	0,
#define X(id, s, n) n,
	DTYPES(X)
#undef X
};

const char *const role_name[NROLE] = {"in", "weight", "act", "out"};

const char *const topo_name[NTOPO] = {"ring", "bidir", "pairwise"};

const OpInfo op_info[NOP] = {
/* spec: the op has an inference rule, so a spec may call it (the infer
 * column spelt NULL, as a token, is the only name that short). */
#define OP(id, name, lo, hi, cls, tensors, infer, emit, vjp) \
	{name, lo, hi, cls, tensors, sizeof #infer != sizeof "NULL"},
#include "ops.def"
#undef OP
};

int
op_lookup(const char *name)
{
	for (int i = 0; i < NOP; i++)
		if (strcmp(op_info[i].name, name) == 0 && op_info[i].spec)
			return i;
	return -1;
}

int
op_attn(OpKind op)
{
	return op_info[op].cls == CL_ATTN || op_info[op].cls == CL_ATTN_GRAD;
}

int
op_pos(const Node *n)
{
	if (op_attn(n->op))
		return n->a.causal;
	return n->op == OP_ROPE || n->op == OP_ROPE_GRAD;
}

int
op_pos_dim(const Node *n)
{
	if (n->op == OP_ROPE || n->op == OP_ROPE_GRAD)
		return n->a.rope.dim;
	return n->in[0]->ndim - 2;
}

int64_t
op_causal_shift(const Node *n)
{
	if (!op_attn(n->op) || !n->a.causal)
		return 0;
	int d = n->in[0]->ndim - 2;
	return n->in[1]->shape[d] - n->in[0]->shape[d];
}

_Noreturn void
die_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "cfc: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(70);
}

static void *
xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

Arena *
arena_new(void)
{
	Arena *a = xmalloc(sizeof *a);

	a->head = NULL;
	a->scratch = NULL;
	return a;
}

void *
arena_alloc(Arena *a, size_t n)
{
	size_t al = sizeof(max_align_t);
	Block *b = a->head;

	n = (n + al - 1) / al * al;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > CHUNK ? n : CHUNK;

		b = xmalloc(sizeof *b + cap);
		b->used = 0;
		b->cap = cap;
		b->next = a->head;
		a->head = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	memset(p, 0, n);
	return p;
}

char *
arena_strndup(Arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

char *
arena_strdup(Arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *
arena_printf(Arena *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("bad format %s", fmt);
	char *p = arena_alloc(a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void
arena_free(Arena *a)
{
	if (!a)
		return;
	arena_free(a->scratch);
	for (Block *b = a->head, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	free(a);
}

Arena *
arena_scratch(Arena *a)
{
	if (!a->scratch)
		a->scratch = arena_new();
	return a->scratch;
}

ArenaMark
arena_mark(Arena *a)
{
	return (ArenaMark){a->head, a->head ? a->head->used : 0};
}

void
arena_release(Arena *a, ArenaMark m)
{
	while (a->head && a->head != m.block) {
		Block *next = a->head->next;
		free(a->head);
		a->head = next;
	}
	if (a->head)
		a->head->used = m.used;
}

void *
arena_grow(Arena *a, void *p, int n, int *cap, int first, size_t sz)
{
	if (n < *cap)
		return p;
	int c = *cap ? 2 * *cap : first;
	void *q = arena_alloc(a, (size_t)c * sz);
	if (n)
		memcpy(q, p, (size_t)n * sz);
	*cap = c;
	return q;
}

/* Grows by doubling inside the arena; the old array is simply left behind. */
static size_t
str_hash(const char *s)
{
	size_t h = 14695981039346656037u; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

/* The slot of key, or of the empty place where it would go. */
static size_t
strmap_slot(const StrMap *m, const char *key)
{
	size_t i = str_hash(key) & (m->cap - 1);

	while (m->key[i] && strcmp(m->key[i], key))
		i = (i + 1) & (m->cap - 1);
	return i;
}

void *
strmap_get(const StrMap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	size_t i = strmap_slot(m, key);
	return m->key[i] ? m->val[i] : NULL;
}

void *
strmap_put(Arena *a, StrMap *m, const char *key, void *val)
{
	if (2 * (m->n + 1) > m->cap) { /* at most half full */
		StrMap b = {NULL, NULL, 0, m->cap ? 2 * m->cap : 16};
		b.key = arena_alloc(a, b.cap * sizeof *b.key);
		b.val = arena_alloc(a, b.cap * sizeof *b.val);
		for (size_t j = 0; j < m->cap; j++)
			if (m->key[j]) {
				size_t i = strmap_slot(&b, m->key[j]);
				b.key[i] = m->key[j];
				b.val[i] = m->val[j];
			}
		b.n = m->n;
		*m = b;
	}
	size_t i = strmap_slot(m, key);
	if (m->key[i])
		return m->val[i];
	m->key[i] = key;
	m->val[i] = val;
	m->n++;
	return NULL;
}

void
vec_push(Arena *a, Vec *v, void *p)
{
	if (v->n == v->cap) {
		int cap = v->cap ? 2 * v->cap : 8;
		void **nv = arena_alloc(a, (size_t)cap * sizeof *nv);

		if (v->n)
			memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
		v->v = nv;
		v->cap = cap;
	}
	v->v[v->n++] = p;
}

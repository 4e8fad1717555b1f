/* sema_names.c: scopes and name lookup (with "did you mean" hints and
 * notes for names used before their definition or out of a layer's sight),
 * and the text of messages: expressions as written, shapes, distributions.
 * requires: a Sema with its diagnostics. ensures: a name is defined once
 * per scope; every lookup failure is reported once, at its use. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sema.h"

/* ---- text for messages ---- */

static const char *
expr_print(Sema *S, const Expr *e)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		die("open_memstream failed");
	ast_print_expr(f, e);
	fclose(f);
	const char *s = arena_strndup(S->a, buf, len);
	free(buf);
	return s;
}

/* The source span of e: binary operators carry their operator's loc. */
static Loc
span(const Expr *e)
{
	Loc l = e->loc, x;

	switch (e->kind) {
	case E_BIN:
		x = span(e->u.bin.l);
		l.line = x.line, l.col = x.col;
		x = span(e->u.bin.r);
		l.eline = x.eline, l.ecol = x.ecol;
		break;
	case E_TRANS:
		x = span(e->u.un);
		if (x.line < l.line || (x.line == l.line && x.col < l.col))
			l.line = x.line, l.col = x.col;
		break;
	default:
		break;
	}
	return l;
}

static int
balanced(const char *s, size_t n)
{
	int depth = 0;

	for (size_t i = 0; i < n && depth >= 0; i++)
		depth += (s[i] == '(') - (s[i] == ')');
	return depth == 0;
}

/* e as the user wrote it when it sits on one line, else printed. */
const char *
sema_text(Sema *S, const Expr *e)
{
	const Src *src = S->d->src;
	Loc l = span(e);
	const char *p;
	size_t len;

	if (S->forcing || !src || !src->text || l.line <= 0 || l.line != l.eline ||
	    l.col <= 0 || l.ecol < l.col || !(p = diag_line(src, l.line, &len)))
		return expr_print(S, e);
	size_t n = (size_t)(l.ecol - l.col + 1);
	if ((size_t)l.ecol > len || !balanced(p + l.col - 1, n))
		return expr_print(S, e);
	return arena_strndup(S->a, p + l.col - 1, n);
}

/* A tensor for messages: its name, or the text of its expression. */
const char *
sema_desc(Sema *S, const char *name, const Expr *e)
{
	return name ? name : sema_text(S, e);
}

const char *
sema_shape_str(Sema *S, const Value *v)
{
	char buf[MAXDIM * 24 + 4];
	size_t n = 0;

	buf[n++] = '[';
	for (int d = 0; d < v->ndim; d++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%lld", d ? "," : "",
		                      (long long)v->shape[d]);
	snprintf(buf + n, sizeof buf - n, "]");
	return arena_strdup(S->a, buf);
}

/* "replicated", "split along S over tp", "a partial sum over tp"; over
 * several groups "split along B over dp and S over tp", "split along B
 * over dp and a partial sum over tp", "a partial sum over tp and dp" */
const char *
sema_dist_desc(Sema *S, const Value *v)
{
	const char *s = "";

	for (int d = 0; d < v->ndim; d++) {
		const Group *g = dist_split_group(&v->dist, d);
		if (g)
			s = arena_printf(S->a, "%s%s%s over %s", s, *s ? " and " : "split along ",
			                 value_dim_name(S->a, v, d), g->name);
	}
	int np = dist_count(&v->dist, DI_PARTIAL), k = 0;
	for (int i = 0; i < MAXGROUPS; i++)
		if (v->dist.p[i].kind == DI_PARTIAL)
			s = arena_printf(S->a, "%s%s%s", s, k++ == 0 ? (*s ? " and a partial sum over " :
			                 "a partial sum over ") : k == np ? " and " : ", ",
			                 v->dist.p[i].group->name);
	return *s ? s : "replicated";
}

/* ---- names ---- */

static int
edit_distance(const char *a, const char *b)
{
	size_t n = strlen(b);
	int row[MAXIDENT + 2];

	if (n > MAXIDENT || strlen(a) > MAXIDENT)
		return INT_MAX;
	for (size_t j = 0; j <= n; j++)
		row[j] = (int)j;
	for (size_t i = 1; a[i - 1]; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= n; j++) {
			int up = row[j];
			int best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[n];
}

/* Keeps the closer of *best and cand as a "did you mean" for name. */
void
sema_closer(const char *name, const char *cand, const char **best, int *bestd)
{
	int d = edit_distance(name, cand);

	if (d > 0 && d <= 2 && d < (int)strlen(name) && d < *bestd) {
		*best = cand;
		*bestd = d;
	}
}

Sym *
sema_scope_find(const Scope *sc, const char *name)
{
	for (int i = 0; i < sc->syms.n; i++) {
		Sym *s = sc->syms.v[i];
		if (strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

Sym *
sema_lookup(const Scope *sc, const char *name)
{
	Sym *s = sema_scope_find(sc, name);

	if (!s && sc->model && (s = sema_scope_find(sc->model, name)) && s->kind == SY_VALUE)
		s = NULL;
	return s;
}

LayerInfo *
sema_find_layer(Sema *S, const char *name)
{
	for (int i = 0; i < S->layers.n; i++) {
		LayerInfo *li = S->layers.v[i];
		if (strcmp(li->decl->name, name) == 0)
			return li;
	}
	return NULL;
}

static const char *
hint_name(const Scope *sc, const char *name)
{
	const char *best = NULL;
	int bestd = INT_MAX;

	for (const Scope *s = sc; s; s = s->model)
		for (int i = 0; i < s->syms.n; i++) {
			const Sym *y = s->syms.v[i];
			if (s == sc || y->kind != SY_VALUE)
				sema_closer(name, y->name, &best, &bestd);
		}
	return best;
}

/* The name's definition later in body, if any: a use before it. */
static const Loc *
defined_later(const Decl *dc, const char *name)
{
	for (int i = 0; dc && i < dc->body.n; i++) {
		const Stmt *st = dc->body.v[i];
		if ((st->kind == S_SIZE || st->kind == S_GROUP || st->kind == S_ASSIGN) &&
		    strcmp(st->u.def.name, name) == 0)
			return &st->u.def.nloc;
		if (st->kind == S_TENSOR && strcmp(st->u.tensor.name, name) == 0)
			return &st->u.tensor.nloc;
	}
	return NULL;
}

void
sema_unknown(Sema *S, const Scope *sc, Loc loc, const char *name)
{
	const Sym *ms = sc->model ? sema_scope_find(sc->model, name) : NULL;
	const char *hint = ms ? NULL : hint_name(sc, name);
	const Loc *later;
	const LayerInfo *li;

	if (hint)
		diag_error(S->d, loc, "unknown name '%s'; did you mean '%s'?", name, hint);
	else
		diag_error(S->d, loc, "unknown name '%s'", name);
	if (ms)
		diag_note(S->d, ms->loc, "'%s' is a tensor of model %s; a layer sees "
		          "only its parameters and its own tensors", name, S->model->name);
	else if ((later = defined_later(sc->decl, name)) ||
	         (sc->model && (later = defined_later(S->model, name))))
		diag_note(S->d, *later, "'%s' is defined here, after its use", name);
	else if ((li = sema_find_layer(S, name)))
		diag_note(S->d, li->decl->nloc,
		          "'%s' is a layer: call it, as in %s(x)", name, name);
}

/* Adds a name to sc. A duplicate is reported and gets a Sym that nothing
 * can find, so callers need not care. */
Sym *
sema_define(Sema *S, Scope *sc, const char *name, Loc loc, SymKind k)
{
	Sym *old = sema_lookup(sc, name), *s = arena_alloc(S->a, sizeof *s);

	s->name = name;
	s->kind = k;
	s->loc = loc;
	if (old) {
		diag_error(S->d, loc, "duplicate name '%s'", name);
		diag_note(S->d, old->loc, "'%s' was first defined here", name);
		return s;
	}
	vec_push(S->a, &sc->syms, s);
	return s;
}

const char *
sema_qualify(Sema *S, const Scope *sc, const char *name)
{
	return sc->path ? arena_printf(S->a, "%s.%s", sc->path, name) : name;
}

const char *
sema_kind_noun(SymKind k)
{
	return k == SY_SIZE ? "a size" : k == SY_GROUP ? "a group" : "a tensor";
}

/* ---- names in the generated C ---- */

/* Every name that reaches the generated C (cnames.c): the model's, each
 * tensor's (its output name for an output), and no two tensors spelt
 * alike there (a layer instance's mlp0.w1 and a tensor mlp0_w1). */
/* Where v's name is written. */
static Loc
value_at(const Value *v)
{
	return v->nloc.line ? v->nloc : v->loc;
}

void
sema_cnames(Sema *S)
{
	const Graph *g = S->g;
	const char *why = cname_model_refused(S->a, g->name);
	StrMap seen = {0}; /* C spelling -> the first value spelt so */

	if (why)
		diag_error(S->d, S->model->nloc, "model %s cannot name the generated C: %s", g->name,
		           why);
	for (int i = 0; i < g->values.n; i++) {
		const Value *v = g->values.v[i];
		const char *c = value_cname(S->a, v), *n = value_uname(v);
		if ((why = cname_refused(S->a, c, g->name))) {
			diag_error(S->d, value_at(v), "%s cannot name a tensor of the generated C%s: %s",
			           n, strcmp(n, c) ? arena_printf(S->a, " (as %s)", c) : "", why);
			continue;
		}
		const Value *w = strmap_put(S->a, &seen, c, (void *)v);
		if (w) {
			diag_error(S->d, value_at(v), "%s and %s are both %s in the generated C",
			           value_uname(w), n, c);
			diag_note(S->d, value_at(w), "the first is here");
		}
	}
	/* the header's macros: X_RANK_DIMS of tensor x_RANK is the
	 * RANK_DIMS of tensor x */
	for (int i = 0; i < g->values.n; i++) {
		const Value *v = g->values.v[i];
		const char *c = value_cname(S->a, v);
		size_t n = strlen(c);
		if (v->role == R_ACT || n <= 5 || strcmp(c + n - 5, "_RANK"))
			continue;
		const Value *w = strmap_get(&seen, arena_strndup(S->a, c, n - 5));
		if (w && w->role != R_ACT)
			diag_error(S->d, value_at(v), "%s and %s would both define the header's "
			           "%s_RANK_DIMS", c, value_cname(S->a, w), value_cname(S->a, w));
	}
}

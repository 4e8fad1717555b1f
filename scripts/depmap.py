#!/usr/bin/python3
"""depmap.py: the map of includes and calls among compiler/, codegen/, cli/
and runtime/, read from the sources (no build needed).

  scripts/depmap.py              the map: circles, upward arrows, big files
  scripts/depmap.py --edges      every edge, with what carries it
  scripts/depmap.py --check FILE exit 1 on a circle or upward arrow that
                                 FILE (tests/depmap.allow) does not list
  --root DIR                     map the tree at DIR (default: this one's)

Nodes are source files. A header x.h is one node with x.c (or x.cu) beside
it: it is that file's interface. A header with no such file (cf.h, cfrt.h)
or one shared by a package of x_*.c files (sema.h, verify.h) is a node of
its own. Edges:
  include   a file includes "h" (resolved in its folder, then in compiler/,
            codegen/, cli/, runtime/; generated headers are not mapped);
  call      a file names a function or variable that another file defines
            (not static), among the files that link together: the compiler
            (compiler/, codegen/, cli/); each runtime backend (runtime/mpi
            or runtime/cuda with runtime/common); runtime/tools with both
            backends and cli/outfile.c.
A circle is a set of two or more nodes that reach each other. An upward
arrow is an edge from a file of compiler/ to a node that reaches back to
it (an edge inside a circle), or from compiler/ to codegen/ or cli/.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ["compiler", "codegen", "cli", "runtime", "runtime/common",
        "runtime/mpi", "runtime/cuda", "runtime/tools"]
SRC_EXT = (".c", ".cu")
HDR_EXT = (".h", ".cuh", ".def")
INC_DIRS = ["compiler", "codegen", "cli", "runtime"]
BIG = 1000

KEYWORDS = set("""auto break case char const continue default do double else
enum extern float for goto if inline int long register restrict return short
signed sizeof static struct switch typedef union unsigned void volatile while
_Bool _Complex _Noreturn _Static_assert _Thread_local __global__ __device__
__host__ __forceinline__ template typename namespace using class public
private operator new delete true false bool""".split())


def files():
	out = []
	for d in DIRS:
		p = os.path.join(ROOT, d)
		if not os.path.isdir(p):
			continue
		for f in sorted(os.listdir(p)):
			if f.endswith(SRC_EXT + HDR_EXT):
				out.append(d + "/" + f)
	return out


def strip(text):
	"""Comments, string and character literals and preprocessor lines
	blanked (newlines kept)."""
	out = []
	i, n = 0, len(text)
	bol = True
	while i < n:
		c = text[i]
		if bol and c == "#":
			# a preprocessor line, with its continuations
			while i < n and text[i] != "\n":
				if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
					i += 2
					out.append("\n")
					continue
				i += 1
			continue
		if c == "/" and text.startswith("/*", i):
			j = text.find("*/", i + 2)
			j = n if j < 0 else j + 2
			out.append("\n" * text.count("\n", i, j) or " ")
			i = j
			continue
		if c == "/" and text.startswith("//", i):
			j = text.find("\n", i)
			i = n if j < 0 else j
			continue
		if c in "\"'":
			j = i + 1
			while j < n and text[j] != c and text[j] != "\n":
				j += 2 if text[j] == "\\" else 1
			out.append(" ")
			i = j + 1
			continue
		bol = c == "\n" or (bol and c in " \t")
		out.append(c)
		i += 1
	return "".join(out)


TOKEN = re.compile(r"[A-Za-z_]\w*|\S")


def definitions(code):
	"""The functions and variables a file defines at file scope, not
	static: {name}."""
	toks = TOKEN.findall(code)
	defs = set()
	depth = 0
	stmt = []   # tokens at depth 0 since the last ; or }
	i = 0
	while i < len(toks):
		t = toks[i]
		if t == "{":
			if depth == 0 and stmt and stmt[-1] == "extern":
				stmt = []   # extern "C" { ... }: its contents at file scope
				i += 1
				continue
			if depth == 0:
				fn = function_name(stmt)
				if fn and "static" not in stmt and "typedef" not in stmt:
					defs.add(fn)
			depth += 1
		elif t == "}":
			depth = max(0, depth - 1)
			if depth == 0 and not stmt_is_initialiser(stmt):
				stmt = []
			i += 1
			continue
		elif depth == 0 and t == ";":
			v = variable_name(stmt)
			if v:
				defs.add(v)
			stmt = []
		if depth == 0 and t not in "{;":
			stmt.append(t)
		i += 1
	return defs


def function_name(stmt):
	"""NAME of `... NAME ( ... )` ending stmt, or None."""
	if not stmt or stmt[-1] != ")":
		return None
	level = 0
	for k in range(len(stmt) - 1, -1, -1):
		if stmt[k] == ")":
			level += 1
		elif stmt[k] == "(":
			level -= 1
			if level == 0:
				if k > 0 and re.match(r"[A-Za-z_]\w*$", stmt[k - 1]) \
				   and stmt[k - 1] not in KEYWORDS and "=" not in stmt[:k]:
					return stmt[k - 1]
				return None
	return None


def stmt_is_initialiser(stmt):
	return "=" in stmt


def variable_name(stmt):
	if not stmt or stmt[0] in ("typedef", "extern", "static", "struct",
	                           "enum", "union") and "=" not in stmt:
		return None
	if "static" in stmt or "typedef" in stmt or "extern" in stmt:
		return None
	head = stmt[:stmt.index("=")] if "=" in stmt else stmt
	if "(" in head:
		return None
	while head and head[-1] == "]":
		k = len(head) - 1 - head[::-1].index("[")
		head = head[:k]
	if len(head) >= 2 and re.match(r"[A-Za-z_]\w*$", head[-1]) \
	   and head[-1] not in KEYWORDS:
		return head[-1]
	return None


INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# The head of a function a macro defines from a table's row: `int
# cfrt_##name(` in a #define that the rows of an included X-macro file
# (runtime/common/ew.def) expand.
TABLE_DEF = re.compile(r"^[ \t]*((?:[A-Za-z_]\w*[ \t]+)+)\**[ \t]*"
                       r"([A-Za-z_]\w*)##\w+[ \t]*\(", re.M)
ROW = re.compile(r"^\s*[A-Z_]+\(\s*([A-Za-z_]\w*)", re.M)


def table_definitions(src, text, known):
	"""The functions src defines through the rows of the .def files it
	includes: PREFIX + the row's first column for each `TYPE PREFIX##x(`
	line of a macro (not static, not a call)."""
	heads = [m.group(2) for m in TABLE_DEF.finditer(text)
	         if not {"static", "return"} & set(m.group(1).split())]
	if not heads:
		return set()
	out = set()
	for inc in INCLUDE.findall(text):
		p = resolve(src, inc, known)
		if not p or not p.endswith(".def"):
			continue
		with open(os.path.join(ROOT, p), encoding="utf-8",
		          errors="replace") as fh:
			rows = ROW.findall(strip(fh.read()))
		out |= {h + r for h in heads for r in rows}
	return out


def resolve(src, name, known):
	for d in [os.path.dirname(src)] + INC_DIRS:
		p = os.path.normpath(os.path.join(d, name))
		if p in known:
			return p
	return None


def group_of(path):
	"""The link groups a file belongs to (whose definitions it may call)."""
	d = os.path.dirname(path)
	if d in ("compiler", "codegen", "cli"):
		return {"compiler", "codegen", "cli"}
	if d == "runtime/mpi":
		return {"runtime/mpi", "runtime/common"}
	if d == "runtime/cuda":
		return {"runtime/cuda", "runtime/common"}
	if d == "runtime/common":
		return {"runtime/common", "runtime/mpi", "runtime/cuda"}
	if d == "runtime/tools":
		return {"runtime/tools", "runtime/common", "runtime/mpi",
		        "runtime/cuda", "cli/outfile.c"}
	return {d}


def in_group(path, grp):
	return os.path.dirname(path) in grp or path in grp


def owner_map(all_files):
	"""header -> the node it belongs to."""
	own = {}
	names = set(all_files)
	for f in all_files:
		base, ext = os.path.splitext(f)
		if ext not in HDR_EXT:
			own[f] = f
			continue
		pkg = any(os.path.dirname(g) == os.path.dirname(f) and
		          os.path.basename(g).startswith(os.path.basename(base) + "_")
		          and g.endswith(SRC_EXT) for g in names)
		mate = [base + e for e in SRC_EXT if base + e in names]
		own[f] = mate[0] if mate and not pkg else f
	return own


def build():
	all_files = files()
	known = set(all_files)
	own = owner_map(all_files)
	code, idents, defs, lines = {}, {}, {}, {}
	for f in all_files:
		with open(os.path.join(ROOT, f), encoding="utf-8",
		          errors="replace") as fh:
			text = fh.read()
		lines[f] = text.count("\n")
		code[f] = text
		s = strip(text)
		idents[f] = set(re.findall(r"[A-Za-z_]\w*", s))
		defs[f] = definitions(s) if f.endswith(SRC_EXT) else set()
	for f in all_files:
		if f.endswith(SRC_EXT):
			defs[f] |= table_definitions(f, code[f], known)
	definers = {}
	for f, ds in defs.items():
		for d in ds:
			definers.setdefault(d, []).append(f)
	edges = {}   # (node, node) -> set of reasons

	def add(a, b, why):
		a, b = own[a], own[b]
		if a != b:
			edges.setdefault((a, b), set()).add(why)
	for f in all_files:
		for inc in INCLUDE.findall(code[f]):
			p = resolve(f, inc, known)
			if p:
				add(f, p, "includes " + inc)
		if not f.endswith(SRC_EXT):
			continue
		grp = group_of(f)
		for name in idents[f] - defs[f]:
			for g in definers.get(name, ()):
				if in_group(g, grp):
					add(f, g, name)
	nodes = sorted(set(own.values()))
	return nodes, edges, lines, own


def sccs(nodes, edges):
	succ = {n: [] for n in nodes}
	for a, b in edges:
		succ[a].append(b)
	index, low, stack, on, out = {}, {}, [], set(), []
	counter = [0]
	sys.setrecursionlimit(10000)

	def visit(v):
		index[v] = low[v] = counter[0]
		counter[0] += 1
		stack.append(v)
		on.add(v)
		for w in succ[v]:
			if w not in index:
				visit(w)
				low[v] = min(low[v], low[w])
			elif w in on:
				low[v] = min(low[v], index[w])
		if low[v] == index[v]:
			comp = []
			while True:
				w = stack.pop()
				on.discard(w)
				comp.append(w)
				if w == v:
					break
			out.append(sorted(comp))
	for v in nodes:
		if v not in index:
			visit(v)
	return out


def measure():
	nodes, edges, lines, own = build()
	comps = [c for c in sccs(nodes, edges) if len(c) > 1]
	where = {n: i for i, c in enumerate(comps) for n in c}
	circles = sorted(" ".join(c) for c in comps)
	ups = []
	for (a, b), why in sorted(edges.items()):
		if not a.startswith("compiler/"):
			continue
		same = a in where and where.get(b) == where[a]
		layer = b.startswith(("codegen/", "cli/"))
		if same or layer:
			ups.append((a, b, sorted(why)))
	big = sorted(((n, f) for f, n in lines.items() if n > BIG), reverse=True)
	return nodes, edges, circles, ups, big


def main(argv):
	global ROOT
	if "--root" in argv:
		ROOT = argv[argv.index("--root") + 1]
	nodes, edges, circles, ups, big = measure()
	if "--edges" in argv:
		for (a, b), why in sorted(edges.items()):
			print("%s -> %s: %s" % (a, b, ", ".join(sorted(why))))
		return 0
	if "--check" in argv:
		allow_file = argv[argv.index("--check") + 1]
		allowed = set()
		with open(allow_file) as fh:
			for line in fh:
				line = line.split("#", 1)[0].strip()
				if line:
					allowed.add(" ".join(line.split()))
		bad = 0
		for c in circles:
			if "circle: " + c not in allowed:
				print("new circle: " + c)
				bad += 1
		for a, b, why in ups:
			if "up: %s -> %s" % (a, b) not in allowed:
				print("new upward arrow: %s -> %s (%s)"
				      % (a, b, ", ".join(why)))
				bad += 1
		return 1 if bad else 0
	print("nodes %d, edges %d" % (len(nodes), len(edges)))
	print("circles: %d" % len(circles))
	for c in circles:
		print("circle: " + c)
	print("upward arrows: %d" % len(ups))
	for a, b, why in ups:
		print("up: %s -> %s (%s)" % (a, b, ", ".join(why)))
	print("files over %d lines: %d" % (BIG, len(big)))
	for n, f in big:
		print("big: %s %d" % (f, n))
	return 0


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))

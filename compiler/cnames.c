/* cnames.c: the names a spec may give things that reach the generated C.
 *
 * Every tensor reaches the C under its name (a layer instance's tensors
 * with the dots of their path as underscores: mlp0.w1 is mlp0_w1): as a
 * field of the model's weight and io structs (the header), as a view in
 * the forward pass, and in the driver's table. A model's name prefixes
 * every public name of its header (mlp_forward, MLP_GROUP_SIZE) and names
 * its files. So a name must not be a C or C++ keyword, a name C reserves
 * (a leading underscore, or two underscores anywhere, which C++
 * reserves), a macro or type of the headers the generated files include
 * (stddef.h, stdint.h, mpi.h through cfrt.h; stdio.h, stdlib.h, string.h
 * and math.h in the driver), or begin with a prefix that belongs to
 * someone else: cf_ and CF_ (the generated code's own names), cfrt_ and
 * CFRT_ (the runtime), MPI's, and the model's (mlp_, MLP_). Such a name is
 * refused where the spec writes it; the generated code's own locals (r,
 * i, s, ctx, ...) give way to the tensors instead (codegen/cgen.h).
 * requires: nothing. ensures: cname_refused(x) == NULL for every name the
 * C generators print. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cf.h"

/* Sorted (strcmp): the keywords of C11, C++ and GNU C. */
static const char *const keywords[] = {
	"alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool",
	"break", "case", "catch", "char", "char16_t", "char32_t", "char8_t", "class",
	"co_await", "co_return", "co_yield", "compl", "concept", "const", "const_cast",
	"consteval", "constexpr", "constinit", "continue", "decltype", "default", "delete",
	"do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern",
	"false", "float", "for", "friend", "goto", "if", "inline", "int", "long",
	"mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator",
	"or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
	"requires", "restrict", "return", "short", "signed", "sizeof", "static",
	"static_assert", "static_cast", "struct", "switch", "template", "this",
	"thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "typeof",
	"union", "unsigned", "using", "virtual", "void", "volatile", "while", "xor",
	"xor_eq",
};

/* Sorted: the types and object-like macros of the headers the generated
 * files include (glibc, Open MPI). */
static const char *const header_names[] = {
	"BIG_ENDIAN", "BUFSIZ", "BYTE_ORDER", "EOF", "EXIT_FAILURE", "EXIT_SUCCESS",
	"FD_SETSIZE", "FILE", "FILENAME_MAX", "FOPEN_MAX", "FP_ILOGB0", "FP_ILOGBNAN",
	"FP_INFINITE", "FP_NAN", "FP_NORMAL", "FP_SUBNORMAL", "FP_ZERO",
	"HAVE_DOUBLE__COMPLEX", "HAVE_FLOAT__COMPLEX", "HAVE_LONG_DOUBLE__COMPLEX",
	"HUGE_VAL", "HUGE_VALF", "HUGE_VALL", "INFINITY", "INT16_MAX", "INT16_MIN",
	"INT32_MAX", "INT32_MIN", "INT64_MAX", "INT64_MIN", "INT8_MAX", "INT8_MIN",
	"INTMAX_MAX", "INTMAX_MIN", "INTPTR_MAX", "INTPTR_MIN", "INT_FAST16_MAX",
	"INT_FAST16_MIN", "INT_FAST32_MAX", "INT_FAST32_MIN", "INT_FAST64_MAX",
	"INT_FAST64_MIN", "INT_FAST8_MAX", "INT_FAST8_MIN", "INT_LEAST16_MAX",
	"INT_LEAST16_MIN", "INT_LEAST32_MAX", "INT_LEAST32_MIN", "INT_LEAST64_MAX",
	"INT_LEAST64_MIN", "INT_LEAST8_MAX", "INT_LEAST8_MIN", "LITTLE_ENDIAN",
	"L_ctermid", "L_tmpnam", "MATH_ERREXCEPT", "MATH_ERRNO", "MB_CUR_MAX",
	"MPIO_Request", "MPIO_Test", "MPIO_Wait", "M_1_PI", "M_2_PI", "M_2_SQRTPI", "M_E",
	"M_LN10", "M_LN2", "M_LOG10E", "M_LOG2E", "M_PI", "M_PI_2", "M_PI_4", "M_SQRT1_2",
	"M_SQRT2", "NAN", "NFDBITS", "NULL", "OPEN_MPI", "PDP_ENDIAN",
	"PLATFORM_COMPILER_FAMILYID", "PLATFORM_COMPILER_FAMILYNAME",
	"PLATFORM_COMPILER_GNU", "PLATFORM_COMPILER_GNU_C", "PLATFORM_COMPILER_VERSION",
	"PLATFORM_COMPILER_VERSION_STR", "PTRDIFF_MAX", "PTRDIFF_MIN", "P_tmpdir",
	"RAND_MAX", "SEEK_CUR", "SEEK_END", "SEEK_SET", "SIG_ATOMIC_MAX", "SIG_ATOMIC_MIN",
	"SIZE_MAX", "TMP_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX", "UINT8_MAX",
	"UINTMAX_MAX", "UINTPTR_MAX", "UINT_FAST16_MAX", "UINT_FAST32_MAX",
	"UINT_FAST64_MAX", "UINT_FAST8_MAX", "UINT_LEAST16_MAX", "UINT_LEAST32_MAX",
	"UINT_LEAST64_MAX", "UINT_LEAST8_MAX", "WCHAR_MAX", "WCHAR_MIN", "WCONTINUED",
	"WEXITED", "WINT_MAX", "WINT_MIN", "WNOHANG", "WNOWAIT", "WSTOPPED", "WUNTRACED",
	"div_t", "double_t", "errno", "float_t", "fpos_t", "int16_t", "int32_t", "int64_t",
	"int8_t", "int_fast16_t", "int_fast32_t", "int_fast64_t", "int_fast8_t",
	"int_least16_t", "int_least32_t", "int_least64_t", "int_least8_t", "intmax_t",
	"intptr_t", "ldiv_t", "linux", "lldiv_t", "math_errhandling", "max_align_t",
	"offsetof", "ompi_fortran_bogus_type_t", "ompi_fortran_integer_t", "ptrdiff_t",
	"size_t", "stderr", "stdin", "stdout", "uint16_t", "uint32_t", "uint64_t",
	"uint8_t", "uint_fast16_t", "uint_fast32_t", "uint_fast64_t", "uint_fast8_t",
	"uint_least16_t", "uint_least32_t", "uint_least64_t", "uint_least8_t", "uintmax_t",
	"uintptr_t", "unix", "va_list", "wchar_t",
};

/* Headers a model's files would hide with their own name. */
static const char *const headers[] = {
	"assert", "complex", "cfrt", "ctype", "cuda", "cuda_runtime", "cublas", "errno",
	"fenv", "float", "inttypes", "limits", "locale", "math", "mpi", "nccl", "setjmp",
	"signal", "stdalign", "stdarg", "stdatomic", "stdbool", "stddef", "stdint", "stdio",
	"stdlib", "stdnoreturn", "string", "strings", "tgmath", "threads", "time", "uchar",
	"unistd", "wchar", "wctype", NULL,
};

static const char *const prefixes[] = {
	"cf_", "CF_", "cfrt_", "CFRT_", "MPI_", "MPIX_", "MPIO_", "PMPI_", "OMPI_", "OPAL_",
	"ompi_", "opal_", NULL,
};

static int
cmp_word(const void *k, const void *e)
{
	return strcmp(k, *(const char *const *)e);
}

const char *
cname_of(Arena *a, const char *name)
{
	char *s = arena_strdup(a, name);

	for (char *p = s; *p; p++)
		if (*p == '.')
			*p = '_';
	return s;
}

const char *
value_cname(Arena *a, const Value *v)
{
	return cname_of(a, value_uname(v));
}

/* Why name is no spelling any C name may have, or NULL. */
static const char *
refused(Arena *a, const char *name)
{
	if (name[0] == '_')
		return "C reserves names beginning with an underscore";
	if (strstr(name, "__"))
		return "C++ reserves names with two underscores in a row";
	if (bsearch(name, keywords, sizeof keywords / sizeof *keywords, sizeof *keywords, cmp_word))
		return "it is a keyword of C or C++";
	if (bsearch(name, header_names, sizeof header_names / sizeof *header_names,
	            sizeof *header_names, cmp_word))
		return "it is a type or macro of the C headers the generated code includes";
	for (int i = 0; prefixes[i]; i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return arena_printf(a, "names beginning with %s belong to %s", prefixes[i],
			                    i < 2 ? "the generated code" : i < 4 ? "the runtime" : "MPI");
	return NULL;
}

const char *
cname_refused(Arena *a, const char *name, const char *model)
{
	const char *why = refused(a, name);
	size_t n = strlen(model);

	if (why)
		return why;
	for (int up = 0; up < 2; up++) {
		char *p = arena_printf(a, "%s_", model);
		for (char *q = p; up && *q; q++)
			*q = (char)toupper((unsigned char)*q);
		if (!strncmp(name, p, n + 1))
			return arena_printf(a, "names beginning with %s belong to model %s's header", p,
			                    model);
	}
	return NULL;
}

const char *
cname_model_refused(Arena *a, const char *name)
{
	for (int i = 0; headers[i]; i++)
		if (!strcmp(name, headers[i]))
			return arena_printf(a, "its header %s.h would hide the system's", name);
	return refused(a, name);
}

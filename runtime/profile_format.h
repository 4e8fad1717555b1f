/* profile_format.h: the tables of runtime/profile.def, for cfc's reader
 * and writer (compiler/profile.c) and cfrt-calibrate. Header only, as
 * profcheck.h: the compiler and the runtime's tool both include it and
 * neither links the other. */
#ifndef CFRT_PROFILE_FORMAT_H
#define CFRT_PROFILE_FORMAT_H

enum PfEntry {
#define PF(id, word, key, values, meaning) id,
#include "profile.def"
#undef PF
	PF_NENTRY
};

/* The line's first word. */
static const char *const pf_word[PF_NENTRY] = {
#define PF(id, word, key, values, meaning) word,
#include "profile.def"
#undef PF
};

/* Its word and key: "gemm %s %lld %lld %lld" (cfrt-calibrate's names of
 * its points). */
static const char *const pf_key[PF_NENTRY] = {
#define PF(id, word, key, values, meaning) word key,
#include "profile.def"
#undef PF
};

/* The whole line, with its values and newline: "gemm %s %lld %lld %lld
 * %.*g\n". */
static const char *const pf_line[PF_NENTRY] = {
#define PF(id, word, key, values, meaning) word key values "\n",
#include "profile.def"
#undef PF
};

#endif

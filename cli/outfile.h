/* outfile.h: the output files of the command-line tools (cfc,
 * cfrt-calibrate), written so that nothing already there is harmed:
 *   - "-" is standard output;
 *   - a regular file, or a name that does not exist yet, is written to a
 *     temporary next to it and renamed onto it only once all of it is
 *     written: never a partial file (a file replaced keeps its mode);
 *   - a character device or a FIFO is written straight through, never
 *     replaced (a write error there, ENOSPC on /dev/full, is an error);
 *   - a symbolic link is followed: what it points at is written by these
 *     rules (a regular target replaced atomically, the link kept; a
 *     dangling link's target created);
 *   - anything else (a directory, a block device, a socket) is refused,
 *     and so is an output that is the same file as an input (the same
 *     device and inode, by whatever path, link or hard link it is named).
 * Several outputs that must appear together are opened and written first,
 * then committed one after the other (outfile_commit only renames). */
#ifndef OUTFILE_H
#define OUTFILE_H

#include <stddef.h>
#include <sys/stat.h>

/* A file read by the same run: an output must not be it. */
typedef struct OutInput {
	const char *name; /* as the user named it, for the message */
	struct stat st;
} OutInput;

typedef struct OutFile {
	char *name;  /* as given, for messages */
	char *path;  /* the file written: the name given, links followed;
	              * "-" for standard output */
	char *tmp;   /* the temporary renamed onto path at commit, or NULL
	              * (written straight through) */
	int fd;      /* -1 once closed */
	mode_t mode; /* the temporary's mode at commit */
	char *err;   /* after a failure: "cannot write NAME: why" (malloc'd) */
} OutFile;

/* Opens name for writing by the rules above: 0, or -1 with o->err set
 * (nothing created then). */
int outfile_open(OutFile *o, const char *name, const OutInput *in, int nin);
/* All of buf: 0, or -1 with o->err set. */
int outfile_write(OutFile *o, const void *buf, size_t len);
/* Closes the file and renames the temporary into place: 0, or -1 with
 * o->err set (the temporary removed). Frees what o holds but err. */
int outfile_commit(OutFile *o);
/* Closes it and removes the temporary: the file named is as it was
 * (what was written through to a device stays written). */
void outfile_discard(OutFile *o);
/* Frees o->err. */
void outfile_free(OutFile *o);

#endif

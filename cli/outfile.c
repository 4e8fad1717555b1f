/* outfile.c: output files that harm nothing already there (outfile.h).
 * Self-contained (libc and POSIX only): cfrt-calibrate links it too.
 * ensures: a regular file is replaced only by rename(2) of a complete
 * temporary; a device or FIFO is only ever opened and written, never
 * created, unlinked or renamed onto; an input is never opened for writing. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outfile.h"

enum { MAXLINKS = 40 }; /* symbolic links followed, as the kernel's ELOOP */

static void
seterr(OutFile *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
seterr(OutFile *o, const char *fmt, ...)
{
	va_list ap, ap2;

	va_start(ap, fmt);
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap);
	free(o->err);
	o->err = malloc((size_t)n + 1);
	if (o->err)
		vsnprintf(o->err, (size_t)n + 1, fmt, ap2);
	va_end(ap2);
	va_end(ap);
}

static char *
concat(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);
	char *s = malloc(alen + blen + 1);

	if (s) {
		memcpy(s, a, alen);
		memcpy(s + alen, b, blen + 1);
	}
	return s;
}

/* name with its symbolic links followed (the last component's: a link
 * in a directory above is the kernel's to follow); a dangling link gives
 * the name it points at. NULL with errno set on failure. */
static char *
follow(const char *name, struct stat *st, int *exists)
{
	char *cur = strdup(name);

	for (int hops = 0; cur; hops++) {
		if (lstat(cur, st)) {
			if (errno != ENOENT)
				break;
			*exists = 0;
			return cur;
		}
		if (!S_ISLNK(st->st_mode)) {
			*exists = 1;
			return cur;
		}
		if (hops == MAXLINKS) {
			errno = ELOOP;
			break;
		}
		char to[4096];
		ssize_t n = readlink(cur, to, sizeof to - 1);
		if (n < 0)
			break;
		to[n] = 0;
		const char *slash = strrchr(cur, '/');
		char *next = to[0] == '/' || !slash ? strdup(to) :
		             concat(cur, (size_t)(slash - cur + 1), to);
		free(cur);
		cur = next;
	}
	int e = errno;
	free(cur);
	errno = e ? e : ENOMEM;
	return NULL;
}

/* The input the file st is, or NULL. */
static const OutInput *
same_input(const struct stat *st, const OutInput *in, int nin)
{
	for (int i = 0; i < nin; i++)
		if (st->st_dev == in[i].st.st_dev && st->st_ino == in[i].st.st_ino)
			return &in[i];
	return NULL;
}

static const char *
kind_name(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISBLK(m) ? "a block device" :
	       S_ISSOCK(m) ? "a socket" : "not a regular file, character device or FIFO";
}

/* A device or FIFO: opened as it is, never truncated or replaced. */
static int
open_through(OutFile *o, const char *name, const OutInput *in, int nin)
{
	struct stat st;

	o->fd = open(o->path, O_WRONLY | O_NOCTTY);
	if (o->fd < 0) {
		seterr(o, "cannot write %s: %s", name, strerror(errno));
		return -1;
	}
	/* what was opened, in case the name changed since lstat */
	if (fstat(o->fd, &st) || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) ||
	    same_input(&st, in, nin)) {
		seterr(o, "cannot write %s: it changed while being opened", name);
		close(o->fd);
		o->fd = -1;
		return -1;
	}
	return 0;
}

/* A regular file or a new name: a temporary next to it. */
static int
open_temp(OutFile *o, const char *name, const struct stat *st, int exists)
{
	size_t n = strlen(o->path);

	if (exists && access(o->path, W_OK)) {
		seterr(o, "cannot write %s: %s", name, strerror(errno));
		return -1;
	}
	o->tmp = concat(o->path, n, ".tmpXXXXXX");
	if (!o->tmp || (o->fd = mkstemp(o->tmp)) < 0) {
		seterr(o, "cannot write %s: %s", name, strerror(o->tmp ? errno : ENOMEM));
		free(o->tmp);
		o->tmp = NULL;
		return -1;
	}
	if (exists) {
		o->mode = st->st_mode & 07777;
	} else {
		mode_t m = umask(0);
		umask(m);
		o->mode = 0666 & ~m;
	}
	return 0;
}

/* Frees the names; the error stays for the caller. */
static void
release(OutFile *o)
{
	free(o->name);
	free(o->path);
	free(o->tmp);
	o->name = o->path = o->tmp = NULL;
	o->fd = -1;
}

int
outfile_open(OutFile *o, const char *name, const OutInput *in, int nin)
{
	struct stat st;
	int exists = 0;

	memset(o, 0, sizeof *o);
	o->fd = -1;
	if (!(o->name = strdup(name))) {
		seterr(o, "cannot write %s: %s", name, strerror(ENOMEM));
		return -1;
	}
	if (!*name) {
		seterr(o, "cannot write '': an empty file name");
		release(o);
		return -1;
	}
	if (!strcmp(name, "-")) {
		fflush(stdout); /* what stdio holds goes first */
		o->path = strdup("-");
		o->fd = STDOUT_FILENO;
		return 0;
	}
	if (!(o->path = follow(name, &st, &exists))) {
		seterr(o, "cannot write %s: %s", name, strerror(errno));
		release(o);
		return -1;
	}
	const OutInput *i = exists ? same_input(&st, in, nin) : NULL;
	if (i) {
		seterr(o, "cannot write %s: it is the input %s (not overwritten)", name, i->name);
	} else if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
		if (!open_through(o, name, in, nin))
			return 0;
	} else if (exists && !S_ISREG(st.st_mode)) {
		seterr(o, "cannot write %s: it is %s", name, kind_name(st.st_mode));
	} else if (!open_temp(o, name, &st, exists)) {
		return 0;
	}
	release(o);
	return -1;
}

int
outfile_write(OutFile *o, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(o->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			seterr(o, "cannot write %s: %s", strcmp(o->name, "-") ? o->name :
			       "to standard output", n < 0 ? strerror(errno) : "nothing written");
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
outfile_commit(OutFile *o)
{
	int rc = 0;

	if (!o->path)
		return -1;
	if (o->fd == STDOUT_FILENO) {
		release(o);
		return 0;
	}
	if (o->tmp && fchmod(o->fd, o->mode))
		rc = -1;
	if (close(o->fd))
		rc = -1;
	if (!rc && o->tmp && rename(o->tmp, o->path))
		rc = -1;
	if (rc) {
		seterr(o, "cannot write %s: %s", o->name, strerror(errno));
		if (o->tmp)
			unlink(o->tmp);
	}
	release(o);
	return rc;
}

void
outfile_discard(OutFile *o)
{
	if (!o->path)
		return;
	if (o->fd >= 0 && o->fd != STDOUT_FILENO)
		close(o->fd);
	if (o->tmp)
		unlink(o->tmp);
	release(o);
}

void
outfile_free(OutFile *o)
{
	free(o->err);
	o->err = NULL;
}

#!/bin/sh
# ldconfig.sh LIBDIR: make install (with no DESTDIR) runs this after putting
# libcfrt.so.0 into LIBDIR. The dynamic loader finds a library in the
# directories it searches (/usr/local/lib on Debian) through its cache, so
# as root, into such a directory, this runs ldconfig; otherwise it does
# nothing: a stage (DESTDIR) is the package's to register, a user cannot,
# and a private prefix is reached through an rpath or LD_LIBRARY_PATH.
# LDCONFIG names the program (the tests give a stand-in).
set -eu
want=$(cd "$1" 2>/dev/null && pwd -P) || exit 0
[ "$(id -u)" -eq 0 ] || exit 0
ldc=${LDCONFIG:-$(command -v ldconfig || echo /sbin/ldconfig)}
# -vNX lists the directories ldconfig reads, "DIR: (from FILE:LINE)",
# and changes neither the cache nor the links.
for d in $("$ldc" -vNX 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'); do
	if [ "$(cd "$d" 2>/dev/null && pwd -P)" = "$want" ]; then
		echo "$ldc"
		exec "$ldc"
	fi
done

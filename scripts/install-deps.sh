#!/bin/sh
# Installs the Debian packages CommFuse needs, only those missing; with
# arguments, those packages instead (make fuzz: afl++). gnuplot-nox draws
# the benchmark plots (make bench, make plots), which make test checks
# (tests/t-plot.sh).
# Needs root or sudo. Safe to run again: does nothing when all are present.
set -eu
PKGS=${*:-"build-essential clang pkg-config flex bison libgraphviz-dev graphviz \
libopenmpi-dev openmpi-bin libcunit1-dev libopenblas-dev python3 python3-numpy \
python3-mpi4py python3-torch cmake gnuplot-nox"}
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || {
		echo "install-deps: need root or sudo to install:$missing" >&2
		exit 1
	}
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null

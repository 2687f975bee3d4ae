#!/bin/sh
# End-to-end tests: build the scenario programs the driver uses
# (tests/scenarios/<name>.c, names from test_e2e.py --scenarios) with
# gcc and clang at -O2, with the compiler's default frame-pointer setting,
# with -fno-omit-frame-pointer and with -fomit-frame-pointer, then run the
# driver (tests/e2e/test_e2e.py), which records them, and some Debian
# programs, with ./rhea and checks each scenario's ground truth.
#
# Run from the repository root after `make` (the Makefile's e2e target does
# this).  Extra arguments go to the driver, e.g.
#   sh tests/e2e/run.sh --only ratio --jobs 1
# RHEA_E2E_KEEP=1 keeps the build and work directory (it is printed).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
for f in "$root/rhea" "$root/librhea.so"; do
	if [ ! -x "$f" ] && [ ! -f "$f" ]; then
		echo "e2e: $f is missing: run make first" >&2
		exit 2
	fi
done
if [ ! -x "$PY" ]; then
	echo "e2e: $PY is missing (tests/deps.sh installs python3)" >&2
	exit 2
fi

build=$(mktemp -d "${TMPDIR:-/tmp}/rhea-e2e.XXXXXX")
cleanup() {
	if [ "${RHEA_E2E_KEEP:-0}" = 1 ]; then
		echo "e2e: kept $build" >&2
	else
		rm -rf "$build"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# variant name, compiler, flags
variants="gcc-O2:gcc:-O2
gcc-O2-fp:gcc:-O2 -fno-omit-frame-pointer
gcc-O2-nofp:gcc:-O2 -fomit-frame-pointer
clang-O2:clang:-O2
clang-O2-fp:clang:-O2 -fno-omit-frame-pointer
clang-O2-nofp:clang:-O2 -fomit-frame-pointer"

# The scenarios the driver uses (tests/scenarios also holds other suites').
scenarios=$("$PY" "$root/tests/e2e/test_e2e.py" --scenarios)

# One compile command per line, run two at a time.  A scenario that does
# not build is reported; its tests then fail ("was not built"), the others
# still run.
cmds="$build/compile.txt"
: >"$cmds"
echo "$variants" | while IFS=: read -r name cc flags; do
	mkdir -p "$build/$name"
	for prog in $scenarios; do
		echo "$cc $flags -g -Wall -Wextra -pthread -o '$build/$name/$prog' '$root/tests/scenarios/$prog.c'" >>"$cmds"
	done
	# the C++ library dlopencxx loads
	case $cc in gcc) cxx=g++ ;; *) cxx=clang++ ;; esac
	echo "$cxx $flags -g -Wall -Wextra -shared -fPIC -o '$build/$name/libcxxnew.so' '$root/tests/scenarios/cxxnew.cc'" >>"$cmds"
done
tr '\n' '\0' <"$cmds" | xargs -0 -P 2 -n 1 sh -c 'eval "$1" || echo "e2e: build failed: $1" >&2' build

status=0
"$PY" "$root/tests/e2e/test_e2e.py" --root "$root" --build "$build" "$@" || status=$?
exit $status

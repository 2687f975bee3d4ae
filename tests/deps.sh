#!/bin/sh
# Install the Debian packages rhea needs to build and test, when root and
# missing.  Idempotent; prints nothing when all is there.  (make bench
# installs what only the benchmarks use - heaptrack, gperftools - itself.)
set -e
PKGS="gcc g++ clang make pkg-config libdw-dev libelf-dev libzstd-dev zlib1g-dev
libcriterion-dev protobuf-compiler golang-go python3 sqlite3 gzip
redis-server redis-tools linux-perf postgresql-15 fd-find"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "rhea: missing Debian packages:$missing (run as root, or apt-get install them)" >&2
	exit 1
fi
echo "rhea: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends $missing >/dev/null

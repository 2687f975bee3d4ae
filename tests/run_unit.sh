#!/bin/sh
# Run each unit-test binary (one process per suite; Criterion forks per test
# and applies per-test timeouts) and print one closing line.
fail=0; pass=0
for t in "$@"; do
	if "$t" --jobs 2 --timeout 60 --short-filename; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED: $t"; fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" = 0 ]

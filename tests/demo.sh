#!/bin/sh
# `make demo`: build the bundled demo program like a distribution binary
# (-O2, no frame pointers), record it, and print the report.
set -e
mkdir -p build
${CC:-cc} -O2 -g -fomit-frame-pointer -pthread -o build/demo demo/demo.c
./rhea record -o build/demo.rhea -- build/demo
./rhea report build/demo.rhea

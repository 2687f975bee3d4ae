# rhea - a tracer for native Linux programs.
#
#   make            build ./rhea and ./librhea.so
#   make test       unit tests (Criterion) and end-to-end scenarios
#   make bench      benchmarks (not part of test)
#   make SANITIZE=1 test   the same under ASan/UBSan (CLI and tests; the agent
#                          is never sanitized: it lives in other programs)
#   make CC=clang   any C11 compiler with gnu extensions
#
# Layout: agent/ (librhea.so, lives in the traced process), core/ (format and
# file I/O shared by agent and CLI), symbolize/, analysis/ (samples -> slices),
# export/ (report and converters), cli/ (the rhea command), tests/, bench/.

CC       ?= gcc
O        ?= build
OPT      ?= -O2
WARN     := -Wall -Wextra -Wshadow -Wno-unused-parameter
CFLAGS   ?= $(OPT) -g
VERSION  := 0.1.0
BASEFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -DRHEA_VERSION_STRING='"$(VERSION)"' -Icore -Iagent -Isymbolize -Ianalysis -Iexport -Icli
LIBS_CLI := -ldw -lelf -lzstd -lz -ldl -lm
LIBS_AGENT := -ldl -lpthread # (libzstd by dlopen, no zlib: core/rfile.c)

ifeq ($(SANITIZE),1)
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
endif

CORE_SRCS  := $(wildcard core/*.c)
AGENT_SRCS := $(wildcard agent/*.c)
# Agent pieces that define no interposed symbol and no constructor: these
# are unit-tested directly, linked into test programs.
AGENT_TESTABLE := $(filter-out agent/hooks.c agent/agent.c agent/fastpath.c agent/attach.c,$(AGENT_SRCS))
LIB_SRCS   := $(CORE_SRCS) $(wildcard symbolize/*.c analysis/*.c export/*.c) \
              $(filter-out cli/rhea.c,$(wildcard cli/*.c)) $(AGENT_TESTABLE)

LIB_OBJS   := $(LIB_SRCS:%.c=$(O)/cli/%.o)
AGENT_OBJS := $(CORE_SRCS:%.c=$(O)/agent/%.o) $(AGENT_SRCS:%.c=$(O)/agent/%.o)

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(O)/tests/%)

.PHONY: FORCE all test unit e2e issues convert crosscheck stress bench clean deps demo
all: rhea librhea.so

# The compiler and flags of the objects in $(O): a change (SANITIZE=1 after
# a plain build, another CC or CFLAGS) rebuilds them, instead of testing
# what an earlier build left.
BUILD_FLAGS := $(CC) $(CFLAGS) $(SANFLAGS)
$(O)/flags: FORCE
	@mkdir -p $(O)
	@if [ "$$(cat $@ 2>/dev/null)" != "$(BUILD_FLAGS)" ]; then echo "$(BUILD_FLAGS)" >$@; fi
FORCE:

$(O)/cli/%.o: %.c $(O)/flags
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) -MMD -c $< -o $@

# The agent: position independent, everything hidden but the interposed
# functions; frame pointers kept so its own frames unwind cheaply, except
# in malloc's and free's fast paths, which never capture (agent/fastpath.c).
# Its own calls to syscall() go straight to the kernel: it interposes
# syscall() (agent/sys.h).
AGENT_FP := -fno-omit-frame-pointer
$(O)/agent/agent/fastpath.o: AGENT_FP := -fomit-frame-pointer
$(O)/agent/%.o: %.c $(O)/flags
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -DRHEA_AGENT -Dsyscall=rhea_syscall -fPIC -fvisibility=hidden \
	    $(AGENT_FP) -ftls-model=initial-exec -MMD -c $< -o $@

$(O)/librhea_core.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

librhea.so: $(AGENT_OBJS)
	$(CC) -shared -o $@ $^ $(LIBS_AGENT) -Wl,-z,nodelete -Wl,--no-undefined

rhea: $(O)/cli/cli/rhea.o $(O)/librhea_core.a
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $^ $(LIBS_CLI)

$(O)/tests/test_%: tests/unit/test_%.c $(O)/librhea_core.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) -o $@ $< $(O)/librhea_core.a -lcriterion $(LIBS_CLI) -ldl -lpthread

deps:
	@sh tests/deps.sh

unit: deps $(UNIT_BINS) all
	@sh tests/run_unit.sh $(UNIT_BINS)

e2e: deps all
	@sh tests/e2e/run.sh

# Every output format against its real consumer (protoc, trace_processor,
# go tool pprof, a JSON parser) and the recordings' ground truth.
convert: deps all
	@sh tests/convert/run.sh

# Blocking attribution, the sampler, signals, churn, redis under load.
issues: deps all
	@/usr/bin/python3 tests/e2e/issues.py $(CURDIR)

# The full thread-churn stress (64 threads created and destroyed for 10 s
# with 1 ms sampling, 20 runs); make test runs it with 2 s runs.
stress: deps all
	@/usr/bin/python3 tests/e2e/issues.py $(CURDIR) --only churn --stress-runs 20 --stress-secs 10

# The sampler against perf on Debian's python3 (skips itself without perf).
crosscheck: deps all
	@/usr/bin/python3 tests/crosscheck/run.py $(CURDIR)

test: deps
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) e2e
	$(MAKE) issues
	$(MAKE) convert
	$(MAKE) crosscheck

bench: deps all
	@sh bench/run.sh

demo: deps all
	@sh tests/demo.sh

clean:
	rm -rf $(O) rhea librhea.so

-include $(shell find $(O) -name '*.d' 2>/dev/null)

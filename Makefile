# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#
# Everything builds into $(BUILD) (default build/). Files are picked up by
# location, so adding a source file needs no change here:
#   bpf/*.bpf.c        → one linked BPF object and one skeleton (critpath.skel.h)
#   user/record/       → the recorder: the only code that sees libbpf
#   user/cmd/main.c    → the CLI entry point
#   user/MODULE/*.c    → libcritpath.a, a folder a module (recording, kpath,
#                        span, engine, out, cmd, proto, util, agent): no libbpf
#   user/*/*.cpp       → libcritpath.a too: thin C++ shims with a C interface
#                        (span/json.cpp: simdjson), so everything links libstdc++
#   user/*/*.proto     → protobuf-c code generated into $(BUILD)/gen
#   tests/unit/test_*.c      → one cmocka binary each, linked with libcritpath.a
#   tests/workloads/*.c      → one program each (driven by integration tests)
#   tools/bench/*.c, tools/demo/*.c → one program each
# Header dependencies are tracked by the compiler (-MMD -MP, $(BUILD)/**/*.d).

BUILD ?= build
CC ?= gcc
CXX ?= g++
CLANG ?= clang
BPFTOOL ?= bpftool
ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

PKGS := libbpf libzstd liblz4 zlib yajl libprotobuf-c libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# libcurl is loaded when an exporter starts (out/otlp_export.c), not linked
LIB_LIBS := $(shell pkg-config --libs libzstd liblz4 zlib yajl libprotobuf-c simdjson 2>/dev/null) \
	    -lstdc++ -lm -lpthread
BPF_LIBS := $(shell pkg-config --libs libbpf 2>/dev/null) -lelf -lz \
	    $(shell pkg-config --libs capstone 2>/dev/null || echo -lcapstone)

SAN ?=
TSAN ?=
comma := ,
FUZZ ?=
SANFLAGS := $(if $(SAN),-fsanitize=address$(comma)undefined -fno-sanitize-recover=all \
		-fno-omit-frame-pointer) \
	    $(if $(TSAN),-fsanitize=thread) $(if $(FUZZ),-fsanitize=fuzzer-no-link)
CFLAGS ?= -O2 -g
MODULES := record recording kpath span engine out cmd proto util agent
MOD_INC := -Iinclude -Iuser $(addprefix -Iuser/,$(MODULES))
CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	  -D_GNU_SOURCE $(MOD_INC) -I$(BUILD) -I$(BUILD)/gen $(PKG_CFLAGS) $(SANFLAGS) -MMD -MP
LDFLAGS += $(SANFLAGS)
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=gnu++17 -Wall -Wextra -Wno-unused-parameter $(MOD_INC) \
	    $(shell pkg-config --cflags simdjson 2>/dev/null) $(SANFLAGS) -MMD -MP

BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux -Iinclude -Ibpf -Wall \
	      -Wno-unused-function -MMD -MP

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
SKEL := $(BUILD)/critpath.skel.h

PROTOS := $(wildcard user/*/*.proto)
PROTO_C := $(patsubst %.proto,$(BUILD)/gen/%.pb-c.c,$(notdir $(PROTOS)))
PROTO_H := $(PROTO_C:.c=.h)

REC_SRCS := $(wildcard user/record/*.c)
LIB_SRCS := $(filter-out user/cmd/cmd/main.c,$(wildcard $(patsubst %,user/%/*.c,$(filter-out record,$(MODULES)))))
LIB_CXX_SRCS := $(wildcard user/*/*.cpp)
LIB_OBJS := $(patsubst user/%.c,$(BUILD)/user/%.o,$(LIB_SRCS)) $(PROTO_C:.c=.o) \
	    $(patsubst user/%.cpp,$(BUILD)/user/%.o,$(LIB_CXX_SRCS))
REC_OBJS := $(patsubst user/%.c,$(BUILD)/user/%.o,$(REC_SRCS))
LIB := $(BUILD)/libcritpath.a

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
WORKLOAD_SRCS := $(wildcard tests/workloads/*.c)
WORKLOAD_BINS := $(patsubst tests/workloads/%.c,$(BUILD)/workloads/%,$(WORKLOAD_SRCS)) \
		 $(BUILD)/workloads/kp_server_cet
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))
TOOL_SRCS := $(wildcard tools/bench/*.c tools/demo/*.c)
TOOL_BINS := $(patsubst tools/%.c,$(BUILD)/%,$(TOOL_SRCS))

.PHONY: all critpath tests tools deps test test-unit test-asan test-integration demo bench \
	vmlinux clean format fuzzers fuzz
.DELETE_ON_ERROR:
# The generated protobuf-c files are prerequisites of pattern rules only, so
# make would delete them as intermediates after a build; a later build then
# compiles profile.pb-c.c without its header.
.SECONDARY: $(PROTO_C) $(PROTO_H)

all: $(BUILD)/critpath tests tools

critpath: $(BUILD)/critpath
tests: $(UNIT_BINS) $(WORKLOAD_BINS)
tools: $(TOOL_BINS)

# --- BPF: compile each family, link into one object, one skeleton ----------
$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c | $(BUILD)/bpf
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/critpath.bpf.o: $(BPF_OBJS)
	$(BPFTOOL) gen object $@ $^

$(SKEL): $(BUILD)/critpath.bpf.o
	$(BPFTOOL) gen skeleton $< name critpath_bpf > $@

# --- user space --------------------------------------------------------------
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: user/out/%.proto | $(BUILD)/gen
	protoc-c --proto_path=user/out --c_out=$(BUILD)/gen $<

$(BUILD)/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c
	$(CC) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

# the generated headers exist before the first compile reads them; after
# it, the .d files know who includes what
$(REC_OBJS): $(SKEL)
$(LIB_OBJS) $(BUILD)/user/cmd/main.o: $(PROTO_H)

$(BUILD)/user/%.o: user/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/user/%.o: user/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -c $< -o $@

# made anew: ar r would keep the objects of deleted sources, and members of
# one name from two folders (util.o) replace each other
$(LIB): $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/critpath: $(BUILD)/user/cmd/main.o $(REC_OBJS) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LIB_LIBS) $(BPF_LIBS)

# --- tests and tools ---------------------------------------------------------
$(BUILD)/tests/%: tests/unit/%.c $(LIB) $(PROTO_H) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Itests/unit $< -o $@ $(LDFLAGS) $(LIB) $(LIB_LIBS) -lcmocka

$(BUILD)/workloads/%: tests/workloads/%.c | $(BUILD)/workloads
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) -lpthread -lm

# kp_server built as Ubuntu and Fedora build their packages (endbr64 first
# in every function): where record --probe puts its uprobes there
$(BUILD)/workloads/kp_server_cet: tests/workloads/kp_server.c | $(BUILD)/workloads
	$(CC) $(CFLAGS) -fcf-protection=full $< -o $@ $(LDFLAGS) -lpthread -lm

# the HTTPS workload of record's TLS capture: against the system's libssl
$(BUILD)/workloads/kp_tls_server: tests/workloads/kp_tls_server.c | $(BUILD)/workloads
	$(CC) $(CFLAGS) $(shell pkg-config --cflags openssl 2>/dev/null) $< -o $@ $(LDFLAGS) \
	    $(shell pkg-config --libs openssl 2>/dev/null || echo -lssl -lcrypto) -lpthread -lm

# the recorder's parts that need no libbpf (user/record/NAME.c), each tested
# alone: where it puts OpenSSL's uprobes (tls_at.c, with the disassembler and
# libelf it needs), its command line (options.c)
$(BUILD)/tests/test_rec_%: tests/unit/test_rec_%.c user/record/%.c $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Itests/unit $< user/record/$*.c -o $@ $(LDFLAGS) $(LIB) $(LIB_LIBS) \
	    $(shell pkg-config --libs capstone 2>/dev/null || echo -lcapstone) -lelf -lcmocka

# the io_uring workload: against the system's liburing
$(BUILD)/workloads/kp_uring_server: tests/workloads/kp_uring_server.c | $(BUILD)/workloads
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) -luring -lpthread -lm

# libFuzzer harnesses: built with clang (make fuzz sets CC, SAN and FUZZ)
# (linked as C++: simdjson's checks need UBSan's C++ runtime)
$(BUILD)/fuzz/%: tests/fuzz/%.c $(LIB) $(PROTO_H) | $(BUILD)/fuzz
	$(CC) $(CFLAGS) -c $< -o $@.o
	$(CXX) -fsanitize=fuzzer $(LDFLAGS) $@.o -o $@ $(LIB) $(LIB_LIBS)

$(BUILD)/bench/%: tools/bench/%.c $(LIB) $(PROTO_H) | $(BUILD)/bench
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) $(LIB) $(LIB_LIBS)

$(BUILD)/demo/%: tools/demo/%.c $(wildcard tools/demo/*.h) | $(BUILD)/demo
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) -lpthread -lm

$(BUILD)/bpf $(BUILD)/user $(BUILD)/gen $(BUILD)/tests $(BUILD)/workloads $(BUILD)/bench $(BUILD)/demo \
$(BUILD)/fuzz:
	mkdir -p $@

# --- entry points --------------------------------------------------------------
deps:
	tools/deps.sh

# The whole suite: unit tests, the same under AddressSanitizer, the tests of
# the recording reader (which reads ahead on a thread of its own) and of the
# store's writer (which sends from one) under ThreadSanitizer, and (as root) integration tests with the real BPF programs,
# the agent's once more with build/asan's critpath. Ends with "N passed, N failed".
TSAN_TESTS := test_recording test_recording_damage test_kpath_file test_ch_writer
FUZZ_MAKE := $(MAKE) --no-print-directory BUILD=build/fuzz CC=clang CXX=clang++ SAN=1 FUZZ=1
test: all
	$(MAKE) --no-print-directory BUILD=build/asan SAN=1 tests build/asan/critpath
	$(MAKE) --no-print-directory BUILD=build/tsan TSAN=1 $(TSAN_TESTS:%=build/tsan/tests/%)
	$(FUZZ_MAKE) fuzzers
	tests/run.sh build build/asan build/tsan build/fuzz

fuzzers: $(FUZZ_BINS)

# Each harness for FUZZ_SECONDS (default 300) from seeds the project's own
# tools make; make test runs them for 20 s each
FUZZ_SECONDS ?= 300
fuzz: all
	$(FUZZ_MAKE) fuzzers
	tools/fuzz.sh build/fuzz $(FUZZ_SECONDS) build

test-unit: tests
	tests/run.sh --unit-only $(BUILD)

demo: all
	tools/demo/run.sh $(BUILD)

bench: all
	tools/bench/run.sh $(BUILD)

vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > vmlinux/vmlinux.h

format:
	clang-format -i $(filter-out vmlinux/%,$(wildcard bpf/*.c bpf/*.h include/*.h user/*.h user/*/*.c \
		user/*/*.cpp user/*/*.h \
		tests/unit/*.c tests/workloads/*.c tools/*/*.c))

clean:
	rm -rf build

# what each object was built from, as the compiler saw it
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

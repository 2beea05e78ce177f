# presto-nfs -- top-level Makefile.
#
# make            build bin/presto-nfsd and the tools (gnu11, -Wall -Wextra -Werror, -O2 -g)
# make run        install missing Debian packages, build, prepare the demo, start the appliance
# make test       the same set-up, then every test (unit, integration, ...)
# make test-kernel  only the Linux kernel client test (qemu)
# make asan       build with AddressSanitizer + UBSan into build/asan and run the tests
# make bench      benchmarks (not tests): tables on stdout, JSON under bench/results/
# make install    install under $(PREFIX)
#
# Each directory contributes a module.mk fragment that appends to PROGS (installed
# programs in $(B)/), TEST_PROGS (test executables in $(T)/) and LIBS.

CC       ?= cc
OPT      ?= -O2
SAN      ?=
O        ?= build/default
B        ?= bin
T        ?= $(O)/tests
PREFIX   ?= /usr/local

PKGS     := libtirpc libpmem libsodium jansson libisal
CPPFLAGS := -D_GNU_SOURCE -I. -I$(O)/gen $(shell pkg-config --cflags $(PKGS))
CFLAGS   := -std=gnu11 -Wall -Wextra -Werror -g $(OPT) $(SAN) -pthread
LDFLAGS  := $(SAN) -pthread
LDLIBS   := $(shell pkg-config --libs $(PKGS))

PROGS      :=
TEST_PROGS :=

.PHONY: all deps run test test-only test-kernel test-progs asan bench install clean
all:

include cache/module.mk
include nfsd/module.mk
include admin/module.mk
include admin/admind.mk
include tests/module.mk

all: $(PROGS) $(TEST_PROGS)

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

deps:
	@sh appliance/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	@sh appliance/run.sh

test:
	@PRESTO_DEPS=test sh appliance/deps.sh
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory test-only

# the test programs the build makes, relative to $(T): tests/run.sh counts
# each one that is missing as a failure
TEST_PROGS_REL = $(patsubst $(T)/%,%,$(TEST_PROGS))

test-progs:
	@echo $(TEST_PROGS_REL)

test-only:
	@PRESTO_BIN=$(abspath $(B)) PRESTO_TESTBIN=$(abspath $(T)) PRESTO_TESTPROGS="$(TEST_PROGS_REL)" sh tests/run.sh

# the Linux kernel NFS client under qemu, alone
test-kernel:
	@PRESTO_DEPS=test sh appliance/deps.sh
	@$(MAKE) --no-print-directory all
	@TESTS=kernel PRESTO_BIN=$(abspath $(B)) PRESTO_TESTBIN=$(abspath $(T)) PRESTO_TESTPROGS="$(TEST_PROGS_REL)" sh tests/run.sh

asan:
	@PRESTO_DEPS=test sh appliance/deps.sh
	@$(MAKE) --no-print-directory O=build/asan B=build/asan/bin OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	    all test-only

bench: deps
	@$(MAKE) --no-print-directory all
	@PRESTO_BIN=$(abspath $(B)) PRESTO_TESTBIN=$(abspath $(T)) sh tests/bench/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0755 $(PROGS) $(DESTDIR)$(PREFIX)/sbin/
	for m in docs/*.8; do [ -f "$$m" ] && install -m 0644 "$$m" $(DESTDIR)$(PREFIX)/share/man/man8/ || true; done

clean:
	rm -rf build bin

-include $(shell find $(O) -name '*.d' 2>/dev/null)

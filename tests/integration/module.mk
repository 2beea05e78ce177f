# tests/integration/module.mk -- integration tests: libnfs (sync, async and
# raw APIs) and hand-made RPC records against a live presto-nfsd (or NFS-Ganesha
# with PRESTO_IT_SERVER=ganesha). tests/run.sh runs every program of
# $(T)/integration/ and tests/integration/test-*.sh (the real nfs-utils and
# libnfs tools).
#
# Each test_X is also built as test_X_nvram (IT_NVRAM_DEFAULT=1) for the
# programs in IT_NVRAM_PROGS: the same tests with presto on (--nvram).

IT_PROGS := test_procs test_exports test_security test_drc test_restart test_perms test_concurrency test_presto test_logfail
IT_NVRAM_PROGS := test_procs test_drc test_restart test_perms test_concurrency
IT_CPPFLAGS := $(shell pkg-config --cflags libnfs cmocka)
IT_LIBS := $(shell pkg-config --libs libnfs cmocka)
IT_DIR := $(O)/tests/integration

TEST_PROGS += $(addprefix $(T)/integration/,$(IT_PROGS) $(addsuffix _nvram,$(IT_NVRAM_PROGS)))

$(IT_DIR)/%.o: CPPFLAGS += $(IT_CPPFLAGS)

$(IT_DIR)/%_nvram.o: tests/integration/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DIT_NVRAM_DEFAULT=1 $(CFLAGS) -MMD -MP -c -o $@ $<

$(T)/integration/test_%: $(IT_DIR)/test_%.o $(IT_DIR)/harness.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(IT_LIBS)

# test_presto also writes a record into a stopped server's log itself (one
# no client could cause): the log library
$(T)/integration/test_presto: $(IT_DIR)/test_presto.o $(IT_DIR)/harness.o $(CACHE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(IT_LIBS) $(LDLIBS)

# keep the objects: they are intermediate files of the pattern rules above
.SECONDARY: $(IT_DIR)/harness.o $(patsubst %,$(IT_DIR)/%.o,$(IT_PROGS) $(addsuffix _nvram,$(IT_NVRAM_PROGS)))

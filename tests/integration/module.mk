# tests/integration/module.mk -- integration tests: libnfs (sync, async and
# raw APIs) and hand-made RPC records against a live presto-nfsd (or NFS-Ganesha
# with PRESTO_IT_SERVER=ganesha). tests/run.sh runs every program of
# $(T)/integration/ and tests/integration/test-*.sh (the real nfs-utils and
# libnfs tools).

IT_PROGS := test_procs test_exports test_security test_drc test_restart test_perms
IT_CPPFLAGS := $(shell pkg-config --cflags libnfs cmocka)
IT_LIBS := $(shell pkg-config --libs libnfs cmocka)

TEST_PROGS += $(addprefix $(T)/integration/,$(IT_PROGS))

$(O)/tests/integration/%.o: CPPFLAGS += $(IT_CPPFLAGS)

$(T)/integration/test_%: $(O)/tests/integration/test_%.o $(O)/tests/integration/harness.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(IT_LIBS)

# keep the objects: they are intermediate files of the pattern rule above
.SECONDARY: $(O)/tests/integration/harness.o $(patsubst %,$(O)/tests/integration/%.o,$(IT_PROGS))

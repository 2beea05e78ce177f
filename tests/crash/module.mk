# tests/crash/module.mk -- crash tests of presto-nfsd through a libnfs client
# (issue 4): crash_nfs (SIGKILL at random moments, full log; power cut with
# tests/crash/test-powercut.sh). test_nvlog_kill, the NVRAM log's own crash
# test, is built by cache/module.mk.

CRASH_CPPFLAGS := $(shell pkg-config --cflags libnfs)
CRASH_LIBS := $(shell pkg-config --libs libnfs)

TEST_PROGS += $(T)/crash/crash_nfs

$(O)/tests/crash/crash_nfs.o: CPPFLAGS += $(CRASH_CPPFLAGS)

$(T)/crash/crash_nfs: $(O)/tests/crash/crash_nfs.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRASH_LIBS)

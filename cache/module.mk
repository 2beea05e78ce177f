# cache/module.mk -- the NVRAM log library (see cache/nvlog_format.h), its
# tool bin/presto-log and its tests.

CACHE_SRCS := cache/crc32c.c cache/nvlog_format.c cache/nvlog.c
CACHE_OBJS := $(CACHE_SRCS:%.c=$(O)/%.o)
CACHE_LIB  := $(O)/cache/libnvlog.a

$(CACHE_LIB): $(CACHE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

PROGS += $(B)/presto-log

$(B)/presto-log: $(O)/cache/presto-log.o $(CACHE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

NVLOG_TESTS := $(T)/unit/test_nvlog $(T)/unit/test_nvlog_powerloss $(T)/crash/test_nvlog_kill
TEST_PROGS += $(NVLOG_TESTS)

$(T)/unit/test_nvlog: $(O)/tests/unit/test_nvlog.o $(CACHE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

$(T)/unit/test_nvlog_powerloss: $(O)/tests/unit/test_nvlog_powerloss.o $(CACHE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

$(T)/crash/test_nvlog_kill: $(O)/tests/crash/test_nvlog_kill.o $(CACHE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

.PHONY: nvlog
nvlog: $(B)/presto-log $(NVLOG_TESTS)

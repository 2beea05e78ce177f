# tests/unit/module.mk -- unit tests (cmocka) of the exports parser.

TEST_PROGS += $(T)/unit/test_exports

$(T)/unit/test_exports: $(O)/tests/unit/test_exports.o $(O)/nfsd/exports.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(LDLIBS)

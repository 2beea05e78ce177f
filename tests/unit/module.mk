# tests/unit/module.mk -- unit tests (cmocka), one program per module:
# exports parser, file handles, duplicate request cache, statistics,
# configuration, vfs (errno mapping, attributes, identity), rpc addresses.

UNIT_LINK = mkdir -p $(dir $@) && $(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(LDLIBS)

TEST_PROGS += $(T)/unit/test_exports $(T)/unit/test_fh $(T)/unit/test_drc \
              $(T)/unit/test_stats $(T)/unit/test_conf $(T)/unit/test_vfs \
              $(T)/unit/test_rpc

$(T)/unit/test_exports: $(O)/tests/unit/test_exports.o $(O)/nfsd/exports.o
	$(UNIT_LINK)

$(T)/unit/test_fh: $(O)/tests/unit/test_fh.o $(O)/nfsd/fh.o $(O)/nfsd/log.o
	$(UNIT_LINK)

$(T)/unit/test_drc: $(O)/tests/unit/test_drc.o $(O)/nfsd/drc.o
	$(UNIT_LINK)

$(T)/unit/test_stats: $(O)/tests/unit/test_stats.o $(O)/nfsd/stats.o
	$(UNIT_LINK)

$(T)/unit/test_conf: $(O)/tests/unit/test_conf.o $(O)/nfsd/conf.o
	$(UNIT_LINK)

$(T)/unit/test_vfs: $(O)/tests/unit/test_vfs.o $(O)/nfsd/vfs.o
	$(UNIT_LINK)

$(T)/unit/test_rpc: $(O)/tests/unit/test_rpc.o $(O)/nfsd/rpc.o $(O)/nfsd/log.o
	$(UNIT_LINK)

# tests that include the rpcgen headers (nfs3_prot.h, mount3.h, plog.h)
$(O)/tests/unit/test_stats.o $(O)/tests/unit/test_vfs.o: $(NFSD_GEN)

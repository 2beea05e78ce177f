# nfsd/module.mk -- presto-nfsd: RPC transport, XDR (rpcgen from our .x files),
# MOUNT v3, the NFSv3 procedures, exports, file handles.

NFSD_X    := nfsd/nfs3_prot.x nfsd/mount3.x nfsd/plog.x
NFSD_GEN  := $(patsubst nfsd/%.x,$(O)/gen/%.h,$(NFSD_X))
NFSD_XDR  := $(patsubst nfsd/%.x,$(O)/gen/%_xdr.o,$(NFSD_X))
NFSD_SRCS := nfsd/main.c nfsd/conf.c nfsd/log.c nfsd/rpc.c nfsd/dispatch.c \
             nfsd/drc.c nfsd/fh.c nfsd/vfs.c nfsd/nfs3.c nfsd/mount3.c \
             nfsd/exports.c nfsd/export_table.c nfsd/rpcb.c nfsd/stats.c nfsd/presto.c nfsd/control.c nfsd/fdcache.c
NFSD_OBJS := $(patsubst %.c,$(O)/%.o,$(NFSD_SRCS)) $(NFSD_XDR)

PROGS += $(B)/presto-nfsd

# rpcgen output is generated, never committed; it is compiled without our
# warning flags because rpcgen's C is not -Wextra clean.
$(O)/gen/%.h: nfsd/%.x
	@mkdir -p $(dir $@)
	rm -f $@ && cd $(dir $@) && cp $(abspath $<) . && rpcgen -h -o $(notdir $@) $(notdir $<)
$(O)/gen/%_xdr.c: nfsd/%.x $(O)/gen/%.h
	@mkdir -p $(dir $@)
	rm -f $@ && cd $(dir $@) && cp $(abspath $<) . && rpcgen -c -o $(notdir $@) $(notdir $<)
$(O)/gen/%_xdr.o: $(O)/gen/%_xdr.c
	$(CC) $(CPPFLAGS) -std=gnu11 -g $(OPT) $(SAN) -w -c -o $@ $<

# every nfsd object may include the generated headers
$(patsubst %.c,$(O)/%.o,$(NFSD_SRCS)): $(NFSD_GEN)

$(B)/presto-nfsd: $(NFSD_OBJS) $(CACHE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

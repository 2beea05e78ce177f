# admin/module.mk -- presto (the operator's command) and presto-admind.
#
# bin/presto talks only to presto-nfsd's control socket: it links jansson
# and nothing of nfsd/.

PRESTO_CLI_OBJS := $(O)/admin/presto.o

PROGS += $(B)/presto

$(B)/presto: $(PRESTO_CLI_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs jansson)

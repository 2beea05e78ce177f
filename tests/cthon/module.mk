# tests/cthon/module.mk -- Connectathon-style tests (tests/cthon/cthon.c).
# tests/run.sh runs $(T)/cthon/cthon (functional mode: it starts its own
# presto-nfsd, presto on and off); tests/bench/bench-cthon.sh runs the same
# program in its timed mode (-t) for `make bench`.

CTHON_CPPFLAGS := $(shell pkg-config --cflags libnfs)
CTHON_LIBS := $(shell pkg-config --libs libnfs)

TEST_PROGS += $(T)/cthon/cthon

$(O)/tests/cthon/%.o: CPPFLAGS += $(CTHON_CPPFLAGS)

$(T)/cthon/cthon: $(O)/tests/cthon/cthon.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CTHON_LIBS)

.SECONDARY: $(O)/tests/cthon/cthon.o

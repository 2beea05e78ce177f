# tests/bench/module.mk -- the load generator of `make bench`.
# Not a test program (the test runner runs everything under $(T)/), so it
# lives in $(O)/bench/ and is listed in BENCH_PROGS.

BENCH_PROGS += $(O)/bench/loadgen

$(O)/tests/bench/loadgen.o: CPPFLAGS += $(shell pkg-config --cflags libnfs)

$(O)/bench/loadgen: $(O)/tests/bench/loadgen.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs libnfs)

all: $(BENCH_PROGS)

# admin/admind.mk -- presto-admind, the console's served folder and the
# unit tests of its history and of its Prometheus text.
#
# presto-admind talks to presto-nfsd only through the control socket: it
# links nothing of nfsd/ or cache/. The console is served from $(O)/web:
# the files of web/ plus uPlot, installed from the npm registry by `npm ci`
# in web/ (web/node_modules is never committed).

ADMIND_OBJS := $(O)/admin/admind.o $(O)/admin/admind_ctl.o $(O)/admin/admind_db.o \
	$(O)/admin/admind_http.o $(O)/admin/admind_prom.o
ADMIND_PKGS := libmicrohttpd sqlite3 jansson libsodium
ADMIND_WEB  := $(O)/web
ADMIND_WEB_SRC := $(wildcard web/*.html web/*.js web/*.css web/*.svg)

PROGS += $(B)/presto-admind
TEST_PROGS += $(T)/admin/test_admind_db $(T)/admin/test_admind_prom

$(ADMIND_OBJS) $(O)/tests/admin/test_admind_db.o $(O)/tests/admin/test_admind_prom.o: \
	CPPFLAGS += $(shell pkg-config --cflags $(ADMIND_PKGS)) \
	-DADMIND_WEB_DIR='"$(abspath $(ADMIND_WEB))"'

$(B)/presto-admind: $(ADMIND_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs $(ADMIND_PKGS)) -lm

$(T)/admin/test_admind_db: $(O)/tests/admin/test_admind_db.o $(O)/admin/admind_db.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs cmocka sqlite3 jansson) -lm

$(T)/admin/test_admind_prom: $(O)/tests/admin/test_admind_prom.o $(O)/admin/admind_prom.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs cmocka jansson)

# the served folder: our files, then the chart library from web/node_modules
all: $(ADMIND_WEB)/.stamp
$(ADMIND_WEB)/.stamp: $(ADMIND_WEB_SRC) web/node_modules/.package-lock.json
	@mkdir -p $(ADMIND_WEB)
	cp $(ADMIND_WEB_SRC) $(ADMIND_WEB)/
	cp web/node_modules/uplot/dist/uPlot.iife.min.js web/node_modules/uplot/dist/uPlot.min.css \
	    $(ADMIND_WEB)/
	@touch $@

web/node_modules/.package-lock.json: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: admind
admind: $(B)/presto-admind $(ADMIND_WEB)/.stamp

# cache/module.mk -- the NVRAM log library (see cache/nvlog_format.h).

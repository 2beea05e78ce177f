# nfsd/module.mk -- presto-nfsd.

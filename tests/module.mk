# tests/module.mk -- test programs are declared by the module they test
# (cache/module.mk, nfsd/module.mk, ...) and by the fragments of tests/*/.
-include $(wildcard tests/*/module.mk)

# admin/module.mk -- presto (the operator's command) and presto-admind.

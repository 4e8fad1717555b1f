# runtime/runtime.mk: libcfrt (owned by the runtime work; placeholder)

# cmake/cmake.mk: CommFuse's CMake package, CommFuseConfig.cmake and
# CommFuseConfigVersion.cmake: written into $(B) for the build tree
# (cmake -DCommFuse_DIR=$(B) finds it before installing) and by make
# install into PREFIX/lib/cmake/CommFuse. Included by the Makefile; uses its
# B, CC, PREFIX, DESTDIR and runtime/runtime.mk's RT_VERSION and RT_SONAME.

CM_FILES = $(B)/CommFuseConfig.cmake $(B)/CommFuseConfigVersion.cmake
CM_DIR = $(PREFIX)/lib/cmake/CommFuse

# $(call CM_CONFIG,INCLUDEDIR,LIBDIR,BINDIR): the config naming where
# cfrt.h, libcfrt and cfc are.
CM_CONFIG = sed -e 's|@INCLUDEDIR@|$(1)|' -e 's|@LIBDIR@|$(2)|' -e 's|@BINDIR@|$(3)|' \
                -e 's|@VERSION@|$(RT_VERSION)|g' -e 's|@SONAME@|$(RT_SONAME)|g' \
                -e 's|@SANLINK@|$(SANLINK)|g' cmake/CommFuseConfig.cmake.in
# The version file knows the pointer size the libraries are built for.
CM_VERSION = sz=$$(echo __SIZEOF_POINTER__ | $(CC) -E -P -x c - | tail -n 1) && \
	sed -e 's|@VERSION@|$(RT_VERSION)|g' -e 's|@MAJOR@|$(firstword $(subst ., ,$(RT_VERSION)))|g' \
	    -e "s|@SIZEOF_VOID_P@|$$sz|g" -e "s|@BITS@|$$((sz * 8))|g" cmake/CommFuseConfigVersion.cmake.in

$(B)/CommFuseConfig.cmake: cmake/CommFuseConfig.cmake.in cmake/cmake.mk runtime/runtime.mk
	@mkdir -p $(@D)
	$(call CM_CONFIG,$(CURDIR)/runtime,$(abspath $(B)),$(abspath $(B))) >$@

$(B)/CommFuseConfigVersion.cmake: cmake/CommFuseConfigVersion.cmake.in cmake/cmake.mk \
                                  runtime/runtime.mk
	@mkdir -p $(@D)
	$(CM_VERSION) >$@

all: $(CM_FILES)
CHECK_DEPS += $(CM_FILES)

# The installed config finds the prefix from its own place: the same file
# serves a DESTDIR stage and the prefix it is unpacked into.
install-cmake: $(CM_FILES)
	mkdir -p $(DESTDIR)$(CM_DIR)
	$(call CM_CONFIG,$${_CommFuse_prefix}/include,$${_CommFuse_prefix}/lib,$${_CommFuse_prefix}/bin) \
		>$(DESTDIR)$(CM_DIR)/CommFuseConfig.cmake
	cp $(B)/CommFuseConfigVersion.cmake $(DESTDIR)$(CM_DIR)/

install: install-cmake
.PHONY: install-cmake

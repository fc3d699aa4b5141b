# Top-level build: every part has its own directory and Makefile; this file
# only delegates, with the same variables the reference's Makefile takes.
#
#   make                        library and test programs
#   make driver KVER=<release>  gdrdrv.ko for a kernel (default: running)
#   make softgpu KVER=<release> the softgpu test GPU (kernel module + libcuda.so.1)
#   make ktests                 kernel-level tests (run inside a VM)
#   make install                library, headers, pkg-config/CMake files, programs
#   make driver_install / softgpu_install / ktests_install
#   make check                  library unit tests (no kernel needed)
#   make version                prints the version
#
# Every sub-Makefile supports all, install and clean, and honours DESTDIR,
# prefix, libdir, bindir and includedir; kernel ones also KVER and KDIR.

prefix ?= /usr/local
exec_prefix ?= $(prefix)
libdir ?= $(exec_prefix)/lib
bindir ?= $(exec_prefix)/bin
includedir ?= $(prefix)/include
DESTDIR ?=
KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build

VERSION := $(shell awk '/^\#define GDRCOPY_VERSION_(MAJOR|MINOR|PATCH)/ {v = v sep $$3; sep = "."} END {print v}' include/gdrcopy_version.h)

SUBMAKE_VARS = prefix=$(prefix) exec_prefix=$(exec_prefix) libdir=$(libdir) bindir=$(bindir) \
	includedir=$(includedir) DESTDIR=$(DESTDIR)
KERNEL_VARS = KVER=$(KVER) KDIR=$(KDIR)

.PHONY: all check lib exes driver softgpu ktests install lib_install exes_install driver_install \
	drv_install softgpu_install ktests_install clean version

all: lib exes

version:
	@echo $(VERSION)

# Library tests that need no kernel (fake gdrdrv and CUDA; seconds).
check: lib
	$(MAKE) -C tests/unit check

lib:
	$(MAKE) -C libgdrapi $(SUBMAKE_VARS)

exes: lib softgpu_lib
	$(MAKE) -C tests/sanity $(SUBMAKE_VARS)
	$(MAKE) -C tests/bench $(SUBMAKE_VARS)

driver:
	$(MAKE) -C gdrdrv $(KERNEL_VARS) $(MAKE_PARAMS)

softgpu_lib:
	$(MAKE) -C tests/softgpu/libcuda $(SUBMAKE_VARS)

softgpu_kmod:
	$(MAKE) -C tests/softgpu/kmod $(KERNEL_VARS)

softgpu: softgpu_kmod softgpu_lib

ktests: softgpu_lib
	$(MAKE) -C tests/kernel $(SUBMAKE_VARS)

install: lib_install exes_install

lib_install: lib
	$(MAKE) -C libgdrapi install $(SUBMAKE_VARS)

exes_install: exes
	$(MAKE) -C tests/sanity install $(SUBMAKE_VARS)
	$(MAKE) -C tests/bench install $(SUBMAKE_VARS)

driver_install drv_install: driver
	$(MAKE) -C gdrdrv install $(KERNEL_VARS) DESTDIR=$(DESTDIR) $(MAKE_PARAMS)

softgpu_install: softgpu
	$(MAKE) -C tests/softgpu/kmod install $(KERNEL_VARS) DESTDIR=$(DESTDIR)
	$(MAKE) -C tests/softgpu/libcuda install $(SUBMAKE_VARS)

ktests_install: ktests
	$(MAKE) -C tests/kernel install $(SUBMAKE_VARS)

clean:
	for d in libgdrapi tests/unit tests/sanity tests/bench tests/kernel tests/softgpu/libcuda; do \
		$(MAKE) -C $$d clean || exit 1; done
	$(MAKE) -C gdrdrv clean $(KERNEL_VARS)
	$(MAKE) -C tests/softgpu/kmod clean $(KERNEL_VARS)

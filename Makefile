# Top-level build: every part has its own directory and Makefile; this file
# only delegates, with the same targets and variables as GDRCopy 2.6's
# Makefile, so automation written for it runs unchanged (README, "Drop-in
# for existing automation").
#
#   make [all]                  config, library, test programs and, where the
#                               kernel's headers are installed, gdrdrv.ko
#   make config                 prints GDRAPI_ARCH=<X86|POWER|ARM64|...>
#   make lib / exes             library / test programs (CUDA=<toolkit> optional)
#   make driver KVER=<release>  gdrdrv.ko for a kernel (default: running)
#   make softgpu KVER=<release> the softgpu test GPU (kernel module + libcuda.so.1)
#   make ktests                 kernel-level tests (run inside a VM)
#   make install                library, headers, pkg-config/CMake files, programs
#   make uninstall              removes what make install put (same prefix, DESTDIR)
#   make lib_install / exes_install
#   make driver_install (= drv_install) / softgpu_install / ktests_install
#   make check                  library unit tests (no kernel needed)
#   make version                prints the version
#
# Every sub-Makefile supports all, install and clean, and honours DESTDIR,
# prefix, libdir, bindir and includedir; kernel ones also KVER and KDIR.
# A relative DESTDIR is taken from this directory.  MAKE_PARAMS goes to the
# driver's make (e.g. MAKE_PARAMS="NVIDIA_SRC_DIR=/usr/src/nvidia-550/nvidia").

prefix ?= /usr/local
exec_prefix ?= $(prefix)
libdir ?= $(exec_prefix)/lib
bindir ?= $(exec_prefix)/bin
includedir ?= $(prefix)/include
DESTDIR ?=
# The sub-makes run in other directories: make a relative DESTDIR absolute.
override DESTDIR := $(if $(DESTDIR),$(abspath $(DESTDIR)))
KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
# Only for a CUDA toolkit's cuda.h and libcuda stub; never required (tests/common/cuda.mk).
CUDA ?= /usr/local/cuda

VERSION := $(shell awk '/^\#define GDRCOPY_VERSION_(MAJOR|MINOR|PATCH)/ {v = v sep $$3; sep = "."} END {print v}' include/gdrcopy_version.h)

SUBMAKE_VARS = prefix=$(prefix) exec_prefix=$(exec_prefix) libdir=$(libdir) bindir=$(bindir) \
	includedir=$(includedir) DESTDIR=$(DESTDIR)
EXES_VARS = $(SUBMAKE_VARS) CUDA=$(CUDA)
KERNEL_VARS = KVER=$(KVER) KDIR=$(KDIR)

.PHONY: python_install doctor_install man_install all config check lib exes driver driver_if_headers softgpu ktests install lib_install exes_install \
	uninstall lib_uninstall exes_uninstall man_uninstall driver_install drv_install softgpu_install ktests_install clean version

# As GDRCopy's: everything that builds in the tree.  gdrdrv needs the
# kernel's headers; where they are missing it is left out with a note
# (`make driver` then fails with the package to install).
all: config lib exes driver_if_headers

driver_if_headers:
ifneq ($(wildcard $(KDIR)/Makefile),)
	$(MAKE) driver
else
	@echo "note: gdrdrv.ko not built: no kernel headers at $(KDIR) (install linux-headers-$(KVER) or kernel-devel, then make driver)" >&2
endif

version:
	@echo $(VERSION)

# The gdrcopy Python module (pure Python: nothing to build) into pythondir.
pythondir ?= $(prefix)/lib/python3/dist-packages
PYTHON_FILES := $(sort $(wildcard python/gdrcopy/*.py)) python/gdrcopy/py.typed
python_install:
	install -d $(DESTDIR)$(pythondir)/gdrcopy
	install -m 0644 $(PYTHON_FILES) $(DESTDIR)$(pythondir)/gdrcopy/

# gdrcopy_doctor's modules: the toolkit's doctor (every module of
# gdrkit/gdrcopy_doctor, which imports only the standard library and itself)
# as the package gdrcopy_doctor under doctordir.  The packages
# add its launcher and facts.json (gdrkit/packaging/render.py).
doctordir ?= $(prefix)/share/gdrcopy
DOCTOR_FILES := $(sort $(wildcard gdrkit/gdrcopy_doctor/*.py))
doctor_install:
	install -d $(DESTDIR)$(doctordir)/gdrcopy_doctor
	install -m 0644 $(DOCTOR_FILES) $(DESTDIR)$(doctordir)/gdrcopy_doctor/

# The CPU family the library's copy routines are built for (GDRCopy's make config).
UNAME_M := $(shell uname -m)
GDRAPI_ARCH := $(or $(if $(filter x86_64 i386 i486 i586 i686,$(UNAME_M)),X86), \
	$(if $(filter ppc64 ppc64le,$(UNAME_M)),POWER),$(if $(filter aarch64 arm64,$(UNAME_M)),ARM64),$(UNAME_M))
config:
	@echo "GDRAPI_ARCH=$(GDRAPI_ARCH)"

# Library tests that need no kernel (fake gdrdrv and CUDA; seconds).
check: lib
	$(MAKE) -C tests/unit check

lib:
	$(MAKE) -C libgdrapi $(SUBMAKE_VARS)

exes: lib softgpu_lib
	$(MAKE) -C tests/sanity $(EXES_VARS)
	$(MAKE) -C tests/bench $(EXES_VARS)

driver:
	$(MAKE) -C gdrdrv $(KERNEL_VARS) $(MAKE_PARAMS)

softgpu_lib:
	$(MAKE) -C tests/softgpu/libcuda $(SUBMAKE_VARS)

softgpu_kmod:
	$(MAKE) -C tests/softgpu/kmod $(KERNEL_VARS)

softgpu: softgpu_kmod softgpu_lib

ktests: softgpu_lib
	$(MAKE) -C tests/kernel $(SUBMAKE_VARS)

install: lib_install exes_install man_install

# The programs' man pages (man/, made from their -h texts by ./toolkit man-pages).
mandir ?= $(prefix)/share/man
MAN_PAGES := $(sort $(wildcard man/*.1))
man_install:
	install -d $(DESTDIR)$(mandir)/man1
	install -m 0644 $(MAN_PAGES) $(DESTDIR)$(mandir)/man1/

lib_install: lib
	$(MAKE) -C libgdrapi install $(SUBMAKE_VARS)

exes_install: exes
	$(MAKE) -C tests/sanity install $(EXES_VARS)
	$(MAKE) -C tests/bench install $(EXES_VARS)

driver_install drv_install: driver
	$(MAKE) -C gdrdrv install $(KERNEL_VARS) DESTDIR=$(DESTDIR) $(MAKE_PARAMS)

softgpu_install: softgpu
	$(MAKE) -C tests/softgpu/kmod install $(KERNEL_VARS) DESTDIR=$(DESTDIR)
	$(MAKE) -C tests/softgpu/libcuda install $(SUBMAKE_VARS)

# The same variables as install; the directories shared with other software stay.
uninstall: lib_uninstall exes_uninstall man_uninstall

man_uninstall:
	rm -f $(addprefix $(DESTDIR)$(mandir)/man1/,$(notdir $(MAN_PAGES)))

lib_uninstall:
	$(MAKE) -C libgdrapi uninstall $(SUBMAKE_VARS)

exes_uninstall:
	$(MAKE) -C tests/sanity uninstall $(SUBMAKE_VARS)
	$(MAKE) -C tests/bench uninstall $(SUBMAKE_VARS)

ktests_install: ktests
	$(MAKE) -C tests/kernel install $(SUBMAKE_VARS)

clean:
	for d in libgdrapi tests/unit tests/sanity tests/bench tests/kernel tests/softgpu/libcuda; do \
		$(MAKE) -C $$d clean || exit 1; done
	$(MAKE) -C gdrdrv clean $(KERNEL_VARS)
	$(MAKE) -C tests/softgpu/kmod clean $(KERNEL_VARS)

# Top-level build: every part has its own directory and Makefile; this file
# only delegates, with the same targets and variables as GDRCopy 2.6's
# Makefile, so automation written for it runs unchanged (docs/nodes.md,
# "Drop-in for existing automation").
#
#   make [all]                  config, library, test programs and, where the
#                               kernel's headers are installed, gdrdrv.ko
#   make config                 prints GDRAPI_ARCH=<X86|POWER|ARM64|...>
#   make lib / exes             library / test programs (CUDA=<toolkit> optional)
#   make driver KVER=<release>  gdrdrv.ko for a kernel (default: running)
#   make softgpu KVER=<release> the softgpu test GPU (kernel module + libcuda.so.1)
#   make ktests                 kernel-level tests (run inside a VM)
#   make install                library, headers, pkg-config/CMake files, programs,
#                               man pages and, with a Python that has PyYAML and
#                               Jinja2, gdrcopy_doctor
#   make uninstall              removes what make install put (same prefix, DESTDIR)
#   make dist                   GDRCopy 2.6's binary tarballs under build/:
#                               libgdrapi-, gdrcopy-tests-, gdrdrv-linux-<arch>-<version>.tar.gz
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

.PHONY: python_install doctor_install doctor_program_install man_doctor_install doctor_uninstall dist man_install all config check lib exes driver driver_if_headers softgpu ktests install lib_install exes_install \
	uninstall lib_uninstall exes_uninstall man_uninstall driver_install drv_install softgpu_install ktests_install clean version

# As GDRCopy's: everything that builds in the tree.  gdrdrv needs the
# kernel's headers and an NVIDIA driver to build for (its sources or its
# module for KVER, or MAKE_PARAMS saying which); where either is missing it
# is left out with a note (`make driver` then fails saying what to install).
all: config lib exes driver_if_headers

driver_if_headers:
ifneq ($(wildcard $(KDIR)/Makefile),)
	@if $(MAKE) -s -C gdrdrv $(KERNEL_VARS) $(MAKE_PARAMS) settings >/dev/null 2>&1; then \
		$(MAKE) driver; \
	else \
		echo "note: gdrdrv.ko not built: no NVIDIA driver for $(KVER) to build it for ('make driver' says what to install, or pass MAKE_PARAMS)" >&2; \
	fi
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

# make install's gdrcopy_doctor, beside its man page: the modules, and the launcher and
# facts.json that gdrkit writes from packages/gdrcopy.yaml, which takes a Python with PyYAML
# and Jinja2 (the toolkit's .venv, or python3-yaml and python3-jinja2).  Without one, the
# program and its man page are left out with a note, as gdrdrv.ko is without kernel headers.
# The packages render the launcher and facts.json themselves and pass DOCTOR_PROGRAM=no.
DOCTOR_PYTHON ?= $(firstword $(wildcard $(CURDIR)/.venv/bin/python) python3)
DOCTOR_PROGRAM ?= yes
doctor_program_install:
	@if [ "$(DOCTOR_PROGRAM)" = no ]; then :; elif $(DOCTOR_PYTHON) -c 'import yaml, jinja2' 2>/dev/null; then \
		$(MAKE) --no-print-directory doctor_install && \
		$(DOCTOR_PYTHON) -m gdrkit.packaging.install_doctor --destdir "$(DESTDIR)" --bindir "$(bindir)" \
			--doctordir "$(doctordir)" && \
		$(MAKE) --no-print-directory man_doctor_install; \
	else \
		echo "note: gdrcopy_doctor not installed: $(DOCTOR_PYTHON) lacks PyYAML or Jinja2 (apt-get install python3-yaml python3-jinja2, or run ./toolkit once for .venv)" >&2; \
	fi

man_doctor_install:
	install -d $(DESTDIR)$(mandir)/man1
	install -m 0644 man/gdrcopy_doctor.1 $(DESTDIR)$(mandir)/man1/

doctor_uninstall:
	rm -f $(DESTDIR)$(bindir)/gdrcopy_doctor $(DESTDIR)$(mandir)/man1/gdrcopy_doctor.1
	rm -rf $(DESTDIR)$(doctordir)/gdrcopy_doctor
	-rmdir $(DESTDIR)$(doctordir) 2>/dev/null

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

install: lib_install exes_install man_install doctor_program_install

# The programs' man pages (man/, made from their -h texts by ./toolkit man-pages);
# gdrcopy_doctor's goes with the program (doctor_program_install).
mandir ?= $(prefix)/share/man
MAN_PAGES := $(filter-out man/gdrcopy_doctor.1,$(sort $(wildcard man/*.1)))
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
uninstall: lib_uninstall exes_uninstall man_uninstall doctor_uninstall

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

# GDRCopy 2.6's `make dist`: three tarballs under build/, named as its are (with this version),
# each with LICENSE: the library (lib64/, include/), the test programs (bin/) and gdrdrv's
# sources (src/, with the two headers it builds against, as the DKMS tree has them).
DIST_ARCH := $(UNAME_M)
DIST_STAGE := build/dist-stage
DIST_TARBALLS := $(foreach p,libgdrapi gdrcopy-tests gdrdrv,build/$(p)-linux-$(DIST_ARCH)-$(VERSION).tar.gz)
GDRDRV_DIST_FILES := gdrdrv/Kbuild gdrdrv/Makefile gdrdrv/README.md $(wildcard gdrdrv/*.c gdrdrv/*.h) \
	$(wildcard gdrdrv/scripts/*.sh gdrdrv/udev/*.rules gdrdrv/p2p-symbols/Kbuild gdrdrv/p2p-symbols/*.c)
DIST_TAR = tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -czf
dist: lib exes
	rm -rf $(DIST_STAGE) $(DIST_TARBALLS)
	$(MAKE) -C libgdrapi install prefix= exec_prefix= libdir=/lib64 includedir=/include \
		DESTDIR=$(abspath $(DIST_STAGE))/lib
	$(MAKE) -C tests/sanity install bindir=/bin DESTDIR=$(abspath $(DIST_STAGE))/tests
	$(MAKE) -C tests/bench install bindir=/bin DESTDIR=$(abspath $(DIST_STAGE))/tests
	install -d $(DIST_STAGE)/gdrdrv/src/include/uapi
	cp --parents $(GDRDRV_DIST_FILES) $(DIST_STAGE)/gdrdrv/ && mv $(DIST_STAGE)/gdrdrv/gdrdrv/* $(DIST_STAGE)/gdrdrv/src/ \
		&& rmdir $(DIST_STAGE)/gdrdrv/gdrdrv
	install -m 0644 include/uapi/gdrdrv.h $(DIST_STAGE)/gdrdrv/src/include/uapi/
	install -m 0644 include/gdrcopy_version.h $(DIST_STAGE)/gdrdrv/src/include/
	for d in lib tests gdrdrv; do install -m 0644 templates/licenses/MIT.txt $(DIST_STAGE)/$$d/LICENSE; done
	cd $(DIST_STAGE)/lib && $(DIST_TAR) ../../libgdrapi-linux-$(DIST_ARCH)-$(VERSION).tar.gz lib64 include LICENSE
	cd $(DIST_STAGE)/tests && $(DIST_TAR) ../../gdrcopy-tests-linux-$(DIST_ARCH)-$(VERSION).tar.gz bin LICENSE
	cd $(DIST_STAGE)/gdrdrv && $(DIST_TAR) ../../gdrdrv-linux-$(DIST_ARCH)-$(VERSION).tar.gz src LICENSE
	rm -rf $(DIST_STAGE)
	@for t in $(DIST_TARBALLS); do echo "built $$t"; done

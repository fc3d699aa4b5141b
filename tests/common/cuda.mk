# cuda.mk - how test programs find the CUDA driver API.  Include it from a
# Makefile under tests/ (after setting nothing: it defines the variables).
#
#   CUDA ?= /usr/local/cuda     a CUDA toolkit, only for cuda.h and a libcuda
#                               to link with; never needed.
#
# Header: $(CUDA)/include/cuda.h when it exists, else softgpu's minimal one.
# Library: the first libcuda.so under $(CUDA) (stubs first), else softgpu's
# libcuda.so.1.  Either way the program records only the soname
# libcuda.so.1, so the same binary runs on a real GPU driver and on softgpu.
# Override with CUDA_CPPFLAGS / CUDA_LDLIBS.

TESTS_COMMON_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
TOPDIR := $(abspath $(TESTS_COMMON_DIR)/../..)
CUDA ?= /usr/local/cuda
SOFTGPU_LIBCUDA_DIR := $(TOPDIR)/tests/softgpu/libcuda

ifneq ($(wildcard $(CUDA)/include/cuda.h),)
CUDA_CPPFLAGS ?= -I$(CUDA)/include
else
CUDA_CPPFLAGS ?= -I$(SOFTGPU_LIBCUDA_DIR)/include
endif

CUDA_LIBCUDA := $(firstword $(wildcard $(CUDA)/lib64/stubs/libcuda.so $(CUDA)/lib/stubs/libcuda.so \
	$(CUDA)/lib64/libcuda.so $(CUDA)/lib/libcuda.so /usr/lib64/nvidia/libcuda.so \
	/usr/lib/nvidia/libcuda.so))
ifneq ($(CUDA_LIBCUDA),)
CUDA_LDLIBS ?= -L$(dir $(CUDA_LIBCUDA)) -lcuda
else
CUDA_LDLIBS ?= $(SOFTGPU_LIBCUDA_DIR)/libcuda.so.1 -Wl,-rpath-link,$(SOFTGPU_LIBCUDA_DIR)
endif

GDRAPI_CPPFLAGS := -I$(TOPDIR)/include
GDRAPI_LIBDIR ?= $(TOPDIR)/libgdrapi/build
GDRAPI_LDLIBS := -L$(GDRAPI_LIBDIR) -lgdrapi -Wl,-rpath-link,$(GDRAPI_LIBDIR)

TESTUTIL_LIB := $(TOPDIR)/tests/common/libtestutil.a
TESTUTIL_CPPFLAGS := -I$(TOPDIR)/tests/common

"""The gdrcopy Python package against the real libgdrapi and fake drivers.

The library's own sources are linked into one shared object with the unit
tests' fakes (tests/unit/fakes.c, fake_vulkan.c: a gdrdrv behind open/ioctl/
mmap, a CUDA driver and a Vulkan loader behind dlopen, all through
-Wl,--wrap), and the package loads that object through GDRCOPY_LIBRARY.  So
every call goes through the C library's real checks and copy routines; only
the kernel and the GPU are stand-ins.  Needs a C compiler (cc).
"""

from __future__ import annotations

import ctypes
import gc
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import gdrcopy  # noqa: E402
from gdrcopy import _lib  # noqa: E402
from gdrkit.system import ensure_debian_packages  # noqa: E402

GPU_PAGE = 1 << 16
FAKE_VA = 0x7F0000000000

try:
    import numpy
except ImportError:  # the toolkit's test extra has it (requirements/test.txt)
    numpy = None  # type: ignore[assignment]

needs_numpy = pytest.mark.skipif(numpy is None, reason="NumPy is not installed in this Python (pip install numpy)")


class GdrdrvConfig(ctypes.Structure):
    _fields_ = [
        ("open_errno", ctypes.c_int),
        ("version_errno", ctypes.c_int),
        ("version", ctypes.c_uint32),
        ("minimum_api", ctypes.c_uint32),
        ("default_type", ctypes.c_uint32),
        ("unsupported_types", ctypes.c_uint32),
        ("pin_errno", ctypes.c_int),
        ("attr_errno", ctypes.c_int),
        ("persistent", ctypes.c_bool),
        ("force_pcie", ctypes.c_bool),
        ("tsc_khz", ctypes.c_uint32),
    ]


class CudaConfig(ctypes.Structure):
    _fields_ = [
        ("present", ctypes.c_bool),
        ("driver_version", ctypes.c_int),
        ("dmabuf_supported", ctypes.c_bool),
        ("coherent", ctypes.c_bool),
        ("mmap_errno", ctypes.c_int),
        ("have_context", ctypes.c_bool),
    ]


class VulkanConfig(ctypes.Structure):
    _fields_ = [
        ("present", ctypes.c_bool),
        ("bar1_visible", ctypes.c_bool),
        ("host_cached", ctypes.c_bool),
        ("heap_size", ctypes.c_uint64),
        ("create_device_fails", ctypes.c_bool),
        ("export_fails", ctypes.c_bool),
        ("import_fails", ctypes.c_bool),
        ("misaligned_import", ctypes.c_bool),
        ("no_vmm_calls", ctypes.c_bool),
        ("no_opaque_fd_import", ctypes.c_bool),
    ]


class SysPaths(ctypes.Structure):
    _fields_ = [(name, ctypes.c_char_p) for name in ("device", "sys_misc_dev", "proc_devices", "sys_module")]


@pytest.fixture(scope="session")
def fake_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_debian_packages(["gcc", "libc6-dev"])
    cc = shutil.which("cc") or "gcc"
    out = tmp_path_factory.mktemp("fakelib") / "libgdrapi-fakes.so"
    sources = sorted(str(p) for p in (REPO / "libgdrapi" / "src").glob("*.c"))
    sources += [str(REPO / "tests" / "unit" / "fakes.c"), str(REPO / "tests" / "unit" / "fake_vulkan.c")]
    wraps = [f"-Wl,--wrap={f}" for f in ("open", "close", "ioctl", "mmap", "munmap", "dlopen", "dlsym", "dlclose")]
    argv = [
        cc,
        "-O1",
        "-g",
        "-fPIC",
        "-shared",
        "-std=gnu11",
        "-pthread",
        "-D_GNU_SOURCE",
        f"-I{REPO / 'include'}",
        f"-I{REPO / 'libgdrapi' / 'src'}",
        "-o",
        str(out),
        *sources,
        *wraps,
        "-ldl",
    ]
    result = subprocess.run(argv, capture_output=True, text=True)
    assert result.returncode == 0, f"building the fake library failed:\n{result.stderr[-4000:]}"
    return out


@pytest.fixture
def fakes(fake_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ctypes.CDLL]:
    """The fakes reset to a 2.6 gdrdrv with WC mappings, no CUDA, no Vulkan; the package using them."""
    monkeypatch.setenv("GDRCOPY_LIBRARY", str(fake_library))
    monkeypatch.setenv("GDRCOPY_ENABLE_LOGGING", "1")
    monkeypatch.delenv("GDRCOPY_BACKEND", raising=False)
    monkeypatch.delenv("GDRCOPY_USE_DMABUF_MMAP", raising=False)
    # Never the host's /etc/gdrcopy.conf: a test that allows vulkan for the node writes this one.
    monkeypatch.setenv("GDRCOPY_CONFIG_FILE", str(tmp_path / "gdrcopy.conf"))
    lib = ctypes.CDLL(str(fake_library))
    lib.fake_gdrdrv_default.restype = GdrdrvConfig
    for name in ("fake_live_files", "fake_live_pins", "fake_live_mappings", "fake_vulkan_live_objects"):
        getattr(lib, name).restype = ctypes.c_uint
    lib.fake_gdrdrv_invalidate.argtypes = [ctypes.c_ulong]
    lib.fake_cuda_add_range.argtypes = [ctypes.c_ulong, ctypes.c_size_t]
    # /proc/devices without gdrdrv and a node path of our own: the host's real gdrdrv, if any, is never seen.
    paths = SysPaths(*(str(tmp_path / name).encode() for name in ("gdrdrv", "misc-dev", "devices", "module")))
    (tmp_path / "devices").write_text("Character devices:\n  1 mem\n\nBlock devices:\n")
    ctypes.c_void_p.in_dll(lib, "gdrdrv_sys_paths").value = ctypes.addressof(paths)
    cfg = lib.fake_gdrdrv_default()
    lib.fake_reset(ctypes.byref(cfg))
    _lib.reset_for_tests()
    yield lib
    gc.collect()
    assert lib.fake_live_files() == 0, "a test left a gdr_t open"
    assert lib.fake_vulkan_live_objects() == 0, "a test left Vulkan objects alive"
    _lib.reset_for_tests()


@pytest.fixture(scope="session")
def fastcopy_module(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """gdrcopy._fastcopy built from python/src with this Python's headers (as pip would build it)."""
    import importlib.util
    import sysconfig

    ensure_debian_packages(["gcc", "libc6-dev"])
    cc = shutil.which("cc") or "gcc"
    if sys.version_info < (3, 11):
        pytest.skip(f"gdrcopy._fastcopy needs the stable ABI of Python 3.11; this is {sys.version.split()[0]}")
    out = tmp_path_factory.mktemp("fastcopy") / "_fastcopy.abi3.so"
    argv = [cc, "-O2", "-fPIC", "-shared", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wstrict-prototypes",
            "-Wmissing-prototypes", f"-I{sysconfig.get_paths()['include']}", "-o", str(out),
            str(REPO / "python" / "src" / "gdrcopy_fastcopy.c")]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True)
    assert result.returncode == 0, f"building gdrcopy._fastcopy failed:\n{result.stderr[-4000:]}"
    spec = importlib.util.spec_from_file_location("gdrcopy._fastcopy", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from gdrcopy import _core

    module.configure(gdrcopy.ClosedError, gdrcopy.GdrError, _core._host_buffer)
    return module


@pytest.fixture
def fastcopy(fastcopy_module: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Mappings made in the test copy through the compiled calls."""
    from gdrcopy import _core

    monkeypatch.setattr(_core, "_fastcopy", fastcopy_module)
    monkeypatch.delenv(_core.FAST_PATH_ENV, raising=False)
    return fastcopy_module


def pattern(n: int, seed: int = 1) -> bytes:
    return bytes((i * 131 + seed * 7 + (i >> 8)) & 0xFF for i in range(n))


def test_version_is_the_projects() -> None:
    header = (REPO / "include" / "gdrcopy_version.h").read_text()
    parts = [
        line.split()[2]
        for line in header.splitlines()
        if line.startswith("#define GDRCOPY_VERSION_") and line.split()[1][-5:] in ("MAJOR", "MINOR", "PATCH")
    ]
    assert gdrcopy.__version__ == ".".join(parts)


def test_backends_are_the_librarys_in_its_order(fakes: ctypes.CDLL) -> None:
    """gdrcopy.backends() asks the library (gdr_get_backend_list): GDR_BACKENDS of backend.h, in its order."""
    from gdrcopy import _core

    header = (REPO / "libgdrapi" / "src" / "backend.h").read_text()
    macro = re.search(r"#define GDR_BACKENDS\(X\)((?:.*\\\n)*.*)", header)
    assert macro is not None, "backend.h no longer defines GDR_BACKENDS(X)"
    assert gdrcopy.backends() == tuple(re.findall(r"X\((\w+)\)", macro.group(1)))
    assert gdrcopy.BACKENDS == gdrcopy.backends()
    # No list of its own: nothing in the bindings' source names a backend to accept.
    assert "BACKENDS = (" not in Path(_core.__file__).read_text()


def test_library_version_and_backend(fakes: ctypes.CDLL) -> None:
    assert gdrcopy.library_version() == "2.6"
    with gdrcopy.open() as g:
        assert g.backend_name == "gdrdrv"
        assert g.driver_version() == (2, 6)
        assert g.persistent_mapping is True
        info = g.info()
        assert info["backend"] == "gdrdrv" and info["driver_version"] == "2.6"
        # The fake is GDRCopy's driver: judged by flavour and kernel, a boolean either way.
        assert info["mappings_inherited_on_fork"] in (True, False)
        assert g.mappings_inherited_on_fork is info["mappings_inherited_on_fork"]
    assert g.closed
    with pytest.raises(gdrcopy.ClosedError, match="closed"):
        g.pin((FAKE_VA, 10))


def test_missing_library_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GDRCOPY_LIBRARY", str(tmp_path / "libgdrapi.so.2"))
    _lib.reset_for_tests()
    try:
        with pytest.raises(gdrcopy.LibraryNotFound, match="install the libgdrapi package"):
            gdrcopy.open()
    finally:
        _lib.reset_for_tests()


def test_open_failure_carries_the_library_reason(fakes: ctypes.CDLL) -> None:
    cfg = fakes.fake_gdrdrv_default()
    cfg.open_errno = 13  # EACCES
    fakes.fake_reset(ctypes.byref(cfg))
    with pytest.raises(gdrcopy.GdrError) as caught:
        gdrcopy.open(backend="gdrdrv")
    assert caught.value.errno == 13
    assert caught.value.function == "gdr_open"
    assert "gdrdrv" in caught.value.reason, caught.value.reason
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        gdrcopy.open(backend="cuda")


@pytest.mark.parametrize("offset", [0, 1, 63, 4095, GPU_PAGE - 1, GPU_PAGE + 17])
def test_round_trip_sizes_and_offsets(fakes: ctypes.CDLL, offset: int) -> None:
    total = 3 * GPU_PAGE
    with gdrcopy.open() as g, g.map((FAKE_VA, total)) as m:
        assert m.nbytes == total and m.mapping_type == gdrcopy.MappingType.WC
        for size in (0, 1, 7, 64, 100, 4096, 65536, total - offset):
            if size > total - offset:
                continue
            data = pattern(size, size + offset)
            m.copy_to(data, offset)
            back = bytearray(size)
            m.copy_from(back, offset)
            assert bytes(back) == data, (size, offset)
            assert m.read(offset, size) == data


def test_unaligned_buffer_is_pinned_from_its_page(fakes: ctypes.CDLL) -> None:
    with gdrcopy.open() as g:
        pin = g.pin((FAKE_VA + 4099, 5000))
        m = pin.map()
        assert (m.ptr - 4099) % 4096 == 0  # the mapping starts on a host page, the buffer 4099 bytes in
        assert pin.info().va == FAKE_VA + 4099 and pin.info().mapped
        m.copy_to(b"x" * 5000)
        with pytest.raises(ValueError, match="1 bytes at offset 5000 do not fit the 5000-byte mapping"):
            m.copy_to(b"y", 5000)
        m.close()
        assert not pin.info().mapped and fakes.fake_live_mappings() == 0
        pin.close()
        assert fakes.fake_live_pins() == 0


def test_host_buffers_of_every_kind(fakes: ctypes.CDLL) -> None:
    with gdrcopy.open() as g, g.map((FAKE_VA, GPU_PAGE)) as m:
        m.copy_to(bytearray(b"bytearray"), 0)
        m.copy_to(memoryview(b"--memoryview--")[2:-2], 20)
        import array

        m.copy_to(array.array("I", [0x01020304]), 40)
        assert m.read(0, 9) == b"bytearray"
        assert m.read(20, 10) == b"memoryview"
        assert m.read(40, 4) == bytes(array.array("I", [0x01020304]))
        out = bytearray(20)
        m.copy_from(out, 0, size=9)
        assert out[:9] == b"bytearray" and out[9:] == bytes(11)


def test_range_and_type_errors_are_clear(fakes: ctypes.CDLL) -> None:
    with gdrcopy.open() as g, g.map((FAKE_VA, 100)) as m:
        with pytest.raises(ValueError, match="101 bytes at offset 0 do not fit the 100-byte mapping"):
            m.copy_to(bytes(101))
        with pytest.raises(ValueError, match="at offset -1"):
            m.copy_from(bytearray(1), -1)
        with pytest.raises(ValueError, match="size 5 is outside the 4-byte host buffer"):
            m.copy_to(b"abcd", 0, size=5)
        with pytest.raises(TypeError, match="bytes are read-only"):
            m.copy_from(b"abcd")
        with pytest.raises(TypeError, match="read-only"):
            m.copy_from(memoryview(b"abcd"))
        with pytest.raises(TypeError, match="int is not a host buffer"):
            m.copy_to(5)
        with pytest.raises(ValueError, match="not contiguous"):
            m.copy_to(memoryview(b"abcdef")[::2])
    with pytest.raises(gdrcopy.ClosedError):
        m.copy_to(b"a")
    with pytest.raises(gdrcopy.ClosedError):
        m.copy_from(bytearray(1))


def test_gpu_buffer_spellings(fakes: ctypes.CDLL) -> None:
    class CuPyLike:
        def __init__(self, ptr: int, shape: tuple[int, ...], strides: Any = None) -> None:
            self.__cuda_array_interface__ = {
                "version": 3,
                "data": (ptr, False),
                "shape": shape,
                "typestr": "<f4",
                "strides": strides,
            }

    with gdrcopy.open() as g:
        with g.map(CuPyLike(FAKE_VA, (16, 16))) as m:
            assert m.nbytes == 16 * 16 * 4
        with pytest.raises(ValueError, match="not contiguous"):
            g.pin(CuPyLike(FAKE_VA, (16, 16), (128, 4)))
        with pytest.raises(TypeError, match="is not a GPU buffer"):
            g.pin(b"host memory")
        with pytest.raises(ValueError, match="positive"):
            g.pin((FAKE_VA, 0))


def _dlpack_capsule(device_type: int, data: int, shape: list[int], byte_offset: int = 0) -> Any:
    from gdrcopy import _gpubuf

    tensor = _gpubuf._DLTensor()
    tensor.data = data
    tensor.device.device_type = device_type
    tensor.ndim = len(shape)
    tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = 1, 16, 1
    shape_array = (ctypes.c_int64 * len(shape))(*shape)
    tensor.shape = shape_array
    tensor.byte_offset = byte_offset
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(tensor), b"dltensor", None)
    _keep.append((tensor, shape_array))  # the capsule does not own them
    return capsule


_keep: list[object] = []


def test_dlpack(fakes: ctypes.CDLL) -> None:
    class Producer:
        def __dlpack__(self) -> Any:
            return _dlpack_capsule(2, FAKE_VA, [8, 8], byte_offset=256)

    with gdrcopy.open() as g:
        pin = g.pin(Producer())
        assert (pin.gpu_ptr, pin.nbytes) == (FAKE_VA + 256, 128)
        pin.close()
        with pytest.raises(ValueError, match="lives in CPU memory"):
            g.pin(_dlpack_capsule(1, FAKE_VA, [4]))


def test_invalidation_is_reported(fakes: ctypes.CDLL) -> None:
    with gdrcopy.open() as g, g.map((FAKE_VA, GPU_PAGE)) as m:
        assert not m.invalidated
        m.check()
        fakes.fake_gdrdrv_invalidate(FAKE_VA)  # as if cuMemFree ran while pinned
        assert m.invalidated
        with pytest.raises(gdrcopy.InvalidatedError, match="freed while pinned"):
            m.check()


def test_closing_a_parent_closes_its_children_first(fakes: ctypes.CDLL) -> None:
    g = gdrcopy.open()
    pins = [g.pin((FAKE_VA + i * GPU_PAGE, GPU_PAGE)) for i in range(3)]
    maps = [p.map() for p in pins]
    assert fakes.fake_live_mappings() == 3
    g.close()
    assert fakes.fake_live_files() == 0
    assert all(m.closed for m in maps) and all(p.closed for p in pins)
    with pytest.raises(gdrcopy.ClosedError, match="closed"):
        maps[0].copy_to(b"z")


def test_garbage_collection_order_is_harmless(fakes: ctypes.CDLL) -> None:
    class Cycle:
        pass

    for _ in range(20):
        holder = Cycle()
        holder.g = gdrcopy.open()  # type: ignore[attr-defined]
        holder.m = holder.g.map((FAKE_VA, GPU_PAGE))  # type: ignore[attr-defined]
        holder.m.holder = holder  # type: ignore[attr-defined]
        holder.self = holder  # type: ignore[attr-defined]
        del holder
    gc.collect()
    assert fakes.fake_live_files() == 0 and fakes.fake_live_mappings() == 0


@needs_numpy
def test_ndarray_view_and_close_refusal(fakes: ctypes.CDLL) -> None:
    with gdrcopy.open() as g:
        m = g.map((FAKE_VA, GPU_PAGE))
        view = m.ndarray(numpy.uint32, (4, 4), offset=64)
        view[:] = numpy.arange(16, dtype=numpy.uint32).reshape(4, 4)
        assert m.read(64, 64) == numpy.arange(16, dtype=numpy.uint32).tobytes()
        m.copy_to(numpy.full(16, 7, dtype=numpy.uint32), 64)
        assert int(view.sum()) == 7 * 16
        with pytest.raises(ValueError, match="do not fit"):
            m.ndarray(numpy.uint8, GPU_PAGE + 1)
        part = view[1:]
        del view
        with pytest.raises(BufferError, match=r"view\(s\) of its mapped memory"):
            m.close()
        with pytest.raises(BufferError, match=r"view\(s\) of its mapped memory"):
            g.close()
        del part
        m.close()
        assert fakes.fake_live_mappings() == 0


def test_numpy_is_optional(fake_library: Path) -> None:
    script = (
        "import sys; sys.modules['numpy'] = None\n"
        "import ctypes, os\n"
        "from test_gdrcopy_py import GdrdrvConfig\n"
        "fakes = ctypes.CDLL(os.environ['GDRCOPY_LIBRARY']); fakes.fake_gdrdrv_default.restype = GdrdrvConfig\n"
        "cfg = fakes.fake_gdrdrv_default(); fakes.fake_reset(ctypes.byref(cfg))\n"
        "import gdrcopy\n"
        "g = gdrcopy.open(); m = g.map((0x7f0000000000, 65536)); m.copy_to(b'ok')\n"
        "try:\n    m.ndarray()\nexcept ImportError as e:\n    print('ImportError:', e)\n"
        "m.close(); g.close()\n"
    )
    # Without the fakes' paths the fake gdrdrv answers /dev/gdrdrv itself.
    env = dict(os.environ, GDRCOPY_LIBRARY=str(fake_library), PYTHONPATH=f"{REPO / 'python'}:{Path(__file__).parent}")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "ImportError: ndarray views need NumPy: pip install numpy" in result.stdout


def test_fork_child_cannot_use_the_parents_objects(fakes: ctypes.CDLL) -> None:
    with gdrcopy.open() as g, g.map((FAKE_VA, GPU_PAGE)) as m:
        m.copy_to(b"parent")
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, never return into pytest
            status = b"?"
            try:
                m.copy_to(b"child")
                status = b"copied"
            except gdrcopy.ClosedError as error:
                status = b"closed" if b"before os.fork()" in str(error).encode() else b"other"
            finally:
                os.write(write, status)
                os._exit(0)
        os.close(write)
        status = os.read(read, 16)
        os.close(read)
        os.waitpid(pid, 0)
        assert status == b"closed"
        assert m.read(0, 6) == b"parent"


def test_vulkan_alloc_mapped(fakes: ctypes.CDLL) -> None:
    cuda = CudaConfig(present=True, driver_version=13000, have_context=True)
    fakes.fake_cuda_set(ctypes.byref(cuda))
    vk = VulkanConfig(present=True, bar1_visible=True, heap_size=64 << 20)
    fakes.fake_vulkan_set(ctypes.byref(vk))
    with gdrcopy.open(backend="vulkan") as g:
        assert g.backend_name == "vulkan"
        a = g.alloc_mapped(100_000)
        cai = a.__cuda_array_interface__
        assert cai["data"] == (a.gpu_ptr, False) and cai["shape"] == (100_000,)
        assert a.gpu_ptr % GPU_PAGE == 0
        with a.map() as m:
            m.copy_to(pattern(100_000))
            assert m.read() == pattern(100_000)
            assert ctypes.string_at(a.cpu_ptr, 16) == pattern(16)
        # Closing the allocation with a live mapping unmaps and unpins first.
        m2 = a.map()
        a.close()
        assert m2.closed and fakes.fake_vulkan_live_objects() > 0  # the instance itself stays
        with pytest.raises(gdrcopy.GdrError, match="gdr_alloc_mapped"):
            g.alloc_mapped(1 << 40)


@needs_numpy
def test_vulkan_ndarray(fakes: ctypes.CDLL) -> None:
    fakes.fake_cuda_set(ctypes.byref(CudaConfig(present=True, driver_version=13000, have_context=True)))
    fakes.fake_vulkan_set(ctypes.byref(VulkanConfig(present=True, bar1_visible=True, heap_size=64 << 20)))
    with gdrcopy.open(backend="vulkan") as g:
        a = g.alloc_mapped(4096)
        view = a.ndarray(numpy.float64)
        assert view.shape == (512,)
        view[:] = 1.5
        with a.map() as m:
            assert m.read(0, 8) == numpy.float64(1.5).tobytes()
        del view
        a.close()


def test_auto_takes_vulkan_where_plain_gdr_open_does_not(fakes: ctypes.CDLL, tmp_path: Path) -> None:
    """Issue 35: the library's gdr_open() leaves vulkan to those who ask; these bindings ask."""
    cfg = fakes.fake_gdrdrv_default()
    cfg.open_errno = 2  # ENOENT: no gdrdrv
    fakes.fake_reset(ctypes.byref(cfg))
    fakes.fake_cuda_set(ctypes.byref(CudaConfig(present=True, driver_version=13000, have_context=True)))
    fakes.fake_vulkan_set(ctypes.byref(VulkanConfig(present=True, bar1_visible=True, heap_size=64 << 20)))
    raw = ctypes.CDLL(os.environ["GDRCOPY_LIBRARY"])
    raw.gdr_open.restype = ctypes.c_void_p
    raw.gdr_get_open_failure.restype = ctypes.c_char_p
    assert raw.gdr_open() is None
    assert "vulkan: not tried" in raw.gdr_get_open_failure().decode()
    with gdrcopy.open() as g:
        assert g.backend_name == "vulkan"
    with gdrcopy.open("auto") as g:
        assert g.backend_name == "vulkan"
    # The node's file allows it for plain gdr_open() too.
    (tmp_path / "gdrcopy.conf").write_text("allow_vulkan = yes\n")
    g_raw = raw.gdr_open()
    assert g_raw is not None
    raw.gdr_close.argtypes = [ctypes.c_void_p]
    assert raw.gdr_close(g_raw) == 0
    with pytest.raises(gdrcopy.OpenError) as caught:
        gdrcopy.open("dma-buf")
    assert "GDRCOPY_BACKEND selects another backend" in caught.value.reasons["vulkan"]


def test_alloc_mapped_needs_vulkan(fakes: ctypes.CDLL) -> None:
    with gdrcopy.open() as g:
        with pytest.raises(gdrcopy.GdrError, match="only the vulkan backend allocates") as caught:
            g.alloc_mapped(4096)
        assert caught.value.errno == 95


def test_dmabuf_backend(fakes: ctypes.CDLL) -> None:
    fakes.fake_cuda_set(
        ctypes.byref(CudaConfig(present=True, driver_version=13030, dmabuf_supported=True, have_context=True))
    )
    fakes.fake_cuda_add_range(FAKE_VA, 4 * GPU_PAGE)
    with gdrcopy.open(backend="dmabuf") as g:
        assert g.backend_name == "dmabuf" and g.using_dma_buf_mmap
        with g.map((FAKE_VA + GPU_PAGE, 2 * GPU_PAGE)) as m:
            m.copy_to(pattern(2 * GPU_PAGE))
            assert m.read() == pattern(2 * GPU_PAGE)
        with pytest.raises(gdrcopy.GdrError) as caught:
            g.pin((FAKE_VA + 8 * GPU_PAGE, GPU_PAGE))  # not GPU memory the fake CUDA knows
        assert caught.value.function == "gdr_pin_buffer_v2" and caught.value.reason


class HostCuda:
    """The benchmark's CUDA calls on host memory: "GPU memory" is a host buffer here."""

    name = "host-memory stand-in"

    def __init__(self) -> None:
        self.buffers: list[Any] = []

    def mem_alloc(self, n: int) -> int:
        return FAKE_VA  # the fake gdrdrv pins any address

    def mem_free(self, ptr: int) -> None:
        pass

    def host_alloc(self, n: int) -> int:
        buf = ctypes.create_string_buffer(n)
        self.buffers.append(buf)
        return ctypes.addressof(buf)

    def bound_htod(self, dst: int, src: int, n: int) -> tuple[Any, tuple[Any, ...]]:
        scratch = self.host_alloc(n)
        return ctypes.memmove, (scratch, src, n)

    def bound_dtoh(self, dst: int, src: int, n: int) -> tuple[Any, tuple[Any, ...]]:
        scratch = self.host_alloc(n)
        return ctypes.memmove, (dst, scratch, n)

    def driver_version(self) -> int:
        return 0


@needs_numpy
def test_bench_prints_a_table_and_json_lines(
    fakes: ctypes.CDLL, fastcopy: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from gdrcopy import _cuda, bench

    monkeypatch.setattr(_cuda, "driver", lambda prefer: HostCuda())
    assert bench.main(["--rounds", "3", "--calls", "50"]) == 0
    out = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in out if line.startswith("{")]
    methods = ("fast", "ctypes", "cuMemcpy", "numpy")
    assert {(r["method"], r["direction"], r["size"]) for r in records} == {
        (m, d, s) for m in methods for d in ("write", "read") for s in (64, 4096)
    }
    assert {r["copy_path"] for r in records} == {"compiled"}
    assert all(r["min_us"] <= r["median_us"] <= r["max_us"] and r["backend"] == "gdrdrv" for r in records)
    table = [line for line in out if line.lstrip().startswith(("64 ", "4096 "))]
    assert len(table) == 4 and all(line.count("[") == len(methods) for line in table)
    assert out[-1].startswith("target: 64 B write <= 0.3 us through the fast path")
    assert fakes.fake_live_mappings() == 0 and fakes.fake_live_pins() == 0


def test_a_repeated_copy_from_the_same_buffer_exports_it_once(
    fakes: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fast path of a polling loop: one C call per copy, no buffer export (it once cost 2 us a call).
    from gdrcopy import _core

    exports: list[object] = []
    real = _core._host_buffer

    def counting(obj: object, writable: bool, what: str) -> tuple[object, Any, int]:
        exports.append(obj)
        return real(obj, writable, what)

    monkeypatch.setattr(_core, "_host_buffer", counting)
    with gdrcopy.open() as g, g.map((FAKE_VA, GPU_PAGE)) as m:
        src, dst = bytearray(pattern(64)), bytearray(64)
        for _ in range(5):
            m.copy_to(src)
            m.copy_from(dst)
        assert dst == src
        assert exports == [src, dst]
        other = bytearray(64)
        m.copy_from(other)
        assert exports == [src, dst, other] and other == src


# ---- the compiled copy calls ---------------------------------------------------


@pytest.mark.parametrize("offset", [0, 1, 63, GPU_PAGE + 17])
def test_compiled_copies_round_trip(fakes: ctypes.CDLL, fastcopy: Any, offset: int) -> None:
    assert gdrcopy.fast_path() == "compiled"
    with gdrcopy.open() as g, g.map((FAKE_VA, 2 * GPU_PAGE)) as m:
        assert m.copy_path == "compiled"
        for size in (1, 7, 64, 4096, 70000):
            if offset + size > m.nbytes:
                continue
            data = pattern(size, seed=size)
            m.copy_to(data, offset)
            out = bytearray(size)
            m.copy_from(out, offset)
            assert bytes(out) == data, (size, offset)
        # Keywords and a partial size, as the ctypes path takes them.
        m.copy_to(src=b"abcdef", offset=offset, size=3)
        out = bytearray(6)
        m.copy_from(dst=out, offset=offset, size=3)
        assert bytes(out[:3]) == b"abc" and m.read(offset, 3) == b"abc"


def test_compiled_copies_say_what_is_wrong_as_ctypes_does(
    fakes: ctypes.CDLL, fastcopy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = []
    for path in ("compiled", "ctypes"):
        if path == "ctypes":
            monkeypatch.setenv(gdrcopy.FAST_PATH_ENV, "1")
        with gdrcopy.open() as g:
            m = g.map((FAKE_VA, GPU_PAGE))
            assert m.copy_path == path
            got = []
            calls: list[tuple[Any, tuple[Any, ...]]] = [
                (m.copy_to, (b"x" * 10, GPU_PAGE - 5)),
                (m.copy_to, (b"x" * 10, -1)),
                (m.copy_to, (b"x" * 10, 0, 11)),
                (m.copy_from, (b"read-only",)),
                (m.copy_to, (12345,)),
            ]
            for function, args in calls:
                with pytest.raises((ValueError, TypeError)) as caught:
                    function(*args)
                got.append((type(caught.value), str(caught.value)))
            m.close()
            with pytest.raises(gdrcopy.ClosedError, match="closed"):
                m.copy_to(b"x")
            messages.append(got)
    assert messages[0] == messages[1]
    assert "do not fit the 65536-byte mapping" in messages[0][0][1]
    assert "bytes are read-only" in messages[0][3][1] and "not a host buffer" in messages[0][4][1]


def test_no_fast_path_env_and_missing_extension_fall_back_to_ctypes(
    fakes: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gdrcopy import _core

    monkeypatch.setattr(_core, "_fastcopy", None)
    assert gdrcopy.fast_path().startswith("ctypes (gdrcopy._fastcopy is not built")
    with gdrcopy.open() as g, g.map((FAKE_VA, GPU_PAGE)) as m:
        assert m.copy_path == "ctypes"
        m.copy_to(b"ctypes")
        assert m.read(0, 6) == b"ctypes"


# ---- errors that say why -------------------------------------------------------


def test_open_failure_carries_every_backends_reason_without_logging(
    fakes: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GDRCOPY_ENABLE_LOGGING")
    cfg = fakes.fake_gdrdrv_default()
    cfg.open_errno = 13  # EACCES
    fakes.fake_reset(ctypes.byref(cfg))
    with pytest.raises(gdrcopy.OpenError) as caught:
        gdrcopy.open()
    error = caught.value
    assert isinstance(error, gdrcopy.GdrError) and error.errno == 13 and error.function == "gdr_open"
    assert tuple(error.reasons) == gdrcopy.backends()
    assert all(error.reasons.values()), error.reasons
    assert "Vulkan" in error.reasons["vulkan"] or "vulkan" in error.reasons["vulkan"].lower()
    for name in gdrcopy.backends():
        assert f"{name}: " in str(error)
    # A backend asked for: the others were skipped, and say so.
    with pytest.raises(gdrcopy.OpenError) as caught:
        gdrcopy.open("gdrdrv")
    assert "GDRCOPY_BACKEND selects another backend" in caught.value.reasons["vulkan"]
    with pytest.raises(ValueError, match="unknown backend 'cuda': .* has gdrdrv, dmabuf, vulkan"):
        gdrcopy.open("cuda")


# ---- zero-copy interchange -----------------------------------------------------


@needs_numpy
def test_numpy_takes_the_cpu_side_without_copying(fakes: ctypes.CDLL, fastcopy: Any) -> None:
    with gdrcopy.open() as g:
        m = g.map((FAKE_VA + 64, GPU_PAGE - 64), device=0)
        array = numpy.asarray(m)
        assert array.dtype == numpy.uint8 and array.shape == (GPU_PAGE - 64,)
        assert array.__array_interface__["data"][0] == m.ptr
        array[:5] = numpy.frombuffer(b"numpy", numpy.uint8)
        assert m.read(0, 5) == b"numpy"
        m.copy_to(b"mapping", 100)
        assert array[100:107].tobytes() == b"mapping"
        view = m.memoryview()
        assert view.format == "B" and view.nbytes == m.nbytes and not view.readonly
        view[200:203] = b"mvw"
        assert m.read(200, 3) == b"mvw"
        with pytest.raises(BufferError, match=r"2 view\(s\)"):
            m.close()
        del array
        view.release()
        del view
        gc.collect()
        m.close()
    assert fakes.fake_live_mappings() == 0


def _consume(capsule: Any) -> tuple[int, int, Any]:
    """What a DLPack consumer does: read the tensor, rename the capsule, later call the deleter."""
    from gdrcopy import _gpubuf, _interchange

    pointer, nbytes = _gpubuf._from_capsule(capsule, "test")
    address = _interchange._capsule_get_pointer(id(capsule), ctypes.addressof(_interchange._DLTENSOR_NAME))
    managed = _interchange._DLManagedTensor.from_address(address)
    assert managed.dl_tensor.device.device_type == 2 and managed.dl_tensor.ndim == 1
    ctypes.pythonapi.PyCapsule_SetName(ctypes.py_object(capsule), b"used_dltensor")
    deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(managed.deleter)
    return pointer, nbytes, lambda: deleter(address)


def test_gpu_side_dlpack_and_cuda_array_interface(fakes: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch) -> None:
    from gdrcopy import _interchange

    monkeypatch.setattr(_interchange, "device_of", lambda pointer: None)  # no CUDA to ask here
    with gdrcopy.open() as g:
        m = g.map((FAKE_VA + 16, 4096), device=3)
        assert m.__dlpack_device__() == (2, 3)
        cai = m.__cuda_array_interface__
        assert cai["data"] == (FAKE_VA + 16, False) and cai["shape"] == (4096,) and cai["typestr"] == "|u1"
        # Consumed: the view lives until the consumer's deleter runs.
        capsule = m.__dlpack__(stream=7, max_version=(1, 0))
        pointer, nbytes, delete = _consume(capsule)
        assert (pointer, nbytes) == (FAKE_VA + 16, 4096)
        del capsule
        gc.collect()
        with pytest.raises(BufferError, match="DLPack"):
            m.close()
        delete()
        assert _interchange.live_exports() == 0
        # Never consumed: the capsule's own destructor releases it.
        capsule = m.__dlpack__()
        assert _interchange.live_exports() == 1
        del capsule
        gc.collect()
        assert _interchange.live_exports() == 0
        with pytest.raises(BufferError, match="copy=True"):
            m.__dlpack__(copy=True)
        with pytest.raises(BufferError, match="not \\(2, 0\\)"):
            m.__dlpack__(dl_device=(2, 0))
        m.close()
        # Without device= and with no CUDA to ask, it says what to do.
        with g.map((FAKE_VA, 4096)) as unknown:
            with pytest.raises(BufferError, match="pass device=N"):
                unknown.__dlpack_device__()
        # A producer that names its device is believed.

        class Producer:
            __cuda_array_interface__ = {"data": (FAKE_VA, False), "shape": (64,), "typestr": "|u1", "version": 3}

            def __dlpack_device__(self) -> tuple[int, int]:
                return (2, 5)

        with g.map(Producer()) as known:
            assert known.device_id == 5


# ---- which library -------------------------------------------------------------


def test_library_choice_bundled_system_and_override(
    fake_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = tmp_path / "bundled" / "libgdrapi.so.2"
    bundled.parent.mkdir()
    shutil.copyfile(fake_library, bundled)
    system = tmp_path / "system"
    system.mkdir()
    monkeypatch.setattr(_lib, "BUNDLED_LIBRARY", bundled)
    monkeypatch.delenv("GDRCOPY_LIBRARY", raising=False)
    monkeypatch.delenv(gdrcopy.PREFER_SYSTEM_ENV, raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(system))

    def install_system(version: str) -> None:
        for old in system.iterdir():
            old.unlink()
        shutil.copyfile(fake_library, system / f"libgdrapi.so.{version}")
        (system / "libgdrapi.so.2").symlink_to(f"libgdrapi.so.{version}")

    install_system("2.6.0")
    first = _lib.choose()[0]
    assert first.source == "bundled" and "2.6.0, not newer" in first.why
    install_system("2.7.0")
    first = _lib.choose()[0]
    assert first.source == "system" and "2.7.0 is newer than the bundled" in first.why
    install_system("2.6.0")
    monkeypatch.setenv(gdrcopy.PREFER_SYSTEM_ENV, "1")
    first = _lib.choose()[0]
    assert first.source == "system" and gdrcopy.PREFER_SYSTEM_ENV in first.why
    _lib.reset_for_tests()
    try:
        info = gdrcopy.library_info()
        assert info["source"] == "system" and info["path"] == str(system / "libgdrapi.so.2.6.0")
    finally:
        _lib.reset_for_tests()
    monkeypatch.setenv("GDRCOPY_LIBRARY", str(fake_library))
    assert _lib.choose() == [_lib.Choice(str(fake_library), "GDRCOPY_LIBRARY", "GDRCOPY_LIBRARY names it")]


def test_python_m_gdrcopy_says_what_it_loads_and_where_files_are(fake_library: Path) -> None:
    env = {**os.environ, "GDRCOPY_LIBRARY": str(fake_library), "PYTHONPATH": str(REPO / "python")}
    info = subprocess.run([sys.executable, "-m", "gdrcopy"], capture_output=True, text=True, env=env, cwd="/")
    assert info.returncode == 0, info.stderr
    import json

    report = json.loads(info.stdout)
    assert report["source"] == "GDRCOPY_LIBRARY" and report["path"] == str(fake_library.resolve())
    assert report["version"] == "2.6" and report["bundled_library"] is None
    # The source tree carries no library: the flags say so instead of printing a wrong path.
    flags = subprocess.run([sys.executable, "-m", "gdrcopy", "--includes"], capture_output=True, text=True, env=env)
    assert flags.returncode == 1 and "carries no library of its own" in flags.stderr


# ---- types ---------------------------------------------------------------------

USER_CODE = """
from __future__ import annotations

import gdrcopy


def roundtrip(pointer: int, nbytes: int) -> bytes:
    with gdrcopy.open() as g, g.map((pointer, nbytes)) as m:
        backend: str = g.backend_name
        m.copy_to(b"hello", 0)
        out = bytearray(5)
        m.copy_from(out)
        kind: gdrcopy.MappingType = m.mapping_type
        device: tuple[int, int] = m.__dlpack_device__()
        print(backend, kind, device, m.copy_path, gdrcopy.library_info()["source"])
        return m.read(0, 5) + bytes(out)


try:
    gdrcopy.open("vulkan").close()
except gdrcopy.OpenError as error:
    reasons: dict[str, str] = error.reasons
"""


def test_mypy_strict_accepts_user_code(tmp_path: Path) -> None:
    snippet = tmp_path / "user.py"
    snippet.write_text(USER_CODE)
    bad = tmp_path / "bad.py"
    # The check can fail: `g` is a Gdr, not Any, so a wrong attribute is an error.
    bad.write_text("import gdrcopy\nwith gdrcopy.open() as g:\n    g.no_such_method()\n")
    env = {**os.environ, "MYPYPATH": str(REPO / "python")}
    # One run for both files (mypy's start-up is most of the cost): only bad.py may be reported.
    args = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull]
    result = subprocess.run([*args, str(snippet), str(bad)], capture_output=True, text=True, env=env, cwd=tmp_path)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 1 and len(errors) == 1, result.stdout + result.stderr
    assert errors[0].startswith("bad.py:") and '"Gdr" has no attribute "no_such_method"' in errors[0], errors


def test_the_bench_without_a_library_says_what_to_install_not_a_traceback(tmp_path: Path) -> None:
    env = dict(os.environ, GDRCOPY_LIBRARY=str(tmp_path / "libgdrapi.so.2"), PYTHONPATH=str(REPO / "python"))
    result = subprocess.run(
        [sys.executable, "-m", "gdrcopy.bench"], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("gdrcopy.bench: error: cannot load") and "GDRCOPY_LIBRARY" in result.stderr

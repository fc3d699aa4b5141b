"""Kernel images as qemu's -kernel takes them, and what their headers say.

An arm64 kernel is an `Image` (64-byte header, magic `ARM\\x64` at 0x38,
the page size in its flags), gzip'd, or an EFI zboot executable (`zimg`
at 4: a PE file holding the compressed Image, which qemu 7.2 cannot boot
directly).  x86 bzImages go to qemu as they are.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

from gdrkit.distro.arch import Arch
from gdrkit.system import die, run

ARM64_MAGIC = b"ARM\x64"
ZBOOT_MAGIC = b"zimg"
# Image header flags, bits 1-2: the kernel's page size (Documentation/arch/arm64/booting.rst).
ARM64_PAGE_SIZES = {1: 4096, 2: 16384, 3: 65536}


def arm64_page_size(image: bytes) -> int | None:
    """The page size an arm64 Image header declares; None if `image` is not one (or says nothing) (pure)."""
    if len(image) < 64 or image[0x38:0x3C] != ARM64_MAGIC:
        return None
    (flags,) = struct.unpack_from("<Q", image, 0x18)
    return ARM64_PAGE_SIZES.get((flags >> 1) & 3)


def zboot_payload(image: bytes) -> tuple[bytes, str] | None:
    """The compressed Image inside an EFI zboot executable and its compression; None if not zboot (pure)."""
    if len(image) < 32 or image[4:8] != ZBOOT_MAGIC:
        return None
    offset, size = struct.unpack_from("<II", image, 8)
    kind = image[24:32].rstrip(b"\0").decode("ascii", "replace")
    return image[offset : offset + size], kind


def decompress(payload: bytes, kind: str, scratch: Path) -> bytes:
    """`payload` decompressed (gzip here, zstd with the zstd tool)."""
    if kind == "gzip":
        return gzip.decompress(payload)
    if kind == "zstd":
        packed, plain = scratch / "Image.zst", scratch / "Image"
        packed.write_bytes(payload)
        run(["zstd", "-q", "-d", "-f", str(packed), "-o", str(plain)], capture=True)
        return plain.read_bytes()
    raise die(f"a zboot kernel compressed with {kind!r}, which gdrkit cannot unpack", "use a kernel with gzip or zstd")


def bootable_image(kernel_image: Path, scratch: Path, arch: Arch) -> Path:
    """A file qemu's -kernel boots: `kernel_image` itself, or the Image unpacked from a zboot one into `scratch`."""
    if arch.kernel != "arm64":
        return kernel_image
    with open(kernel_image, "rb") as handle:
        head = handle.read(64)
    if zboot_payload(head + b"\0" * 32) is None:
        return kernel_image  # an Image or a gzip'd one: qemu takes both
    found = zboot_payload(kernel_image.read_bytes())
    assert found is not None
    plain = decompress(*found, scratch)
    if arm64_page_size(plain) is None:
        raise die(f"{kernel_image} holds no arm64 Image", "is it an arm64 kernel?")
    out = scratch / "Image"
    out.write_bytes(plain)
    return out


def image_page_size(kernel_image: Path, arch: Arch) -> int | None:
    """The page size an arm64 kernel image declares (None elsewhere or when unknown)."""
    if arch.kernel != "arm64":
        return None
    data = kernel_image.read_bytes()
    found = zboot_payload(data)
    if found is not None and found[1] == "gzip":
        data = gzip.decompress(found[0])
    elif data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return arm64_page_size(data[:64])

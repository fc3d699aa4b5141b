"""The version has one source, include/gdrcopy_version.h; everything derives from it."""

from gdrkit import version


def test_version_is_read_from_the_header() -> None:
    header = version.VERSION_HEADER.read_text()
    assert f"#define GDRCOPY_VERSION_MAJOR {version.MAJOR}\n" in header
    assert f"#define GDRCOPY_VERSION_MINOR {version.MINOR}\n" in header
    assert version.VERSION == f"{version.MAJOR}.{version.MINOR}.{version.PATCH}"


def test_interface_version_is_that_of_gdrcopy_2_6() -> None:
    # Drop-in compatibility: the library and driver must report 2.6.
    assert version.api_version() == "2.6"

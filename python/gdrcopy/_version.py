# The package version: the project's (include/gdrcopy_version.h; a test keeps them equal).
__version__ = "2.6.1"

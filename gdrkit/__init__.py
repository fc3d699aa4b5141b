"""gdrkit: build, package, deploy and test GDRCopy (gdrdrv, libgdrapi, tests).

`tasks.py` at the top of the repository is a thin Invoke layer over this
package; everything that does work lives here and is importable and tested.
"""

from gdrkit.version import VERSION, api_version

__all__ = ["VERSION", "api_version"]

"""dlopen() each library name given, as a consumer does, and print the file the loader opened.

    python3 dlopen_by_name.py libgdrapi.so libgdrapi.so.2

Exits 1 at the first name the dynamic loader cannot open.  NCCL, aws-ofi-nccl,
DPDK and libfabric < 2.4 open libgdrapi.so; NVSHMEM, DOCA and libfabric >= 2.4
libgdrapi.so.2.  Run by tests/packaging/fresh_install.sh with only the runtime
package installed.
"""

import ctypes
import os
import sys


def opened(stem: str) -> list[str]:
    with open("/proc/self/maps") as maps:
        fields = [line.split(None, 5) for line in maps]
    return sorted({os.path.realpath(f[5].strip()) for f in fields if len(f) == 6 and f"/{stem}" in f[5]})


for name in sys.argv[1:]:
    try:
        ctypes.CDLL(name)
    except OSError as error:
        print(f"dlopen({name!r}) failed: {error}")
        sys.exit(1)
    print(f"dlopen({name!r}) opened {', '.join(opened(name.split('.so')[0] + '.so'))}")

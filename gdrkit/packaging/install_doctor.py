"""`make install`'s gdrcopy_doctor: the launcher and facts.json beside the modules `make doctor_install` copied.

    python3 -m gdrkit.packaging.install_doctor --destdir D --bindir B --doctordir DIR [--interpreter P]

The packages render the same launcher and facts (gdrkit.packaging.render); this writes them for a
source install, so that the program its man page describes is installed with it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdrkit.gdrcopy_doctor import facts
from gdrkit.packaging.render import DOCTOR_PACKAGE, DOCTOR_PROGRAM, doctor_facts_file, doctor_launcher, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="install_doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--destdir", default="", help="staging root the paths below are under (default: none)")
    parser.add_argument("--bindir", required=True, help="where the gdrcopy_doctor program goes")
    parser.add_argument("--doctordir", required=True, help=f"where make doctor_install put {DOCTOR_PACKAGE}/")
    parser.add_argument(
        "--interpreter", default="/usr/bin/python3", help="the program's #! (default: /usr/bin/python3)"
    )
    args = parser.parse_args(argv)
    root = Path(args.destdir or "/")
    modules = root / args.doctordir.lstrip("/") / DOCTOR_PACKAGE
    if not (modules / "cli.py").is_file():
        print(f"error: no {modules}/cli.py\n  hint: run make doctor_install with the same DESTDIR and doctordir first",
              file=sys.stderr)  # fmt: skip
        return 1
    files = {
        f"{args.bindir.lstrip('/')}/{DOCTOR_PROGRAM}": doctor_launcher(args.interpreter, args.doctordir),
        f"{args.doctordir.lstrip('/')}/{DOCTOR_PACKAGE}/{facts.FACTS_FILE}": doctor_facts_file(),
    }
    write(files, root)
    for relative in sorted(files):
        print(f"installed {root / relative}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

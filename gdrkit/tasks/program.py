"""`./toolkit`'s entry point: Invoke's program over this namespace, with the project's version.

Run through Invoke's own `invoke` command, `--version` would print Invoke's
version and a usage error would exit 1, the status of a failed check; this
program prints gdrcopy's version (include/gdrcopy_version.h) and exits
USAGE (2) on an unknown task or option, as gdrcopy_doctor and argparse do.
"""

from __future__ import annotations

from typing import Any

from invoke.exceptions import Exit, ParseError
from invoke.program import Program

from gdrkit.tasks import ns
from gdrkit.version import VERSION

USAGE = 2


class ToolkitProgram(Program):
    """Invoke's Program whose parse errors exit USAGE with a hint instead of 1."""

    def _usage(self, error: ParseError) -> Exit:
        context = getattr(error, "context", None)
        where = f"./toolkit {context.name} --help" if context is not None and context.name else "./toolkit --list"
        return Exit(f"error: {error}\n{where} lists what it takes", code=USAGE)

    def parse_core(self, argv: Any) -> None:
        try:
            super().parse_core(argv)
        except ParseError as error:
            raise self._usage(error) from None

    def parse_tasks(self) -> None:
        try:
            super().parse_tasks()
        except ParseError as error:
            raise self._usage(error) from None


program = ToolkitProgram(namespace=ns, version=VERSION, name="gdrcopy toolkit", binary="./toolkit")

if __name__ == "__main__":
    program.run()

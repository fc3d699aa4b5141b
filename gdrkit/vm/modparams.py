"""The parameters a module of this tree takes, read from its C sources, and arguments checked against them.

vm-test passes `--softgpu-args` and `--gdrdrv-args` to insmod in the guest, where an unknown
parameter fails the boot minutes later (or, for a value of the wrong type, loads with a warning).
The sources are the one home of the parameters (`module_param`, `module_param_named`,
`module_param_cb`), so the check reads them rather than a list kept beside them.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from gdrkit.system import bad_input
from gdrkit.version import REPO_ROOT

# Each module's C sources, relative to the tree.
MODULE_SOURCES: dict[str, tuple[str, ...]] = {
    "softgpu": ("tests/softgpu/kmod",),
    "gdrdrv": ("gdrdrv/gdrdrv.c",),
}
PARAM = re.compile(r"\bmodule_param(?:_named|_cb)?\(\s*(\w+)\s*,([^;]*)\);")
# What the kernel's param_set_* of each type takes; a callback parameter (module_param_cb) checks its own.
VALUE = {
    "bool": re.compile(r"[01yYnN]|true|false|on|off"),
    "int": re.compile(r"[-+]?(0x[0-9a-fA-F]+|\d+)"),
    "uint": re.compile(r"\+?(0x[0-9a-fA-F]+|\d+)"),
    "ulong": re.compile(r"\+?(0x[0-9a-fA-F]+|\d+)"),
    "ullong": re.compile(r"\+?(0x[0-9a-fA-F]+|\d+)"),
}


def parameters(module: str, root: Path = REPO_ROOT) -> dict[str, str]:
    """name -> type ("bool", "uint", ...; "" for a callback parameter) of `module`'s parameters."""
    found: dict[str, str] = {}
    for part in MODULE_SOURCES[module]:
        path = root / part
        for source in sorted(path.glob("*.c")) if path.is_dir() else [path]:
            for match in PARAM.finditer(source.read_text()):
                fields = [f.strip() for f in match.group(2).split(",")]
                kind = "" if "module_param_cb" in match.group(0) else fields[-2]
                found[match.group(1)] = kind
    return found


def check_args(module: str, args: str, option: str, root: Path = REPO_ROOT) -> tuple[str, ...]:
    """`args` split into NAME=VALUE words, each a parameter `module` has, with a value of its type."""
    known = parameters(module, root)
    words = tuple(shlex.split(args))
    for word in words:
        name, equals, value = word.partition("=")
        if name not in known:
            raise bad_input(
                f"{option}: {module} has no parameter {name!r}",
                "use NAME=VALUE with one of: "
                + ", ".join(f"{n} ({t or 'see its source'})" for n, t in sorted(known.items())),
            )
        pattern = VALUE.get(known[name])
        if not equals and known[name] != "bool":
            raise bad_input(f"{option}: {word!r} gives {module}'s {name} no value", f"write {name}=VALUE")
        if equals and pattern is not None and not pattern.fullmatch(value):
            raise bad_input(
                f"{option}: {module}'s {name} is a {known[name]}, not {value!r}", f"give {name} a {known[name]} value"
            )
    return words

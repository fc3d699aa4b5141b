#!/usr/bin/env python3
"""Generate C programs that check our cuda.h against a real CUDA toolkit's.

Run where a CUDA toolkit is installed (the GPU machine):

    tools/gen-cudah-check.py OUTDIR
    gcc -I/usr/local/cuda/include OUTDIR/values.c -o values && ./values
    gcc -I/usr/local/cuda/include -c OUTDIR/symbols.c -o real.o
    gcc -Iinclude -c OUTDIR/symbols.c -o ours.o
    diff <(nm -u real.o) <(nm -u ours.o)

values.c prints one MISMATCH line per enum value, flag or struct layout that
differs and exits 1 if any does; symbols.c takes the address of every
function our header declares, so nm -u shows the ABI symbol each name maps to.
"""

import pathlib
import re
import sys

HEADER = pathlib.Path(__file__).resolve().parent.parent / "include" / "cuda.h"

# Layout facts that compiled programs rely on: (type, member or None).
LAYOUTS = [
    ("CUDA_POINTER_ATTRIBUTE_P2P_TOKENS", None),
    ("CUDA_POINTER_ATTRIBUTE_P2P_TOKENS", "p2pToken"),
    ("CUDA_POINTER_ATTRIBUTE_P2P_TOKENS", "vaSpaceToken"),
    ("CUmemLocation", None),
    ("CUmemLocation", "id"),
    ("CUmemAllocationProp", None),
    ("CUmemAllocationProp", "requestedHandleTypes"),
    ("CUmemAllocationProp", "location"),
    ("CUmemAllocationProp", "win32HandleMetaData"),
    ("CUmemAllocationProp", "allocFlags"),
    ("CUmemAllocationProp", "allocFlags.gpuDirectRDMACapable"),
    ("CUmemAllocationProp", "allocFlags.usage"),
    ("CUmemAccessDesc", None),
    ("CUmemAccessDesc", "flags"),
    ("CUctxCreateParams", None),
    ("CUctxCreateParams", "numExecAffinityParams"),
    ("CUctxCreateParams", "cigParams"),
    ("CUuuid", None),
    ("CUdeviceptr", None),
    ("CUdevice", None),
]


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit("usage: gen-cudah-check.py OUTDIR")
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    text = HEADER.read_text()

    values = re.findall(r"^\s*(CU[A-Z0-9_]+)\s*=\s*([^,\n]+?),?\s*$", text, re.M)
    flags = re.findall(r"^#define\s+(CU_[A-Z0-9_]+)\s+(0x[0-9A-Fa-f]+|\d+)\s*$", text, re.M)
    functions = sorted(set(re.findall(r"CUDAAPI\s+(cu[A-Za-z0-9_]+)\s*\(", text)))

    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <cuda.h>", "int main(void)", "{", "\tint bad = 0;"]
    for name, value in values + flags:
        lines.append(f"\tif ((long long)({name}) != (long long)({value})) {{")
        lines.append(f'\t\tprintf("MISMATCH {name}: ours {value}, real %lld\\n", (long long)({name}));')
        lines.append("\t\tbad = 1;\n\t}")
    for type_name, member in LAYOUTS:
        expr = f"sizeof({type_name})" if member is None else f"offsetof({type_name}, {member})"
        lines.append(f'\tprintf("LAYOUT {expr} = %zu\\n", (size_t){expr});')
    lines.append(f'\tprintf("checked {len(values) + len(flags)} values\\n");')
    lines += ["\treturn bad;", "}"]
    (out / "values.c").write_text("\n".join(lines) + "\n")

    sym = ["#include <cuda.h>", "void *softgpu_symbol_refs[] = {"]
    sym += [f"\t(void *)&{f}," for f in functions]
    sym.append("};")
    (out / "symbols.c").write_text("\n".join(sym) + "\n")
    print(f"{len(values) + len(flags)} values, {len(functions)} functions -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes the C sources scripts/upstream_check.sh compiles to compare the C
API of two transfer_engine.h headers (upstream's and ours):

  c_abi_probe.py layout <upstream header> <our header> <out.c>
      a program printing, for every struct both headers declare, one line
      "struct NAME size N field@offset ..." (fields in upstream's order);
      compiled once against each header, the two outputs must be equal.
  c_abi_probe.py prototypes <upstream header> <out.c>
      upstream's functions and macro values as checks, compiled against
      our header: a missing or incompatible declaration, or a macro with
      another value, is a compile error. Prints the two counts.

Exit 2 when a header has no C part to read.
"""
import re
import sys


def c_part(path):
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # The C API is what precedes the C++ part.
    cut = text.find("namespace mooncake")
    return text if cut < 0 else text[:cut]


def structs(text):
    """{name: [field, ...]} for every `struct NAME { ... };`."""
    out = {}
    for m in re.finditer(r"struct\s+(\w+)\s*\{(.*?)\}\s*;", text, re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = decl.strip()
            if not decl:
                continue
            # "uint64_t base, length" / "char name[256]" / "T* p"
            head = re.match(r"(.*?)(\w+\s*(\[[^\]]*\])?\s*(,.*)?)$", decl, re.S)
            names = [re.sub(r"\[.*", "", n).strip(" *")
                     for n in head.group(2).split(",")]
            fields.extend(n for n in names if n)
        out[m.group(1)] = fields
    return out


def layout(upstream, ours, dest):
    up, mine = structs(c_part(upstream)), structs(c_part(ours))
    if not up or not mine:
        sys.exit(2)
    lines = ["#include <stddef.h>", "#include <stdio.h>",
             '#include "tent/transfer_engine.h"', "int main(void) {"]
    for name in sorted(set(up) & set(mine)):
        fmt = f"struct {name} size %zu"
        args = [f"sizeof(struct {name})"]
        for f in up[name]:
            fmt += f" {f}@%zu"
            args.append(f"offsetof(struct {name}, {f})")
        lines.append(f'    printf("{fmt}\\n", {", ".join(args)});')
        if up[name] != mine[name]:
            # Same layout by accident is not the same struct.
            lines.append(f'    printf("struct {name} fields differ: '
                         f'upstream {" ".join(up[name])} / ours '
                         f'{" ".join(mine[name])}\\n");')
    for name in sorted(set(up) - set(mine)):
        lines.append(f'    printf("struct {name} missing in ours\\n");')
    lines += ["    return 0;", "}"]
    open(dest, "w").write("\n".join(lines) + "\n")


def prototypes(upstream, dest):
    text = c_part(upstream)
    body = re.sub(r"#[^\n]*", "", text)
    body = re.sub(r"struct\s+\w+\s*\{.*?\}\s*;", "", body, flags=re.S)
    protos = [" ".join(p.split()) + ";"
              for p in re.findall(r"[\w\s\*]+\btent_\w+\s*\([^;{]*\)\s*(?=;)",
                                  body)]
    macros = re.findall(r"#define\s+((?:STATUS|TRANSPORT|OPCODE|PERM|TYPE)_\w+)"
                        r"\s+\(?(-?\d+)\)?", text)
    if not protos:
        sys.exit(2)
    names = [re.search(r"\b(tent_\w+)\s*\(", p).group(1) for p in protos]
    lines = ['#include "tent/transfer_engine.h"']
    # Taken before the redeclarations: a function our header lacks is an
    # undeclared identifier here; one declared otherwise conflicts below.
    lines.append("void* c_abi_functions[] = {")
    lines += [f"    (void*)&{n}," for n in names]
    lines.append("};")
    lines += protos
    for name, value in macros:
        lines.append(f"_Static_assert({name} == {value}, "
                     f'"{name} is not {value}");')
    lines.append("_Static_assert(LOCAL_SEGMENT_ID == 0, \"LOCAL_SEGMENT_ID\");")
    lines.append(f"int c_abi_prototype_count = {len(protos)};")
    open(dest, "w").write("\n".join(lines) + "\n")
    print(len(protos), len(macros))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "layout":
        layout(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 4 and sys.argv[1] == "prototypes":
        prototypes(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)

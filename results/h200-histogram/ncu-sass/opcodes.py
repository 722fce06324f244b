"""Where a level of the split histogram path spends its instructions: each SASS opcode's share of the executed
warp instructions, and the instructions each warp executes per 1,024-token chunk, from ncu's source page
(``ncu -i levels.ncu-rep --page source --csv --print-source sass > sass.csv``). Usage: ``python
results/h200-histogram/ncu-sass/opcodes.py sass.csv`` (the two profiled launches: the first and second level)."""

import collections
import csv
import sys


def kernels(path: str) -> list[tuple[list[str], list[list[str]]]]:
    out, header = [], None
    with open(path) as f:
        for row in csv.reader(f):
            if row and row[0] == "Kernel Name":
                out.append((None, []))
            elif row and row[0] == "Address":
                header = row
                out[-1] = (header, out[-1][1])
            elif row and out:
                out[-1][1].append(row)
    return out


def opcode(source: str) -> str:
    words = source.split()
    return (words[1] if words[0].startswith("@") else words[0]).split(".")[0]


def main(path: str) -> None:
    for index, (header, rows) in enumerate(kernels(path)):
        executed = header.index("Instructions Executed")
        counts = [int(row[executed]) for row in rows]
        total = sum(counts)
        per_chunk = max(counts)  # the loop body's instructions run once a chunk per warp
        by_opcode = collections.Counter()
        for row, count in zip(rows, counts, strict=True):
            by_opcode[opcode(row[1])] += count
        print(f"launch {index}: {total:,} warp instructions executed; {total / per_chunk:.0f} per warp and chunk "
              f"(the loop body runs {per_chunk:,} times)")
        print("  " + ", ".join(f"{name} {count / total:.1%}" for name, count in by_opcode.most_common(16)))


if __name__ == "__main__":
    main(sys.argv[1])

"""Names the functions of a shared object that contain given offsets.

    python3 symbolize.py OBJECT OFFSET...

For frames that stack-sampler.c records as OBJECT+0xOFFSET in a library of
the machine it ran on (libc, a driver): run it there. Uses the dynamic
symbol table (`nm -D`), so a function that the object does not export is
named by the nearest exported one before it, with the distance.
"""

import subprocess
import sys


def main():
    obj, offsets = sys.argv[1], [int(o, 16) for o in sys.argv[2:]]
    out = subprocess.run(["nm", "-D", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
    table = sorted(
        (int(parts[0], 16), parts[2])
        for parts in (line.split() for line in out.splitlines())
        if len(parts) == 3 and parts[1] in "tTwWiI"
    )
    for offset in offsets:
        before = [entry for entry in table if entry[0] <= offset]
        name = f"{before[-1][1]}+{offset - before[-1][0]:#x}" if before else "?"
        print(f"{obj}+{offset:#x}  {name}")


if __name__ == "__main__":
    main()

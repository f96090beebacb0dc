#!/usr/bin/env python3
# Checks that dpbench's folders include one another only downwards (docs/DEVELOPING.md, "The
# layers"): cli on top; models, strategies and reports in the middle, never including each other;
# engine at the ground, whose rooms are ordered too (README.md, "Layout"); and that no header
# includes itself back through others. Prints one line per violation and exits 1 if any.
#   check_include_layers.py [ROOT]     check the tree at ROOT (default: the repository)
#   check_include_layers.py --self-test  shows that each rule catches a planted back arrow
import os
import re
import sys
import tempfile

# Each room (a folder, or a few files at engine/'s root) and its floor: a file may include its own
# room and any room on a lower floor, never another room on its own floor or above.
FLOORS = [
    (0, [("engine/errors.h", "engine/data_type.h", "engine/precision.h")]),
    (1, [("engine/machine/",)]),
    (2, [("engine/backend/",)]),
    (3, [("engine/communication/",)]),
    (4, [("engine/cuda/",), ("engine/reference/",)]),
    (5, [("engine/data/",)]),
    (6, [("engine/training/",)]),
    (7, [("engine/backends.h", "engine/backends.cpp")]),
    (8, [("models/",), ("strategies/",), ("reports/",)]),
    (9, [("cli/",)]),
]
# reports/ reads the result records only, whatever floor the engine puts them on.
REPORTS_MAY_INCLUDE = ["engine/errors.h", "engine/data_type.h", "engine/precision.h", "engine/machine/",
                       "engine/backend/device_timeline.h", "engine/training/run_measurements.h", "engine/training/parameter_units.h",
                       "engine/communication/collective_traffic.h", "engine/communication/collective_schedule.h"]
CHECKED_FOLDERS = ("cli", "engine", "models", "strategies", "reports")
SOURCE = re.compile(r"\.(h|cpp|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(path):
    """(floor, the room's first member) of the room holding `path`, or None."""
    for floor, rooms in FLOORS:
        for room in rooms:
            if any(path == member or (member.endswith("/") and path.startswith(member)) for member in room):
                return (floor, room[0])
    return None


def includes_of(root):
    found = {}
    for folder in CHECKED_FOLDERS:
        for directory, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if not SOURCE.search(name):
                    continue
                path = os.path.relpath(os.path.join(directory, name), root)
                with open(os.path.join(root, path), errors="replace") as source:
                    found[path] = [t for t in INCLUDE.findall(source.read()) if "/" in t]
    return found


def violations(root):
    problems = []
    graph = includes_of(root)
    for path, targets in sorted(graph.items()):
        here = room_of(path)
        if here is None:
            problems.append(f"{path}: in no room of the layout (add its folder to FLOORS)")
            continue
        for target in targets:
            there = room_of(target)
            if there is None or there[1] == here[1]:
                continue
            if here[1] == "reports/":
                if not any(target == r or (r.endswith("/") and target.startswith(r)) for r in REPORTS_MAY_INCLUDE):
                    problems.append(f"{path} includes {target}: reports/ reads only the result records")
                continue
            if there[0] >= here[0]:
                problems.append(f"{path} includes {target}: {there[1]} is not below {here[1]}")
    # A header that includes itself back through others.
    headers = {p: [t for t in ts if t in graph and not t.endswith(".cpp")] for p, ts in graph.items()
               if not p.endswith((".cpp", ".cu"))}
    state = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in headers.get(node, []):
            if state.get(nxt) == 1:
                problems.append("include cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for header in sorted(headers):
        if header not in state:
            visit(header, [header])
    return problems


def self_test():
    planted = [
        ("engine/backend/a.h", '#include "engine/communication/b.h"\n', "is not below"),
        ("engine/cuda/a.cpp", '#include "engine/reference/b.h"\n', "is not below"),
        ("models/a.cpp", '#include "strategies/b.h"\n', "is not below"),
        ("engine/training/a.cpp", '#include "engine/backends.h"\n', "is not below"),
        ("reports/a.cpp", '#include "engine/backend/device.h"\n', "result records"),
        ("engine/machine/a.h", '#include "engine/machine/b.h"\n', "include cycle"),
    ]
    failures = 0
    for path, text, expected in planted:
        with tempfile.TemporaryDirectory() as root:
            for name, body in [(path, text), ("engine/machine/b.h", '#include "engine/machine/a.h"\n'),
                               ("engine/communication/b.h", ""), ("engine/reference/b.h", ""),
                               ("strategies/b.h", ""), ("engine/backends.h", ""),
                               ("engine/backend/device.h", "")]:
                if os.path.exists(os.path.join(root, name)):
                    continue  # the planted file, written first
                os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
                with open(os.path.join(root, name), "w") as out:
                    out.write(body)
            found = violations(root)
            if not any(expected in line and path in line for line in found):
                print(f"self-test: planted {path} ({text.strip()}) was not caught as '{expected}': {found}")
                failures += 1
    if failures == 0:
        print(f"self-test: all {len(planted)} planted back arrows caught")
    return 1 if failures else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    problems = violations(root)
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} include(s) against the layers; see docs/DEVELOPING.md, 'The layers'")
        return 1
    print(f"include layers: {len(includes_of(root))} files, every include points downwards, no header cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The shape of the source tree, measured: lines per folder (and its share of src/, tools/ and
python/), files over the line limit, functions over the line limit, and includes that run from a
lower floor up to a higher one (the floors of docs/design.md's folder map, listed below).

  scripts/house.py            # the report
  scripts/house.py --check    # also exit 1 when a limit is broken (ctest's house.layout)

Functions are measured on the text with comments and string literals (raw ones included) blanked:
a function is a brace block at namespace or class scope whose head has a parameter list; its length
is from the line of its opening brace to the line of its closing one, lambdas and local classes
inside it counted with it."""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Floors, lowest first: a folder may include its own headers and those of lower floors only.
# Folders on one floor do not include each other.
FLOORS = [
    ["support", "acrobat"],  # src/support, include/acrobat (the public headers)
    ["kernels", "io"],
    ["types"],
    ["ops"],
    ["lang"],
    ["ir"],
    ["transforms"],
    ["analysis"],
    ["compiler", "codegen"],
    ["runtime"],
    ["autodiff"],
    ["engines"],
    ["tools", "python"],
]
FLOOR = {name: i for i, names in enumerate(FLOORS) for name in names}
MEASURED = ["src", "tools", "python"]
SOURCE = (".cpp", ".h", ".py", ".def", ".in")
MAX_SHARE, MAX_FILE_LINES, MAX_FUNCTION_LINES = 0.20, 800, 150


def files(tops, endings=SOURCE):
    for top in tops:
        for d, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(x for x in dirs if x not in ("tests", "__pycache__"))
            for n in sorted(names):
                if n.endswith(endings):
                    yield os.path.relpath(os.path.join(d, n), ROOT)


def folder_of(rel):
    parts = rel.split("/")
    return parts[1] if parts[0] in ("src", "include") and len(parts) > 2 else parts[0]


def count_lines(rel):
    with open(os.path.join(ROOT, rel), errors="replace") as f:
        return sum(1 for _ in f)


def blank_comments_and_strings(text):
    """The text with comments, string and character literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    keep = lambda s: re.sub(r"[^\n]", " ", s)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(keep(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(keep(text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^ ()\\\t\n]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(keep(text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(keep(text[i:j + 1]))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(rel):
    """(name, first line, lines) of every function body at namespace or class scope."""
    text = blank_comments_and_strings(open(os.path.join(ROOT, rel), errors="replace").read())
    found, stack, head_start = [], [], 0
    for i, c in enumerate(text):
        if c in ";":
            if not stack or stack[-1][0] != "func":
                head_start = i + 1
        elif c == "{":
            if stack and stack[-1][0] == "func":
                stack.append(("inner", i))
                continue
            head = text[head_start:i]
            flat = " ".join(head.split())
            if re.search(r"\bnamespace\b|extern\s*$", flat):
                kind = "scope"
            elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", flat):
                kind = "scope"
            elif ")" in flat and not re.search(r"=\s*$", flat) and not flat.rstrip().endswith(","):
                kind = "func"
            else:
                kind = "other"
            stack.append((kind, i, flat))
            head_start = i + 1
        elif c == "}":
            if not stack:
                continue
            top = stack.pop()
            if top[0] == "func":
                first = text.count("\n", 0, top[1]) + 1
                last = text.count("\n", 0, i) + 1
                m = re.search(r"([~\w:<>]+)\s*\([^()]*(\([^()]*\)[^()]*)*\)[^()]*$", top[2])
                found.append((m.group(1) if m else top[2][-60:], first, last - first + 1))
            if not stack or stack[-1][0] != "func":
                head_start = i + 1
    return found


def upward_includes():
    bad = []
    for rel in files(["src", "include", "tools", "python"], (".cpp", ".h", ".def")):
        me = folder_of(rel)
        if me not in FLOOR:
            continue
        for m in re.finditer(r'#include "([^"/]+)/', open(os.path.join(ROOT, rel)).read()):
            target = m.group(1)
            if target not in FLOOR or target == me:
                continue
            if FLOOR[target] >= FLOOR[me]:
                bad.append("%s includes %s/ (floor %d includes floor %d)" % (rel, target, FLOOR[me], FLOOR[target]))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 when a limit is broken")
    ap.add_argument("--top", type=int, default=10, help="longest functions to list (default 10)")
    args = ap.parse_args()
    problems = []

    by_folder, total = {}, 0
    for rel in files(MEASURED):
        n = count_lines(rel)
        total += n
        key = "/".join(rel.split("/")[:2]) if rel.startswith("src/") else rel.split("/")[0]
        by_folder[key] = by_folder.get(key, 0) + n
    print("lines of src/, tools/ and python/: %d" % total)
    for key, n in sorted(by_folder.items(), key=lambda kv: -kv[1]):
        share = n / total
        print("  %-16s %6d  %4.1f%%" % (key, n, 100 * share))
        if share > MAX_SHARE:
            problems.append("%s holds %.1f%% of the lines (at most %d%%)" % (key, 100 * share, 100 * MAX_SHARE))

    sources = list(files(MEASURED, (".cpp", ".h", ".py")))
    for rel in sources:
        n = count_lines(rel)
        if n > MAX_FILE_LINES:
            problems.append("%s has %d lines (at most %d)" % (rel, n, MAX_FILE_LINES))

    measured = []
    for rel in sources:
        if rel.endswith((".cpp", ".h")):
            measured += [(lines, rel, first, name) for name, first, lines in functions(rel)]
    measured.sort(reverse=True)
    print("longest functions (C++):")
    for lines, rel, first, name in measured[:args.top]:
        print("  %4d  %s:%d %s" % (lines, rel, first, name))
    for lines, rel, first, name in measured:
        if lines > MAX_FUNCTION_LINES:
            problems.append("%s:%d %s has %d lines (at most %d)" % (rel, first, name, lines, MAX_FUNCTION_LINES))

    problems += upward_includes()
    print("problems:" if problems else "no folder over %d%%, no file over %d lines, no function over %d lines, "
          "no include from a lower floor up" % (100 * MAX_SHARE, MAX_FILE_LINES, MAX_FUNCTION_LINES))
    for p in problems:
        print("  " + p)
    return 1 if problems and args.check else 0


if __name__ == "__main__":
    sys.exit(main())

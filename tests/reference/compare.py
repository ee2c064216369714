#!/usr/bin/python3
"""Compares acrobat's outputs against the oracle's expected outputs.

  compare.py EXPECTED.json ACTUAL.json [--rtol 1e-4] [--atol 1e-5] [--max-report 10]

Both files: {"outputs": [{"shape": [...], "data": [...flat row-major floats...]}, ...]}
(other top-level keys are ignored). Checks the instance count, every shape, and every element
with |actual - expected| <= atol + rtol * |expected| (NaN never matches; equal infinities match).

Exit status: 0 all match, 1 mismatch (count, shape or values; the first few are listed),
2 missing or malformed input file.
"""

import argparse
import json
import math
import sys


class Malformed(Exception):
    pass


def load_outputs(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise Malformed("%s file %s does not exist" % (what, path))
    except OSError as e:
        raise Malformed("cannot read %s file %s: %s" % (what, path, e))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Malformed("%s file %s is not valid JSON: %s" % (what, path, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("outputs"), list):
        raise Malformed('%s file %s: expected an object with an "outputs" list' % (what, path))
    outs = []
    for i, o in enumerate(doc["outputs"]):
        if not isinstance(o, dict) or "shape" not in o or "data" not in o:
            raise Malformed('%s file %s: outputs[%d] must be {"shape": [...], "data": [...]}' % (what, path, i))
        shape, data = o["shape"], o["data"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            raise Malformed("%s file %s: outputs[%d].shape is not a list of non-negative ints: %r"
                            % (what, path, i, shape))
        if not isinstance(data, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for v in data):
            raise Malformed("%s file %s: outputs[%d].data is not a flat list of numbers" % (what, path, i))
        n = 1
        for d in shape:
            n *= d
        if n != len(data):
            raise Malformed("%s file %s: outputs[%d] has shape %r (%d elements) but %d data values"
                            % (what, path, i, shape, n, len(data)))
        outs.append((shape, [float(v) for v in data]))
    return outs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("expected")
    ap.add_argument("actual")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--max-report", type=int, default=10, help="mismatches to list")
    args = ap.parse_args(argv)

    try:
        exp = load_outputs(args.expected, "expected")
        act = load_outputs(args.actual, "actual")
    except Malformed as e:
        print("compare.py: error: %s" % e, file=sys.stderr)
        return 2

    problems = []  # human-readable lines, first few printed
    n_bad = 0
    if len(exp) != len(act):
        problems.append("instance count differs: expected %d, actual %d" % (len(exp), len(act)))
        n_bad += 1
    max_abs = max_rel = 0.0
    where_abs = where_rel = None
    n_elems = 0
    for i, ((es, ed), (as_, ad)) in enumerate(zip(exp, act)):
        if es != as_:
            n_bad += 1
            problems.append("instance %d: shape differs: expected %r, actual %r" % (i, es, as_))
            continue
        for j, (e, a) in enumerate(zip(ed, ad)):
            n_elems += 1
            if a == e:  # also covers equal infinities
                continue
            diff = abs(a - e)  # NaN if either is NaN or infinities differ
            rel = diff / abs(e) if e != 0 else (math.inf if diff else 0.0)
            # the first NaN sticks as the maximum
            if not math.isnan(max_abs) and (math.isnan(diff) or diff > max_abs):
                max_abs, where_abs = diff, (i, j)
            if not math.isnan(max_rel) and (math.isnan(rel) or rel > max_rel):
                max_rel, where_rel = rel, (i, j)
            if not (diff <= args.atol + args.rtol * abs(e)):
                n_bad += 1
                problems.append("instance %d element %d: expected %.9g, actual %.9g (abs err %.3g, rel err %.3g)"
                                % (i, j, e, a, diff, rel))

    def at(w):
        return " at instance %d element %d" % w if w else ""

    status = "OK" if n_bad == 0 else "FAIL"
    print("compare: %s: %d instances (%d expected, %d actual), %d elements; max abs err %.3g%s, max rel err %.3g%s "
          "(rtol %g, atol %g)" % (status, min(len(exp), len(act)), len(exp), len(act), n_elems,
                                  max_abs, at(where_abs), max_rel, at(where_rel), args.rtol, args.atol))
    if n_bad:
        print("compare: %d mismatch(es); first %d:" % (n_bad, min(n_bad, args.max_report)))
        for p in problems[: args.max_report]:
            print("  " + p)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

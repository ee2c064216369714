#!/usr/bin/python3
"""Compares acrobat's outputs against the oracle's expected outputs.

  compare.py EXPECTED.json ACTUAL.json [--rtol 1e-4] [--atol 1e-5] [--margin-eps 1e-4]
             [--max-near-ties 0.05] [--max-report 10]

Both files: {"outputs": [value, ...]} (other top-level keys are ignored), one value per instance
in acrobat's --output encoding: a tensor {"shape": [...], "data": [...flat row-major floats...]},
a tuple or list as an array, ints/floats/bools as themselves, a constructor as {"Ctor": [...]}
or "Ctor". Checks the instance count and the structure of every value; tensors' shapes and
floats element-wise with |actual - expected| <= atol + rtol * |expected| (NaN never matches;
equal infinities match); ints, bools and strings exactly.

Decisions (tensor-dependent control flow): when EXPECTED has "margins" (the oracle's smallest
decision margin per instance), instances whose margin is below --margin-eps are NEAR TIES: acrobat
may legitimately take the other branch there, so they are compared and listed with the outcome,
but a mismatch on them is reported as inconclusive instead of failing. The comparison fails if
more than --max-near-ties (a fraction) of the instances are near ties: the test would be too weak.

Exit status: 0 all match, 1 mismatch (count, structure or values; the first few are listed) or
too many near ties, 2 missing or malformed input file.
"""

import argparse
import json
import math
import sys


class Malformed(Exception):
    pass


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_tensor(v):
    return isinstance(v, dict) and set(v) == {"shape", "data"}


def check_value(v, where):
    """Validates tensors inside a value (raises Malformed)."""
    if is_tensor(v):
        shape, data = v["shape"], v["data"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            raise Malformed("%s.shape is not a list of non-negative ints: %r" % (where, shape))
        if not isinstance(data, list) or not all(is_num(x) for x in data):
            raise Malformed("%s.data is not a flat list of numbers" % where)
        n = 1
        for d in shape:
            n *= d
        if n != len(data):
            raise Malformed("%s has shape %r (%d elements) but %d data values" % (where, shape, n, len(data)))
    elif isinstance(v, list):
        for k, x in enumerate(v):
            check_value(x, "%s[%d]" % (where, k))
    elif isinstance(v, dict):
        for k, x in v.items():
            check_value(x, "%s.%s" % (where, k))
    elif v is None:
        raise Malformed("%s is null" % where)


def load_doc(path, what):
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
    for i, o in enumerate(doc["outputs"]):
        try:
            check_value(o, "outputs[%d]" % i)
        except Malformed as e:
            raise Malformed("%s file %s: %s" % (what, path, e))
    return doc


class Comparer:
    def __init__(self, rtol, atol):
        self.rtol, self.atol = rtol, atol
        self.n_elems = 0
        self.max_abs = self.max_rel = 0.0
        self.where_abs = self.where_rel = None

    def floats(self, e, a, where, problems):
        self.n_elems += 1
        if a == e:  # also covers equal infinities
            return
        diff = abs(a - e)  # NaN if either is NaN or infinities differ
        rel = diff / abs(e) if e != 0 else (math.inf if diff else 0.0)
        # the first NaN sticks as the maximum
        if not math.isnan(self.max_abs) and (math.isnan(diff) or diff > self.max_abs):
            self.max_abs, self.where_abs = diff, where
        if not math.isnan(self.max_rel) and (math.isnan(rel) or rel > self.max_rel):
            self.max_rel, self.where_rel = rel, where
        if not (diff <= self.atol + self.rtol * abs(e)):
            problems.append("%s: expected %.9g, actual %.9g (abs err %.3g, rel err %.3g)" % (where, e, a, diff, rel))

    def value(self, e, a, where, problems):
        """Appends a line to `problems` for every difference between e and a."""
        if is_tensor(e):
            if not is_tensor(a):
                problems.append("%s: expected a tensor, found %s" % (where, json.dumps(a)[:60]))
            elif e["shape"] != a["shape"]:
                problems.append("%s: shape differs: expected %r, actual %r" % (where, e["shape"], a["shape"]))
            else:
                for j, (x, y) in enumerate(zip(e["data"], a["data"])):
                    self.floats(float(x), float(y), "%s element %d" % (where, j), problems)
        elif isinstance(e, list):
            if not isinstance(a, list) or len(a) != len(e):
                problems.append("%s: expected an array of %d, found %s" % (where, len(e), json.dumps(a)[:80]))
            else:
                for k, (x, y) in enumerate(zip(e, a)):
                    self.value(x, y, "%s[%d]" % (where, k), problems)
        elif isinstance(e, dict):
            if not isinstance(a, dict) or set(a) != set(e):
                problems.append("%s: expected %s, found %s" % (where, json.dumps(e)[:60], json.dumps(a)[:60]))
            else:
                for k in e:
                    self.value(e[k], a[k], "%s.%s" % (where, k), problems)
        elif isinstance(e, bool) or isinstance(e, str) or isinstance(a, bool) or isinstance(a, str):
            if type(e) is not type(a) or e != a:
                problems.append("%s: expected %s, actual %s" % (where, json.dumps(e), json.dumps(a)[:60]))
        elif isinstance(e, int) and isinstance(a, int):
            self.n_elems += 1
            if e != a:
                problems.append("%s: expected int %d, actual %d" % (where, e, a))
        elif is_num(e) and is_num(a):
            self.floats(float(e), float(a), where, problems)
        else:
            problems.append("%s: expected %s, actual %s" % (where, json.dumps(e)[:60], json.dumps(a)[:60]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("expected")
    ap.add_argument("actual")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--margin-eps", type=float, default=1e-4,
                    help="decisions whose oracle margin is below this are near ties (default 1e-4)")
    ap.add_argument("--max-near-ties", type=float, default=0.05,
                    help="largest fraction of near-tie instances accepted (default 0.05)")
    ap.add_argument("--max-report", type=int, default=10, help="mismatches to list")
    args = ap.parse_args(argv)

    try:
        exp_doc = load_doc(args.expected, "expected")
        act_doc = load_doc(args.actual, "actual")
    except Malformed as e:
        print("compare.py: error: %s" % e, file=sys.stderr)
        return 2
    exp, act = exp_doc["outputs"], act_doc["outputs"]
    margins = exp_doc.get("margins")
    if margins is not None and (not isinstance(margins, list) or len(margins) != len(exp)
                                or not all(m is None or is_num(m) for m in margins)):
        print("compare.py: error: expected file %s: \"margins\" must be a list of numbers or nulls, one per "
              "output" % args.expected, file=sys.stderr)
        return 2

    problems = []  # human-readable lines, first few printed
    n_bad = 0
    near_ties = []  # (instance, margin, matched)
    if len(exp) != len(act):
        problems.append("instance count differs: expected %d, actual %d" % (len(exp), len(act)))
        n_bad += 1
    cmp = Comparer(args.rtol, args.atol)
    for i, (e, a) in enumerate(zip(exp, act)):
        mine = []
        m = margins[i] if margins is not None else None
        if m is not None and m < args.margin_eps:
            Comparer(args.rtol, args.atol).value(e, a, "instance %d" % i, mine)  # not in the statistics
            near_ties.append((i, m, not mine))
            continue
        cmp.value(e, a, "instance %d" % i, mine)
        n_bad += len(mine)
        problems.extend(mine)

    def at(w):
        return " at %s" % w if w else ""

    too_many = bool(exp) and len(near_ties) > args.max_near_ties * len(exp)
    status = "OK" if n_bad == 0 and not too_many else "FAIL"
    print("compare: %s: %d instances (%d expected, %d actual), %d values; max abs err %.3g%s, max rel err %.3g%s "
          "(rtol %g, atol %g)" % (status, min(len(exp), len(act)), len(exp), len(act), cmp.n_elems,
                                  cmp.max_abs, at(cmp.where_abs), cmp.max_rel, at(cmp.where_rel),
                                  args.rtol, args.atol))
    if margins is not None:
        known = [m for m in margins if m is not None]
        decisions = exp_doc.get("decisions")
        print("compare: decisions: %s in total, smallest margin %s; %d near-tie instance(s) (margin < %g)"
              % (sum(decisions) if isinstance(decisions, list) else "?",
                 "%.3g" % min(known) if known else "-", len(near_ties), args.margin_eps))
        for i, m, ok in near_ties:
            print("  near tie: instance %d, margin %.3g: %s" % (i, m, "outputs match" if ok else
                                                               "outputs DIFFER (inconclusive, not counted)"))
    rc = 0
    if n_bad:
        print("compare: %d mismatch(es); first %d:" % (n_bad, min(n_bad, args.max_report)))
        for p in problems[: args.max_report]:
            print("  " + p)
        rc = 1
    if too_many:
        print("compare: FAIL: %d of %d instances are near ties (more than %g): the comparison would be too weak"
              % (len(near_ties), len(exp), args.max_near_ties))
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())

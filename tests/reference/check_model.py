#!/usr/bin/python3
"""End-to-end model test: acrobat's outputs must equal the PyTorch oracle's.

  check_model.py --acrobat PATH/TO/acrobat --model NAME [--set H=512 ...]
                 [--limit 200] [--seed 0] [--data FILE] [--data-seed 1] [--workdir DIR] [--keep]
                 [--rtol 1e-4] [--atol 1e-5] [--margin-eps 1e-4] [--max-near-ties 0.05]
                 [--timeout SECONDS] [--extra-args="ARGS"]... [--oracle-only | --oracle DIR]
                 [-- MORE ACROBAT ARGS]

NAME: treelstm, mvrnn, birnn or any tests/reference/model_NAME.py (registry.py).
Steps (each command is printed before it runs; its output goes straight through):
  1. generate.py: oracle weights W.safetensors and expected outputs EXPECTED.json; for a model
     with make_data (and no --data given), it first writes --limit synthetic instances from
     --data-seed to DATA in the workdir
  2. ACROBAT run <repo>/models/<SOURCE>.acr --params W.safetensors --input KIND:<data>
       [--vocab <repo>/data/sst/vocab.txt] [--set K=V ...] [--entry ENTRY] --limit N
       --output ACTUAL.json [extra args]
     with SOURCE and ENTRY the model's (registry.py; by default its name and main)
     with KIND the model's INPUT_KIND (--vocab for sst and sst-tokens); the default data is
     <repo>/data/sst/test.txt for models without make_data
  3. compare.py EXPECTED.json ACTUAL.json --rtol --atol --margin-eps --max-near-ties
--oracle-only runs step 1 alone, into --workdir; --oracle DIR skips it and takes its files from DIR,
where --oracle-only wrote them with the same model, dims, data and limit (checked: a difference is
a usage error). The CTest suite computes each model's oracle once for its three engines so
(tests/models/CMakeLists.txt: a fixture).

The repository root is derived from this script's location (<repo>/tests/reference/).
Exit status: 0 pass; otherwise the exit status of the first failing step (compare: 1 mismatch,
2 missing/malformed output; a step killed by signal S gives 128+S), or 2 for a usage/setup error.
Without --workdir the files go to a fresh temporary directory that is removed on success and
kept (and printed) on failure; an explicit --workdir is never removed.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import registry  # noqa: E402  (the model table and --set parsing; imports torch)


def say(msg):
    print("check_model: %s" % msg, flush=True)


def run_step(name, cmd, timeout=None):
    """Runs cmd with inherited stdout/stderr. Returns an exit status suitable for sys.exit."""
    say("[%s] %s" % (name, shlex.join(cmd)))
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(cmd, timeout=timeout).returncode
    except FileNotFoundError as e:
        say("[%s] cannot execute: %s" % (name, e))
        return 2
    except PermissionError as e:
        say("[%s] cannot execute: %s" % (name, e))
        return 2
    except subprocess.TimeoutExpired:
        say("[%s] timed out after %ss" % (name, timeout))
        return 124
    dt = time.perf_counter() - t0
    if rc < 0:
        say("[%s] killed by signal %d after %.2fs" % (name, -rc, dt))
        return 128 + (-rc)
    say("[%s] exit %d in %.2fs" % (name, rc, dt))
    return rc


def main(argv):
    # Everything after a bare "--" goes to acrobat verbatim.
    passthrough = []
    if "--" in argv:
        k = argv.index("--")
        argv, passthrough = argv[:k], argv[k + 1 :]

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", required=True, help="path to the acrobat binary")
    ap.add_argument("--model", required=True, choices=registry.names())
    ap.add_argument("--set", action="append", default=[], metavar="K=V", help="dim override (repeatable)")
    ap.add_argument("--limit", type=int, default=200, help="first N instances (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="input file (default: generated for models with make_data, "
                    "else <repo>/data/sst/test.txt)")
    ap.add_argument("--data-seed", type=int, default=1, help="seed of the generated data")
    ap.add_argument("--vocab", default=os.path.join(REPO, "data", "sst", "vocab.txt"))
    ap.add_argument("--workdir", help="directory for weights/expected/actual files (kept)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary workdir even on success")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--margin-eps", type=float, default=1e-4, help="near-tie decision margin (compare.py)")
    ap.add_argument("--max-near-ties", type=float, default=0.05, help="fraction of near ties allowed")
    ap.add_argument("--timeout", type=float, default=None, help="seconds allowed for the acrobat run")
    ap.add_argument("--extra-args", action="append", default=[], metavar="ARGS",
                    help='extra acrobat arguments, shell-split (use --extra-args="--x 1")')
    oracle = ap.add_mutually_exclusive_group()
    oracle.add_argument("--oracle-only", action="store_true", help="step 1 only, into --workdir")
    oracle.add_argument("--oracle", metavar="DIR", help="step 1's files from DIR (written by --oracle-only)")
    args = ap.parse_args(argv)
    if args.oracle_only and not args.workdir:
        say("error: --oracle-only writes into --workdir: give it")
        return 2

    try:
        sets = registry.parse_sets(args.set)
        spec = registry.get(args.model)
        registry.resolve_dims(spec, sets)  # validate early
    except ValueError as e:
        say("error: %s" % e)
        return 2
    extra = [a for s in args.extra_args for a in shlex.split(s)] + passthrough

    acrobat = args.acrobat
    if os.sep not in acrobat:
        acrobat = shutil.which(acrobat) or acrobat
    acrobat = os.path.abspath(acrobat)
    model_file = os.path.join(REPO, "models", spec.SOURCE + ".acr")
    entry_args = ["--entry", spec.ENTRY] if spec.ENTRY else []
    make_data = args.data is None and spec.make_data is not None
    if args.data is None and not make_data:
        args.data = os.path.join(REPO, "data", "sst", "test.txt")
    if make_data and args.limit <= 0:
        say("error: model %s generates its data: --limit must be > 0" % args.model)
        return 2
    checks = [("acrobat binary", acrobat), ("model source", model_file)]
    if not make_data:
        checks.append(("data file", args.data))
    if spec.reads_vocab:
        checks.append(("vocabulary", args.vocab))
    for what, path in checks:
        if not os.path.isfile(path):
            say("error: %s %s does not exist" % (what, path))
            return 2
    if not os.access(acrobat, os.X_OK):
        say("error: acrobat binary %s is not executable" % acrobat)
        return 2

    if args.workdir:
        workdir, temporary = os.path.abspath(args.workdir), False
        os.makedirs(workdir, exist_ok=True)
    else:
        workdir, temporary = tempfile.mkdtemp(prefix="acrobat-check-%s-" % args.model), True
    tag = args.model + "".join("_%s%d" % kv for kv in sorted(sets.items()))
    oracle_dir = os.path.abspath(args.oracle) if args.oracle else workdir
    params = os.path.join(oracle_dir, tag + ".params.safetensors")
    expected = os.path.join(oracle_dir, tag + ".expected.json")
    actual = os.path.join(workdir, tag + ".actual.json")
    set_args = [a for k, v in sorted(sets.items()) for a in ("--set", "%s=%d" % (k, v))]
    vocab_args = ["--vocab", args.vocab] if spec.reads_vocab else []
    data_args = ["--data", args.data]
    if make_data:
        args.data = os.path.join(oracle_dir, tag + ".data." + ("json" if spec.INPUT_KIND == "json" else "txt"))
        data_args = ["--data", args.data, "--make-data", "--data-seed", str(args.data_seed)]

    oracle_cmd = [sys.executable, os.path.join(HERE, "generate.py"), "--model", args.model,
                  *set_args, *data_args, *vocab_args, "--limit", str(args.limit), "--seed", str(args.seed),
                  "--params", params, "--expected", expected]
    # Made for the command that writes the oracle's files.
    stamp = registry.OracleStamp(os.path.join(oracle_dir, tag + ".oracle.json"), oracle_cmd)
    if args.oracle:
        problem = stamp.problem("check_model.py")
        if problem:
            say("error: " + problem)
            return 2
        rc = 0
    else:
        stamp.clear()
        rc = run_step("oracle", oracle_cmd)
        if rc == 0:
            stamp.write()
        if args.oracle_only:
            say("%s oracle %s (exit %d) in %s" % ("made" if rc == 0 else "FAILED", tag, rc, workdir))
            return rc
    if rc == 0:
        if os.path.exists(actual):
            os.remove(actual)  # never compare against a stale result
        rc = run_step("acrobat", [acrobat, "run", model_file, "--params", params,
                                  "--input", "%s:%s" % (spec.INPUT_KIND, args.data),
                                  *vocab_args, *set_args, *entry_args, "--limit", str(args.limit),
                                  "--output", actual, *extra], timeout=args.timeout)
        if rc == 0 and not os.path.isfile(actual):
            say("error: acrobat exited 0 but wrote no output file %s" % actual)
            rc = 2
    if rc == 0:
        rc = run_step("compare", [sys.executable, os.path.join(HERE, "compare.py"), expected, actual,
                                  "--rtol", repr(args.rtol), "--atol", repr(args.atol),
                                  "--margin-eps", repr(args.margin_eps),
                                  "--max-near-ties", repr(args.max_near_ties)])

    if rc == 0:
        say("PASS %s" % tag)
        if temporary and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            say("files kept in %s" % workdir)
    else:
        say("FAIL %s (exit %d); files kept in %s" % (tag, rc, workdir))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

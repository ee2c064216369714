#!/usr/bin/python3
"""Open-loop load test of `acrobat serve`: requests arrive as a Poisson process at 50%, 80% and 95% of
`acrobat run --batch 64`'s throughput on the same instances (build/bench/serve_load --rate), on three
workloads of mixed costs, against three servers in the same run:

  continuous    --continuous --max-batch 64: instances join the running batch and leave it when done
  whole         --max-batch 64 --max-delay-ms 0: batches run to their end (run to completion)
  one at a time --max-batch 1

Workloads (random weights from seed 0 unless said; the AOT engine, one engine thread):
  treelstm  models/treelstm.acr H=256, the 2210 SST test trees (2 to 112 nodes)
  berxit    models/berxit.acr, the SST test sentences as token lists (2 to 56 tokens), each leaving at
            the layer where its classifier is sure enough (early exit)
  gpt       models/gpt.acr (d 512, 6 layers), bench/results/generate: prompts of MNLI lengths, output
            budgets of MRPC lengths, greedy generation until the end token or the budget

For each server and load: goodput (answers of 200 a second of arrivals), p50, p99 and p99.9 latency of
every request from its arrival (a 504 counts at its time), and the statuses. The gpt requests ask
for streamed answers: the time to the first event is the time to the first token with the
continuous server (which streams each token as it is generated), the whole answer's with the others;
beside it, one decode step plus the prefill of an instance alone (`acrobat run --batch 1` on the
prompts with a budget of 2 tokens: the mean time per instance). Then the continuous
server at saturation (128 clients, each sending its next request when answered) against `acrobat
run --batch 64`. Every request carries "deadline_ms" (--deadline-ms, per workload), which bounds an
overloaded server's run. Loopback only; the engine on core 0, HTTP and the client on the rest.

  /usr/bin/python3 bench/serve_open_bench.py [--workloads treelstm,berxit,gpt] [--seconds 15]
      [--out bench/results/serve-open] [--servers continuous,whole,...]

Writes serve_open.json, serve_open.md and serve_open.png to --out.

With --mixed, the three workloads arrive together at ONE server of the three models (`acrobat serve
--models`, their batches taking turns on the one engine thread): each at its share of the load
times a third of its own `run --batch 64` throughput, so that at 100% each would take a third of
the engine's time. Three Poisson streams (one serve_load each) make one; p50/p99/p99.9 over every
request of the three and per workload, against the same three servers and, as a user would serve
three models without --models, three whole-batch servers of one model each (three processes whose
engine threads share the engine's core, time-sliced by the system). Writes serve_mixed.json,
serve_mixed.md and serve_mixed.png (default --out bench/results/serve-mixed)."""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))

import acrobat  # noqa: E402
from serve_bench import client_cores, cpu_model, stop_servers  # noqa: E402

TEST = os.path.join(ROOT, "data", "sst", "test.txt")
GENERATE = os.path.join(ROOT, "bench", "results", "generate")
LOADS = (0.5, 0.8, 0.95)
SERVERS = (("continuous", ["--continuous", "--max-batch", "64"]),
           ("whole", ["--max-batch", "64", "--max-delay-ms", "0"]),
           ("one at a time", ["--max-batch", "1"]))


def workloads(work):
    """name -> (model, extra flags of run and serve, instances file, deadline ms, streamed)."""
    out = {}
    trees = os.path.join(work, "trees.jsonl")
    tree_model = os.path.join(ROOT, "models", "treelstm.acr")
    with open(trees, "w") as f:
        for t in acrobat.load(tree_model, dims={"H": 256}).read_values("sst:" + TEST):
            f.write(json.dumps(t) + "\n")
    out["treelstm"] = (tree_model, ["--set", "H=256"], trees, 10000, False)
    sentences = os.path.join(work, "sentences.jsonl")
    berxit = os.path.join(ROOT, "models", "berxit.acr")
    with open(sentences, "w") as f:
        for s in acrobat.load(berxit).read_values("sst-tokens:" + TEST):
            f.write(json.dumps(s) + "\n")
    out["berxit"] = (berxit, [], sentences, 10000, False)
    out["gpt"] = (os.path.join(ROOT, "models", "gpt.acr"), ["--params", os.path.join(GENERATE, "params.safetensors")],
                  os.path.join(GENERATE, "instances.jsonl"), 30000, True)
    return out


def offline(args, model, flags, instances):
    """`acrobat run --batch 64`'s instances/s on the file, the median of three runs."""
    runs = []
    for _ in range(3):
        r = subprocess.run([args.acrobat, "run", model, "--input", "json:" + instances, "--batch", "64", "--threads", "1",
                            "--engine", "aot", "--show", "0"] + flags, capture_output=True, text=True, check=True)
        runs.append(float(re.search(r"([\d.]+) instances/s", r.stdout).group(1)))
    return sorted(runs)[1]


def serve(args, model, flags, server_flags):
    p = subprocess.Popen([args.acrobat, "serve", model, "--port", "0", "--engine", "aot", "--threads", "1",
                          "--max-connections", "1024", "--max-queue", "1000000"] + flags + server_flags,
                         stdout=subprocess.PIPE, text=True)
    m = re.search(r":(\d+)/v1/models/", p.stdout.readline())
    if not m:
        p.kill()
        raise SystemExit("serve_open_bench.py: the server did not start")
    return p, int(m.group(1))


def serve_models(args, models, server_flags):
    """A server of the models file (every workload's model): (process, port)."""
    p = subprocess.Popen([args.acrobat, "serve", "--models", models, "--port", "0", "--engine", "aot", "--threads",
                          "1", "--max-connections", "1024", "--max-queue", "1000000"] + server_flags,
                         stdout=subprocess.PIPE, text=True)
    m = re.search(r":(\d+)/v1/models/", p.stdout.readline())
    if not m:
        p.kill()
        raise SystemExit("serve_open_bench.py: the server did not start")
    for _ in range(len(MIX) - 1):  # a line a model, once it is loaded
        p.stdout.readline()
    return p, int(m.group(1))


def first_token_floor(args, work, model, flags, instances):
    """ms: a prompt and one decode step of an instance alone (`acrobat run --batch 1`, budget 2)."""
    two = os.path.join(work, "budget2.jsonl")
    with open(instances) as f, open(two, "w") as g:
        for line in f:
            if line.strip():
                g.write(json.dumps([json.loads(line)[0], 2]) + "\n")
    r = subprocess.run([args.acrobat, "run", model, "--input", "json:" + two, "--batch", "1", "--threads", "1",
                        "--engine", "aot", "--show", "0"] + flags, capture_output=True, text=True, check=True)
    return 1e3 / float(re.search(r"([\d.]+) instances/s", r.stdout).group(1))


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0.0


# --mixed: the clients of each workload (its requests in flight at once, at most).
MIX = (("treelstm", 512), ("berxit", 256), ("gpt", 128))


def mixed(args, every, work):
    """The three workloads at once on one server of the three models (the module's docstring)."""
    models = os.path.join(work, "models.jsonl")
    with open(models, "w") as f:
        for name, _ in MIX:
            model, flags, _, _, _ = every[name]
            line = {"model": model, "name": name}
            for flag, value in zip(flags[::2], flags[1::2]):
                if flag == "--set":
                    line["set"] = {k: int(v) for k, v in (kv.split("=") for kv in value.split(","))}
                elif flag == "--params":
                    line["params"] = value
            f.write(json.dumps(line) + "\n")
    base = {}
    for name, _ in MIX:
        model, flags, instances, _, _ = every[name]
        base[name] = offline(args, model, flags, instances)
        print("%s: acrobat run --batch 64: %.1f instances/s" % (name, base[name]), flush=True)
    model, flags, instances, _, _ = every["gpt"]
    floor = first_token_floor(args, work, model, flags, instances)
    print("gpt: prefill and one decode step alone: %.1f ms" % floor, flush=True)
    rows = []
    for label, server_flags in SERVERS + (("whole, 3 processes", None),):
        if args.servers is not None and label not in args.servers.split(","):
            continue
        if server_flags is None:  # one process a model
            servers, ports = [], {}
            for name, _ in MIX:
                model, flags, _, _, _ = every[name]
                server, ports[name] = serve(args, model, flags, SERVERS[1][1])
                servers.append(server)
        else:
            server, port = serve_models(args, models, server_flags)
            servers, ports = [server], {name: port for name, _ in MIX}
        try:
            for name, _ in MIX:  # warm-up
                load(args, ports[name], name, every[name][2], ["--clients", "64", "--limit", "256"])
            for share in LOADS:
                cores = client_cores(1)
                procs = []
                for seed, (name, clients) in enumerate(MIX):
                    _, _, instances, deadline, streamed = every[name]
                    procs.append(subprocess.Popen(
                        [args.load, "--port", str(ports[name]), "--model", name, "--instances", instances,
                         "--rate", "%.3f" % (share * base[name] / len(MIX)), "--seconds", str(args.seconds),
                         "--clients", str(clients), "--deadline-ms", str(deadline), "--seed", str(7 + seed),
                         "--latencies"] + (["--stream"] if streamed else []),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        preexec_fn=lambda: os.sched_setaffinity(0, cores)))
                parts = {}
                for (name, _), p in zip(MIX, procs):
                    out, err = p.communicate()
                    if p.returncode != 0:
                        raise SystemExit("serve_open_bench.py: serve_load failed: " + out + err)
                    parts[name] = json.loads(out)
                every_latency = [x for part in parts.values() for x in part.pop("latencies_ms")]
                r = {"server": label, "load": share, "first_floor_ms": floor,
                     "goodput": sum(part["goodput"] for part in parts.values()),
                     "offered": sum(share * base[name] / len(MIX) for name, _ in MIX),
                     "requests": len(every_latency),
                     "p50_ms": percentile(every_latency, 0.50), "p99_ms": percentile(every_latency, 0.99),
                     "p999_ms": percentile(every_latency, 0.999), "workloads": parts}
                rows.append(r)
                print("  %-14s load %.2f: goodput %7.1f/s (%.2fx offered), p50 %8.1f ms, p99 %8.1f ms, p99.9 %8.1f ms; "
                      "p99 by workload %s; gpt first token p50 %.1f ms, p99 %.1f ms" % (
                          label, share, r["goodput"], r["goodput"] / r["offered"], r["p50_ms"], r["p99_ms"],
                          r["p999_ms"], ", ".join("%s %.1f" % (n, parts[n]["p99_ms"]) for n, _ in MIX),
                          parts["gpt"]["first_event_p50_ms"], parts["gpt"]["first_event_p99_ms"]), flush=True)
        finally:
            stop_servers(servers)
    model_name = cpu_model()
    result = {"cpu": model_name, "seconds": args.seconds, "offline": base, "rows": rows}
    with open(os.path.join(args.out, "serve_mixed.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = ["# acrobat serve under a mixed open-loop load", "",
          "`/usr/bin/python3 bench/serve_open_bench.py --mixed --seconds %g` on %s: one server of three models "
          "(`acrobat serve --models`, AOT, one engine thread on a core of its own); Poisson arrivals of each "
          "workload at the load times a third of its own `acrobat run --batch 64` throughput (%s), for %g s "
          "per cell; latency from each request's arrival, a 504 (past its deadline) counted at its time; "
          "goodput: answers of 200 a second." % (
              args.seconds, model_name, ", ".join("%s %.1f/s" % (n, base[n]) for n, _ in MIX), args.seconds), "",
          "| load | server | goodput /s | p50 ms | p99 ms | p99.9 ms | p99 vs continuous | treelstm p99 | berxit p99 "
          "| gpt p99 | gpt first token p50 / p99 ms |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cont = next((c for c in rows if c["load"] == r["load"] and c["server"] == "continuous"), r)
        w = r["workloads"]
        md.append("| %d%% | %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.1f | %.1f | %.1f | %.1f / %.1f |" % (
            round(100 * r["load"]), r["server"], r["goodput"], r["p50_ms"], r["p99_ms"], r["p999_ms"],
            r["p99_ms"] / cont["p99_ms"], w["treelstm"]["p99_ms"], w["berxit"]["p99_ms"], w["gpt"]["p99_ms"],
            w["gpt"]["first_event_p50_ms"], w["gpt"]["first_event_p99_ms"]))
    md += ["", "The prefill and one decode step of a gpt instance alone: %.1f ms." % floor]
    with open(os.path.join(args.out, "serve_mixed.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    plot_mixed(result, os.path.join(args.out, "serve_mixed.png"))
    return 0


def plot_mixed(result, path):
    values = [("every request", lambda r: r["p99_ms"])] + [
        (name, (lambda n: lambda r: r["workloads"][n]["p99_ms"])(name)) for name, _ in MIX]
    panels = [("mixed load: " + title, {label: [(100 * r["load"], value(r)) for r in result["rows"] if r["server"] == label]
                                        for label, _ in SERVER_COLOURS}) for title, value in values]
    draw_p99(panels, "load (% of run --batch 64, a third each)", path)


def load(args, port, name, instances, extra):
    cores = client_cores(1)
    r = subprocess.run([args.load, "--port", str(port), "--model", name, "--instances", instances] + extra,
                       capture_output=True, text=True, preexec_fn=lambda: os.sched_setaffinity(0, cores))
    if r.returncode != 0:
        raise SystemExit("serve_open_bench.py: serve_load failed: " + r.stdout + r.stderr)
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", default=os.path.join(ROOT, "build", "tools", "acrobat"))
    ap.add_argument("--load", default=os.path.join(ROOT, "build", "bench", "serve_load"))
    ap.add_argument("--workloads", default="treelstm,berxit,gpt")
    ap.add_argument("--seconds", type=float, default=15, help="seconds of arrivals per cell")
    ap.add_argument("--mixed", action="store_true", help="the three workloads at once on one server of three models")
    ap.add_argument("--out", default=None, help="default bench/results/serve-open (--mixed: serve-mixed)")
    ap.add_argument("--servers", default=None,
                    help="only these servers, comma-separated labels (e.g. continuous); the tables then "
                         "compare within them")
    args = ap.parse_args()
    if args.out is None:
        args.out = os.path.join(ROOT, "bench", "results", "serve-mixed" if args.mixed else "serve-open")
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(ROOT, "build", "serve-open-bench")
    os.makedirs(work, exist_ok=True)
    every = workloads(work)
    if args.mixed:
        return mixed(args, every, work)
    rows, saturation = [], []
    for name in args.workloads.split(","):
        model, flags, instances, deadline, streamed = every[name]
        stem = os.path.splitext(os.path.basename(model))[0]
        base = offline(args, model, flags, instances)
        print("%s: acrobat run --batch 64: %.1f instances/s" % (name, base), flush=True)
        first_floor = None
        if streamed:  # a prompt and one decode step, alone: the budget 2
            first_floor = first_token_floor(args, work, model, flags, instances)
            print("  prefill and one decode step alone: %.1f ms" % first_floor, flush=True)
        for label, server_flags in SERVERS:
            if args.servers is not None and label not in args.servers.split(","):
                continue
            server, port = serve(args, model, flags, server_flags)
            try:
                load(args, port, stem, instances, ["--clients", "64", "--limit", "256"])  # warm-up
                for share in LOADS:
                    r = load(args, port, stem, instances,
                             ["--rate", "%.3f" % (share * base), "--seconds", str(args.seconds), "--clients", "512",
                              "--deadline-ms", str(deadline), "--seed", "7"] + (["--stream"] if streamed else []))
                    r.update(workload=name, server=label, load=share, offline=base, first_floor_ms=first_floor)
                    rows.append(r)
                    print("  %-14s load %.2f: goodput %7.1f/s (%.2fx offered), p50 %8.1f ms, p99 %8.1f ms, "
                          "p99.9 %8.1f ms, %s" % (label, share, r["goodput"], r["goodput"] / (share * base),
                                                  r["p50_ms"], r["p99_ms"], r["p999_ms"], r["status"]), flush=True)
                    if streamed:
                        print("    first event p50 %.1f ms, p99 %.1f ms (%.2fx / %.2fx prefill and one step alone)" % (
                            r["first_event_p50_ms"], r["first_event_p99_ms"], r["first_event_p50_ms"] / first_floor,
                            r["first_event_p99_ms"] / first_floor), flush=True)
                if label == "continuous":
                    r = load(args, port, stem, instances, ["--clients", "128"])
                    saturation.append({"workload": name, "offline": base, **r})
                    print("  saturation: %.1f requests/s (%.3fx acrobat run --batch 64)" % (
                        r["requests_per_second"], r["requests_per_second"] / base), flush=True)
            finally:
                stop_servers([server])
    model_name = cpu_model()
    result = {"cpu": model_name, "seconds": args.seconds, "rows": rows, "saturation": saturation}
    with open(os.path.join(args.out, "serve_open.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = ["# acrobat serve under open-loop load", "",
          "`/usr/bin/python3 bench/serve_open_bench.py --workloads %s --seconds %g` on %s: Poisson arrivals "
          "for %g s per cell at a share of `acrobat run --batch 64`'s throughput on the same instances (AOT, "
          "one engine thread on a core of its own); latency from each request's arrival, a 504 (past its "
          "deadline) counted at its time; goodput: answers of 200 a second." % (
              args.workloads, args.seconds, model_name, args.seconds), "",
          "| workload | run --batch 64 /s | load | server | goodput /s | p50 ms | p99 ms | p99.9 ms | p99 vs continuous |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cont = next((c for c in rows if c["workload"] == r["workload"] and c["load"] == r["load"] and
                     c["server"] == "continuous"), r)
        md.append("| %s | %.1f | %d%% | %s | %.1f | %.1f | %.1f | %.1f | %.2fx |" % (
            r["workload"], r["offline"], round(100 * r["load"]), r["server"], r["goodput"], r["p50_ms"], r["p99_ms"],
            r["p999_ms"], r["p99_ms"] / cont["p99_ms"]))
    md += ["", "Time to the first token of the gpt generations (streamed answers: the first event), against "
           "the prefill and one decode step of an instance alone:", "",
           "| load | server | first token p50 ms | p99 ms | prefill + one step alone ms | p50 / alone | p99 / alone |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("first_floor_ms"):
            md.append("| %d%% | %s | %.1f | %.1f | %.1f | %.2fx | %.2fx |" % (
                round(100 * r["load"]), r["server"], r["first_event_p50_ms"], r["first_event_p99_ms"], r["first_floor_ms"],
                r["first_event_p50_ms"] / r["first_floor_ms"], r["first_event_p99_ms"] / r["first_floor_ms"]))
    md += ["", "At saturation (the continuous server, 128 clients each sending its next request when answered):", "",
           "| workload | requests/s | vs run --batch 64 | p50 ms | p99 ms |", "|---|---|---|---|---|"]
    for s in saturation:
        md.append("| %s | %.1f | %.3fx | %.1f | %.1f |" % (s["workload"], s["requests_per_second"],
                                                        s["requests_per_second"] / s["offline"], s["p50_ms"], s["p99_ms"]))
    with open(os.path.join(args.out, "serve_open.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    plot(result, os.path.join(args.out, "serve_open.png"))
    return 0


# The servers of the plots, and their colours.
SERVER_COLOURS = (("continuous", "#e6550d"), ("whole", "#3182bd"), ("one at a time", "#969696"),
                  ("whole, 3 processes", "#31a354"))


def plot(result, path):
    names = sorted({r["workload"] for r in result["rows"]}, key=["treelstm", "berxit", "gpt"].index)
    panels = [(name, {label: [(100 * r["load"], r["p99_ms"]) for r in result["rows"]
                              if r["workload"] == name and r["server"] == label] for label, _ in SERVER_COLOURS})
              for name in names]
    draw_p99(panels, "load (% of run --batch 64)", path)


def draw_p99(panels, xlabel, path):
    """One panel per (title, {server: [(load %, p99 ms)]}), log scale, a line per server with points."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(panels), figsize=(4.3 * len(panels), 3.8), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels):
        for label, colour in SERVER_COLOURS:
            if lines.get(label):
                ax.plot(*zip(*lines[label]), "o-", color=colour, label=label)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("p99 latency (ms)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())

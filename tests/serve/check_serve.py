#!/usr/bin/python3
"""`acrobat serve` end to end: the TreeLSTM (H 64) behind HTTP on a free loopback port. What it
promises under attack is tested apart, by attack_serve.py.

  check_serve.py --acrobat BIN --workdir DIR

1. 64 requests at once, each one SST test tree, except one malformed body and one tree whose word
   id is out of range (fails at run time): the malformed one gets 400 with the parse error, the
   failing one 400 naming the index and the model by its file name (no path), and the other 62
   their outputs, equal to `acrobat run`'s on the same trees (1e-5); the batch that held the
   failing tree was run again without it.
2. 64 more at once: they are batched (a batch of more than 32 instances in /metrics).
3. An instance of the wrong type (400 naming instances[0]), an unknown model (404 naming the
   model served), no "instances" (400), 40 trees sent as `curl -d` sends them (a form content
   type, over the library's 8 KiB form cap: 200), a wrong method (405 naming the right one),
   /health, /ready, /v1/models/treelstm/metadata (the entry's types as the language prints them,
   the dims, the engine, the batching), /metrics in Prometheus text counting every response by
   status, with the gauges of the moment (queue, instances running, connections, RSS).
4. SIGTERM with requests in flight: each is answered, then the server exits 0.
5. An internal error (a bug in acrobat, made to happen with ACROBAT_INJECT_FAULT=instance:3 in a
   second server, one instance per batch): the request whose batch met it gets a 500 naming the
   place in acrobat's source (no path of this machine), the 7 others sent with it and every later
   request their outputs, /health stays 200, /metrics counts the 500 and the internal error.
6. While the model loads and compiles (the AOT engine with an empty cache): /health answers 200,
   /ready and predict 503; once the server prints its address, /ready is 200 and predict answers
   `acrobat run`'s outputs.
7. The queue's policy, on a server that waits up to 2 s for 3 instances per batch, --max-queue 8:
   a request with "deadline_ms": 100 gets a 504 within a second (its instance dropped unrun); one
   of 9 instances a 503 at once; two requests of priority 0 queued, then one of 2 instances of
   priority 9: the batch takes those 2 and the older of priority 0, the other waits its 2 s;
   "priority" 10, "deadline_ms" 0 or a string get a 400 naming the key; /metrics counts the 503,
   the 504 and the dropped instance.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serving import (CONTINUOUS, MODEL, ROOT, Checks, Model, at_once, close, get, metric, metrics, post,  # noqa: E402
                     predicts, start, stop)


def internal_error(args, model, check):
    """5. of the module's docstring."""
    env = dict(os.environ, ACROBAT_INJECT_FAULT="instance:3")
    server, port, _ = start(args.acrobat, model.params, ["--max-batch", "1", "--max-delay-ms", "0"], env)
    try:
        if not check(port is not None, "a server with an injected fault starts"):
            return
        for i in range(2):
            check(predicts(port, model, i), "before the fault: tree %d" % i)
        answers = at_once(port, [json.dumps({"instances": [t]}) for t in model.trees[2:10]])
        failed = [(s, b) for s, b in answers if s != 200]
        check(len(failed) == 1 and failed[0][0] == 500, "one 500 among 8: %s" % [s for s, _ in answers])
        if failed:
            error = failed[0][1].get("error", "")
            check("internal error at src/runtime/instance_driver.cpp:" in error and ROOT not in error,
                  "the 500 names the place in the source, no path of this machine: %r" % error)
        for i, (status, body) in enumerate(answers):
            check(status == 500 or close(body["predictions"][0]["data"], model.expected[2 + i]),
                  "request %d beside the fault" % (2 + i))
        for i in range(10, 14):
            check(predicts(port, model, i), "after the fault: tree %d" % i)
        check(get(port, "/health")[0] == 200, "/health after the fault")
        text = metrics(port)
        check(metric(text, 'acrobat_requests_total{code="500"}') == 1, "one answer of 500 in /metrics")
        check(metric(text, 'acrobat_requests_total{code="200"}') == 13, "13 answers of 200 in /metrics")
        check(metric(text, "acrobat_internal_errors_total") == 1, "the internal error in /metrics")
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
        check(server.returncode == 0, "exit after SIGTERM following a fault: %s" % server.returncode)
    finally:
        stop(server)


def loading(args, model, check):
    """6. of the module's docstring."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cache = os.path.join(args.workdir, "cache-%d" % os.getpid())  # empty: the model is compiled afresh
    env = dict(os.environ, ACROBAT_CACHE_DIR=cache)
    server = subprocess.Popen([args.acrobat, "serve", MODEL, "--set", "H=64", "--params", model.params, "--threads", "1",
                               "--engine", "aot", "--port", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        end, health = time.time() + 30, None
        while time.time() < end and health != 200:
            try:
                health = get(port, "/health", timeout=5)[0]
            except OSError:
                time.sleep(0.05)
        ready = get(port, "/ready")[:2]
        status, body = post(port, json.dumps({"instances": [model.trees[0]]}))
        check(health == 200 and ready == (503, '{"status":"loading"}') and status == 503 and "loading" in body["error"],
              "while loading: /health %s, /ready %s, predict %s %s" % (health, ready, status, body))
        line = server.stdout.readline()
        check("http://127.0.0.1:%d/" % port in line, "the address once loaded: %r" % line)
        check(get(port, "/ready")[:2] == (200, '{"status":"ready"}'), "/ready once loaded")
        check(predicts(port, model, 0), "predict once loaded")
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
        check(server.returncode == 0, "exit after loading: %s" % server.returncode)
    finally:
        stop(server)
        shutil.rmtree(cache, ignore_errors=True)


def queue_policy(args, model, check):
    """7. of the module's docstring."""
    server, port, _ = start(args.acrobat, model.params, ["--max-batch", "3", "--max-delay-ms", "2000", "--max-queue", "8"])
    try:
        if not check(port is not None, "a server with --max-queue starts"):
            return
        trees, done = model.trees, {}

        def queued(n):  # the batcher waits for 3 instances (or 2 s): what is sent stays queued meanwhile
            end = time.time() + 10
            while metric(metrics(port), "acrobat_queued_instances") != n and time.time() < end:
                time.sleep(0.005)

        def timed(name, body):
            status, answer = post(port, json.dumps(body))
            done[name] = (time.time(), status, answer)

        begin = time.time()
        late_status, late = post(port, json.dumps({"instances": [trees[3]], "deadline_ms": 100}))
        late_took = time.time() - begin
        queued(0)  # the late instance dropped when its batch formed
        full_status, full = post(port, json.dumps({"instances": [trees[4]] * 9}))
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            first = pool.submit(timed, "first", {"instances": [trees[0]]})
            queued(1)
            second = pool.submit(timed, "second", {"instances": [trees[1]]})
            queued(2)
            high = pool.submit(timed, "high", {"instances": [trees[5], trees[6]], "priority": 9})
            for f in (first, second, high):
                f.result()
        (t1, s1, a1), (t2, s2, a2), (th, sh, ah) = done["first"], done["second"], done["high"]
        check((s1, s2, sh) == (200, 200, 200), "first, second, high: %s %s %s" % (s1, s2, sh))
        check(th < t2 - 1.0 and t1 < t2 - 1.0,
              "the 2 of priority 9 and the first of priority 0 in one batch, the second 2 s later: %.2f %.2f %.2f"
              % (t1 - begin, t2 - begin, th - begin))
        check(s1 == 200 and close(a1["predictions"][0]["data"], model.expected[0]), "the first answer")
        check(s2 == 200 and close(a2["predictions"][0]["data"], model.expected[1]), "the second answer")
        check(sh == 200 and all(close(a["data"], model.expected[k]) for a, k in zip(ah["predictions"], (5, 6))),
              "the high answers")
        check(late_status == 504 and "deadline of 100 ms" in late.get("error", "") and late_took < 1.0,
              "a deadline of 100 ms while the batcher waits 2 s: %s %s after %.2f s" % (late_status, late, late_took))
        check(full_status == 503 and "--max-queue 8" in full.get("error", ""), "9 instances: %s %s" % (full_status, full))
        for body, key in (({"instances": [trees[0]], "priority": 10}, "priority"),
                          ({"instances": [trees[0]], "deadline_ms": 0}, "deadline_ms"),
                          ({"instances": [trees[0]], "priority": "high"}, "priority")):
            status, answer = post(port, json.dumps(body))
            check(status == 400 and ('"%s" must be an integer' % key) in answer.get("error", ""),
                  "%s: %s %s" % (body, status, answer))
        text = metrics(port)
        check(metric(text, "acrobat_refused_requests_total") == 1 and metric(text, "acrobat_late_requests_total") == 1
              and metric(text, "acrobat_dropped_instances_total") == 1, "the 503, the 504 and its dropped instance in /metrics")
    finally:
        stop(server)


def batched_requests(port, model, check):
    """1. and 2. of the module's docstring."""
    bodies = [json.dumps({"instances": [t]}) for t in model.trees[:62]]
    bodies.append('{"instances": [')
    bodies.append(json.dumps({"instances": [{"Leaf": [10 ** 9]}]}))
    answers = at_once(port, bodies)
    for i in range(62):
        status, body = answers[i]
        check(status == 200 and close(body["predictions"][0]["data"], model.expected[i]),
              "request %d: %s %s" % (i, status, str(body)[:200]))
    status, body = answers[62]
    check(status == 400 and "not JSON" in body.get("error", ""), "malformed body: %s %s" % (status, body))
    status, body = answers[63]
    error = body.get("error", "")
    check(status == 400 and "out of range" in error and error.startswith("treelstm.acr:") and ROOT not in error,
          "failing tree, the model named by its file: %s %s" % (status, body))
    text = metrics(port)
    check(metric(text, 'acrobat_requests_total{code="200"}') == 62, "62 answers of 200 in /metrics")
    check(metric(text, 'acrobat_requests_total{code="400"}') == 2, "2 answers of 400 in /metrics")
    check(CONTINUOUS or (metric(text, "acrobat_batch_failures_total") or 0) >= 1, "the failed batch in /metrics")

    answers = at_once(port, [json.dumps({"instances": [t]}) for t in model.trees[62:126]])
    for i, (status, body) in enumerate(answers):
        check(status == 200 and close(body["predictions"][0]["data"], model.expected[62 + i]),
              "request %d of round 2: %s" % (i, status))
    text = metrics(port)
    count = metric(text, "acrobat_batch_size_count")
    at_most_32 = metric(text, 'acrobat_batch_size_bucket{le="32"}')
    check(count is not None and at_most_32 is not None and at_most_32 < count, "a batch of more than 32")
    check("# TYPE acrobat_request_seconds histogram" in text, "request latency histogram")


def endpoints(port, model, check):
    """3. of the module's docstring."""
    status, body = post(port, json.dumps({"instances": [{"Leaf": ["x"]}]}))
    check(status == 400 and "instances[0]" in body.get("error", ""), "wrong type: %s %s" % (status, body))
    status, body = post(port, json.dumps({"instances": [model.trees[0]]}), name="nosuchmodel")
    check(status == 404 and "serves the model treelstm" in body.get("error", ""), "unknown model: %s %s" % (status, body))
    status, body = post(port, json.dumps({"inputs": [model.trees[0]]}))
    check(status == 400 and "instances" in body.get("error", ""), "no instances: %s %s" % (status, body))
    form = json.dumps({"instances": model.trees[:40]})
    status, body = post(port, form, content_type="application/x-www-form-urlencoded")
    check(len(form) > 8192 and status == 200 and len(body.get("predictions", [])) == 40 and
          all(close(body["predictions"][i]["data"], model.expected[i]) for i in range(40)),
          "%d bytes as a form: %s" % (len(form), status))
    status, text, headers = get(port, "/v1/models/treelstm:predict")
    check(status == 405 and "expected POST" in text and headers.get("Allow") == "POST", "GET of predict: %s %s" % (status, text))
    status, body = post(port, "{}", path="/health")
    check(status == 405 and "expected GET" in body.get("error", ""), "POST /health: %s %s" % (status, body))
    check(get(port, "/health")[:2] == (200, '{"status":"ok"}'), "/health")
    check(get(port, "/ready")[:2] == (200, '{"status":"ready"}'), "/ready")
    status, text, _ = get(port, "/v1/models/treelstm/metadata")
    meta = json.loads(text) if status == 200 else {}
    check(meta.get("name") == "treelstm" and meta.get("entry") == "main" and
          meta.get("inputs") == [{"name": "t", "type": "Tree"}] and meta.get("outputs") == [{"type": "f32[1, 5]"}] and
          meta.get("dims", {}).get("H") == 64 and meta.get("engine") and
          meta.get("batching") == {"max_batch": 64, "max_delay_ms": 200.0, "continuous": CONTINUOUS, "max_cost": 0},
          "metadata: %s %s" % (status, text))
    text = metrics(port)
    for code in (200, 400, 404, 405):
        check((metric(text, 'acrobat_responses_total{code="%d"}' % code) or 0) >= 1, "responses of %d in /metrics" % code)
    check(metric(text, "acrobat_queued_instances") == 0 and metric(text, "acrobat_running_instances") == 0,
          "nothing queued or running when idle")
    check((metric(text, "acrobat_open_connections") or 0) >= 1 and (metric(text, "acrobat_busy_connections") or 0) >= 1,
          "this request's connection open and busy")
    check(10 << 20 < (metric(text, "acrobat_resident_memory_bytes") or 0) < 600 << 20, "resident memory in /metrics")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    model = Model(args.acrobat, args.workdir)
    check = Checks("check_serve.py")
    server, port, line = start(args.acrobat, model.params, ["--max-batch", "64", "--max-delay-ms", "200"])
    try:
        if port is None:
            return 1
        # --threads 1: the engine keeps a core to itself when there is another for HTTP.
        cores = sorted(os.sched_getaffinity(0))
        want = ("engine on core(s) %d, HTTP on %s" % (cores[0], ",".join(map(str, cores[1:])))
                if len(cores) > 1 else "not pinned")
        check(want in line, "the cores in %r: expected %r" % (line, want))
        batched_requests(port, model, check)
        endpoints(port, model, check)

        # 4. SIGTERM with requests in flight: all answered, exit 0.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(post, port, json.dumps({"instances": [t]})) for t in model.trees[:8]]
            threading.Event().wait(0.1)
            server.send_signal(signal.SIGTERM)
            results = [f.result() for f in futures]
        check(all(s == 200 for s, _ in results), "requests in flight at SIGTERM: %s" % [s for s, _ in results])
        rest = server.communicate(timeout=60)[0]
        check(server.returncode == 0 and "stopped after" in rest, "exit after SIGTERM: %s %r" % (server.returncode, rest))
    finally:
        stop(server)
    internal_error(args, model, check)
    loading(args, model, check)
    queue_policy(args, model, check)
    if check.problems:
        return 1
    print("check_serve.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

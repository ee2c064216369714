#!/usr/bin/python3
"""`acrobat serve` end to end: the TreeLSTM (H 64) behind HTTP on a free loopback port.

  check_serve.py --acrobat BIN --workdir DIR

1. 64 requests at once, each one SST test tree, except one malformed body and one tree whose word
   id is out of range (fails at run time): the malformed one gets 400 with the parse error, the
   failing one 400 naming the index, and the other 62 their outputs, equal to `acrobat run`'s on the
   same trees (1e-5); the batch that held the failing tree was run again instance by instance.
2. 64 more at once: they are batched (a batch of more than 32 instances in /metrics).
3. An instance of the wrong type (400 naming instances[0]), an unknown model (404), a tree nested
   20000 levels deep and one nested 6000 deep inside a valid JSON body (400 naming the limit, the
   server alive and answering the next request), invalid UTF-8 in a string (400 with a JSON body),
   a body over --max-request-bytes (413 with a JSON body, as JSON and as a form), 40 trees sent as
   `curl -d` sends them (a form content type, over the library's 8 KiB form cap: 200), a wrong
   method (405 naming the right one), a second server on the same port (it fails to start),
   /health, /metrics in Prometheus text counting every response by status.
4. SIGTERM with requests in flight: each is answered, then the server exits 0.
5. An internal error (a bug in acrobat, made to happen with ACROBAT_INJECT_FAULT=instance:3 in a
   second server, one instance per batch): the request whose batch met it gets a 500 naming the
   place in acrobat's source (no path of this machine), the 7 others sent with it and every later
   request their outputs, /health stays 200, /metrics counts the 500 and the internal error.
Needs the Python package of the same build (PYTHONPATH=build/python) to encode the trees.
"""

import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import acrobat  # noqa: E402
import registry  # noqa: E402

TEST = os.path.join(ROOT, "data", "sst", "test.txt")
VOCAB = os.path.join(ROOT, "data", "sst", "vocab.txt")
MODEL = os.path.join(ROOT, "models", "treelstm.acr")


def post(port, body, name="treelstm", content_type="application/json", path=None):
    """(status, parsed JSON answer) of a predict request; `body` is text or raw bytes."""
    data = body if isinstance(body, bytes) else body.encode()
    url = "http://127.0.0.1:%d%s" % (port, path or "/v1/models/%s:predict" % name)
    req = urllib.request.Request(url, data=data, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def at_once(port, bodies):
    """Posts every body at the same moment (one thread each, released together)."""
    gate = threading.Barrier(len(bodies))

    def one(b):
        gate.wait()
        return post(port, b)

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(one, bodies))


def close(a, b, rtol=1e-5, atol=1e-6):
    return all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b)) and len(a) == len(b)


def metric(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def start(args, params, extra, env=None, port_given=False):
    """A server of the test's model on a free port (or the one `extra` gives): (process, port, its
    first line), or (process, None, line) when it printed no address."""
    port = [] if port_given else ["--port", "0"]
    server = subprocess.Popen([args.acrobat, "serve", MODEL, "--set", "H=64", "--params", params, "--threads", "1",
                               "--max-request-bytes", "1048576"] + port + extra, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if port_given else None, text=True, env=env)
    line = server.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/v1/models/treelstm:predict", line)
    if not m and not port_given:
        print("check_serve.py: no address in %r" % line, file=sys.stderr)
    return server, (int(m.group(1)) if m else None), line


def internal_error(args, params, trees, expected, problems):
    """5. of the module's docstring."""
    def check(cond, what):
        if not cond:
            problems.append(what)
            print("check_serve.py: FAILED: " + what, file=sys.stderr)

    env = dict(os.environ, ACROBAT_INJECT_FAULT="instance:3")
    server, port, _ = start(args, params, ["--max-batch", "1", "--max-delay-ms", "0"], env)
    try:
        if port is None:
            check(False, "a server with an injected fault starts")
            return
        for i in range(2):
            status, body = post(port, json.dumps({"instances": [trees[i]]}))
            check(status == 200 and close(body["predictions"][0]["data"], expected[i]), "before the fault: %s" % status)
        answers = at_once(port, [json.dumps({"instances": [t]}) for t in trees[2:10]])
        failed = [(s, b) for s, b in answers if s != 200]
        check(len(failed) == 1 and failed[0][0] == 500, "one 500 among 8: %s" % [s for s, _ in answers])
        if failed:
            error = failed[0][1].get("error", "")
            check("internal error at src/runtime/instance_driver.cpp:" in error and ROOT not in error,
                  "the 500 names the place in the source, no path of this machine: %r" % error)
        for i, (status, body) in enumerate(answers):
            check(status == 500 or close(body["predictions"][0]["data"], expected[2 + i]),
                  "request %d beside the fault" % (2 + i))
        for i in range(10, 14):
            status, body = post(port, json.dumps({"instances": [trees[i]]}))
            check(status == 200 and close(body["predictions"][0]["data"], expected[i]), "after the fault: %s" % status)
        check(get(port, "/health")[0] == 200, "/health after the fault")
        _, text = get(port, "/metrics")
        check(metric(text, 'acrobat_requests_total{code="500"}') == 1, "one answer of 500 in /metrics")
        check(metric(text, 'acrobat_requests_total{code="200"}') == 13, "13 answers of 200 in /metrics")
        check(metric(text, "acrobat_internal_errors_total") == 1, "the internal error in /metrics")
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
        check(server.returncode == 0, "exit after SIGTERM following a fault: %s" % server.returncode)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    _, _, _, _, params = registry.setup_run("treelstm", {"H": 64}, TEST, VOCAB, 1, args.workdir)
    trees = acrobat.load(MODEL, dims={"H": 64}, threads=1).read_values("sst:" + TEST, limit=126)
    out = os.path.join(args.workdir, "expected.json")
    subprocess.run([args.acrobat, "run", MODEL, "--set", "H=64", "--params", params, "--input", "sst:" + TEST,
                    "--limit", "126", "--threads", "1", "--output", out], check=True, capture_output=True)
    with open(out) as f:
        expected = [o["data"] for o in json.load(f)["outputs"]]

    server, port, line = start(args, params, ["--max-batch", "64", "--max-delay-ms", "200"])
    problems = []

    def check(cond, what):
        if not cond:
            problems.append(what)
            print("check_serve.py: FAILED: " + what, file=sys.stderr)

    try:
        if port is None:
            return 1
        check(get(port, "/health")[0] == 200, "/health")
        # --threads 1: the engine keeps a core to itself when there is another for HTTP.
        cores = sorted(os.sched_getaffinity(0))
        want = ("engine on core(s) %d, HTTP on %s" % (cores[0], ",".join(map(str, cores[1:])))
                if len(cores) > 1 else "not pinned")
        check(want in line, "the cores in %r: expected %r" % (line, want))

        # 1. 62 trees, a malformed body and a failing tree, at once.
        bodies = [json.dumps({"instances": [t]}) for t in trees[:62]]
        bodies.append('{"instances": [')
        bodies.append(json.dumps({"instances": [{"Leaf": [10 ** 9]}]}))
        answers = at_once(port, bodies)
        for i in range(62):
            status, body = answers[i]
            check(status == 200 and close(body["predictions"][0]["data"], expected[i]),
                  "request %d: %s %s" % (i, status, str(body)[:200]))
        status, body = answers[62]
        check(status == 400 and "not JSON" in body.get("error", ""), "malformed body: %s %s" % (status, body))
        status, body = answers[63]
        check(status == 400 and "out of range" in body.get("error", ""), "failing tree: %s %s" % (status, body))
        _, text = get(port, "/metrics")
        check(metric(text, 'acrobat_requests_total{code="200"}') == 62, "62 answers of 200 in /metrics")
        check(metric(text, 'acrobat_requests_total{code="400"}') == 2, "2 answers of 400 in /metrics")
        check((metric(text, "acrobat_batch_failures_total") or 0) >= 1, "the failed batch in /metrics")

        # 2. 64 good requests at once are batched.
        answers = at_once(port, [json.dumps({"instances": [t]}) for t in trees[62:126]])
        for i, (status, body) in enumerate(answers):
            check(status == 200 and close(body["predictions"][0]["data"], expected[62 + i]),
                  "request %d of round 2: %s" % (i, status))
        _, text = get(port, "/metrics")
        count = metric(text, "acrobat_batch_size_count")
        at_most_32 = metric(text, 'acrobat_batch_size_bucket{le="32"}')
        check(count is not None and at_most_32 is not None and at_most_32 < count, "a batch of more than 32")
        check("# TYPE acrobat_request_seconds histogram" in text, "request latency histogram")

        # 3. Errors of one request.
        status, body = post(port, json.dumps({"instances": [{"Leaf": ["x"]}]}))
        check(status == 400 and "instances[0]" in body.get("error", ""), "wrong type: %s %s" % (status, body))
        status, body = post(port, json.dumps({"instances": [trees[0]]}), name="nosuchmodel")
        check(status == 404, "unknown model: %s" % status)
        status, body = post(port, json.dumps({"inputs": [trees[0]]}))
        check(status == 400 and "instances" in body.get("error", ""), "no instances: %s %s" % (status, body))
        for depth in (20000, 6000):
            deep = '{"Leaf": [1]}'
            deep = '{"Node": [' * depth + deep + ', {"Leaf": [2]}]}' * depth
            status, body = post(port, '{"instances": [' + deep + ']}')
            check(status == 400 and "nested more than 5000" in body.get("error", ""),
                  "a tree %d deep: %s %s" % (depth, status, str(body)[:200]))
        status, body = post(port, b'{"instances": [{"Leaf": ["\xff\xfe"]}]}')
        check(status == 400 and "error" in body, "invalid UTF-8: %s %s" % (status, body))
        status, body = post(port, json.dumps({"instances": [trees[0]]}))
        check(status == 200 and close(body["predictions"][0]["data"], expected[0]), "after the deep trees: %s" % status)
        big = '{"instances": [' + ", ".join([json.dumps(trees[0])] * 20000) + "]}"
        for content_type in ("application/json", "application/x-www-form-urlencoded"):
            status, body = post(port, big, content_type=content_type)
            check(status == 413 and "--max-request-bytes" in body.get("error", ""),
                  "%d bytes as %s: %s %s" % (len(big), content_type, status, str(body)[:200]))
        form = json.dumps({"instances": trees[:40]})
        status, body = post(port, form, content_type="application/x-www-form-urlencoded")
        check(len(form) > 8192 and status == 200 and len(body.get("predictions", [])) == 40 and
              all(close(body["predictions"][i]["data"], expected[i]) for i in range(40)),
              "%d bytes as a form: %s" % (len(form), status))
        status, text = get(port, "/v1/models/treelstm:predict")
        check(status == 405 and "expected POST" in text, "GET of predict: %s %s" % (status, text))
        status, body = post(port, "{}", path="/health")
        check(status == 405 and "expected GET" in body.get("error", ""), "POST /health: %s %s" % (status, body))
        second, second_port, second_line = start(args, params, ["--port", str(port)], port_given=True)
        rest = second.communicate(timeout=60)[0] if second.poll() is None else ""
        check(second.returncode not in (0, None) and second_port is None,
              "a second server on port %d: exit %s, %r" % (port, second.returncode, second_line + rest))

        _, text = get(port, "/metrics")
        for code in (200, 400, 404, 405, 413):
            check((metric(text, 'acrobat_responses_total{code="%d"}' % code) or 0) >= 1, "responses of %d in /metrics" % code)

        # 4. SIGTERM with requests in flight: all answered, exit 0.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(post, port, json.dumps({"instances": [t]})) for t in trees[:8]]
            threading.Event().wait(0.1)
            server.send_signal(signal.SIGTERM)
            results = [f.result() for f in futures]
        check(all(s == 200 for s, _ in results), "requests in flight at SIGTERM: %s" % [s for s, _ in results])
        rest = server.communicate(timeout=60)[0]
        check(server.returncode == 0 and "stopped after" in rest, "exit after SIGTERM: %s %r" % (server.returncode, rest))
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    internal_error(args, params, trees, expected, problems)
    if problems:
        return 1
    print("check_serve.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

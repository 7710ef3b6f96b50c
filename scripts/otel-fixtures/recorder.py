#!/usr/bin/env python3
"""Tiny OTLP/HTTP (protobuf) receiver that records request bodies verbatim.

Every POST to /v1/traces is written, in arrival order, to OUT/NNN.pb
(000.pb, 001.pb, ...). POSTs to /v1/logs go to OUT/logs/NNN.pb and POSTs to
/v1/metrics to OUT/metrics/NNN.pb (own counters), so we can see whether an
instrumentation sends anything besides spans. Each request is answered with
200, content-type application/x-protobuf and an empty body (an empty body is
a valid serialized empty Export*ServiceResponse).

The server is single-threaded (http.server.HTTPServer), so requests are
handled strictly one after another and file numbers follow arrival order.
Every response carries "Connection: close": with keep-alive, one exporter's
idle connection (e.g. the log exporter's) would block the single thread and
starve the other exporter.

Usage:
    recorder.py --out DIR [-- COMMAND ARGS...]

With a COMMAND, the recorder listens on a free port on 127.0.0.1, runs the
command with OTLP_RECORDER_ENDPOINT=http://127.0.0.1:PORT in its environment,
stops when the command exits and exits with the command's status. Without a
command it prints the endpoint and serves until interrupted.
"""
import argparse
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

ROUTES = {"/v1/traces": "", "/v1/logs": "logs", "/v1/metrics": "metrics"}


def make_handler(out_dir, counters, lock):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            path = self.path.split("?", 1)[0]
            if path not in ROUTES:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                return
            enc = self.headers.get("Content-Encoding")
            if enc:
                # Stored verbatim anyway; make.sh disables compression.
                sys.stderr.write(f"recorder: warning: Content-Encoding {enc} on {path}\n")
            sub = ROUTES[path]
            target = os.path.join(out_dir, sub) if sub else out_dir
            with lock:
                n = counters.get(path, 0)
                counters[path] = n + 1
            os.makedirs(target, exist_ok=True)
            name = os.path.join(target, f"{n:03d}.pb")
            with open(name, "wb") as f:
                f.write(body)
            sys.stderr.write(f"recorder: {path} -> {name} ({len(body)} bytes)\n")
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

        def log_message(self, fmt, *args):
            pass

    return Handler


def main():
    argv = sys.argv[1:]
    cmd = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory to write NNN.pb files into")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    server = HTTPServer(("127.0.0.1", 0), make_handler(args.out, {}, threading.Lock()))
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    if not cmd:
        print(endpoint, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        return 0

    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    env = dict(os.environ, OTLP_RECORDER_ENDPOINT=endpoint)
    sys.stderr.write(f"recorder: listening on {endpoint}, running {cmd}\n")
    rc = subprocess.call(cmd, env=env)
    server.shutdown()
    server.server_close()
    return rc


if __name__ == "__main__":
    sys.exit(main())

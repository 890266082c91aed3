#!/usr/bin/env python3
"""The lab site of `make run` and the compose test: a static directory,
plus two blind weaknesses that show nothing in their answers, calling back
to an out-of-band server when one is given (--oob-http HOST:PORT,
--oob-dns HOST:PORT):

- /fetch?url=http://NAME/PATH fetches the URL (a blind SSRF), over HTTP to
  the OOB server's HTTP address with `Host: NAME`;
- /lookup?host=NAME asks the OOB server's DNS address for NAME's A record
  (a DNS-only callback).

On the same port, a request whose Host names a host of the stack lab
(--stacks FILE, default stacks.json beside this script; the file the Rust
tests' stack lab reads too) gets that host's answers: a WordPress, a
Jenkins, a Grafana, a Tomcat, an nginx and a blank page, with the responses
the corpus's detection and vulnerability templates look for and the
findings a full scan gets on each (see the file's "about"). Any other Host
gets the static site.

Usage: lab_site.py --bind ADDR --port PORT --directory DIR [--stacks FILE]
                   [--oob-http H:P --oob-dns H:P]
"""
import argparse
import functools
import http.client
import http.server
import json
import os
import random
import re
import socket
import struct
import urllib.parse


def fetch(url, oob_http):
    rest = url[len("http://"):] if url.startswith("http://") else url
    host, _, path = rest.partition("/")
    addr, port = oob_http.rsplit(":", 1)
    conn = http.client.HTTPConnection(addr, int(port), timeout=3)
    conn.request("GET", "/" + path, headers={"Host": host, "User-Agent": "lab-fetcher"})
    conn.getresponse().read()


def lookup(name, oob_dns):
    addr, port = oob_dns.rsplit(":", 1)
    question = b"".join(bytes([len(l)]) + l.encode() for l in name.strip(".").split(".") if l)
    packet = struct.pack(">HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0)
    packet += question + b"\x00" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        s.sendto(packet, (addr, int(port)))
        s.recv(512)


class Stacks:
    """The stack lab's hosts, read from its JSON fixture."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.fixture = json.load(f)
        self.hosts = {h["host"]: h for h in self.fixture["hosts"]}

    @staticmethod
    def matches(route, path, authorization):
        pattern = [route[k] for k in ("prefix", "contains", "suffix") if k in route]
        by_pattern = bool(pattern) and (
            path.startswith(route.get("prefix", ""))
            and route.get("contains", "") in path
            and path.endswith(route.get("suffix", ""))
        )
        wanted = route.get("authorization")
        return (path in route.get("paths", []) or by_pattern) and (
            wanted is None or authorization == wanted
        )

    def answer(self, host, raw_path, authorization):
        """(answer, the host's own headers) for one request to `host`."""
        stack = self.hosts[host]
        path = re.split(r"[?#]", raw_path, maxsplit=1)[0]
        # Repeated slashes merged, as nginx does.
        path = re.sub(r"/{2,}", "/", path)
        for route in stack["routes"]:
            if self.matches(route, path, authorization):
                return route, stack["headers"]
        return self.fixture["not_found"], stack["headers"]


class Lab(http.server.SimpleHTTPRequestHandler):
    oob_http = None
    oob_dns = None
    stacks = None

    def stack_host(self):
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        return host if self.stacks and host in self.stacks.hosts else None

    def parse_request(self):
        if not super().parse_request():
            return False
        if self.stack_host() and self.request_version == "HTTP/1.1":
            # Keep-alive for the stacks, as the servers they present as do;
            # the static site stays one request a connection.
            self.protocol_version = "HTTP/1.1"
            self.close_connection = (self.headers.get("Connection") or "").lower() == "close"
        return True

    def serve_stack(self, host):
        # The request body, read and dropped, so the next request on the
        # connection starts where it should.
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        answer, host_headers = self.stacks.answer(
            host, self.path, self.headers.get("Authorization")
        )
        body = b"" if self.command == "HEAD" else answer["body"].encode("utf-8")
        # No Server or Date header but the host's own: the stacks present
        # as their products, not as this server.
        self.send_response_only(answer["status"])
        self.send_header("Content-Type", answer["content_type"])
        self.send_header("Content-Length", str(len(body)))
        for name, value in (
            self.stacks.fixture["headers"] + answer.get("headers", []) + host_headers
        ):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):
        host = self.stack_host()
        if host:
            return self.serve_stack(host)
        super().do_HEAD()

    def do_POST(self):
        host = self.stack_host()
        if host:
            return self.serve_stack(host)
        self.send_error(501, "Unsupported method (%r)" % self.command)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_POST

    def do_GET(self):
        host = self.stack_host()
        if host:
            return self.serve_stack(host)
        parts = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parts.query)
        if parts.path in ("/fetch", "/lookup"):
            try:
                if parts.path == "/fetch" and self.oob_http and "url" in query:
                    fetch(query["url"][0], self.oob_http)
                if parts.path == "/lookup" and self.oob_dns and "host" in query:
                    lookup(query["host"][0], self.oob_dns)
            except OSError:
                pass
            body = b"request accepted\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8081)
    p.add_argument("--directory", default=".")
    p.add_argument("--oob-http")
    p.add_argument("--oob-dns")
    p.add_argument(
        "--stacks",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "stacks.json"),
        help="the stack lab's fixture; served when the file exists",
    )
    args = p.parse_args()
    Lab.oob_http, Lab.oob_dns = args.oob_http, args.oob_dns
    if os.path.exists(args.stacks):
        Lab.stacks = Stacks(args.stacks)
    handler = functools.partial(Lab, directory=args.directory)
    http.server.ThreadingHTTPServer((args.bind, args.port), handler).serve_forever()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The lab site of `make run` and the compose test: a static directory,
plus two blind weaknesses that show nothing in their answers, calling back
to an out-of-band server when one is given (--oob-http HOST:PORT,
--oob-dns HOST:PORT):

- /fetch?url=http://NAME/PATH fetches the URL (a blind SSRF), over HTTP to
  the OOB server's HTTP address with `Host: NAME`;
- /lookup?host=NAME asks the OOB server's DNS address for NAME's A record
  (a DNS-only callback).

Usage: lab_site.py --bind ADDR --port PORT --directory DIR [--oob-http H:P --oob-dns H:P]
"""
import argparse
import functools
import http.client
import http.server
import random
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


class Lab(http.server.SimpleHTTPRequestHandler):
    oob_http = None
    oob_dns = None

    def do_GET(self):
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
    args = p.parse_args()
    Lab.oob_http, Lab.oob_dns = args.oob_http, args.oob_dns
    handler = functools.partial(Lab, directory=args.directory)
    http.server.ThreadingHTTPServer((args.bind, args.port), handler).serve_forever()


if __name__ == "__main__":
    main()

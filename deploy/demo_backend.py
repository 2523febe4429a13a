#!/usr/bin/env python3
"""A demo backend for deploy/demo.sh: answers every HTTP GET with its name."""
import http.server
import sys


def main():
    name, port = sys.argv[1], int(sys.argv[2])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"hello from {name}\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()

"""A fake OpenAI-compatible chat server on 127.0.0.1 for tests of LM faults, judges and timeouts.

``FakeServer(mode)`` answers ``/v1/chat/completions``; ``responder(request_json) -> content`` lets a test choose
each reply from the request (for example, a judge's verdict from the prompt). Nothing leaves the loopback interface.
"""

from __future__ import annotations

import base64
import http.server
import json
import threading
from collections.abc import Callable
from urllib.parse import quote

import pytest


class FakeServer:
    """``/v1/chat/completions`` on 127.0.0.1 with a switchable ``mode``:

    ``ok`` (a correct chat completion whose content is ``content``), ``garbage`` (HTTP 200, not JSON), ``500``,
    ``401`` (the body echoes the request's Authorization header), ``401-encoded`` (the body echoes that header
    base64-encoded, its credentials alone base64url-encoded without padding, and the header URL-encoded),
    ``500-once`` (the first request gets a 500, every later one is answered as in ``ok``) and ``hang`` (accepts,
    never answers).
    """

    def __init__(self, mode: str = "ok", content: str = "[[ ## answer ## ]]\nalpha\n\n[[ ## completed ## ]]",
                 responder: Callable[[dict], str] | None = None):
        self.mode, self.content, self.responder = mode, content, responder
        self.requests: list[dict] = []
        self.stop = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                        "body": body})
                if server.mode == "hang":
                    server.stop.wait(30)
                    return
                if server.mode == "garbage":
                    code, out = 200, b"<html><body>502 bad gateway, or something</body"
                elif server.mode == "500" or (server.mode == "500-once" and len(server.requests) == 1):
                    code, out = 500, b'{"error": {"message": "the model crashed", "type": "server_error"}}'
                elif server.mode == "401":
                    echoed = f"invalid credentials in header Authorization: {self.headers.get('Authorization')}"
                    code, out = 401, json.dumps({"error": {"message": echoed, "type": "invalid_auth"}}).encode()
                elif server.mode == "401-encoded":
                    header = self.headers.get("Authorization") or ""
                    credentials = header.split(" ", 1)[-1].encode()
                    echoed = (f"invalid credentials: header (base64) {base64.b64encode(header.encode()).decode()}, "
                              f"credentials (base64url) {base64.urlsafe_b64encode(credentials).decode().rstrip('=')}, "
                              f"header (url-encoded) {quote(header, safe='')}")
                    code, out = 401, json.dumps({"error": {"message": echoed, "type": "invalid_auth"}}).encode()
                else:
                    request = json.loads(body)
                    code, out = 200, json.dumps({
                        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": request["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant",
                                                 "content": server.responder(request) if server.responder
                                                 else server.content}}],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made: list[FakeServer] = []

    def make(mode: str = "ok", **kwargs) -> FakeServer:
        made.append(FakeServer(mode, **kwargs))
        return made[-1]

    yield make
    for server in made:
        server.close()



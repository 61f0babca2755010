"""A loopback server speaking the part of KFP's v2beta1 REST API that ``kfp.Client`` calls to
create recurring runs (healthz, experiments, recurringruns), keeping what it was sent."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

API = "/apis/v2beta1"


@dataclass
class KfpApi:
    """The server's state: experiments and recurring runs by id, and every request it got."""

    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)
    recurring: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path)
    host: str = ""

    def handle(self, method: str, url: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        parsed = urlparse(url)
        path, query = parsed.path, parse_qs(parsed.query)
        self.requests.append((method, path))
        if path == f"{API}/healthz":
            return 200, {"commit_sha": "loopback", "tag_name": "2.5.0", "multi_user": False}
        if path == f"{API}/experiments" and method == "GET":
            wanted = _filter_value(query, "display_name")
            found = [e for e in self.experiments.values() if wanted is None or e["display_name"] == wanted]
            return 200, {"experiments": found, "total_size": len(found)} if found else {}
        if path == f"{API}/experiments" and method == "POST":
            exp = {**(body or {}), "experiment_id": str(uuid.uuid4()), "storage_state": "AVAILABLE"}
            self.experiments[exp["experiment_id"]] = exp
            return 200, exp
        if path == f"{API}/recurringruns" and method == "GET":
            exp_id = (query.get("experiment_id") or [None])[0]
            runs = [r for r in self.recurring.values() if exp_id is None or r.get("experiment_id") == exp_id]
            return 200, {"recurringRuns": runs, "total_size": len(runs)} if runs else {}
        if path == f"{API}/recurringruns" and method == "POST":
            run = {**(body or {}), "recurring_run_id": str(uuid.uuid4()), "status": "ENABLED"}
            self.recurring[run["recurring_run_id"]] = run
            return 200, run
        if path.startswith(f"{API}/recurringruns/") and method == "DELETE":
            self.recurring.pop(path.rsplit("/", 1)[1], None)
            return 200, {}
        return 404, {"error": f"no route {method} {path}", "code": 5}


def _filter_value(query: dict[str, list[str]], key: str) -> str | None:
    raw = (query.get("filter") or [None])[0]
    if not raw:
        return None
    for p in json.loads(raw).get("predicates", []):
        if p.get("key") == key:
            return p.get("stringValue") or p.get("string_value")
    return None


@contextmanager
def serve() -> Iterator[KfpApi]:
    """The API on 127.0.0.1 at a free port, for the length of the block."""
    api = KfpApi()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, doc = api.handle(method, self.path, body)
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's names
            self._reply("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._reply("POST")

        def do_DELETE(self) -> None:  # noqa: N802
            self._reply("DELETE")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    api.host = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

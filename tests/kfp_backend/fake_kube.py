"""An in-process Kubernetes API server for the custom-object endpoints a launcher uses.

It speaks the real REST paths (``/apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}]``)
so that the official ``kubernetes`` client can be pointed at it, and runs a small controller
per created job: a ``behavior`` that updates the job's status as Kubeflow Trainer or the
training operator would (for example, by actually running the ranks with torchrun).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_PATH = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/?]+)(/(?P<name>[^/?]+))?")


@dataclass
class Job:
    obj: dict[str, Any]
    deleted: threading.Event = field(default_factory=threading.Event)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def set_condition(self, ctype: str, reason: str = "", message: str = "", **status: Any) -> None:
        st = self.obj.setdefault("status", {})
        conds = [c for c in st.get("conditions", []) if c["type"] != ctype]
        conds.append({"type": ctype, "status": "True", "reason": reason, "message": message,
                      "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        st["conditions"] = conds
        st.update(status)


Behavior = Callable[["FakeKube", Job], None]


class FakeKube:
    def __init__(self, behavior: Behavior, *, refuse_create: int | None = None):
        self.behavior = behavior
        self.refuse_create = refuse_create  # e.g. 403: the service account may not create jobs
        self.jobs: dict[tuple[str, str, str], Job] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "reason": reason, "message": message, "code": code})

            def _route(self, method: str) -> None:
                server.requests.append((method, self.path))
                m = _PATH.match(self.path)
                if not m:
                    return self._status(404, "NotFound", self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                key = (m["plural"], m["ns"], m["name"] or body.get("metadata", {}).get("name", ""))
                with server.lock:
                    job = server.jobs.get(key)
                    if method == "POST":
                        if server.refuse_create:
                            return self._status(server.refuse_create, "Forbidden", f"cannot create {key[0]}")
                        if job is not None:
                            return self._status(409, "AlreadyExists", f"{key[0]} {key[2]} already exists")
                        body.setdefault("metadata", {})["uid"] = f"uid-{len(server.jobs)}"
                        body["status"] = {}
                        job = server.jobs[key] = Job(body)
                        threading.Thread(target=server.behavior, args=(server, job), daemon=True).start()
                        return self._send(201, body)
                    if job is None or job.deleted.is_set():
                        return self._status(404, "NotFound", f"{key[0]} {key[2]} not found")
                    if method == "GET":
                        return self._send(200, json.loads(json.dumps(job.obj)))
                    if method == "DELETE":
                        job.deleted.set()
                        for p in job.procs:  # the pods go with the job
                            if p.poll() is None:
                                p.kill()
                        return self._send(200, {"kind": "Status", "status": "Success"})
                return self._status(405, "MethodNotAllowed", method)

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def client(self) -> Any:
        from kubernetes import client

        cfg = client.Configuration(host=self.host)
        return client.ApiClient(cfg)

    def __enter__(self) -> FakeKube:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        for job in self.jobs.values():
            job.deleted.set()
            for p in job.procs:
                if p.poll() is None:
                    p.kill()
        self.httpd.shutdown()
        self.httpd.server_close()

    def deleted(self) -> list[str]:
        """Paths of the DELETE requests (query strings dropped)."""
        return [path.split("?")[0] for method, path in self.requests if method == "DELETE"]


# -- controller behaviors -------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_trainjob_ranks(extra_env: dict[str, str] | None = None) -> Behavior:
    """What Kubeflow Trainer's torch runtime does on one node: set PET_* and run the trainer's
    command (torchrun) in the job's image; here the image is this interpreter."""

    def behave(server: FakeKube, job: Job) -> None:
        trainer = job.obj["spec"]["trainer"]
        assert trainer["numNodes"] == 1, "the fake controller runs one node"
        env = {**os.environ, **{e["name"]: e["value"] for e in trainer.get("env", []) if "value" in e},
               "PET_NNODES": str(trainer["numNodes"]), "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"]),
               "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(_free_port()),
               **(extra_env or {})}
        command = [sys.executable, "-m", "torch.distributed.run"] if trainer["command"] == ["torchrun"] else trainer["command"]
        with server.lock:
            job.set_condition("Created", "JobSetCreated")
            job.obj["status"]["jobsStatus"] = [{"name": "node", "active": 1, "ready": 1, "succeeded": 0, "failed": 0}]
            proc = subprocess.Popen([*command, *trainer["args"]], env=env)
            job.procs.append(proc)
        code = proc.wait()
        if job.deleted.is_set():
            return
        with server.lock:
            if code == 0:
                job.set_condition("Complete", "JobsCompleted", "jobs have successfully completed")
            else:
                job.set_condition("Failed", "JobsFailed", "jobset node failed: BackoffLimitExceeded")

    return behave


def scripted(*steps: tuple[float, str, str, str]) -> Behavior:
    """(delay seconds, condition type, reason, message) applied in order, as a controller would."""

    def behave(server: FakeKube, job: Job) -> None:
        for delay, ctype, reason, message in steps:
            if job.deleted.wait(delay):
                return
            with server.lock:
                job.set_condition(ctype, reason, message)

    return behave

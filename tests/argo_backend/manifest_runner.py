"""A compiled Workflow's DAG run the way Argo's controller would run it, each container as a
local process: ``{{...}}`` substituted from the workflow's parameters and the tasks' outputs,
input artifacts placed at the template's paths, outputs read back from the files the
template's ``outputs`` name. No controller and no mock of one: only what the manifest says.

Paths under ``/tmp/interlock`` (where the templates put inputs and outputs) are moved under a
folder of the test, one per task; the state volume's mount path becomes a test folder too.
Covers what the tests use: DAG and container templates, parameters, artifacts, ``when``,
``depends`` (the tasks come in dependency order), ``withParam``, exit hooks and ``onExit``,
and resource templates creating a TrainJob: the manifest substituted as Argo does, then its
ranks run as the job's node would run them (torchrun, one node, on this host).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_VAR = re.compile(r"\{\{\s*([^{}=][^{}]*?)\s*\}\}")
_EXPR = re.compile(r"\{\{=(.*?)\}\}(?!\})")


@dataclass
class Ran:
    status: str  # Succeeded | Failed | Skipped
    code: int | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, Path] = field(default_factory=dict)
    stderr: str = ""


class ManifestRunner:
    def __init__(self, doc: dict[str, Any], work: Path, params: dict[str, str] | None = None, name: str = "wf-test",
                 fork: bool = False):
        self.fork = fork
        self.spec = doc["spec"]
        self.templates = {t["name"]: t for t in self.spec["templates"]}
        self.work, self.name = work, name
        given = dict(params or {})
        self.params = {p["name"]: given.get(p["name"], p.get("value")) for p in self.spec.get("arguments", {}).get("parameters", [])}
        self.ran: dict[str, Ran] = {}  # task path -> what came of it
        self.by_template: dict[str, Ran] = {}  # container template -> what its last run gave
        self.mount_root = work / "volume"
        self.created: list[dict[str, Any]] = []  # what resource templates created, as substituted
        self._n = 0

    def run(self) -> Ran:
        main = self.run_template(self.templates[self.spec["entrypoint"]], {}, {}, "main")
        if self.spec.get("onExit"):
            status = "Succeeded" if main.status == "Succeeded" else "Failed"
            self.run_template(self.templates[self.spec["onExit"]], {}, {}, "exit", status=status)
        return main

    # -- substitution ---------------------------------------------------------------------
    def sub(self, text: str, scope: dict[str, str]) -> str:
        def one(m: re.Match[str]) -> str:
            key = m.group(1)
            if key == "workflow.name":
                return self.name
            if key.startswith("workflow.parameters."):
                return str(self.params[key.split(".", 2)[2]])
            if key in scope:
                return scope[key]
            if key.startswith("item."):
                raise KeyError(f"{key!r}: no such field of the item")
            raise KeyError(f"{key!r} is not in scope")
        text = _EXPR.sub(lambda m: str(_Expr(m.group(1), lambda k: self._lookup(k, scope)).value()), text)
        return _VAR.sub(one, text)

    def _lookup(self, key: str, scope: dict[str, str]) -> str:
        if key.startswith("workflow.parameters."):
            return str(self.params[key.split(".", 2)[2]])
        return scope.get(key, "Omitted" if key.endswith(".status") else None)

    # -- templates --------------------------------------------------------------------------
    def run_template(self, t: dict[str, Any], params: dict[str, str], arts: dict[str, Path], path: str,
                     status: str | None = None) -> Ran:
        for p in t.get("inputs", {}).get("parameters", []):
            if p["name"] not in params and "value" in p:  # Argo substitutes the workflow's variables in it
                params[p["name"]] = self.sub(p["value"], {})
        if "dag" in t:
            return self.run_dag(t, params, arts, path)
        if "resource" in t:
            return self.run_trainjob(t, params)
        return self.run_container(t, params, arts, path, status)

    def run_dag(self, t: dict[str, Any], params: dict[str, str], arts: dict[str, Path], path: str) -> Ran:
        scope = {f"inputs.parameters.{k}": v for k, v in params.items()}
        art_scope = {f"inputs.artifacts.{k}": v for k, v in arts.items()}
        failed = False
        for task in t["dag"]["tasks"]:
            assert "withItems" not in task, "the runner fans out withParam only"
            if failed and t["dag"].get("failFast", True):
                break
            if "withParam" in task:
                ran = self.fan_out(task, scope, art_scope, f"{path}/{task['name']}", t["dag"].get("failFast", True))
            else:
                ran = self.run_task(task, scope, art_scope, f"{path}/{task['name']}")
            self.ran[f"{path}/{task['name']}"] = ran
            tn = task["name"]
            scope[f"tasks.{tn}.status"] = ran.status
            for k, v in ran.parameters.items():
                scope[f"tasks.{tn}.outputs.parameters.{k}"] = v
            for k, v in ran.artifacts.items():
                art_scope[f"tasks.{tn}.outputs.artifacts.{k}"] = v
            if "exit" in task.get("hooks", {}) and ran.status != "Omitted":
                hook = task["hooks"]["exit"]
                self.ran[f"{path}/{tn}.exit"] = self.run_task({**hook, "name": f"{tn}.exit"}, scope, art_scope,
                                                              f"{path}/{tn}.exit")
            failed = failed or ran.status == "Failed"
        out = Ran("Failed" if failed else "Succeeded")
        for p in t.get("outputs", {}).get("parameters", []):
            try:
                out.parameters[p["name"]] = self.sub(p["valueFrom"]["parameter"], scope)
            except KeyError:
                pass
        for a in t.get("outputs", {}).get("artifacts", []):
            key = _VAR.fullmatch(a["from"]).group(1)  # type: ignore[union-attr]
            if key in art_scope:
                out.artifacts[a["name"]] = art_scope[key]
        return out

    def fan_out(self, task: dict[str, Any], scope: dict[str, str], art_scope: dict[str, Path], path: str,
                fail_fast: bool) -> Ran:
        """One task per item of ``withParam``; the items' output parameters aggregated as Argo does
        (a JSON list of each item's text, in item order; a failed item has none)."""
        if "depends" in task and not _depends_hold(task["depends"], scope):
            return Ran("Omitted")
        if "when" in task and not _holds(self.sub(task["when"], scope)):
            return Ran("Skipped")
        items = json.loads(self.sub(task["withParam"], scope))
        lists: dict[str, list[str]] = {}
        statuses = []
        for i, item in enumerate(items):
            item_scope = {**scope, **{f"item.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in item.items()}}
            one = self.run_task({k: v for k, v in task.items() if k not in ("withParam", "depends", "when")},
                                item_scope, art_scope, f"{path}({i})")
            self.ran[f"{path}({i})"] = one
            statuses.append(one.status)
            for k, v in one.parameters.items():
                lists.setdefault(k, []).append(v)
        status = "Failed" if "Failed" in statuses else "Succeeded"
        return Ran(status, parameters={k: json.dumps(v) for k, v in lists.items()})

    def run_task(self, task: dict[str, Any], scope: dict[str, str], art_scope: dict[str, Path], path: str) -> Ran:
        if "depends" in task and not _depends_hold(task["depends"], scope):
            return Ran("Omitted")
        if "when" in task and not _holds(self.sub(task["when"], scope)):
            return Ran("Skipped")
        args = task.get("arguments", {})
        params = {p["name"]: self.sub(p["value"], scope) for p in args.get("parameters", [])}
        arts = {a["name"]: art_scope[_VAR.fullmatch(a["from"]).group(1)] for a in args.get("artifacts", [])}  # type: ignore[union-attr]
        return self.run_template(self.templates[task["template"]], params, arts, path)

    def run_container(self, t: dict[str, Any], params: dict[str, str], arts: dict[str, Path], path: str,
                      status: str | None) -> Ran:
        self._n += 1
        root = self.work / "pods" / f"{self._n:03d}-{t['name']}"
        root.mkdir(parents=True)
        scope = {f"inputs.parameters.{k}": v for k, v in params.items()}
        if status is not None:
            scope["workflow.status"] = status

        def local(text: str) -> str:
            return text.replace("/tmp/interlock/", f"{root}/").replace("/interlock-state", str(self.mount_root))

        for a in t.get("inputs", {}).get("artifacts", []):
            shutil.copytree(arts[a["name"]], local(a["path"]))
        c = t["container"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_")}
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = local(self.sub(e["value"], scope))
        cmd = [local(self.sub(x, scope)) for x in [*c["command"], *c.get("args", [])]]
        assert cmd[0] == "python"
        code = (_forked if self.fork else _spawned)(cmd, env, root)
        ran = Ran("Succeeded" if code == 0 else "Failed", code, stderr=(root / "stderr").read_text())
        self.by_template[t["name"]] = ran
        if code == 0:
            for p in t.get("outputs", {}).get("parameters", []):
                ran.parameters[p["name"]] = Path(local(p["valueFrom"]["path"])).read_text()
            for a in t.get("outputs", {}).get("artifacts", []):
                found = Path(local(a["path"]))
                assert found.exists(), f"{t['name']}: no output artifact at {a['path']}"
                ran.artifacts[a["name"]] = found
        return ran


    def run_trainjob(self, t: dict[str, Any], params: dict[str, str]) -> Ran:
        """A resource template's TrainJob: its ranks as local processes, with the trainer's
        command and env as written in the manifest Argo would create (single node only)."""
        r = t["resource"]
        assert r["action"] == "create", r
        scope = {f"inputs.parameters.{k}": v for k, v in params.items()}
        job = json.loads(self.sub(r["manifest"], scope))  # Argo substitutes, then the API server parses
        self.created.append(job)
        assert job["kind"] == "TrainJob" and job["spec"]["trainer"]["numNodes"] == 1
        trainer = job["spec"]["trainer"]
        self._n += 1
        root = self.work / "pods" / f"{self._n:03d}-{t['name']}"
        root.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_")}
        for e in trainer.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"].replace("/interlock-state", str(self.mount_root))
        assert trainer["command"] == ["torchrun"]
        args = list(trainer["args"])
        at = args.index("-m")  # the rendezvous on a free port: the tests run in parallel
        args[at:at] = ["--master-addr=127.0.0.1", f"--master-port={_free_port()}"]
        with open(root / "stdout", "w") as out, open(root / "stderr", "w") as err:
            code = subprocess.run([sys.executable, "-m", "torch.distributed.run", *args], env=env, stdout=out,
                                  stderr=err, cwd=root, timeout=120).returncode
        ran = Ran("Succeeded" if code == 0 else "Failed", code, stderr=(root / "stderr").read_text())
        self.by_template[t["name"]] = ran
        return ran


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawned(cmd: list[str], env: dict[str, str], root: Path) -> int:
    """The container's command as a new Python process."""
    # Output to files, not pipes: a step's leftover child would hold a pipe open after the pod's end.
    with open(root / "stdout", "w") as out, open(root / "stderr", "w") as err:
        return subprocess.run([sys.executable, *cmd[1:]], env=env, stdout=out, stderr=err, cwd=root,
                              timeout=120).returncode


def _forked(cmd: list[str], env: dict[str, str], root: Path) -> int:
    """The same ``python -m MODULE ARGS`` in a forked child of this process: its own process
    (environment, working directory, exit code), without paying Python's and pandas' start
    again for each of the hundreds of containers the differential test runs."""
    assert cmd[1] == "-m"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            out = os.open(root / "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            err = os.open(root / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.chdir(root)
            os.environ.clear()
            os.environ.update(env)
            sys.argv = [cmd[2], *cmd[3:]]
            import runpy

            try:
                runpy.run_module(cmd[2], run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _holds(expr: str) -> bool:
    """Argo's ``when`` after substitution (govaluate): the operators our conditions use."""
    py = expr.replace("&&", " and ").replace("||", " or ").replace("!(", " not (")
    py = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", py))
    return bool(eval(py, {"__builtins__": {}}))  # noqa: S307 - the test's own compiled conditions


_DEP = re.compile(r"([a-z0-9][a-z0-9-]*)(?:\.([A-Za-z]+))?")


def _depends_hold(expr: str, scope: dict[str, str]) -> bool:
    """Argo's ``depends`` (``&&``, ``||``, ``!``, parentheses): ``a`` alone means a.Succeeded ||
    a.Skipped || a.Daemoned; a task not reached reads Omitted."""
    def one(m: re.Match[str]) -> str:
        status = scope.get(f"tasks.{m.group(1)}.status", "Omitted")
        if m.group(2) is None:
            return str(status in ("Succeeded", "Skipped", "Daemoned"))
        return str(status == m.group(2))
    py = _DEP.sub(one, expr).replace("&&", " and ").replace("||", " or ").replace("!", " not ")
    return bool(eval(py, {"__builtins__": {}}))  # noqa: S307


class _Expr:
    """The part of Argo's expression language (expr-lang) the manifests use: a ternary on a
    task's status (``il.branch_value``), and the fan-out's ``toJson(map(fromJSON(list), {...}))``
    with ``#``/``#index`` and indexing."""

    _TOKEN = re.compile(
        r"""\s*(\(|\)|\[|\]|\{|\}|,|\?\?|\?|:|==|'[^']*'|"(?:[^"\\]|\\.)*"|-?\d+|#index|#"""
        r"""|(?:tasks|inputs|workflow)(?:\??\.[A-Za-z0-9_-]+|\['[^']*'\])+|[A-Za-z_]+)""")

    def __init__(self, text: str, lookup: Any):
        self.tokens = [m.group(1) for m in self._TOKEN.finditer(text)]
        assert "".join(self.tokens).replace(" ", "") == text.replace(" ", ""), f"unsupported expression {text!r}"
        self.lookup, self.i = lookup, 0
        self.tree = self._expr()

    def value(self) -> Any:
        v = self.tree({})
        return v if isinstance(v, str) else json.dumps(v)

    def _next(self) -> str:
        self.i += 1
        return self.tokens[self.i - 1]

    def _peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _expr(self) -> Any:
        left = self._postfix()
        if self._peek() == "??":
            self._next()
            default = self._postfix()
            left = (lambda a, b: lambda env: b(env) if a(env) is None else a(env))(left, default)
        if self._peek() == "==":
            self._next()
            right = self._postfix()
            left = (lambda a, b: lambda env: a(env) == b(env))(left, right)
        if self._peek() == "?":
            self._next()
            yes = self._expr()
            assert self._next() == ":"
            no = self._expr()
            return lambda env: yes(env) if left(env) else no(env)
        return left

    def _postfix(self) -> Any:
        v = self._primary()
        while self._peek() == "[":
            self._next()
            index = self._expr()
            assert self._next() == "]"
            v = (lambda a, b: lambda env: a(env)[b(env)])(v, index)
        return v

    def _args(self, close: str) -> list[Any]:
        out = []
        while self._peek() != close:
            out.append(self._expr())
            if self._peek() == ",":
                self._next()
        self._next()
        return out

    def _primary(self) -> Any:
        tok = self._next()
        if tok == "(":
            v = self._expr()
            assert self._next() == ")"
            return v
        if tok == "{":
            pairs = []
            while self._peek() != "}":
                key = self._next()[1:-1]
                assert self._next() == ":"
                pairs.append((key, self._expr()))
                if self._peek() == ",":
                    self._next()
            self._next()
            return lambda env: {k: f(env) for k, f in pairs}
        if tok.startswith("'"):
            return lambda env: tok[1:-1]
        if tok.startswith('"'):
            text = json.loads(tok)
            return lambda env: text
        if tok.lstrip("-").isdigit():
            return lambda env: int(tok)
        if tok == "#":
            return lambda env: env["#"]
        if tok == "#index":
            return lambda env: env["#index"]
        if tok in ("toJson", "fromJSON", "map"):
            assert self._next() == "("
            args = self._args(")")
            if tok == "toJson":
                return lambda env: json.dumps(args[0](env))
            if tok == "fromJSON":
                return lambda env: json.loads(args[0](env))
            return lambda env: [args[1]({"#": x, "#index": i}) for i, x in enumerate(args[0](env))]
        key = re.sub(r"\['([^']*)'\]", r".\1", tok).replace("?.", ".")
        return lambda env: self.lookup(key)

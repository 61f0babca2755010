"""A compiled Workflow's DAG run the way Argo's controller would run it, each container as a
local process: ``{{...}}`` substituted from the workflow's parameters and the tasks' outputs,
input artifacts placed at the template's paths, outputs read back from the files the
template's ``outputs`` name. No controller and no mock of one: only what the manifest says.

Paths under ``/tmp/interlock`` (where the templates put inputs and outputs) are moved under a
folder of the test, one per task; the state volume's mount path becomes a test folder too.
Covers what the tests use: DAG and container templates, parameters, artifacts, ``when``,
``depends`` (the tasks come in dependency order), exit hooks and ``onExit``; not ``withParam``.
"""

from __future__ import annotations

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
    def __init__(self, doc: dict[str, Any], work: Path, params: dict[str, str] | None = None, name: str = "wf-test"):
        self.spec = doc["spec"]
        self.templates = {t["name"]: t for t in self.spec["templates"]}
        self.work, self.name = work, name
        given = dict(params or {})
        self.params = {p["name"]: given.get(p["name"], p.get("value")) for p in self.spec.get("arguments", {}).get("parameters", [])}
        self.ran: dict[str, Ran] = {}  # task path -> what came of it
        self.by_template: dict[str, Ran] = {}  # container template -> what its last run gave
        self.mount_root = work / "volume"
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
            raise KeyError(f"{key!r} is not in scope")
        text = _EXPR.sub(lambda m: str(_Expr(m.group(1), lambda k: self._lookup(k, scope)).value()), text)
        return _VAR.sub(one, text)

    def _lookup(self, key: str, scope: dict[str, str]) -> str:
        if key.startswith("workflow.parameters."):
            return str(self.params[key.split(".", 2)[2]])
        return scope.get(key, "Omitted" if key.endswith(".status") else "")

    # -- templates --------------------------------------------------------------------------
    def run_template(self, t: dict[str, Any], params: dict[str, str], arts: dict[str, Path], path: str,
                     status: str | None = None) -> Ran:
        for p in t.get("inputs", {}).get("parameters", []):
            if p["name"] not in params and "value" in p:
                params[p["name"]] = p["value"]
        if "dag" in t:
            return self.run_dag(t, params, arts, path)
        return self.run_container(t, params, arts, path, status)

    def run_dag(self, t: dict[str, Any], params: dict[str, str], arts: dict[str, Path], path: str) -> Ran:
        scope = {f"inputs.parameters.{k}": v for k, v in params.items()}
        art_scope = {f"inputs.artifacts.{k}": v for k, v in arts.items()}
        failed = False
        for task in t["dag"]["tasks"]:
            assert "withParam" not in task and "withItems" not in task, "the runner does not fan out"
            if failed and t["dag"].get("failFast", True):
                break
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
        # Output to files, not pipes: a step's leftover child would hold a pipe open after the pod's end.
        with open(root / "stdout", "w") as out, open(root / "stderr", "w") as err:
            proc = subprocess.run([sys.executable, *cmd[1:]], env=env, stdout=out, stderr=err, cwd=root, timeout=120)
        ran = Ran("Succeeded" if proc.returncode == 0 else "Failed", proc.returncode,
                  stderr=(root / "stderr").read_text())
        self.by_template[t["name"]] = ran
        if proc.returncode == 0:
            for p in t.get("outputs", {}).get("parameters", []):
                ran.parameters[p["name"]] = Path(local(p["valueFrom"]["path"])).read_text()
            for a in t.get("outputs", {}).get("artifacts", []):
                found = Path(local(a["path"]))
                assert found.exists(), f"{t['name']}: no output artifact at {a['path']}"
                ran.artifacts[a["name"]] = found
        return ran


def _holds(expr: str) -> bool:
    """Argo's ``when`` after substitution (govaluate): the operators our conditions use."""
    py = expr.replace("&&", " and ").replace("||", " or ").replace("!(", " not (")
    py = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", py))
    return bool(eval(py, {"__builtins__": {}}))  # noqa: S307 - the test's own compiled conditions


_DEP = re.compile(r"([a-z0-9][a-z0-9-]*)(?:\.([A-Za-z]+))?")


def _depends_hold(expr: str, scope: dict[str, str]) -> bool:
    """Argo's ``depends``: ``a`` alone means a.Succeeded || a.Skipped || a.Daemoned."""
    def one(m: re.Match[str]) -> str:
        status = scope.get(f"tasks.{m.group(1)}.status", "Omitted")
        if m.group(2) is None:
            return str(status in ("Succeeded", "Skipped", "Daemoned"))
        return str(status == m.group(2))
    return bool(eval(_DEP.sub(one, expr).replace("&&", " and ").replace("||", " or "), {"__builtins__": {}}))  # noqa: S307


class _Expr:
    """The part of Argo's expression language the manifests use outside fan-out: a ternary on a
    task's status picking a branch's output (``il.branch_value``)."""

    _TOKEN = re.compile(r"\s*(\(|\)|\?|:|==|'[^']*'|(?:tasks|inputs|workflow)(?:\.[A-Za-z0-9_-]+|\['[^']*'\])+)")

    def __init__(self, text: str, lookup: Any):
        self.tokens = [m.group(1) for m in self._TOKEN.finditer(text)]
        assert "".join(self.tokens).replace(" ", "") == text.replace(" ", ""), f"unsupported expression {text!r}"
        self.lookup, self.i = lookup, 0

    def value(self) -> Any:
        return self._expr()

    def _next(self) -> str:
        self.i += 1
        return self.tokens[self.i - 1]

    def _peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _expr(self) -> Any:
        left = self._primary()
        if self._peek() == "==":
            self._next()
            left = left == self._primary()
        if self._peek() == "?":
            self._next()
            yes = self._expr()
            assert self._next() == ":"
            no = self._expr()
            return yes if left else no
        return left

    def _primary(self) -> Any:
        tok = self._next()
        if tok == "(":
            v = self._expr()
            assert self._next() == ")"
            return v
        if tok.startswith("'"):
            return tok[1:-1]
        return self.lookup(re.sub(r"\['([^']*)'\]", r".\1", tok))

"""What keeps KFP compile near kfp's own cost, and that it changes nothing in the IR.

kfp's container setters call ``inspect.stack()``, whose cost grows with the depth of the
calling stack and the size of its functions: interlock applies them on a helper thread with
a shallow stack (adapters/kfp/shallow.py). Compiling a pipeline without distributed steps
does not import the launcher's modules.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from kfp_test_pipelines import policies, typed

import interlock as il
from interlock.adapters.kfp import shallow
from interlock.adapters.kfp.compile import _build_pipeline, compile_pipeline
from interlock.adapters.kfp.policies import KfpOptions


def test_kfp_task_setters_see_a_shallow_stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    depths: list[int] = []
    real = inspect.stack

    def counting(context: int = 1) -> list[inspect.FrameInfo]:
        frames = real(context)
        depths.append(len(frames) - 1)  # less this wrapper's own frame
        return frames

    monkeypatch.setattr(inspect, "stack", counting)
    compile_pipeline(il.spec(policies.policies), tmp_path / "p.yaml", KfpOptions(pipeline_root="s3://b/root"))
    assert depths, "kfp's setters no longer call inspect.stack(): shallow.py can go"
    # The helper's loop, _task_settings, the setter, kfp's wrapper, _ensure_container_spec_exists
    # (under pytest the builder's own stack is some 60 frames deep).
    assert max(depths) <= 6, depths


def test_the_helper_changes_nothing_in_the_ir(tmp_path: Path) -> None:
    from kfp import compiler

    for pipeline in (policies.policies, typed.typed):
        spec = il.spec(pipeline)
        opts = KfpOptions(pipeline_root="s3://b/root")
        helped = compile_pipeline(spec, tmp_path / "helped.yaml", opts)
        in_place = tmp_path / "in-place.yaml"  # every setter called on the builder's own stack
        compiler.Compiler().compile(_build_pipeline(spec, opts).pipeline, str(in_place))
        assert helped.read_text() == in_place.read_text()
        docs = list(yaml.safe_load_all(helped.read_text()))
        assert docs[0]["deploymentSpec"]["executors"], "kfp's compiler wrote no executors"


def test_an_error_on_the_helper_reaches_the_caller() -> None:
    def refuse(what: str) -> None:
        raise ValueError(f"refused {what}")

    with shallow.shallow_setters():
        with pytest.raises(ValueError, match="refused cpu"):
            shallow.call(refuse, "cpu")
        # A call made on the helper itself runs in place rather than waiting on itself.
        assert shallow.call(shallow.call, lambda: 7) == 7
        assert shallow.call(lambda: 3) == 3  # the helper serves on after an error
    assert shallow.call(lambda: 4) == 4  # outside a block: in place


def test_a_pipeline_without_distributed_steps_compiles_without_the_launcher(tmp_path: Path) -> None:
    child = textwrap.dedent("""
        import json, sys
        from pathlib import Path
        import interlock as il
        from interlock.adapters.kfp.policies import KfpOptions
        from interlock.adapters.kfp.compile import compile_pipeline
        from kfp_test_pipelines import policies
        compile_pipeline(il.spec(policies.policies), Path(sys.argv[1]), KfpOptions(pipeline_root="s3://b/root"))
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("interlock.") and ("launch" in m or
              "trainjob" in m or "distributed" in m or "pytorch" in m))))
    """)
    done = subprocess.run([sys.executable, "-c", child, str(tmp_path / "p.yaml")], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []

"""What keeps KFP compile near kfp's own cost, and that it changes nothing in the IR.

kfp's container setters call ``inspect.stack()``, which reads every frame's source: interlock
builds with setters that name themselves without it (adapters/kfp/setter_stack.py).
Compiling a pipeline without distributed steps does not import the launcher's modules.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml
from kfp_test_pipelines import policies, typed

import interlock as il
from interlock.adapters.kfp.compile import _build_pipeline, compile_pipeline
from interlock.adapters.kfp.policies import KfpOptions


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

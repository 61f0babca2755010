"""``interlock compile --backend flyte2``: the module, checked by importing it with the SDK.

The SDK has no public way to serialize task specs offline (``flyte.deploy(dry_run=True)``
still needs an endpoint; the serializer is private), so the module is the artifact; it is
imported once here, so a module the SDK refuses never leaves the compiler.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from interlock.core.base.errors import CapabilityError
from interlock.core.model.pipeline_spec import PipelineSpec

from .render import render


def compile_to(spec: PipelineSpec, out: Path, *, image: str | None, store: str, concurrent: bool = True,
               check: bool = True) -> list[Path]:
    path = out if out.suffix == ".py" else out / f"{spec.name.replace('-', '_')}_flyte2.py"
    source = render(spec, store=store, image=image, concurrent=concurrent)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    if check:
        name = f"_interlock_flyte2_check_{abs(hash(source))}"
        loader = importlib.util.spec_from_file_location(name, path)
        assert loader is not None and loader.loader is not None
        module = importlib.util.module_from_spec(loader)
        try:
            loader.loader.exec_module(module)
        except ModuleNotFoundError as exc:  # a distributed step's plugin, not installed here
            raise CapabilityError(f"the compiled module {path} imports {exc.name!r}, which is not installed",
                                  pipeline=spec.name, hint="pip install 'interlock[flyte2-pytorch]' (it brings "
                                  "flyteplugins-pytorch, the SDK's PyTorch plugin)") from exc
        except Exception as exc:  # noqa: BLE001 - the SDK refused a task's settings
            raise CapabilityError(f"the flyte SDK refused the compiled module {path}: {exc}", pipeline=spec.name,
                                  hint="`interlock backends` lists what flyte2 supports") from exc
        finally:
            sys.modules.pop(name, None)
    return [path]

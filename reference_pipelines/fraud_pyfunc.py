"""The fraud model as an MLflow ``pyfunc`` model: what the register step registers.

``mlflow.pyfunc.load_model("models:/fraud-detector@champion").predict(frame)`` returns
fraud probabilities for raw transaction rows (the columns of ``fraud_model.INPUT_COLUMNS``):
the model applies its own preprocessing, fitted on its training split. The weights and the
preprocessing stay the plain model directory the train step wrote (no pickle of them),
logged as the artifact ``model``; this package travels with it as MLflow ``code_paths``.
Imports mlflow: import this module only where a model is registered or loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd

from . import fraud_model

ARTIFACT = "model"  # the model directory, in the pyfunc's artifacts
PACKAGE_DIR = Path(__file__).resolve().parent


MODEL_CODE = PACKAGE_DIR / "fraud_pyfunc_model.py"  # models from code: no pickle


class FraudPyfunc(mlflow.pyfunc.PythonModel):
    def load_context(self, context):  # type: ignore[no-untyped-def]
        self.model, self.pre = fraud_model.load_model_dir(Path(context.artifacts[ARTIFACT]))

    # pd.DataFrame: a type hint MLflow accepts (and checks); the columns come from the input example.
    def predict(self, context, model_input: pd.DataFrame, params=None):  # type: ignore[no-untyped-def]
        """Fraud probabilities (float64), one per row of ``model_input``."""
        return fraud_model.score(self.model, fraud_model.apply_preprocessing(model_input, self.pre))


def load_model_files(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """(model, preprocessing) from a downloaded registry version: an MLflow model (an
    ``MLmodel`` file) or a plain model directory (versions registered before pyfunc)."""
    path = Path(path)
    if (path / "MLmodel").is_file():
        loaded = mlflow.pyfunc.load_model(str(path)).unwrap_python_model()
        return loaded.model, loaded.pre
    return fraud_model.load_model_dir(path)


# What loading the model imports: only these modules travel with it (not the pipelines).
MODEL_MODULES = ("__init__.py", "fraud_data.py", "fraud_model.py", "fraud_pyfunc.py")


def register_model(reg: Any, model_name: str, model_dir: Path, **register_kw: Any) -> str:
    """Register ``model_dir`` (written by ``fraud_model.save_model_dir``) as a pyfunc version."""
    import shutil
    import tempfile
    import warnings

    with tempfile.TemporaryDirectory(prefix="fraud-code-") as tmp, warnings.catch_warnings():
        # MLflow warns that an integer column cannot hold a missing value: the schema
        # (fraud_schema.py) says these columns have none, so the signature keeps them integers.
        warnings.filterwarnings("ignore", message=r"Hint: Inferred schema contains integer column")
        package = Path(tmp) / PACKAGE_DIR.name
        package.mkdir()
        for name in MODEL_MODULES:
            shutil.copy2(PACKAGE_DIR / name, package / name)
        return str(reg.register_pyfunc(
            model_name,
            MODEL_CODE,
            artifacts={ARTIFACT: model_dir},
            input_example=fraud_model.load_input_example(model_dir),
            code_paths=[package],
            packages=("torch",),
            **register_kw,
        ))

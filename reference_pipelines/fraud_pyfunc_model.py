"""The fraud pyfunc as MLflow "models from code": MLflow runs this file to build the model
when it is logged and when it is loaded, so nothing is pickled (see fraud_pyfunc.py)."""

import mlflow.models

from reference_pipelines.fraud_pyfunc import FraudPyfunc

mlflow.models.set_model(FraudPyfunc())

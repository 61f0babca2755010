"""Apache Airflow 3 backends: ``airflow`` (a DAG file for a deployment) and ``airflow-local``
(the same DAG run by real Airflow's ``dag.test()``). The DAG is rendered from the lowered plan
(``loader.py``); each task runs one node through the runtime shim (``worker.py``)."""

"""Airflow's ProvidersManager finds the bridge through the ``apache_airflow_provider`` entry point.

The entry point is declared in pyproject.toml; so that this test does not depend on how
the package was installed, it puts a minimal ``interlock`` dist-info carrying exactly that
entry point first on the path of a subprocess and lets Airflow discover providers there.
"""

from __future__ import annotations

import json
import subprocess
import sys

from bridge_harness import airflow_env

ENTRY_POINT = "interlock.plugins.airflow.provider:get_provider_info"

PROBE = """
import json
from airflow.providers_manager import ProvidersManager
pm = ProvidersManager()
info = pm.providers["interlock"]
hook = pm.hooks["interlock_flyte"]
print(json.dumps({
    "package": info.data["package-name"],
    "hook": [hook.hook_class_name, hook.connection_id_attribute_name, hook.hook_name],
    "links": [c for c in pm.extra_links_class_names if c.startswith("interlock.")],
    "triggers": sorted(t.trigger_class_name for t in pm.trigger if t.package_name == "interlock"),
    "widgets": sorted(k for k in pm.connection_form_widgets if k.startswith("extra__interlock_flyte__")),
    "behaviour": pm.field_behaviours.get("interlock_flyte"),
}))
"""


def test_providers_manager_discovers_the_flyte_connection_type(tmp_path):
    dist = tmp_path / "site" / "interlock-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: interlock\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[apache_airflow_provider]\nprovider_info = {ENTRY_POINT}\n"
    )
    env = airflow_env(tmp_path, "127.0.0.1:1", tmp_path / "unused.db")
    env["PYTHONPATH"] = str(tmp_path / "site")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["package"] == "interlock"
    assert found["hook"] == ["interlock.plugins.airflow.hook.FlyteHook", "flyte_conn_id", "Flyte (interlock)"]
    assert found["links"] == ["interlock.plugins.airflow.operators.FlyteExecutionLink"]
    assert found["triggers"] == ["interlock.plugins.airflow.triggers"]
    assert {"extra__interlock_flyte__insecure", "extra__interlock_flyte__project", "extra__interlock_flyte__domain"} <= set(
        found["widgets"]
    )
    assert found["behaviour"]["hidden_fields"] == ["schema"]
    assert found["behaviour"]["relabeling"]["password"] == "Client secret"

#!/usr/bin/env bash
# Every extra resolves WITHOUT constraints.txt, as `pip install 'interlock[EXTRA]'` does for a
# user, within a time limit: pip's resolver runs in dry-run mode (nothing is installed).
#   bash .ci/check_resolve.sh [EXTRA ...]     default: every extra, alone and together
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${RESOLVE_LIMIT_S:-600}
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=("all,test" quickstart flyte flyte2 flyte2-pytorch kfp argo airflow airflow-bridge mlflow pandera s3 torch drift "flyte,s3")
venv=$(mktemp -d)/venv
python3.11 -m venv "$venv" && "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1
failed=0
printf '%-12s %8s %9s  %s\n' extras seconds packages result
for extras in "${sets[@]}"; do
  report=$(mktemp)
  t0=$(date +%s)
  if timeout "$limit" "$venv/bin/pip" install -q --dry-run --ignore-installed --report "$report" -e ".[$extras]" \
      >"$report.log" 2>&1; then
    n=$(python3.11 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['install']))" "$report")
    result=ok
  else
    n=-; result="FAILED (exit $?; last lines below)"; failed=1
  fi
  printf '%-12s %8s %9s  %s\n' "$extras" "$(( $(date +%s) - t0 ))" "$n" "$result"
  [ "$result" = ok ] || grep -v "WARNING: Location" "$report.log" | tail -5
done
exit $failed

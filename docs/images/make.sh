#!/usr/bin/env bash
# Regenerate the pictures in docs/reports.md and the README (needs chromium on PATH):
#   bash docs/images/make.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
shot() {  # page png width height
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/profile" \
    --screenshot="$2" --window-size="$3,$4" "file://$1" 2>/dev/null
}
interlock graph docs/examples/report_demo.py --html "$tmp/graph.html"
interlock run docs/examples/report_demo.py --workdir "$tmp/wd" --run-id demo-1 -p busy_gpu=true
interlock run docs/examples/report_demo.py --workdir "$tmp/wd" --run-id demo-2 -p busy_gpu=true  # ingest: a cache hit
report=$(interlock show demo-2 --workdir "$tmp/wd")
shot "$tmp/graph.html" docs/images/graph.png 1000 1165
[ "${report#/}" != "$report" ] || report="$PWD/$report"  # show prints the path it wrote
shot "$report" docs/images/run-report.png 1000 2420
echo "wrote docs/images/graph.png and docs/images/run-report.png (from $report)"

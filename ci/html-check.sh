#!/usr/bin/env bash
# Checks the HTML page in a real browser: a small run of every
# backend present, rendered by headless Chromium. Fails unless the page is
# under 200 KB per device run (400 KB for four backends), its DOM has the
# report tables and the snapshot images, and the screenshot shows timeline
# bars and wavefield pixels (so the embedded PNG images decoded).
#
#   bash ci/html-check.sh      (installs chromium and python3-pil when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's Python, where python3-pil installs (another python3 may come first on PATH).
py=/usr/bin/python3
if ! command -v chromium >/dev/null || ! "$py" -c 'import PIL' 2>/dev/null; then
  sudo=()
  if [ "$(id -u)" != 0 ]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium python3-pil >/dev/null
fi
dir=target/html-check
rm -rf "$dir"
mkdir -p "$dir"
cargo xtask conform --backend all --size small --html "$dir/page.html" --json "$dir/report.json" >"$dir/conform.log"
runs=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["runs"]))' "$dir/report.json")
bytes=$(stat -c %s "$dir/page.html")
echo "page: $bytes bytes for $runs device runs"
if [ "$bytes" -gt $((runs * 200 * 1024)) ]; then
  echo "html-check: the page is over 200 KB per device run" >&2
  exit 1
fi
browse=(chromium --headless --no-sandbox --disable-gpu --hide-scrollbars)
timeout 120 "${browse[@]}" --dump-dom "file://$PWD/$dir/page.html" >"$dir/dom.html" 2>/dev/null
timeout 120 "${browse[@]}" --window-size=1300,6000 --screenshot="$dir/page.png" "file://$PWD/$dir/page.html" >/dev/null 2>&1
"$py" - "$dir/dom.html" "$dir/page.png" <<'PY'
import sys
from PIL import Image
dom = open(sys.argv[1]).read()
tables, images = dom.count("<table>"), dom.count('<img alt="step')
shot = Image.open(sys.argv[2]).convert("RGB")
colours = shot.getcolors(maxcolors=1 << 24) or []
count = {rgb: n for n, rgb in colours}
kernel_bars = count.get((0x3B, 0x6F, 0xB6), 0)
wavefield = sum(n for rgb, n in count.items() if rgb[0] == 255 and rgb[1] == rgb[2] and rgb[1] < 200) + sum(
    n for rgb, n in count.items() if rgb[2] == 255 and rgb[0] == rgb[1] and rgb[0] < 200)
print(f"dom: {tables} tables, {images} snapshot images; screenshot: {kernel_bars} timeline pixels, {wavefield} wavefield pixels")
if tables < 2 or images < 1 or kernel_bars < 1000 or wavefield < 1000:
    sys.exit("html-check: the page lacks tables or images, or they did not render")
PY

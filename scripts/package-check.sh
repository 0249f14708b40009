#!/usr/bin/env bash
# The packaged layout, proven for one function: `sam build` of DetectFunction
# (the same path as `make build`) must leave a directory with `bootstrap` at
# its root, an aarch64 ELF executable, and the template SAM deploys must point
# at it. First, each function built without `respond` builds only the SDK
# clients its role lets it call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/sdk-clients-check.sh"
"$root/scripts/build.sh" DetectFunction
out="$root/infra/.aws-sam/build"
"$root/.venv/bin/python" - "$out" <<'PY'
import os, struct, sys, zipfile, io
out = sys.argv[1]
fn = os.path.join(out, "DetectFunction")
boot = os.path.join(fn, "bootstrap")
assert os.path.isfile(boot), f"no bootstrap at the root of {fn}: {os.listdir(fn) if os.path.isdir(fn) else 'missing'}"
assert os.access(boot, os.X_OK), "bootstrap is not executable"
head = open(boot, "rb").read(20)
assert head[:4] == b"\x7fELF", "bootstrap is not an ELF file"
assert head[4] == 2, "bootstrap is not a 64-bit ELF"
machine = struct.unpack("<H", head[18:20])[0]
assert machine == 0xB7, f"bootstrap is for ELF machine {machine:#x}, not aarch64 (0xb7)"
tpl = open(os.path.join(out, "template.yaml")).read()
assert "CodeUri: DetectFunction" in tpl, "the built template does not point DetectFunction at its build directory"
# What `sam deploy` uploads: the directory zipped, bootstrap at the root.
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
    for name in os.listdir(fn):
        z.write(os.path.join(fn, name), name)
names = zipfile.ZipFile(buf).namelist()
assert "bootstrap" in names, names
size = os.path.getsize(boot)
print(f"package: DetectFunction/bootstrap is an aarch64 ELF, {size/1e6:.1f} MB, {len(buf.getvalue())/1e6:.1f} MB zipped; 1 passed, 0 failed")
PY

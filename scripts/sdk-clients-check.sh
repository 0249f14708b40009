#!/usr/bin/env bash
# Each function whose crate does not enable the `handover` feature `respond`
# (today: detect) builds only the AWS SDK clients it calls. "Calls" is its
# functions/<name>/iam.txt, which scripts/iam_check.py holds to the code and
# the template. STS is always allowed: aws-config builds it for credentials.
# `cargo tree` resolves features as a build of that crate alone does (as
# `sam build` does from its CodeUri), without compiling anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python3 - <<'PY'
import pathlib, re, subprocess, sys
# IAM service prefix -> SDK crate, for every client the workspace builds.
CRATE = {
    "autoscaling": "aws-sdk-autoscaling", "bedrock": "aws-sdk-bedrockruntime",
    "cloudwatch": "aws-sdk-cloudwatch", "dynamodb": "aws-sdk-dynamodb",
    "ec2": "aws-sdk-ec2", "ecs": "aws-sdk-ecs", "eks": "aws-sdk-eks",
    "elasticloadbalancing": "aws-sdk-elasticloadbalancingv2",
    "events": "aws-sdk-eventbridge", "iam": "aws-sdk-iam", "rds": "aws-sdk-rds",
    "route53": "aws-sdk-route53",
    "route53-recovery-cluster": "aws-sdk-route53recoverycluster",
    "s3": "aws-sdk-s3", "secretsmanager": "aws-sdk-secretsmanager",
    "sns": "aws-sdk-sns", "sqs": "aws-sdk-sqs", "ssm": "aws-sdk-ssm",
    "states": "aws-sdk-sfn", "sts": "aws-sdk-sts",
}
failed = checked = 0
for toml in sorted(pathlib.Path("functions").glob("*/Cargo.toml")):
    name = toml.parent.name
    if re.search(r'^handover\s*=.*"respond"', toml.read_text(), re.M):
        continue
    allowed = {"aws-sdk-sts"}
    for line in (toml.parent / "iam.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or "@platform" in line:
            continue
        service = line.split(":")[0]
        if service not in CRATE:
            sys.exit(f"{toml.parent}/iam.txt: no SDK crate known for service {service!r}")
        allowed.add(CRATE[service])
    tree = subprocess.run(
        ["cargo", "tree", "-p", name, "-e", "normal", "--prefix", "none", "--format", "{p}"],
        check=True, capture_output=True, text=True).stdout
    built = {l.split()[0] for l in tree.splitlines() if l.startswith("aws-sdk-")}
    extra = sorted(built - allowed)
    checked += 1
    if extra:
        failed += 1
        print(f"FAIL {name} builds SDK clients its iam.txt never calls: {', '.join(extra)}")
    else:
        print(f"ok   {name} builds {', '.join(sorted(built))}")
print(f"sdk clients: {checked - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY

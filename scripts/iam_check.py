"""The roles match the code.

For every function, `functions/<name>/iam.txt` declares the AWS actions its
code calls. This check proves three things:

1. the declared set equals the actions granted to that function's role in
   infra/template.yaml (logs:* for its own log group aside): nothing granted
   but unused, nothing used but not granted;
2. every declared action is really called: its SDK operation
   (`.modify_db_instance()` for rds:ModifyDBInstance) appears in the code the
   function is built from (its crate, and the modules of `shared/` it imports);
3. with --observed FILE (the router's call log from the path tests, where
   each call names its function), every call a function really made is declared.

An action marked `@platform` in iam.txt is one Lambda itself uses with the
function's role (sending to the on-failure destination, VPC network
interfaces): it must be granted, and is exempt from point 2.

Prints `N passed, N failed` and exits non-zero on any failure.
"""

import json
import os
import re
import sys

from samtranslator.yaml_helper import yaml_parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Actions whose SDK call has another name: Bedrock authorises Converse with
# bedrock:InvokeModel (see "Converse API" in the Bedrock user guide).
# execute-api:Invoke is a SigV4-signed HTTP request to an API Gateway route:
# the CLI signs for the service name `SIGNING_SERVICE` (execute-api).
CALLS = {"bedrock:InvokeModel": [".converse(", ".invoke_model("], "execute-api:Invoke": ["name(SIGNING_SERVICE)"]}


# The only actions that may be marked `@platform`: Lambda's on-failure
# destination, active tracing, and network interfaces in a VPC.
PLATFORM = {
    "sqs:SendMessage",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
}


def snake(op: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", op)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


def actions_in(node, acc=None) -> set:
    """Every action of every statement under `node` (both branches of Fn::If)."""
    acc = set() if acc is None else acc
    if isinstance(node, dict):
        if "Action" in node and "Effect" in node:
            acts = node["Action"]
            for a in acts if isinstance(acts, list) else [acts]:
                if isinstance(a, str):
                    acc.add(a)
        for v in node.values():
            actions_in(v, acc)
    elif isinstance(node, list):
        for v in node:
            actions_in(v, acc)
    return acc


def granted(template) -> dict:
    """role logical id -> set of actions."""
    return {
        name: actions_in(res["Properties"].get("Policies", []))
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::IAM::Role"
    }


def managed_policies(template) -> dict:
    """managed policy logical id -> set of actions."""
    return {
        name: actions_in(res["Properties"]["PolicyDocument"])
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::IAM::ManagedPolicy"
    }


# Actions AWS authorises without any permission: declared with
# `@nopermission`, never granted (sts:GetCallerIdentity, per the STS API reference).
NO_PERMISSION = {"sts:GetCallerIdentity"}

# Callers that are not functions: the CLI (app/handover-cli in the user
# agent), its declarations and the managed policy an operator attaches.
OPERATOR = ("handover-cli", os.path.join("cli", "iam.txt"), os.path.join("cli", "src"), ("OperatorPolicy", "ResponderPolicy"))


def function_roles(template) -> dict:
    """binary name -> role logical id."""
    out = {}
    for name, res in template["Resources"].items():
        if res["Type"] == "AWS::Serverless::Function":
            binary = res["Metadata"]["BuildProperties"]["Binary"]
            role = res["Properties"]["Role"]
            out[binary] = role["Fn::GetAtt"][0] if isinstance(role, dict) else role.split(".")[0]
    return out


def sources_of(binary: str, fdir: str = "") -> str:
    """The function's own code plus the shared modules it names (one level of `use handover::x`)."""
    texts = []
    fdir = fdir or os.path.join(ROOT, "functions", binary, "src")
    for dp, _, files in os.walk(fdir):
        for f in files:
            if f.endswith(".rs"):
                texts.append(open(os.path.join(dp, f)).read())
    own = "\n".join(texts)
    shared = os.path.join(ROOT, "shared", "src")
    modules = set(re.findall(r"handover::([a-z_]+)", own))
    seen = set()
    while modules - seen:
        m = (modules - seen).pop()
        seen.add(m)
        for cand in (os.path.join(shared, m + ".rs"), os.path.join(shared, m)):
            paths = []
            if os.path.isfile(cand):
                paths = [cand]
            elif os.path.isdir(cand):
                paths = [os.path.join(dp, f) for dp, _, fs in os.walk(cand) for f in fs if f.endswith(".rs")]
            for p in paths:
                text = open(p).read()
                texts.append(text)
                modules |= set(re.findall(r"crate::([a-z_]+)", text))
    return "\n".join(texts)


def main() -> int:
    observed_file = None
    if len(sys.argv) == 3 and sys.argv[1] == "--observed":
        observed_file = sys.argv[2]
    template = yaml_parse(open(os.path.join(ROOT, "infra", "template.yaml")).read())
    roles = granted(template)
    fn_roles = function_roles(template)
    passed = failed = 0

    def check(ok: bool, what: str):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {what}")

    observed = {}
    if observed_file:
        for call in json.load(open(observed_file)):
            if call.get("caller") and call.get("service"):
                observed.setdefault(call["caller"], set()).add(f'{call["service"]}:{call["action"]}')
    callers = [
        (b, os.path.join("functions", b, "iam.txt"), os.path.join(ROOT, "functions", b, "src"), fn_roles.get(b))
        for b in sorted(os.listdir(os.path.join(ROOT, "functions")))
    ]
    name, decl, src, policy = OPERATOR
    grants_of = dict(roles)
    managed = managed_policies(template)
    grants_of.update(managed)
    # The CLI's grant is the union of its policies.
    if all(p in managed for p in policy):
        grants_of["+".join(policy)] = set().union(*(managed[p] for p in policy))
    callers.append((name, decl, os.path.join(ROOT, src), "+".join(policy)))
    for binary, decl_rel, src, grantee in callers:
        decl_path = os.path.join(ROOT, decl_rel)
        check(os.path.exists(decl_path), f"{binary}: {decl_rel} missing")
        check(grantee in grants_of, f"{binary}: no role or policy in infra/template.yaml grants its calls")
        if not os.path.exists(decl_path) or grantee not in grants_of:
            continue
        # `action @platform`: granted for Lambda itself (on-failure destination,
        # VPC network interfaces), never called by the code.
        entries = [l.split("#")[0].split() for l in open(decl_path) if l.split("#")[0].strip()]
        platform = {e[0] for e in entries if "@platform" in e[1:]}
        for a in sorted(platform - PLATFORM):
            check(False, f"{binary}: {a} is marked @platform but is not an action Lambda itself uses with a role")
        free = {e[0] for e in entries if "@nopermission" in e[1:]}
        for a in sorted(free - NO_PERMISSION):
            check(False, f"{binary}: {a} is marked @nopermission but AWS authorises it")
        declared = {e[0] for e in entries}
        grants = {a for a in grants_of[grantee] if not a.startswith("logs:")}
        for a in sorted(grants - declared):
            check(False, f"{binary}: {a} is granted in the template but not declared as used")
        for a in sorted(declared - free - grants):
            check(False, f"{binary}: {a} is used but not granted in the template")
        check(grants == declared - free, f"{binary}: template grants == declared")
        code = sources_of(binary, src)
        for a in sorted(declared - platform):
            calls = CALLS.get(a, [f".{snake(a.split(':', 1)[1])}("])
            check(any(c in code for c in calls),
                  f"{binary}: {a} is declared but none of {' '.join(calls)} is called in its code")
        for a in sorted(observed.get(binary, set())):
            svc, op = a.split(":", 1)
            # The SigV4 signing name, where it differs from the IAM prefix.
            names = {a, f"{ {'monitoring': 'cloudwatch'}.get(svc, svc)}:{op}"}
            check(bool(names & declared), f"{binary}: called {a} in the path tests, but it is not declared")
    print(f"iam: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Expand infra/template.yaml the way `sam package` + CloudFormation would,
so cfn-lint can check the resources inside AWS::Serverless::* too.

`sam package` uploads CodeUri folders and inlines nothing; here the local
paths are replaced with placeholder S3 URIs and DefinitionUri with the ASL
itself (as `Definition`), then aws-sam-translator applies the transform.
Usage: python sam_expand.py TEMPLATE OUT
"""

import json
import os
import sys

from samtranslator.parser.parser import Parser
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """The template uses no AWS managed policies; nothing to look up."""

    def load(self):
        return {}


def main() -> int:
    src, out = sys.argv[1], sys.argv[2]
    base = os.path.dirname(os.path.abspath(src))
    with open(src) as f:
        template = yaml_parse(f.read())
    for name, res in template.get("Resources", {}).items():
        props = res.get("Properties", {})
        if res["Type"] == "AWS::Serverless::StateMachine" and isinstance(props.get("DefinitionUri"), str):
            with open(os.path.join(base, props.pop("DefinitionUri"))) as f:
                props["Definition"] = json.load(f)
    glob = template.get("Globals", {}).get("Function", {})
    if isinstance(glob.get("CodeUri"), str):
        glob["CodeUri"] = "s3://handover-artifacts/placeholder.zip"
    for res in template.get("Resources", {}).values():
        props = res.get("Properties", {})
        if res["Type"] == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = "s3://handover-artifacts/placeholder.zip"
    params = {p: "x" for p in template.get("Parameters", {})}
    params.update({"AWS::Region": "ap-northeast-1", "AWS::Partition": "aws", "AWS::AccountId": "123456789012"})
    os.environ.setdefault("AWS_DEFAULT_REGION", "ap-northeast-1")
    expanded = transform(template, params, NoManagedPolicies(), Parser())
    with open(out, "w") as f:
        json.dump(expanded, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What both Python peers do first at init, as the Rust functions do: the
client configuration (`handover::aws::Aws::named`) and the plan read from
SSM (`PlanSource::from_env`)."""
import json
import os

import boto3
from botocore.config import Config

REGION = os.environ["AWS_REGION"]
TABLE = os.environ["TABLE_NAME"]


def config(app):
    """The clients' configuration. The user agent names the function, as
    the Rust SDK's `app/<function>` does, so the emulator's call log
    attributes the calls."""
    return Config(
        user_agent_appid=app,
        connect_timeout=3,
        read_timeout=10,
        retries={"mode": "standard", "max_attempts": 3},
    )


def plan(cfg):
    """The plan from SSM (`PLAN_PARAMETER`)."""
    ssm = boto3.client("ssm", region_name=REGION, config=cfg)
    return json.loads(ssm.get_parameter(Name=os.environ["PLAN_PARAMETER"])["Parameter"]["Value"])

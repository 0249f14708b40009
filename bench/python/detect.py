"""The bench's Python peer of Handover's `detect` (a measuring stick, not a
product): Python 3 + boto3 under the official runtime interface client
(`python -m awslambdaric detect.handler`), doing what detect does.

At init, as `functions/detect/src/handler.rs` `Deps::from_env`: the plan
from SSM (`PLAN_PARAMETER`), and the clients detect builds (DynamoDB,
Route 53, CloudWatch in the alarm's Region, Step Functions; one HTTP
client). Per healthy tick, as `handover::detect::Detector::tick`: the
Scheduler payload checked; the primary record read (GetItem, consistent);
the endpoint GET, GetHealthCheckStatus and the alarm's state side by side;
the probe run read (GetItem) and the tick written (PutItem, conditional on
the last tick); the heartbeat metric line (EMF) printed. The bench checks
that the calls it makes are the ones the Rust function made.
"""
import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import boto3

from peer import REGION, TABLE, config, plan

CONFIG = config("detect")
PLAN = plan(CONFIG)
STATE_MACHINE = os.environ["STATE_MACHINE_ARN"]
ALARM = (PLAN.get("detection") or {}).get("alarm")
dynamodb = boto3.client("dynamodb", region_name=REGION, config=CONFIG)
route53 = boto3.client("route53", region_name="us-east-1", config=CONFIG)
cloudwatch = boto3.client(
    "cloudwatch", region_name=(ALARM or {}).get("region", "us-east-1"), config=CONFIG
)
sfn = boto3.client("stepfunctions", region_name=REGION, config=CONFIG)
POOL = ThreadPoolExecutor(max_workers=3)


def ms(text):
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def endpoint(url, timeout):
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    except Exception:
        status = None
    return {"name": "endpoint", "failing": status is None or not 200 <= status < 300,
            "latency_ms": int((time.monotonic() - start) * 1000)}


def health(check_id):
    statuses = route53.get_health_check_status(HealthCheckId=check_id)[
        "HealthCheckObservations"]
    healthy = sum(1 for o in statuses if o["StatusReport"]["Status"].startswith("Success"))
    share = healthy / len(statuses) if statuses else 0.0
    return {"name": "health_check",
            "failing": share < PLAN["detection"]["healthy_share_below"]}


def alarm():
    if not ALARM:
        return None
    a = cloudwatch.describe_alarms(AlarmNames=[ALARM["name"]])["MetricAlarms"]
    state = a[0]["StateValue"] if a else "INSUFFICIENT_DATA"
    return {"name": "alarm", "failing": {"ALARM": True, "OK": False}.get(state)}


def key(pk):
    return {"pk": {"S": pk}, "sk": {"S": "STATE"}}


def handler(event, context):
    if event.get("source") != "aws.scheduler" or event.get("detail-type") != "Scheduled Event":
        raise ValueError("not an EventBridge Scheduler payload")
    tick = ms(event["time"])
    record = dynamodb.get_item(TableName=TABLE, Key=key("PRIMARY"), ConsistentRead=True).get("Item")
    if record is None:
        raise RuntimeError("no primary record")
    site = PLAN["regions"]["primary"] if record["region"]["S"] == PLAN["regions"]["primary"]["region"] \
        else PLAN["regions"]["standby"]
    timeout = PLAN["detection"]["probe_timeout_ms"] / 1000
    futures = [POOL.submit(endpoint, site["endpoint"], timeout),
               POOL.submit(health, site["health_check_id"]), POOL.submit(alarm)]
    signals = [f.result() for f in futures]
    signals = [s for s in signals if s is not None]
    failed = sum(1 for s in signals if s["failing"]) >= 2
    probe = f"PROBE#{site['region']}"
    current = dynamodb.get_item(TableName=TABLE, Key=key(probe), ConsistentRead=True).get("Item") or {}
    last = current.get("last_tick_ms", {}).get("N")
    if last is not None and tick <= int(last):
        return {"outcome": "duplicate", "region": site["region"]}
    item = {**key(probe), "consecutive": {"N": "0"}, "last_tick_ms": {"N": str(tick)},
            "evidence": {"L": []}}
    condition = {"ConditionExpression": "attribute_not_exists(last_tick_ms)"} if last is None else {
        "ConditionExpression": "last_tick_ms = :last",
        "ExpressionAttributeValues": {":last": {"N": last}}}
    dynamodb.put_item(TableName=TABLE, Item=item, **condition)
    print(json.dumps({"_aws": {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": [
        {"Namespace": "Handover", "Dimensions": [["Stack"]],
         "Metrics": [{"Name": "DetectHeartbeat", "Unit": "Count"}]}]},
        "Stack": os.environ.get("HANDOVER_STACK_NAME", ""), "DetectHeartbeat": 1,
        "signals": signals}), file=sys.stdout, flush=True)
    return {"outcome": "failing" if failed else "healthy", "region": site["region"]}

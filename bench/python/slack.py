"""The bench's Python peer of Handover's `slack` (a measuring stick, not a
product): Python 3 + boto3 under the official runtime interface client
(`python -m awslambdaric slack.handler`), doing what slack does.

At init, as `functions/slack/src/handler.rs` `Deps::from_env`: the plan
from SSM (`PLAN_PARAMETER`), the signing secret it names from Secrets
Manager (plaintext, or JSON with `signing_secret`), the DynamoDB client.
The Step Functions client is built on the first decision, in the
execution's Region, as the Rust function's `Aws::sfn` builds it.

Per click, as `handover::approval::decide::Decider::handle`: the API Gateway
HTTP API (payload 2.0) event's body base64-decoded; Slack's signature
checked (`v0:<timestamp>:<body>`, HMAC-SHA256 with `hmac`, constant-time
compare, 5 minutes of skew at most); the `block_actions` payload parsed from
the form; the user and workspace checked against the plan's list; the key
consumed once (UpdateItem, conditional on a pending, unexpired key);
SendTaskSuccess with the decision; the key marked delivered (UpdateItem);
the message replaced through `response_url`; a 200. The bench checks that
the calls it makes are the ones the Rust function made.
"""
import base64
import hashlib
import hmac
import json
import os
import time
import urllib.parse
import urllib.request
from datetime import datetime, timezone

import boto3

from peer import REGION, TABLE, config, plan

CONFIG = config("slack")
PLAN = plan(CONFIG)
secrets = boto3.client("secretsmanager", region_name=REGION, config=CONFIG)
_raw = secrets.get_secret_value(SecretId=PLAN["slack"]["signing_secret_arn"])["SecretString"].strip()
SIGNING_SECRET = (json.loads(_raw)["signing_secret"] if _raw.startswith("{") else _raw).encode()
dynamodb = boto3.client("dynamodb", region_name=REGION, config=CONFIG)
APPROVERS = {a["user_id"]: a["name"] for a in PLAN["slack"]["approvers"]}
TEAM = PLAN["slack"].get("team_id")
SFN = {}


def sfn(region):
    if region not in SFN:
        SFN[region] = boto3.client("stepfunctions", region_name=region, config=CONFIG)
    return SFN[region]


def reply(status, text=""):
    r = {"statusCode": status, "headers": {"content-type": "text/plain; charset=utf-8"}}
    if text:
        r["body"] = text
    return r


def key(pk):
    return {"pk": {"S": pk}, "sk": {"S": "STATE"}}


def iso(ms):
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat().replace("+00:00", "Z")


def handler(event, context):
    if event["requestContext"]["http"]["method"] != "POST":
        return reply(405, "Slack interactions are POSTed")
    body = event.get("body") or ""
    body = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    headers = event.get("headers") or {}
    ts, sig = headers.get("x-slack-request-timestamp"), headers.get("x-slack-signature")
    if not ts or not sig or abs(time.time() - int(ts)) > 300:
        return reply(401, "request not signed by Slack: stale or missing timestamp")
    expected = "v0=" + hmac.new(SIGNING_SECRET, b"v0:" + ts.encode() + b":" + body,
                                hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, sig):
        return reply(401, "request not signed by Slack: signature mismatch")
    payload = json.loads(urllib.parse.parse_qs(body.decode())["payload"][0])
    [action] = payload["actions"]
    decision = {"handover_approve": "approve", "handover_approve_data_loss": "approve",
                "handover_reject": "reject"}[action["action_id"]]
    user = payload["user"]["id"]
    team = (payload.get("team") or {}).get("id") or payload["user"].get("team_id")
    if user not in APPROVERS or (TEAM is not None and team != TEAM):
        return reply(403, f"<@{user}> is not on this service's approver list: nothing was changed.")
    now = int(time.time() * 1000)
    pk = key("APPROVAL#" + action["value"])
    item = dynamodb.update_item(
        TableName=TABLE, Key=pk,
        UpdateExpression="SET #st = :decided, decision = :d, decided_by = :u, decided_ms = :now",
        ConditionExpression="attribute_exists(pk) AND #st = :pending AND expires_ms > :now",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={":decided": {"S": decision + "d"}, ":d": {"S": decision},
                                   ":u": {"S": user}, ":now": {"N": str(now)},
                                   ":pending": {"S": "pending"}},
        ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD")["Attributes"]
    execution = item["execution"]["S"]
    result = {"decision": decision, "approver_id": user, "approver_name": APPROVERS[user],
              "decided_at": iso(now), "requested_at": iso(int(item["requested_ms"]["N"])),
              "data_loss_acknowledged": action["action_id"] == "handover_approve_data_loss"}
    client = sfn(execution.split(":")[3])
    if decision == "approve":
        client.send_task_success(taskToken=item["task_token"]["S"], output=json.dumps(result))
    else:
        client.send_task_failure(taskToken=item["task_token"]["S"], error="Handover.Rejected",
                                 cause=json.dumps(result))
    dynamodb.update_item(
        TableName=TABLE, Key=pk,
        UpdateExpression="SET delivered_ms = if_not_exists(delivered_ms, :now), "
                         "delivered_by = if_not_exists(delivered_by, :by)",
        ConditionExpression="attribute_exists(pk) AND decided_by = :u",
        ExpressionAttributeValues={":u": {"S": user}, ":by": {"S": user},
                                   ":now": {"N": str(int(time.time() * 1000))}})
    blocks = [b for b in (payload.get("message") or {}).get("blocks") or []
              if b.get("block_id") not in ("handover_actions", "handover_cli")]
    blocks.append({"type": "section", "text": {"type": "mrkdwn", "text":
                   f"*{decision}d* by {APPROVERS[user]} (<@{user}>)"}})
    message = json.dumps({"replace_original": True, "text": f"{decision}d by {APPROVERS[user]}",
                          "blocks": blocks}).encode()
    request = urllib.request.Request(payload["response_url"], data=message, method="POST",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=2.5) as r:
        r.read()
    return reply(200)

"""The local AWS world Handover's tests and drills run against.

One process, two listeners on 127.0.0.1:

* moto in server mode (a real AWS wire-protocol emulator) on a private port,
  with Step Functions execution enabled, and one behaviour patched to match
  AWS (see ``patch_promote_read_replica``);
* the *router* on the public port. Everything goes through it:
  - ``POST /2015-03-31/functions/<name>/invocations`` goes to
    ``cargo lambda watch`` (moto's Step Functions interpreter invokes Lambda at
    ``http://localhost:$MOTO_PORT``, and MOTO_PORT is the router's port). A
    handler error, which cargo lambda answers with HTTP 500, is translated to
    what real Lambda answers: 200 with ``X-Amz-Function-Error: Unhandled``;
  - Route 53 behaviour moto does not have: GetHealthCheckStatus answers from
    statuses the test or drill sets (moto always says healthy), and
    TestDNSAnswer resolves the failover records moto holds with those statuses;
  - DynamoDB calls are serialised, because moto's backend is not thread-safe
    and DynamoDB's conditional writes are atomic;
  - injected faults per service and Region (timeouts, 5xx) so tests can make
    "P's database API is unreachable" true;
  - a stand-in for Bedrock's Converse API, which moto does not implement
    (moto's bedrock-runtime has InvokeModel only, answering ``{}``). It answers
    in Converse's wire shape with the text a test set for that model id, or
    with a line that says plainly that no model ran. Each request is kept so
    tests can read the prompt Handover sent;
  - everything else goes to moto unchanged.

Control endpoints (JSON): ``POST /_handover/faults``, ``POST /_handover/health``,
``POST /_handover/lambda`` (``{"upstream": "http://127.0.0.1:PORT"}``),
``GET /_handover/calls`` (a log of AWS actions seen, for exact-call assertions),
``POST /_handover/model`` (``{"<model id>": {"text": "..."}}``), ``GET /_handover/model``
(the Converse requests seen, by model id), ``POST /_handover/sns`` (an http
subscription endpoint for moto's SNS) and ``GET /_handover/sns`` (the
notifications delivered there), ``POST /_handover/reset``.

Usage: ``python handover_emulator.py --ready-file PATH [--lambda-upstream URL]``.
It writes ``{"endpoint": ..., "moto": ...}`` to PATH when both listeners are up
and serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def patch_promote_read_replica() -> None:
    """Make moto's PromoteReadReplica behave like RDS.

    AWS: after PromoteReadReplica completes, the instance is a standalone DB
    instance; DescribeDBInstances no longer returns
    ReadReplicaSourceDBInstanceIdentifier, and the source no longer lists it in
    ReadReplicaDBInstanceIdentifiers (RDS User Guide, "Promoting a read replica
    to be a standalone DB instance"). moto 5.2.5 only flips an internal flag and
    keeps both links, so Handover's real check ("available and no replication
    source") would never pass. This patch removes the links; production logic
    is unchanged.
    """
    from moto.rds import models

    original = models.RDSBackend.promote_read_replica

    def promote_read_replica(self, db_kwargs):  # type: ignore[no-untyped-def]
        database = self.databases[db_kwargs["db_instance_identifier"]]
        source_id = getattr(database, "source_db_instance_identifier", None)
        was_replica = database.is_replica
        result = original(self, db_kwargs)
        if was_replica and source_id:
            try:
                source = self.find_db_from_id(source_id)
                for ref in (database.db_instance_arn, database.db_instance_identifier):
                    if ref in source.replicas:
                        source.replicas.remove(ref)
            except Exception:  # the source may be gone (P's Region lost)
                pass
            database.source_db_instance_identifier = None
        return result

    models.RDSBackend.promote_read_replica = promote_read_replica


def patch_send_task_failure_cause() -> None:
    """Pass SendTaskFailure's `cause` through, as AWS does.

    AWS: the cause given to SendTaskFailure appears in the TaskFailed event and
    in a Catch's `Cause` (Step Functions API Reference, SendTaskFailure).
    moto 5.2.5's response handler reads only `error` and drops `cause`, so a
    rejection would lose who rejected. This patch forwards it unchanged.
    """
    from moto.core.responses import EmptyResult
    from moto.stepfunctions import responses

    def send_task_failure(self):  # type: ignore[no-untyped-def]
        self.stepfunction_backend.send_task_failure(
            self._get_param("taskToken"), error=self._get_param("error"), cause=self._get_param("cause")
        )
        return EmptyResult()

    responses.StepFunctionResponse.send_task_failure = send_task_failure


class World:
    """Mutable state of the router: faults, health statuses, call log."""

    def __init__(self, moto_port: int, lambda_upstream: str | None) -> None:
        self.moto_port = moto_port
        self.lambda_upstream = lambda_upstream
        self.lock = threading.Lock()
        # "service:region" (or "service:*") -> {"mode": "timeout"|"error", "seconds": n,
        #   "count": n (only the next n calls), "caller": function name (only its calls),
        #   "target": resource name (only calls naming it, e.g. one DB instance)}
        self.faults: dict[str, dict] = {}
        self.health: dict[str, bool] = {}  # health check id -> healthy?
        self.calls: list[dict] = []
        self.models: dict[str, dict] = {}  # model id -> {"text": answer}
        self.converse: dict[str, list] = {}  # model id -> request bodies seen
        # What moto's SNS delivered to an http subscription on /_handover/sns
        # (the notification JSON SNS posts: Type, TopicArn, Subject, Message).
        self.sns: list = []
        # moto's DynamoDB backend is not thread-safe: two concurrent conditional
        # writes can both pass their condition. DynamoDB applies each write to an
        # item atomically, so the router serialises DynamoDB calls to match.
        self.dynamodb = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.faults.clear()
            self.health.clear()
            self.calls.clear()
            self.models.clear()
            self.converse.clear()
            self.sns.clear()


SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request")


def service_region(headers) -> tuple[str, str]:
    m = SCOPE.search(headers.get("Authorization", ""))
    return (m.group(2), m.group(1)) if m else ("", "")


def target_of(headers, body: bytes) -> str:
    """The resource a call names, for exact-call assertions (RDS identifiers)."""
    if "x-www-form-urlencoded" in headers.get("Content-Type", "") and body:
        q = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        for key in ("DBInstanceIdentifier", "GlobalClusterIdentifier", "Name", "HealthCheckId"):
            if key in q:
                return q[key][0]
    return ""


APP = re.compile(r"\bapp/([A-Za-z0-9_.-]+)")


def caller_of(headers) -> str:
    """The calling function, from the SDK user agent's `app/<name>` (see handover::aws)."""
    m = APP.search(headers.get("x-amz-user-agent", "") + " " + headers.get("User-Agent", ""))
    return m.group(1) if m else ""


# REST APIs name the operation by method and path. The calls Handover makes,
# named as IAM names them (Converse is authorised as bedrock:InvokeModel).
REST_ACTIONS = [
    ("route53", "GET", r"^/2013-04-01/healthcheck/[^/]+/status$", "GetHealthCheckStatus"),
    ("route53", "GET", r"^/2013-04-01/healthcheck/[^/]+$", "GetHealthCheck"),
    ("route53", "POST", r"^/2013-04-01/healthcheck/[^/]+$", "UpdateHealthCheck"),
    ("route53", "POST", r"^/2013-04-01/healthcheck$", "CreateHealthCheck"),
    ("route53", "GET", r"^/2013-04-01/testdnsanswer$", "TestDNSAnswer"),
    ("route53", "POST", r"^/2013-04-01/hostedzone/[^/]+/rrset/?$", "ChangeResourceRecordSets"),
    ("route53", "GET", r"^/2013-04-01/hostedzone/[^/]+/rrset/?$", "ListResourceRecordSets"),
    ("route53", "GET", r"^/2013-04-01/change/[^/]+$", "GetChange"),
    ("route53", "POST", r"^/2013-04-01/hostedzone$", "CreateHostedZone"),
    ("route53", "GET", r"^/2013-04-01/hostedzone/[^/]+$", "GetHostedZone"),
    ("bedrock", "POST", r"^/model/[^/]+/converse$", "InvokeModel"),
    ("s3", "PUT", r"^/[^/]+/.+$", "PutObject"),
    ("s3", "GET", r"^/[^/]+/.+$", "GetObject"),
    ("s3", "HEAD", r"^/[^/]+/.+$", "GetObject"),
    ("s3", "PUT", r"^/[^/]+/?$", "CreateBucket"),
    ("s3", "GET", r"^/[^/]+/?$", "ListBucket"),
]


def action_of(headers, path: str, body: bytes, service: str = "", method: str = "") -> str:
    target = headers.get("X-Amz-Target")
    if target:
        return target.split(".")[-1]
    ctype = headers.get("Content-Type", "")
    if "x-www-form-urlencoded" in ctype and body:
        q = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        if "Action" in q:
            return q["Action"][0]
    bare = path.split("?")[0]
    for svc, verb, pattern, action in REST_ACTIONS:
        if svc == service and verb == method and re.match(pattern, bare):
            return action
    return bare


def merge(world: World, table: dict, doc: dict, convert=lambda v: v) -> dict:
    """Apply a control document to one of the router's tables: a value sets
    its key, `null` removes it. Returns a copy of the table."""
    with world.lock:
        for key, value in doc.items():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = convert(value)
        return dict(table)


def make_handler(world: World):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: tests read the call log instead
            pass

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, value) -> None:
            self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

        def do_GET(self):
            self._dispatch("GET")

        def do_POST(self):
            self._dispatch("POST")

        def do_PUT(self):
            self._dispatch("PUT")

        def do_DELETE(self):
            self._dispatch("DELETE")

        def do_HEAD(self):
            self._dispatch("HEAD")

        def _dispatch(self, method: str) -> None:
            body = self._body()
            path = self.path
            if path.startswith("/_handover/"):
                return self._control(method, path, body)
            if method == "POST" and path.startswith("/2015-03-31/functions/") and path.endswith("/invocations"):
                return self._invoke(path, body)
            service, region = service_region(self.headers)
            action = action_of(self.headers, path, body, service, method)
            caller = caller_of(self.headers)
            target = target_of(self.headers, body)
            with world.lock:
                world.calls.append({"service": service, "region": region, "action": action,
                                    "target": target, "caller": caller, "t": time.time()})
                key = f"{service}:{region}" if f"{service}:{region}" in world.faults else f"{service}:*"
                fault = world.faults.get(key)
                if fault and fault.get("caller") and fault["caller"] != caller:
                    fault = None
                if fault and fault.get("target") and fault["target"] != target:
                    fault = None
                if fault and "count" in fault:
                    # A fault for the next N matching calls only.
                    fault["count"] -= 1
                    if fault["count"] <= 0:
                        world.faults.pop(key, None)
            if fault:
                if fault.get("mode") == "timeout":
                    time.sleep(float(fault.get("seconds", 30)))
                    self.close_connection = True
                    return
                if fault.get("mode") == "error":
                    if service in ("dynamodb", "ssm", "states", "secretsmanager", "logs", "bedrock"):
                        return self._send(503, b'{"__type":"ServiceUnavailable","message":"injected fault"}',
                                          {"Content-Type": "application/x-amz-json-1.0"})
                    return self._send(503, b'<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceUnavailable'
                                           b'</Code><Message>injected fault</Message></Error>'
                                           b'<RequestId>handover-fault</RequestId></ErrorResponse>',
                                      {"Content-Type": "text/xml"})
            if service == "route53":
                m = re.match(r"^/2013-04-01/healthcheck/([^/]+)/status$", path.split("?")[0])
                if m and method == "GET":
                    return self._health_status(m.group(1))
                if path.startswith("/2013-04-01/testdnsanswer") and method == "GET":
                    return self._test_dns_answer(path)
            if service == "bedrock":
                m = re.match(r"^/model/([^/]+)/converse$", path.split("?")[0])
                if m and method == "POST":
                    return self._converse(urllib.parse.unquote(m.group(1)), body)
            if service == "dynamodb":
                with world.dynamodb:
                    return self._proxy(method, path, body)
            self._proxy(method, path, body)

        # -- moto -------------------------------------------------------------
        def _proxy(self, method: str, path: str, body: bytes) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", world.moto_port, timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "content-length")}
            conn.request(method, path, body=body if body else None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            out = {k: v for k, v in resp.getheaders()
                   if k.lower() not in ("transfer-encoding", "connection", "content-length")}
            conn.close()
            self._send(resp.status, data, out)

        def _moto_json(self, method: str, path: str, headers: dict, body: bytes = b""):
            conn = http.client.HTTPConnection("127.0.0.1", world.moto_port, timeout=30)
            conn.request(method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            return resp.status, data

        # -- Lambda -----------------------------------------------------------
        def _invoke(self, path: str, body: bytes) -> None:
            if not world.lambda_upstream:
                return self._json(502, {"Type": "Service", "message": "no lambda upstream configured"})
            name = urllib.parse.unquote(path[len("/2015-03-31/functions/"):-len("/invocations")])
            name = name.split(":function:")[-1].split(":")[0]  # ARN or plain name -> binary name
            up = urllib.parse.urlparse(world.lambda_upstream)
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=900)
            with world.lock:
                world.calls.append({"service": "lambda", "region": "", "action": f"Invoke:{name}", "t": time.time()})
            try:
                conn.request("POST", f"/2015-03-31/functions/{name}/invocations", body=body,
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
            except OSError as e:
                return self._json(502, {"Type": "Service", "message": f"lambda upstream: {e}"})
            finally:
                conn.close()
            headers = {"Content-Type": "application/json", "X-Amz-Executed-Version": "$LATEST"}
            if resp.status >= 400:
                # Real Lambda reports a function error as 200 + X-Amz-Function-Error.
                headers["X-Amz-Function-Error"] = "Unhandled"
                try:
                    err = json.loads(data)
                    data = json.dumps({"errorType": err.get("errorType", "Unknown"),
                                       "errorMessage": err.get("errorMessage", "")}).encode()
                except ValueError:
                    data = json.dumps({"errorType": "Handover.Fatal",
                                       "errorMessage": data.decode("utf-8", "replace")}).encode()
            self._send(200, data, headers)

        # -- Route 53 behaviour -----------------------------------------------
        def _health_status(self, check_id: str) -> None:
            with world.lock:
                healthy = world.health.get(check_id)
            if healthy is None:
                return self._proxy("GET", self.path, b"")
            status = "Success: HTTP Status Code 200, OK" if healthy else "Failure: Connection timed out"
            observations = "".join(
                f"<HealthCheckObservation><Region>{r}</Region><IPAddress>192.0.2.{i}</IPAddress>"
                f"<StatusReport><Status>{escape(status)}</Status>"
                f"<CheckedTime>{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}</CheckedTime>"
                f"</StatusReport></HealthCheckObservation>"
                for i, r in enumerate(["us-east-1", "us-west-1", "eu-west-1", "ap-southeast-1",
                                       "ap-northeast-1", "sa-east-1", "us-west-2", "ap-southeast-2"], 1)
            )
            body = ('<?xml version="1.0" encoding="UTF-8"?>'
                    '<GetHealthCheckStatusResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/">'
                    f"<HealthCheckObservations>{observations}</HealthCheckObservations>"
                    "</GetHealthCheckStatusResponse>")
            self._send(200, body.encode(), {"Content-Type": "text/xml"})

        def _test_dns_answer(self, path: str) -> None:
            q = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)
            zone = q.get("hostedzoneid", [""])[0]
            name = q.get("recordname", [""])[0].rstrip(".") + "."
            rtype = q.get("recordtype", ["CNAME"])[0]
            status, data = self._moto_json("GET", f"/2013-04-01/hostedzone/{zone}/rrset", dict(self.headers))
            if status != 200:
                return self._send(status, data, {"Content-Type": "text/xml"})
            answers = resolve(data.decode(), name, rtype, world)
            recs = "".join(f"<RecordDataEntry>{escape(a)}</RecordDataEntry>" for a in answers)
            code = "NOERROR" if answers else "NXDOMAIN"
            body = ('<?xml version="1.0" encoding="UTF-8"?>'
                    '<TestDNSAnswerResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/">'
                    "<Nameserver>ns-1.awsdns-00.org</Nameserver>"
                    f"<RecordName>{escape(name)}</RecordName><RecordType>{rtype}</RecordType>"
                    f"<RecordData>{recs}</RecordData><ResponseCode>{code}</ResponseCode>"
                    "<Protocol>UDP</Protocol></TestDNSAnswerResponse>")
            self._send(200, body.encode(), {"Content-Type": "text/xml"})

        def _converse(self, model_id: str, body: bytes) -> None:
            """Converse's answer shape; the text is the test's, or says no model ran."""
            try:
                request = json.loads(body)
            except ValueError:
                return self._send(400, b'{"message":"request body is not JSON"}',
                                  {"Content-Type": "application/json",
                                   "x-amzn-ErrorType": "ValidationException"})
            with world.lock:
                world.converse.setdefault(model_id, []).append(request)
                configured = world.models.get(model_id)
            if configured and "text" in configured:
                text = configured["text"]
            else:
                text = ("Local Bedrock stand-in: no model ran. The explanation step called Converse "
                        f"with {len(json.dumps(request))} bytes of diagnosis; in AWS a model's "
                        "advisory text would appear here.")
            answer = {
                "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0},
                "metrics": {"latencyMs": 0},
            }
            self._json(200, answer)

        # -- control ----------------------------------------------------------
        def _control(self, method: str, path: str, body: bytes) -> None:
            doc = json.loads(body) if body else {}
            if path == "/_handover/faults" and method == "POST":
                return self._json(200, merge(world, world.faults, doc))
            if path == "/_handover/health" and method == "POST":
                return self._json(200, merge(world, world.health, doc, bool))
            if path == "/_handover/calls" and method == "GET":
                with world.lock:
                    return self._json(200, list(world.calls))
            if path == "/_handover/lambda" and method == "POST":
                with world.lock:
                    world.lambda_upstream = doc.get("upstream")
                return self._json(200, {"upstream": world.lambda_upstream})
            if path == "/_handover/model" and method == "POST":
                return self._json(200, merge(world, world.models, doc))
            if path == "/_handover/model" and method == "GET":
                with world.lock:
                    return self._json(200, world.converse)
            if path == "/_handover/sns" and method == "POST":
                with world.lock:
                    world.sns.append(doc)
                return self._json(200, {})
            if path == "/_handover/sns" and method == "GET":
                with world.lock:
                    return self._json(200, list(world.sns))
            if path == "/_handover/reset" and method == "POST":
                world.reset()
                return self._json(200, {})
            self._json(404, {"message": f"unknown control {method} {path}"})

    return Handler


def resolve(rrset_xml: str, name: str, rtype: str, world: World) -> list[str]:
    """Answer a query the way Route 53 does for simple and failover records."""
    import xml.etree.ElementTree as ET

    ns = {"r": "https://route53.amazonaws.com/doc/2013-04-01/"}
    root = ET.fromstring(rrset_xml)
    primary, secondary, simple = [], [], []
    for rs in root.iter("{%s}ResourceRecordSet" % ns["r"]):
        if (rs.findtext("r:Name", "", ns) or "").rstrip(".") + "." != name:
            continue
        if rs.findtext("r:Type", "", ns) != rtype:
            continue
        values = [v.text or "" for v in rs.iter("{%s}Value" % ns["r"])]
        alias = rs.find("r:AliasTarget", ns)
        if alias is not None:
            values = [alias.findtext("r:DNSName", "", ns)]
        check = rs.findtext("r:HealthCheckId", "", ns)
        with world.lock:
            healthy = world.health.get(check, True) if check else True
        failover = rs.findtext("r:Failover", "", ns)
        entry = (values, healthy)
        if failover == "PRIMARY":
            primary.append(entry)
        elif failover == "SECONDARY":
            secondary.append(entry)
        else:
            simple.append(entry)
    if simple:
        return simple[0][0]
    for values, healthy in primary:
        if healthy:
            return values
    for values, _ in secondary:
        return values
    # Route 53 answers with the primary when every record is unhealthy.
    return primary[0][0] if primary else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--lambda-upstream", default=os.environ.get("HANDOVER_LAMBDA_UPSTREAM"))
    parser.add_argument("--port", type=int, default=0, help="router port (0: a free one)")
    args = parser.parse_args()

    router_port = args.port or free_port()
    moto_port = free_port()
    # moto's Step Functions interpreter calls Lambda at localhost:$MOTO_PORT: the router.
    os.environ["MOTO_PORT"] = str(router_port)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")

    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    patch_promote_read_replica()
    patch_send_task_failure_cause()
    from moto.server import ThreadedMotoServer

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
    moto.start()
    conn = http.client.HTTPConnection("127.0.0.1", moto_port, timeout=10)
    conn.request("POST", "/moto-api/config", body=json.dumps({"stepfunctions": {"execute_state_machine": True}}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    if resp.status >= 300:
        print(f"moto config failed: {resp.status}", file=sys.stderr)
        return 1

    world = World(moto_port, args.lambda_upstream)
    server = ThreadingHTTPServer(("127.0.0.1", router_port), make_handler(world))
    server.daemon_threads = True

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ready = {"endpoint": f"http://127.0.0.1:{router_port}", "moto": f"http://127.0.0.1:{moto_port}",
             "pid": os.getpid()}
    tmp = args.ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
    os.replace(tmp, args.ready_file)
    server.serve_forever()
    moto.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

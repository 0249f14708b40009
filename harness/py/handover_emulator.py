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
  - API Gateway in front of the HTTP API routes the template puts behind
    ``AWS_IAM`` (``POST /_handover/apigw`` registers them, read from the
    template by the harness): a request signed with SigV4 for
    ``execute-api`` is authenticated against the credentials moto issued
    (an IAM user's access key, or an ``sts:AssumeRole`` session), its
    signature and its date checked as API Gateway checks them, and the
    function gets the payload 2.0 event with
    ``requestContext.authorizer.iam`` naming the principal (see
    ``api_gateway_event``);
  - everything else goes to moto unchanged.

Control endpoints (JSON): ``POST /_handover/faults``, ``POST /_handover/health``,
``POST /_handover/lambda`` (``{"upstream": "http://127.0.0.1:PORT"}`` for every
function, or ``{"upstreams": {"<binary>": "http://127.0.0.1:PORT"}}``, one
runtime per function: a function not named there is not found, as in Lambda),
``POST /_handover/apigw`` (``{"routes": [{"method", "path", "function", "auth"}]}``),
``POST /_handover/replication`` (``{"<db id>": {"status", "message"}}``: a
replica's read replication status in DescribeDBInstances' StatusInfos),
``POST /_handover/maintenance`` (``{"<db id>": [pending actions]}``: RDS's
DescribePendingMaintenanceActions, which moto lacks),
IAM's SimulatePrincipalPolicy (moto lacks it too) is answered from the roles
in moto's IAM: their inline and attached policies and permissions boundary,
evaluated by ``evaluate_policies`` as IAM's policy evaluation logic does,
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
import base64
import calendar
import datetime
import hashlib
import hmac
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


# How long AWS takes where Handover's safety depends on it. Zero means moto's
# instant answer; tests and drills set realistic (compressed) values through
# ``POST /_handover/realism``. See docs/explanation/emulated-world.md.
REALISM_DEFAULTS = {
    # PromoteReadReplica: S stays `modifying`, then `rebooting`, and only then
    # becomes a standalone `available` instance without a replication source.
    "promote_modifying_s": 0.0,
    "promote_rebooting_s": 0.0,
    # PromoteReadReplica accepted, but DescribeDBInstances still shows the
    # available replica of P for this long: a second call is refused
    # (InvalidDBInstanceState) while the describe says nothing happened.
    "promote_stale_s": 0.0,
    # ModifyDBInstance security groups: new groups show `adding`, old ones
    # `removing`, for this long before the membership is `active`.
    "sg_pending_s": 0.0,
    # RebootDBInstance: `rebooting` for this long, then `available`, with
    # the event "DB instance restarted" (RDS-EVENT-0006). The engine shuts
    # down as the reboot begins: PostgreSQL's fast shutdown ends every
    # session at once. Never instant: RDS answers the call with the
    # instance `rebooting`.
    "reboot_s": 0.3,
    # RebootDBInstance accepted, but DescribeDBInstances still shows
    # `available` for this long before the reboot begins, as users report
    # of RDS: a fence that trusts the first `available` is fooled.
    "reboot_stale_s": 0.0,
    # ModifyDBInstance NewDBInstanceIdentifier: `renaming` for this long; the
    # instance's endpoint changes with its name, and its engine restarts.
    "rename_s": 0.0,
    # The first automated backup of a promoted instance with backups on
    # (PromoteReadReplica docs: "backups are taken based on your backup
    # settings" once promoted). It starts as the promotion ends and finishes
    # this long after, with "Backing up DB instance" and "Finished DB
    # instance backup" events and an automated snapshot. Zero: none is taken.
    # The status stays `available`. RDS documents no status for this backup;
    # if it showed `backing-up`, the world would be kinder than AWS here.
    "first_backup_s": 0.0,
    # Route 53 ChangeResourceRecordSets: the change is PENDING for this long,
    # then GetChange says INSYNC (Route 53 API Reference, GetChange). The
    # scope is a hosted zone ID (bare, as moto issues it) or "*". The record
    # answers the new value at once.
    "route53_insync_s": 0.0,
}
# DB instance identifier -> the PostgreSQL server behind it ({"port": n}), for
# instances whose database is real: a reboot restarts the engine, so every
# session on that server ends (``POST /_handover/databases``). With
# ``"promote": true`` the server is a streaming replica, and PromoteReadReplica
# promotes it (``pg_promote``) before the instance shows `available`.
DATABASES: dict[str, dict] = {}
# (Region, DB instance identifier) -> the port its endpoint had when it was
# renamed away: RDS derives an endpoint from the identifier, so a new instance
# created with that identifier answers where the old one did.
ENDPOINTS: dict[tuple[str, str], int] = {}
# Region -> the tls/ directory of a real server there: its CA signs every
# certificate in the Region, as an RDS Region's CA does.
REGION_CA: dict[str, str] = {}
# DB instance identifier -> the read replication status RDS shows for that
# replica, {"status": ..., "message": ...} (``POST /_handover/replication``).
# A replica not listed is `replicating`.
REPLICATION: dict[str, dict] = {}
# The read replication statuses RDS documents (DBInstanceStatusInfo).
REPLICATION_STATUSES = ("replicating", "replication stop point set", "replication stop point reached",
                        "error", "stopped", "terminated")
# Directories of the servers the emulator built itself: stopped at exit.
BUILT: list[str] = []
# Scope ("*" or one DB instance identifier) -> the settings above, so tests
# sharing the emulator can each make their own instances realistic.
REALISM: dict[str, dict] = {"*": dict(REALISM_DEFAULTS)}
RDS_LOCK = threading.Lock()


def realism(ident: str, key: str) -> float:
    scope = REALISM.get(ident) or REALISM["*"]
    return float(scope.get(key, REALISM["*"][key]))


def patch_promote_read_replica() -> None:
    """Make moto's PromoteReadReplica behave like RDS.

    AWS (RDS User Guide, "Promoting a read replica to be a standalone DB
    instance"): the call returns at once with the instance `modifying`; it then
    reboots and becomes `available` as a standalone instance, and only then do
    DescribeDBInstances stop returning ReadReplicaSourceDBInstanceIdentifier
    and the source stop listing it in ReadReplicaDBInstanceIdentifiers. A
    promotion asked of an instance that is not an available read replica is
    refused with InvalidDBInstanceState. moto 5.2.5 flips an internal flag at
    once, keeps both links and accepts any number of calls. This patch gives
    the status sequence (timed by ``REALISM``), removes the links at the end,
    and refuses a second promotion; production logic is unchanged.
    """
    import copy

    from moto.rds import models
    from moto.rds.exceptions import DBInstanceNotFoundError, InvalidDBInstanceStateFault

    original = models.RDSBackend.promote_read_replica

    def finish(backend, database, source_id, db_kwargs) -> None:
        real = DATABASES.get(database.db_instance_identifier)
        if real and real.get("promote"):
            # The engine leaves recovery: it replays what it received and
            # takes writes from here on.
            try:
                psql(real, "SELECT pg_promote(true, 60)")
            except Exception as e:  # noqa: BLE001 (logged: a world that cannot promote shows in verify)
                print(f"promoting the database of {database.db_instance_identifier}: {e}", flush=True)
        with RDS_LOCK:
            original(backend, db_kwargs)
            if source_id:
                try:
                    source = backend.find_db_from_id(source_id)
                    for ref in (database.db_instance_arn, database.db_instance_identifier):
                        if ref in source.replicas:
                            source.replicas.remove(ref)
                except Exception:  # the source may be gone (P's Region lost)
                    pass
            database.source_db_instance_identifier = None
            database.status = "available"
            database._handover_promoting = False
        first_backup(database)

    def first_backup(database) -> None:
        ident = database.db_instance_identifier
        seconds = realism(ident, "first_backup_s")
        if seconds <= 0 or int(getattr(database, "backup_retention_period", 0) or 0) <= 0:
            return
        with RDS_LOCK:
            database.add_event("DB_INSTANCE_BACKUP_START")

        def done() -> None:
            with RDS_LOCK:
                if database.backend.databases.get(ident) is not database:
                    return  # the instance was deleted or replaced meanwhile
                stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S")
                try:
                    database.backend.create_auto_snapshot(ident, f"rds:{ident}-{stamp}")
                except Exception as e:  # noqa: BLE001 (logged: the report then shows no backup)
                    print(f"the first backup of {ident}: {e}", flush=True)
                    return
                database.add_event("DB_INSTANCE_BACKUP_FINISH")

        threading.Timer(seconds, done).start()

    def promote_read_replica(self, db_kwargs):  # type: ignore[no-untyped-def]
        ident = db_kwargs["db_instance_identifier"]
        database = self.databases.get(ident)
        if database is None:
            raise DBInstanceNotFoundError(ident)
        with RDS_LOCK:
            if getattr(database, "_handover_promoting", False) or database.status != "available":
                raise InvalidDBInstanceStateFault(f"DB instance {ident} is not in available state.")
            if not database.is_replica:
                raise InvalidDBInstanceStateFault(f"DB instance {ident} is not a read replica.")
            source_id = getattr(database, "source_db_instance_identifier", None)
            modifying = realism(ident, "promote_modifying_s")
            rebooting = realism(ident, "promote_rebooting_s")
            stale = realism(ident, "promote_stale_s")
            if modifying + rebooting + stale > 0:
                database._handover_promoting = True
                answer = copy.copy(database)
                answer.status = "modifying"

                def begin() -> None:
                    with RDS_LOCK:
                        database.status = "modifying"

                def reboot() -> None:
                    with RDS_LOCK:
                        database.status = "rebooting"
                    real = DATABASES.get(ident)
                    if real:  # the promotion's reboot ends every session
                        try:
                            end_sessions(real)
                        except Exception as e:  # noqa: BLE001 (logged; the promotion goes on)
                            print(f"ending sessions of {ident}: {e}", flush=True)

                if stale > 0:
                    threading.Timer(stale, begin).start()
                else:
                    database.status = "modifying"
                threading.Timer(stale + modifying, reboot).start()
                threading.Timer(stale + modifying + rebooting, finish, (self, database, source_id, db_kwargs)).start()
                return answer
        finish(self, database, source_id, db_kwargs)
        return database

    models.RDSBackend.promote_read_replica = promote_read_replica


def postgres_sh(*args: str, env: dict | None = None) -> str:
    """Run scripts/postgres.sh (the harness's PostgreSQL world) and return its output."""
    import subprocess

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "postgres.sh")
    out = subprocess.run([script, *args], check=True, capture_output=True, text=True, timeout=300,
                         env={**os.environ, **(env or {})})
    return out.stdout.strip()


def patch_create_db_instance_read_replica() -> None:
    """Make CreateDBInstanceReadReplica build a replica, as RDS does.

    AWS (RDS User Guide, "Creating a read replica"; API Reference,
    CreateDBInstanceReadReplica): the call returns with the new instance
    `creating`; RDS snapshots the source and starts streaming from it, and
    only then is the replica `available`. An identifier in use is refused
    with DBInstanceAlreadyExists. moto 5.2.5 answers with a copy of the
    source, `available` at once, and silently replaces an instance that
    already had the identifier. This patch refuses a taken identifier and,
    when the source has a real database (``DATABASES`` with its directory),
    builds the replica for real: ``scripts/postgres.sh standby`` (a base
    backup of the source, then streaming), its certificate signed by the
    Region's CA and naming the Region's endpoints, on the port the
    identifier's endpoint had (``ENDPOINTS``). The instance stays `creating`
    until the server is up, and the router promotes it with
    PromoteReadReplica like any real replica. Production logic is unchanged.
    """
    from moto.rds import models
    from moto.rds.exceptions import DBInstanceAlreadyExists

    original = models.RDSBackend.create_db_instance_read_replica

    def create(self, db_kwargs):  # type: ignore[no-untyped-def]
        ident = db_kwargs["db_instance_identifier"]
        with RDS_LOCK:
            if ident in self.databases:
                raise DBInstanceAlreadyExists()
            REPLICATION.pop(ident, None)  # a new replica starts replicating
            replica = original(self, db_kwargs)
            source_ident = db_kwargs["source_db_instance_identifier"].split(":")[-1]
            source = DATABASES.get(source_ident)
            # A real database already registered under the identifier is
            # the harness's own (it rebuilds S itself after a reset): the
            # router builds none beside it.
            if not (source and source.get("dir")) or ident in DATABASES:
                return replica
            replica.status = "creating"
            region = replica.region
        directory = os.path.join(os.path.dirname(source["dir"]), f"pg-{ident}")
        port = ENDPOINTS.pop((region, ident), None) or free_port()

        def build() -> None:
            BUILT.append(directory)
            env = {"PG_TLS_NAME": f"*.aaaaaaaaaa.{region}.rds.amazonaws.com"}
            if region in REGION_CA:
                env["PG_TLS_CA"] = REGION_CA[region]
            try:
                postgres_sh("standby", directory, str(source["port"]), source["dir"], str(port), env=env)
            except Exception as e:  # noqa: BLE001 (logged: RDS shows the instance failed)
                print(f"building the replica {ident}: {e} {getattr(e, 'stderr', '')}", flush=True)
                with RDS_LOCK:
                    replica.status = "failed"
                return
            with RDS_LOCK:
                DATABASES[ident] = {"port": port, "promote": True, "dir": directory, "region": region}
                REGION_CA.setdefault(region, os.path.join(directory, "tls"))
                replica.status = "available"

        threading.Thread(target=build, daemon=True).start()
        return replica

    models.RDSBackend.create_db_instance_read_replica = create


def patch_rename_db_instance() -> None:
    """Make a rename move the instance's endpoint, as in RDS.

    AWS (RDS User Guide, "Renaming a DB instance"): ModifyDBInstance with
    NewDBInstanceIdentifier and ApplyImmediately renames the instance; its
    endpoint changes with the name, the instance is `renaming` and then
    `available`, and the old name can be given to a new instance (the usual
    way to replace one in place). moto 5.2.5 renames at once and keeps the
    endpoint's server where it was. For an instance with a real database,
    this patch restarts the server on a new port (every session ends) and
    keeps the old port for the next instance that takes the old name.
    """
    from moto.rds import models
    from moto.rds.exceptions import DBInstanceAlreadyExists, InvalidDBInstanceStateFault

    original = models.RDSBackend.modify_db_instance

    def modify_db_instance(self, db_instance_identifier, db_kwargs):  # type: ignore[no-untyped-def]
        new = db_kwargs.get("new_db_instance_identifier")
        if not new or new == db_instance_identifier:
            return original(self, db_instance_identifier, db_kwargs)
        with RDS_LOCK:
            database = self.databases.get(db_instance_identifier)
            if database is not None and database.status != "available":
                raise InvalidDBInstanceStateFault(f"DB instance {db_instance_identifier} is not in available state.")
            if new in self.databases:
                raise DBInstanceAlreadyExists()
        result = original(self, db_instance_identifier, db_kwargs)
        with RDS_LOCK:
            if db_instance_identifier in REPLICATION:  # the status follows the instance
                REPLICATION[new] = REPLICATION.pop(db_instance_identifier)
            real = DATABASES.pop(db_instance_identifier, None)
            seconds = realism(new, "rename_s")
            if real or seconds > 0:
                result.status = "renaming"
        if real:
            ENDPOINTS[(result.region, db_instance_identifier)] = real["port"]
            moved = dict(real, port=free_port())
            try:
                postgres_sh("move", real["dir"], str(moved["port"]))
            except Exception as e:  # noqa: BLE001 (logged: the old server is gone from the world)
                print(f"moving the database of {db_instance_identifier}: {e} {getattr(e, 'stderr', '')}", flush=True)
            with RDS_LOCK:
                DATABASES[new] = moved

        def done() -> None:
            with RDS_LOCK:
                if result.status == "renaming":
                    result.status = "available"

        threading.Timer(max(seconds, 0.0), done).start()
        return result

    models.RDSBackend.modify_db_instance = modify_db_instance


def psql(database: dict, statement: str) -> None:
    """Run one statement as the superuser on a local PostgreSQL."""
    import glob
    import subprocess

    binary = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))[-1:] or ["psql"]
    subprocess.run(binary + ["-h", "127.0.0.1", "-p", str(database["port"]), "-U", "postgres", "-d", "postgres",
                             "-qAtc", statement],
                   check=True, capture_output=True, timeout=70)


def end_sessions(database: dict) -> None:
    """End every client session on a local PostgreSQL, as an engine restart does."""
    psql(database, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                   "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")


def patch_reboot_db_instance() -> None:
    """Make RebootDBInstance reboot, as in RDS.

    AWS (RDS API Reference, RebootDBInstance; RDS User Guide, "Rebooting a DB
    instance"): the call returns with the instance `rebooting`, the database
    engine restarts, which ends every connection, and the instance is
    `available` again; an instance that is not `available` is refused with
    InvalidDBInstanceState. RDS then reports "DB instance restarted"
    (RDS-EVENT-0006; a Single-AZ instance reports only that one). moto 5.2.5
    answers without changing anything. For an instance with a real database
    behind it (``DATABASES``), this patch ends its sessions as the reboot
    begins. With ``reboot_stale_s``, describes show `available` for that
    long after the call was accepted, before the reboot begins.
    """
    import copy

    from moto.rds import models
    from moto.rds.exceptions import DBInstanceNotFoundError, InvalidDBInstanceStateFault

    models.Event.EVENT_MAP.setdefault(
        "DB_INSTANCE_RESTARTED", {"Categories": ["availability"], "Message": "DB instance restarted"}
    )

    def reboot_db_instance(self, db_instance_identifier):  # type: ignore[no-untyped-def]
        database = self.databases.get(db_instance_identifier)
        if database is None:
            raise DBInstanceNotFoundError(db_instance_identifier)
        stale = max(realism(db_instance_identifier, "reboot_stale_s"), 0.0)
        seconds = max(realism(db_instance_identifier, "reboot_s"), 0.05)
        with RDS_LOCK:
            if database.status != "available" or getattr(database, "handover_reboot_pending", False):
                raise InvalidDBInstanceStateFault(f"DB instance {db_instance_identifier} is not in available state.")
            database.handover_reboot_pending = True
            real = DATABASES.get(db_instance_identifier)
            answer = copy.copy(database)
            answer.status = "rebooting"
            if stale == 0:
                database.status = "rebooting"

        def begin() -> None:
            with RDS_LOCK:
                database.status = "rebooting"
            if real:
                end_sessions(real)

        def back() -> None:
            with RDS_LOCK:
                if database.status == "rebooting":
                    database.status = "available"
                database.handover_reboot_pending = False
                database.add_event("DB_INSTANCE_RESTARTED")

        threading.Timer(stale, begin).start()
        threading.Timer(stale + seconds, back).start()
        return answer

    models.RDSBackend.reboot_db_instance = reboot_db_instance


def patch_security_group_membership() -> None:
    """Make a security-group change take time, as in RDS.

    AWS (RDS API Reference, VpcSecurityGroupMembership): after ModifyDBInstance
    with VpcSecurityGroupIds, DescribeDBInstances lists the new groups as
    `adding` and the old ones as `removing` until the change is applied, then
    each as `active`. moto 5.2.5 shows the new set `active` at once. This
    patch keeps the old set visible as `removing` for ``REALISM["sg_pending_s"]``.
    """
    from moto.rds import models

    original = models.RDSBackend.modify_db_instance

    from moto.rds.exceptions import InvalidDBInstanceStateFault

    def modify_db_instance(self, db_instance_identifier, db_kwargs):  # type: ignore[no-untyped-def]
        database = self.databases.get(db_instance_identifier)
        if database is not None and database.status == "rebooting":
            # RDS refuses to modify an instance that is not available.
            raise InvalidDBInstanceStateFault(f"DB instance {db_instance_identifier} is not in available state.")
        before = list(database.vpc_security_group_ids) if database is not None else None
        result = original(self, db_instance_identifier, db_kwargs)
        pending = realism(db_instance_identifier, "sg_pending_s")
        if before is not None and pending > 0 and list(result.vpc_security_group_ids) != before:
            with RDS_LOCK:
                result._handover_sg = {"until": time.time() + pending, "old": before}
        return result

    def membership(self):  # type: ignore[no-untyped-def]
        with RDS_LOCK:
            change = getattr(self, "_handover_sg", None)
        now = list(self.vpc_security_group_ids)
        if change and time.time() < change["until"]:
            out = [{"Status": "active" if g in change["old"] else "adding", "VpcSecurityGroupId": g} for g in now]
            out += [{"Status": "removing", "VpcSecurityGroupId": g} for g in change["old"] if g not in now]
            return out
        return [{"Status": "active", "VpcSecurityGroupId": g} for g in now]

    models.RDSBackend.modify_db_instance = modify_db_instance
    models.DBInstance.vpc_security_group_membership_list = property(membership)


def patch_replication_status() -> None:
    """Show a replica's replication status, as RDS does.

    AWS (RDS API Reference, DBInstanceStatusInfo): DescribeDBInstances lists
    a read replica's `StatusInfos`, with `StatusType` "read replication" and
    `Status` replicating, error, stopped or terminated (and two stop-point
    values), `Normal` false when replication is not running, and RDS's
    `Message`. For PostgreSQL
    this is how RDS says replication stopped: its ReplicaLag has no -1.
    moto 5.2.5 lists no StatusInfos. This patch lists one for each replica,
    from ``REPLICATION`` (default `replicating`).
    """
    from moto.rds import models

    def status_infos(self):  # type: ignore[no-untyped-def]
        if not getattr(self, "source_db_instance_identifier", None):
            return None  # not a replica: RDS lists no StatusInfos
        shown = REPLICATION.get(self.db_instance_identifier) or {}
        status = str(shown.get("status", "replicating"))
        normal = status not in ("error", "stopped", "terminated")
        info = {"StatusType": "read replication", "Normal": normal, "Status": status}
        if shown.get("message"):
            info["Message"] = str(shown["message"])
        return [info]

    models.DBInstance.status_infos = property(status_infos)


def patch_route53_insync() -> None:
    """Make a Route 53 change PENDING before it is INSYNC, as Route 53 does.

    AWS (Route 53 API Reference, ChangeResourceRecordSets and GetChange): the
    call answers PENDING with a change ID, and GetChange answers INSYNC once
    every authoritative name server has the change ("generally within 60
    seconds"). moto 5.2.5 answers INSYNC at once, with one fixed change ID for
    every change. Where the zone's ``route53_insync_s`` is set, this patch
    gives each change its own ID and keeps it PENDING that long. Elsewhere
    moto's answer stands. GetChange answers INSYNC for any ID it did not
    issue, as moto does.
    """
    from moto.core.utils import utcnow
    from moto.route53.responses import Route53

    original = Route53.change_resource_record_sets
    submitted: dict[str, float] = {}
    counter = iter(range(1, 1 << 62))

    def change_resource_record_sets(self):  # type: ignore[no-untyped-def]
        result = original(self)
        zone = str(self._get_param("HostedZoneId") or "").rsplit("/", 1)[-1]
        pending = realism(zone, "route53_insync_s")
        if pending <= 0:
            return result
        change_id = f"/change/C{next(counter):012d}HANDOVER"
        info = result.result["ChangeInfo"]
        submitted[change_id] = (time.monotonic() + pending, info["SubmittedAt"])
        info["Id"], info["Status"] = change_id, "PENDING"
        return result

    def get_change(self):  # type: ignore[no-untyped-def]
        from moto.core.responses import ActionResult

        change_id = self._get_param("Id")
        if not change_id.startswith("/change/"):
            change_id = f"/change/{change_id}"
        due, at = submitted.get(change_id, (0.0, utcnow()))
        status = "PENDING" if time.monotonic() < due else "INSYNC"
        return ActionResult({"ChangeInfo": {"Id": change_id, "Status": status, "SubmittedAt": at}})

    Route53.change_resource_record_sets = change_resource_record_sets
    Route53.get_change = get_change


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


# The throttling error each service really answers with (its API reference's
# error list), so the SDK classifies it as AWS's would be classified.
THROTTLE = {
    "dynamodb": (400, "ProvisionedThroughputExceededException"),
    "states": (400, "ThrottlingException"),
    "ssm": (400, "ThrottlingException"),
    "secretsmanager": (400, "ThrottlingException"),
    "logs": (400, "ThrottlingException"),
    "bedrock": (429, "ThrottlingException"),
    "rds": (400, "Throttling"),
    "route53": (400, "Throttling"),
    "monitoring": (400, "Throttling"),
    "elasticloadbalancing": (400, "Throttling"),
    "sts": (400, "Throttling"),
    "sns": (400, "Throttled"),
    "s3": (503, "SlowDown"),
    "lambda": (429, "TooManyRequestsException"),
}

FAULT_MODES = ("throttle", "error", "latency", "timeout", "lost", "kill")


def rule_matches(rule: dict, call: dict, text: str) -> bool:
    """Does a fault rule apply to this call? Every filter the rule sets must hold."""
    for key in ("service", "region", "action", "caller", "target"):
        if rule.get(key) and rule[key] != call.get(key):
            return False
    wanted = rule.get("match")
    if wanted:
        wanted = [wanted] if isinstance(wanted, str) else wanted
        if not any(w in text for w in wanted):
            return False
    return all(w in text for w in rule.get("match_all", []))


# The Regions Route 53's health checkers report from, two checkers each.
CHECKERS = [r for r in ["us-east-1", "us-west-1", "us-west-2", "eu-west-1", "ap-southeast-1",
                        "ap-southeast-2", "ap-northeast-1", "sa-east-1"] for _ in range(2)]


def checker_share(value) -> float:
    """A health control value: a bool, or the share of checkers reporting healthy."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    share = float(value)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"a checker share is between 0 and 1, not {value}")
    return share


def route53_healthy(share: float) -> bool:
    """Route 53 considers an endpoint healthy when more than 18 % of its
    health checkers report it healthy (Route 53 Developer Guide, "How Amazon
    Route 53 determines whether a health check is healthy")."""
    return round(share * len(CHECKERS)) / len(CHECKERS) > 0.18


def check_healthy(check: str, share: float) -> bool:
    """A health check's status as failover routing uses it: the checkers'
    verdict, then the check's own settings (Route 53 API Reference,
    HealthCheckConfig): a `Disabled` check is always healthy, and `Inverted`
    flips the status, so Disabled + Inverted is always unhealthy (how an
    operator stops traffic to a record whatever its endpoint does)."""
    healthy = route53_healthy(share)
    try:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.route53.models import route53_backends

        hc = route53_backends[DEFAULT_ACCOUNT_ID]["global"].health_checks.get(check)
    except Exception:  # noqa: BLE001 (no such check in moto: the checkers decide)
        hc = None
    if hc is not None:
        if hc.disabled:
            healthy = True
        if hc.inverted:
            healthy = not healthy
    return healthy


RESPAWNED: list = []  # processes the router started in place of killed ones


def kill_and_replace(pid: int) -> None:
    """SIGKILL a function process, then start a fresh one of the same binary
    with the same environment, directory and output, as Lambda starts a new
    execution environment after one dies. cargo lambda watch does not restart
    a function whose process was killed, but any process polling its runtime
    API gets the next invocation, so the new one serves the retry (a cold
    start, as in Lambda)."""
    import subprocess

    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.split("=", 1) for kv in f.read().decode("utf-8", "replace").split("\0") if "=" in kv)
        exe = os.readlink(f"/proc/{pid}/exe")
        cwd = os.readlink(f"/proc/{pid}/cwd")
        out = os.readlink(f"/proc/{pid}/fd/1")
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    for _ in range(100):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    break
        except OSError:  # gone (reaped): the race the check exists for
            break
        time.sleep(0.02)
    log = open(out, "ab") if out.startswith("/") and os.path.exists(out) else subprocess.DEVNULL
    RESPAWNED.append(subprocess.Popen([exe], env=env, cwd=cwd, stdout=log, stderr=log,
                                      stdin=subprocess.DEVNULL, start_new_session=True))


def function_processes(name: str, environ_marker: str | None) -> list[int]:
    """PIDs of the function binary `name` that cargo lambda watch started
    (target/<profile>/<name>), optionally only those whose environment holds
    `environ_marker` (e.g. their table's name, when several worlds run)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{entry}/exe")
        except OSError:
            continue
        if not re.search(rf"/target/(debug|release)/{re.escape(name)}$", exe):
            continue
        if environ_marker:
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if environ_marker.encode() not in f.read():
                        continue
            except OSError:
                continue
        pids.append(int(entry))
    return pids


class World:
    """Mutable state of the router: faults, health statuses, call log."""

    def __init__(self, moto_port: int, lambda_upstream: str | None) -> None:
        self.moto_port = moto_port
        self.lambda_upstream = lambda_upstream
        # Function (binary) name -> its own runtime; set, it replaces the above.
        self.lambda_upstreams: dict[str, str] = {}
        self.lock = threading.Lock()
        # "service:region" (or "service:*") -> {"mode": "timeout"|"error", "seconds": n,
        #   "count": n (only the next n calls), "caller": function name (only its calls),
        #   "target": resource name (only calls naming it, e.g. one DB instance)}
        self.faults: dict[str, dict] = {}
        # Fault rules (``POST /_handover/rules``), checked in order after the
        # table above: {"id", "mode": one of FAULT_MODES, filters "service",
        # "region", "action", "caller", "target", "match" (substrings of the
        # path or body: a run's resource names; any one of them),
        # "match_all" (substrings that must all appear), "skip": let the first n
        # matching calls through, "count": fault the next n only, "seconds"
        # (latency, timeout, lost), "environ" (kill: only processes whose
        # environment holds it)}. Each fault applied is logged in fault_log.
        self.rules: list[dict] = []
        self.fault_log: list[dict] = []
        # Function name -> when a kill rule last killed its process: an
        # invocation in flight then ends as Lambda ends it (Runtime.ExitError).
        self.killed: dict[str, float] = {}
        self.health: dict[str, float] = {}  # health check id -> share of checkers reporting healthy
        # "METHOD /path" -> {"function": binary name, "auth": "AWS_IAM"}: the
        # HTTP API routes the router serves as API Gateway does.
        self.routes: dict[str, dict] = {}
        # DB instance identifier -> the maintenance RDS has pending for it, as
        # DescribePendingMaintenanceActions lists it (moto has no such call):
        # [{"action", "description", "current_apply_date", "forced_apply_date",
        #   "auto_applied_after_date", "opt_in_status"}] (dates ISO 8601).
        self.maintenance: dict[str, list] = {}
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
            self.rules.clear()
            self.fault_log.clear()
            self.health.clear()
            self.maintenance.clear()
            REALISM.clear()
            REALISM["*"] = dict(REALISM_DEFAULTS)
            DATABASES.clear()
            REPLICATION.clear()
            ENDPOINTS.clear()
            REGION_CA.clear()
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
    ("eks", "GET", r"^/clusters/[^/]+/node-groups/[^/]+$", "DescribeNodegroup"),
    ("eks", "POST", r"^/clusters/[^/]+/node-groups$", "CreateNodegroup"),
    ("eks", "GET", r"^/clusters/[^/]+$", "DescribeCluster"),
    ("eks", "POST", r"^/clusters$", "CreateCluster"),
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


# -- IAM policy evaluation (SimulatePrincipalPolicy) ---------------------------
# The subset of IAM's policy language Handover's roles use, evaluated as the
# IAM User Guide's "Policy evaluation logic" says: an explicit Deny wins, then
# an Allow, else an implicit deny; a permissions boundary must allow too. A
# condition operator outside the subset raises, so a policy the emulator
# cannot judge is an error, never a guess.

def _glob(pattern: str, value: str, fold: bool) -> bool:
    rx = "^" + ".*".join(re.escape(p).replace(r"\?", ".") for p in pattern.split("*")) + "$"
    return re.match(rx, value, re.IGNORECASE if fold else 0) is not None


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _condition_holds(block: dict, context: dict, missing: set) -> bool:
    for op, tests in block.items():
        qualifier, _, base = op.rpartition(":")
        if_exists = base.endswith("IfExists")
        base = base[: -len("IfExists")] if if_exists else base
        compare = {
            "StringEquals": lambda a, b: a == b,
            "StringNotEquals": lambda a, b: a != b,
            "StringLike": lambda a, b: _glob(b, a, False),
            "StringNotLike": lambda a, b: not _glob(b, a, False),
            "ArnEquals": lambda a, b: a == b,
            "ArnLike": lambda a, b: _glob(b, a, False),
            "Bool": lambda a, b: str(a).lower() == str(b).lower(),
        }.get(base)
        if compare is None or qualifier not in ("", "ForAllValues", "ForAnyValue"):
            raise ValueError(f"the emulator cannot evaluate condition operator {op}")
        negated = base.startswith("StringNot")
        for key, wanted in tests.items():
            wanted = _listed(wanted)
            values = context.get(key.lower())
            if values is None:
                if qualifier == "ForAllValues" or if_exists:
                    continue  # an empty set satisfies ForAllValues
                missing.add(key)
                if negated and qualifier == "":
                    # IAM: a negated operator on a key the request lacks is
                    # true ("Deny unless aws:RequestedRegion is ours" denies
                    # a request that does not say its Region).
                    continue
                return False
            if negated:
                one = lambda v: all(compare(v, w) for w in wanted)  # noqa: E731
            else:
                one = lambda v: any(compare(v, w) for w in wanted)  # noqa: E731
            if qualifier == "ForAllValues":
                ok = all(one(v) for v in values)
            else:
                ok = any(one(v) for v in values)
            if not ok:
                return False
    return True


def evaluate_policies(docs: list, action: str, resource: str, context: dict, missing: set) -> str:
    """`allowed`, `explicitDeny` or `implicitDeny` for one action on one resource."""
    allowed = False
    for doc in docs:
        for st in _listed(doc.get("Statement", [])):
            if "Action" in st:
                hit = any(_glob(a, action, True) for a in _listed(st["Action"]))
            else:
                hit = not any(_glob(a, action, True) for a in _listed(st.get("NotAction", [])))
            if not hit:
                continue
            if "Resource" in st:
                hit = any(_glob(r, resource, False) for r in _listed(st["Resource"]))
            else:
                hit = not any(_glob(r, resource, False) for r in _listed(st.get("NotResource", [])))
            if not hit or not _condition_holds(st.get("Condition", {}), context, missing):
                continue
            if st.get("Effect") == "Deny":
                return "explicitDeny"
            allowed = True
    return "allowed" if allowed else "implicitDeny"


def _members(q: dict, prefix: str) -> list:
    """`Prefix.member.N` values of a Query request, in N's order."""
    found = []
    for k, v in q.items():
        m = re.match(rf"^{re.escape(prefix)}\.member\.(\d+)$", k)
        if m:
            found.append((int(m.group(1)), v[0]))
    return [v for _, v in sorted(found)]


def simulate_principal_policy(body: bytes) -> tuple[int, str]:
    """IAM SimulatePrincipalPolicy (IAM API Reference) for a role in moto's
    IAM: each action of `ActionNames` on each of `ResourceArns` (`*` when
    none), with `ContextEntries`. Returns (status, XML)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends
    q = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    source = q.get("PolicySourceArn", [""])[0]
    actions = _members(q, "ActionNames")
    resources = _members(q, "ResourceArns") or ["*"]
    context = {}
    n = 1
    while f"ContextEntries.member.{n}.ContextKeyName" in q:
        key = q[f"ContextEntries.member.{n}.ContextKeyName"][0]
        context[key.lower()] = _members(q, f"ContextEntries.member.{n}.ContextKeyValues")
        n += 1

    def error(status: int, code: str, message: str) -> tuple[int, str]:
        return status, (f'<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><Error>'
                        f"<Type>Sender</Type><Code>{code}</Code><Message>{escape(message)}</Message>"
                        "</Error><RequestId>handover-simulate</RequestId></ErrorResponse>")

    if not actions:
        return error(400, "ValidationError", "1 validation error detected: Value null at 'actionNames'")
    backend = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    role = next((r for r in backend.roles.values() if r.arn == source), None)
    if role is None:
        return error(404, "NoSuchEntity", f"The role with ARN {source} cannot be found.")

    def document(arn: str) -> dict:
        policy = backend.managed_policies.get(arn)
        if policy is None:
            return {}
        version = next(v for v in policy.versions if v.is_default)
        return json.loads(urllib.parse.unquote(version.document) if version.document.startswith("%") else version.document)

    def parsed(doc) -> dict:
        return doc if isinstance(doc, dict) else json.loads(doc)

    docs = [parsed(d) for d in role.policies.values()]
    docs += [document(arn) for arn in role.managed_policies]
    boundary = getattr(role, "permissions_boundary", None)
    if isinstance(boundary, dict):  # moto keeps {"PermissionsBoundaryArn": ..., ...}
        boundary = boundary.get("PermissionsBoundaryArn")
    members = ""
    for action in actions:
        for resource in resources:
            missing: set = set()
            try:
                decision = evaluate_policies(docs, action, resource, context, missing)
                if decision == "allowed" and boundary:
                    decision = evaluate_policies([document(boundary)], action, resource, context, missing)
            except ValueError as e:
                return error(400, "InvalidInput", str(e))
            missing_xml = "".join(f"<member>{escape(m)}</member>" for m in sorted(missing))
            boundary_xml = ("<PermissionsBoundaryDecisionDetail><AllowedByPermissionsBoundary>"
                            f"{'true' if decision == 'allowed' else 'false'}</AllowedByPermissionsBoundary>"
                            "</PermissionsBoundaryDecisionDetail>") if boundary else ""
            members += ("<member>"
                        f"<EvalActionName>{escape(action)}</EvalActionName>"
                        f"<EvalResourceName>{escape(resource)}</EvalResourceName>"
                        f"<EvalDecision>{decision}</EvalDecision>"
                        "<MatchedStatements/>"
                        f"<MissingContextValues>{missing_xml}</MissingContextValues>"
                        f"{boundary_xml}</member>")
    return 200, ('<SimulatePrincipalPolicyResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/">'
                 "<SimulatePrincipalPolicyResult><IsTruncated>false</IsTruncated>"
                 f"<EvaluationResults>{members}</EvaluationResults></SimulatePrincipalPolicyResult>"
                 "<ResponseMetadata><RequestId>handover-simulate</RequestId></ResponseMetadata>"
                 "</SimulatePrincipalPolicyResponse>")


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


# API Gateway's answers when IAM authorisation refuses a request, as the
# body {"message": ...} it sends (API Gateway Developer Guide, "Control
# access to HTTP APIs with IAM authorization"; the messages are SigV4's
# standard ones, as every AWS service words them).
APIGW_FORBIDDEN = "Forbidden"
APIGW_BAD_SIGNATURE = ("The request signature we calculated does not match the signature you provided. "
                       "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
APIGW_BAD_TOKEN = "The security token included in the request is invalid."
# SigV4: a request dated more than 5 minutes from the server's clock is refused.
SIGV4_SKEW_S = 300
AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/,]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, ?"
                  r"SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$")


def sigv4_principal(method: str, path: str, headers, body: bytes,
                    api_region: str) -> tuple[str | None, str, dict]:
    """Authenticate a SigV4-signed request as API Gateway's IAM authoriser
    does: (principal ARN, "", identity) or (None, API Gateway's message, {}).

    The secret is the one moto issued for the access key (CreateAccessKey or
    AssumeRole); an unknown key or session token is refused, and so is a
    signature computed with anything else, or dated outside SigV4's window."""
    m = AUTH.match(headers.get("Authorization", "").strip())
    if not m:
        return None, APIGW_FORBIDDEN, {}
    key_id, day, region, service, signed, signature = m.groups()
    amz_date = headers.get("X-Amz-Date", "")
    try:
        when = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        return None, APIGW_FORBIDDEN, {}
    if service != "execute-api":
        return None, "Credential should be scoped to correct service: 'execute-api'. ", {}
    if region != api_region:
        return None, "Credential should be scoped to a valid region. ", {}
    if not amz_date.startswith(day):
        return None, APIGW_BAD_SIGNATURE, {}
    if abs(time.time() - when) > SIGV4_SKEW_S:
        now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        return None, f"Signature expired: {amz_date} is now earlier than {now} (5 min.)", {}
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.core.utils import utcnow
    from moto.iam.access_control import create_access_key
    from moto.sts.models import sts_backends
    if any(r.access_key_id == key_id and r.expiration < utcnow()
           for r in sts_backends[DEFAULT_ACCOUNT_ID]["aws"].assumed_roles):
        return None, "The security token included in the request is expired", {}
    try:
        token = headers.get("X-Amz-Security-Token")
        # moto looks the token up by this exact name; HTTP names are case-free.
        key = create_access_key(DEFAULT_ACCOUNT_ID, "aws", key_id,
                                {"X-Amz-Security-Token": token} if token else {})
        secret = key.create_credentials().secret_key
    except Exception:  # noqa: BLE001 (moto's CreateAccessKeyFailure: unknown key or token)
        return None, APIGW_BAD_TOKEN, {}
    names = signed.split(";")
    if "host" not in names:
        return None, APIGW_BAD_SIGNATURE, {}
    bare, _, query = path.partition("?")
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    canonical = "\n".join([
        method,
        urllib.parse.quote(bare, safe="/~"),
        "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}" for k, v in pairs),
        "".join(f"{n}:{' '.join((headers.get(n) or '').split())}\n" for n in names),
        signed,
        hashlib.sha256(body).hexdigest(),
    ])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        return None, APIGW_BAD_SIGNATURE, {}
    arn = key.arn
    identity = {
        "accessKey": key_id,
        "accountId": DEFAULT_ACCOUNT_ID,
        # GetCallerIdentity's UserId: the role's id and the session name for
        # a session (moto keeps no role ids for sessions: the name stands in).
        "callerId": f"AROA{hashlib.sha1(arn.encode()).hexdigest()[:17].upper()}:{arn.rsplit('/', 1)[-1]}"
        if ":assumed-role/" in arn else f"AIDA{hashlib.sha1(arn.encode()).hexdigest()[:17].upper()}",
        "cognitoIdentity": None,
        "principalOrgId": None,
        "userArn": arn,
    }
    identity["userId"] = identity["callerId"]
    return arn, "", identity


def api_gateway_event(route: dict, method: str, path: str, headers, body: bytes, region: str,
                      identity: dict) -> dict:
    """The payload format 2.0 event API Gateway hands a Lambda proxy
    integration (API Gateway Developer Guide, "Create AWS Lambda proxy
    integrations for HTTP APIs"), with ``authorizer.iam`` for an IAM route.
    The same shape as the harness's ``triggers::http_event`` for open routes."""
    api_id = "abc123def4"
    host = f"{api_id}.execute-api.{region}.amazonaws.com"
    now = time.time()
    bare, _, query = path.partition("?")
    hdrs = {k.lower(): v for k, v in headers.items()}
    hdrs.update({"host": host, "x-forwarded-proto": "https", "x-forwarded-port": "443",
                 "x-forwarded-for": "127.0.0.1", "content-length": str(len(body))})
    ctype = hdrs.get("content-type", "").lower()
    text = ctype.startswith("text/") or any(ctype.startswith(t) for t in
                                            ("application/json", "application/xml", "application/javascript"))
    return {
        "version": "2.0",
        "routeKey": f"{method} {bare}",
        "rawPath": bare,
        "rawQueryString": query,
        "headers": hdrs,
        "requestContext": {
            "accountId": "123456789012",  # the API owner's account
            "apiId": api_id,
            "authorizer": {"iam": identity},
            "domainName": host,
            "domainPrefix": api_id,
            "http": {"method": method, "path": bare, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
                     "userAgent": hdrs.get("user-agent", "")},
            "requestId": f"{int(now * 1000):x}-handover",
            "routeKey": f"{method} {bare}",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": body.decode("utf-8", "replace") if text else base64.b64encode(body).decode(),
        "isBase64Encoded": not text,
    }


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
            self._call = None
            body = self._body()
            path = self.path
            if path.startswith("/_handover/"):
                try:
                    return self._control(method, path, body)
                except (ValueError, TypeError, KeyError) as e:
                    return self._json(400, {"message": f"bad control document: {e}"})
            if method == "POST" and path.startswith("/2015-03-31/functions/") and path.endswith("/invocations"):
                return self._invoke(path, body)
            service, region = service_region(self.headers)
            with world.lock:
                routed = f"{method} {path.split('?')[0]}" in world.routes
            if service == "execute-api" or routed:
                return self._api_gateway(method, path, body, region)
            action = action_of(self.headers, path, body, service, method)
            caller = caller_of(self.headers)
            target = target_of(self.headers, body)
            call = {"service": service, "region": region, "action": action,
                    "target": target, "caller": caller, "t": time.time()}
            rule = None
            self._call = call
            with world.lock:
                world.calls.append(call)
                text = path + " " + body.decode("utf-8", "replace")
                for candidate in world.rules:
                    if candidate.get("count", 1) <= 0 or not rule_matches(candidate, call, text):
                        continue
                    if candidate.get("skip", 0) > 0:
                        candidate["skip"] -= 1
                        continue
                    if "count" in candidate:
                        candidate["count"] -= 1
                    rule = candidate
                    applied = {**call, "rule": rule.get("id", ""), "mode": rule["mode"]}
                    world.fault_log.append(applied)
                    break
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
            if rule:
                mode = rule["mode"]
                if mode == "throttle":
                    status, code = THROTTLE.get(service, (400, "ThrottlingException"))
                    return self._error(service, status, code, "Rate exceeded")
                if mode == "error":
                    # A 5xx by default; `status` and `code` make it any
                    # answer, e.g. a 400 the SDK does not retry.
                    return self._error(service, int(rule.get("status", 500)), rule.get("code", "InternalFailure"),
                                       rule.get("message", "We encountered an internal error. Please try again."))
                if mode in ("latency", "timeout"):
                    time.sleep(float(rule.get("seconds", 30 if mode == "timeout" else 1)))
                if mode == "timeout":
                    # The server never saw it: nothing is applied.
                    self.close_connection = True
                    return
                if mode == "lost":
                    # The server acts; its answer never reaches the caller.
                    self._serve(service, method, path, body, deliver=False)
                    time.sleep(float(rule.get("seconds", 0)))
                    self.close_connection = True
                    return
                if mode == "kill":
                    self._serve(service, method, path, body)
                    pids = function_processes(caller, rule.get("environ"))
                    for pid in pids:
                        kill_and_replace(pid)
                    with world.lock:
                        applied["killed"] = pids
                        world.killed[caller] = time.time()
                    return
            self._serve(service, method, path, body)

        def _error(self, service: str, status: int, code: str, message: str) -> None:
            """An AWS error in the service's wire protocol (JSON or XML)."""
            if "json" in self.headers.get("Content-Type", "") or service in ("lambda", "bedrock"):
                return self._send(status, json.dumps({"__type": code, "message": message}).encode(),
                                  {"Content-Type": "application/x-amz-json-1.0", "x-amzn-ErrorType": code})
            if service == "s3":
                return self._send(status, f"<Error><Code>{code}</Code><Message>{message}</Message>"
                                          "<RequestId>handover-fault</RequestId></Error>".encode(),
                                  {"Content-Type": "application/xml"})
            kind = "Sender" if status < 500 else "Receiver"
            return self._send(status, f"<ErrorResponse><Error><Type>{kind}</Type><Code>{code}</Code>"
                                      f"<Message>{message}</Message></Error>"
                                      "<RequestId>handover-fault</RequestId></ErrorResponse>".encode(),
                              {"Content-Type": "text/xml"})

        def _serve(self, service: str, method: str, path: str, body: bytes, deliver: bool = True) -> None:
            """Answer a call: Handover's behaviours where moto has none, else moto."""
            if not deliver:
                self._proxy(method, path, body, deliver=False)
                return
            if service == "route53":
                m = re.match(r"^/2013-04-01/healthcheck/([^/]+)/status$", path.split("?")[0])
                if m and method == "GET":
                    return self._health_status(m.group(1))
                if path.startswith("/2013-04-01/testdnsanswer") and method == "GET":
                    return self._test_dns_answer(path)
            if service == "rds" and action_of(self.headers, path, body, service, method) \
                    == "DescribePendingMaintenanceActions":
                return self._pending_maintenance(body, service_region(self.headers)[1])
            if service == "iam" and action_of(self.headers, path, body, service, method) \
                    == "SimulatePrincipalPolicy":
                status, out = simulate_principal_policy(body)
                return self._send(status, out.encode(), {"Content-Type": "text/xml"})
            if service == "bedrock":
                m = re.match(r"^/model/([^/]+)/converse$", path.split("?")[0])
                if m and method == "POST":
                    return self._converse(urllib.parse.unquote(m.group(1)), body)
            self._proxy(method, path, body)

        # -- moto -------------------------------------------------------------
        def _proxy(self, method: str, path: str, body: bytes, deliver: bool = True) -> None:
            if service_region(self.headers)[0] == "dynamodb":
                with world.dynamodb:
                    return self._forward(method, path, body, deliver)
            return self._forward(method, path, body, deliver)

        def _forward(self, method: str, path: str, body: bytes, deliver: bool) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", world.moto_port, timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "content-length")}
            conn.request(method, path, body=body if body else None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            out = {k: v for k, v in resp.getheaders()
                   if k.lower() not in ("transfer-encoding", "connection", "content-length")}
            conn.close()
            call = getattr(self, "_call", None)
            if call is not None:
                # What the server answered (also when the caller never hears it).
                with world.lock:
                    call["status"] = resp.status
            if deliver:
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
            name = urllib.parse.unquote(path[len("/2015-03-31/functions/"):-len("/invocations")])
            name = name.split(":function:")[-1].split(":")[0]  # ARN or plain name -> binary name
            self._send(*self._lambda(name, body))

        def _api_gateway(self, method: str, path: str, body: bytes, region: str) -> None:
            """An HTTP API route behind AWS_IAM: authenticate, then the function."""
            bare = path.split("?")[0]
            with world.lock:
                route = world.routes.get(f"{method} {bare}")
                world.calls.append({"service": "execute-api", "region": region, "action": "Invoke",
                                    "target": bare, "caller": caller_of(self.headers), "t": time.time()})
            if route is None:
                return self._json(404, {"message": "Not Found"})
            principal, message, identity = sigv4_principal(method, path, self.headers, body, route["region"])
            if principal is None:
                return self._json(403, {"message": message})
            event = api_gateway_event(route, method, path, self.headers, body, route["region"], identity)
            status, data, headers = self._lambda(route["function"], json.dumps(event).encode())
            if status != 200 or "X-Amz-Function-Error" in headers:
                # A failed integration (API Gateway Developer Guide,
                # "Troubleshooting issues with HTTP API Lambda integrations").
                return self._json(500, {"message": "Internal Server Error"})
            answer = json.loads(data)
            out = answer.get("body") or ""
            payload = base64.b64decode(out) if answer.get("isBase64Encoded") else out.encode()
            self._send(int(answer.get("statusCode", 200)), payload,
                       {k: v for k, v in (answer.get("headers") or {}).items()
                        if k.lower() not in ("content-length", "connection", "transfer-encoding")})

        def _lambda(self, name: str, body: bytes) -> tuple[int, bytes, dict]:
            """Invoke `name` as Lambda's Invoke API answers: (status, body, headers)."""
            with world.lock:
                upstream = world.lambda_upstreams.get(name) if world.lambda_upstreams else world.lambda_upstream
            if world.lambda_upstreams and not upstream:
                # Lambda's answer for a function that does not exist (Lambda
                # API Reference, Invoke: ResourceNotFoundException, 404).
                return 404, json.dumps({"Type": "User", "message": f"Function not found: {name}"}).encode(), \
                    {"Content-Type": "application/json", "x-amzn-ErrorType": "ResourceNotFoundException"}
            if not upstream:
                return 502, json.dumps({"Type": "Service", "message": "no lambda upstream configured"}).encode(), \
                    {"Content-Type": "application/json"}
            up = urllib.parse.urlparse(upstream)
            started = time.time()
            with world.lock:
                world.calls.append({"service": "lambda", "region": "", "action": f"Invoke:{name}", "t": started})
            answer: dict = {}

            def call() -> None:
                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=900)
                try:
                    conn.request("POST", f"/2015-03-31/functions/{name}/invocations", body=body,
                                 headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    answer["resp"], answer["data"] = resp, resp.read()
                except OSError as e:
                    answer["error"] = e
                finally:
                    conn.close()

            worker = threading.Thread(target=call, daemon=True)
            worker.start()
            headers = {"Content-Type": "application/json", "X-Amz-Executed-Version": "$LATEST"}
            while worker.is_alive():
                worker.join(0.1)
                with world.lock:
                    killed = world.killed.get(name, 0.0) >= started
                if killed and worker.is_alive():
                    # Lambda's answer when the runtime process dies mid-invocation
                    # (Lambda Developer Guide, "Troubleshoot invocation issues":
                    # Runtime.ExitError); Step Functions reports it as a task failure.
                    headers["X-Amz-Function-Error"] = "Unhandled"
                    request_id = f"{int(started * 1000):x}-handover-kill"
                    return 200, json.dumps({
                        "errorType": "Runtime.ExitError",
                        "errorMessage": f"RequestId: {request_id} Error: Runtime exited with error: signal: killed",
                    }).encode(), headers
            if "error" in answer:
                return 502, json.dumps({"Type": "Service", "message": f"lambda upstream: {answer['error']}"}).encode(), \
                    {"Content-Type": "application/json"}
            resp, data = answer["resp"], answer["data"]
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
            return 200, data, headers

        # -- Route 53 behaviour -----------------------------------------------
        def _health_status(self, check_id: str) -> None:
            with world.lock:
                share = world.health.get(check_id)
            if share is None:
                return self._proxy("GET", self.path, b"")
            # Route 53 checks from 8 Regions, more than one checker in each
            # (Route 53 Developer Guide, "How Route 53 determines whether a
            # health check is healthy"); the first round(share x 16) report
            # success, as a partial outage or a flapping path makes them.
            healthy = round(share * len(CHECKERS))
            ok, bad = "Success: HTTP Status Code 200, OK", "Failure: Connection timed out"
            observations = "".join(
                f"<HealthCheckObservation><Region>{r}</Region><IPAddress>192.0.2.{i}</IPAddress>"
                f"<StatusReport><Status>{escape(ok if i <= healthy else bad)}</Status>"
                f"<CheckedTime>{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}</CheckedTime>"
                f"</StatusReport></HealthCheckObservation>"
                for i, r in enumerate(CHECKERS, 1)
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

        def _pending_maintenance(self, body: bytes, region: str) -> None:
            """DescribePendingMaintenanceActions (RDS API Reference): the actions
            a test set for the instances the `db-instance-id` filter (an
            identifier or an ARN) or ResourceIdentifier names; all of them
            without either."""
            q = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            wanted = set(q.get("ResourceIdentifier", []))
            for k, v in q.items():
                m = re.match(r"^Filters\.Filter\.(\d+)\.Name$", k)
                if m and v[0] == "db-instance-id":
                    n = m.group(1)
                    wanted |= {vals[0] for key, vals in q.items()
                               if key.startswith(f"Filters.Filter.{n}.Values.")}
            wanted = {w.rsplit(":", 1)[-1] for w in wanted}
            with world.lock:
                found = {i: list(a) for i, a in world.maintenance.items() if not wanted or i in wanted}
            items = ""
            for ident, actions in found.items():
                details = "".join(
                    "<PendingMaintenanceAction>"
                    + "".join(f"<{tag}>{escape(str(a[key]))}</{tag}>" for key, tag in (
                        ("action", "Action"), ("description", "Description"),
                        ("auto_applied_after_date", "AutoAppliedAfterDate"),
                        ("forced_apply_date", "ForcedApplyDate"), ("opt_in_status", "OptInStatus"),
                        ("current_apply_date", "CurrentApplyDate")) if a.get(key))
                    + "</PendingMaintenanceAction>"
                    for a in actions)
                items += ("<ResourcePendingMaintenanceActions>"
                          f"<ResourceIdentifier>arn:aws:rds:{region}:123456789012:db:{escape(ident)}</ResourceIdentifier>"
                          f"<PendingMaintenanceActionDetails>{details}</PendingMaintenanceActionDetails>"
                          "</ResourcePendingMaintenanceActions>")
            out = ('<DescribePendingMaintenanceActionsResponse xmlns="http://rds.amazonaws.com/doc/2014-10-31/">'
                   f"<DescribePendingMaintenanceActionsResult><PendingMaintenanceActions>{items}"
                   "</PendingMaintenanceActions></DescribePendingMaintenanceActionsResult>"
                   "<ResponseMetadata><RequestId>handover-maintenance</RequestId></ResponseMetadata>"
                   "</DescribePendingMaintenanceActionsResponse>")
            self._send(200, out.encode(), {"Content-Type": "text/xml"})

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
            if path == "/_handover/rules" and method == "POST":
                # {"add": [rule, ...]} appends; {"clear": true} empties first;
                # {"remove": [id, ...]} drops those rules only.
                with world.lock:
                    if doc.get("clear"):
                        world.rules.clear()
                    gone = set(doc.get("remove", []))
                    if gone:
                        world.rules[:] = [r for r in world.rules if r.get("id") not in gone]
                    for rule in doc.get("add", []):
                        if rule.get("mode") not in FAULT_MODES:
                            return self._json(400, {"message": f"mode must be one of {FAULT_MODES}"})
                        world.rules.append(dict(rule))
                    return self._json(200, list(world.rules))
            if path == "/_handover/rules" and method == "GET":
                with world.lock:
                    return self._json(200, {"rules": list(world.rules), "log": list(world.fault_log)})
            if path == "/_handover/databases" and method == "POST":
                # {"<db id>": {"port": n}} or null to forget one.
                with world.lock:
                    for ident, real in doc.items():
                        if real is None:
                            DATABASES.pop(ident, None)
                        else:
                            DATABASES[ident] = {"port": int(real["port"]), "promote": bool(real.get("promote"))}
                            # With its directory and Region, the server can be the
                            # source of a real replica (CreateDBInstanceReadReplica).
                            if real.get("dir") and real.get("region"):
                                DATABASES[ident].update(dir=str(real["dir"]), region=str(real["region"]))
                                REGION_CA.setdefault(str(real["region"]), os.path.join(str(real["dir"]), "tls"))
                    return self._json(200, DATABASES)
            if path == "/_handover/realism" and method == "POST":
                # {"*": {...}} for every instance, {"<db id>": {...}} for one;
                # null removes a scope.
                with world.lock:
                    for scope, settings in doc.items():
                        if settings is None:
                            if scope != "*":
                                REALISM.pop(scope, None)
                            continue
                        unknown = [k for k in settings if k not in REALISM_DEFAULTS]
                        if unknown:
                            return self._json(400, {"message": f"unknown realism keys {unknown}"})
                        REALISM.setdefault(scope, {}).update({k: float(v) for k, v in settings.items()})
                    return self._json(200, REALISM)
            if path == "/_handover/health" and method == "POST":
                # true / false, or the share of Route 53's checkers that see
                # the endpoint healthy (0.0 to 1.0).
                return self._json(200, merge(world, world.health, doc, checker_share))
            if path == "/_handover/calls" and method == "GET":
                with world.lock:
                    return self._json(200, list(world.calls))
            if path == "/_handover/lambda" and method == "POST":
                with world.lock:
                    world.lambda_upstream = doc.get("upstream")
                    world.lambda_upstreams = dict(doc.get("upstreams") or {})
                return self._json(200, {"upstream": world.lambda_upstream, "upstreams": world.lambda_upstreams})
            if path == "/_handover/apigw" and method == "POST":
                # {"routes": [{"method": "POST", "path": "/decisions",
                # "function": "slack", "auth": "AWS_IAM", "region": the
                # API's Region}]}: added or replaced.
                routes = {}
                for r in doc.get("routes", []):
                    if r.get("auth") != "AWS_IAM":
                        return self._json(400, {"message": "only AWS_IAM routes are served here"})
                    routes[f"{r['method'].upper()} {r['path']}"] = {
                        "function": str(r["function"]), "auth": "AWS_IAM", "region": str(r["region"])}
                with world.lock:
                    world.routes.update(routes)
                    return self._json(200, world.routes)
            if path == "/_handover/replication" and method == "POST":
                # {"<db id>": {"status", "message"}} or null: replicating again.
                bad = [k for k, v in doc.items() if v is not None and not (
                    isinstance(v, dict) and v.get("status") in REPLICATION_STATUSES
                    and isinstance(v.get("message", ""), str))]
                if bad:
                    return self._json(400, {"message": f"{bad}: each value is null or "
                                            f"{{\"status\": one of {REPLICATION_STATUSES}, \"message\": text}}"})
                return self._json(200, merge(world, REPLICATION, doc, dict))
            if path == "/_handover/maintenance" and method == "POST":
                # {"<db id>": [action, ...]} or null to clear one.
                return self._json(200, merge(world, world.maintenance, doc, list))
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
            share = world.health.get(check, 1.0)
        healthy = check_healthy(check, share) if check else True
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
    patch_security_group_membership()
    patch_reboot_db_instance()
    patch_create_db_instance_read_replica()
    patch_rename_db_instance()
    patch_send_task_failure_cause()
    patch_route53_insync()
    patch_replication_status()
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
    # The servers this emulator built (re-protection's replicas) go with it.
    for directory in list(BUILT):
        try:
            postgres_sh("stop", directory)
        except Exception as e:  # noqa: BLE001 (best effort at exit)
            print(f"stopping {directory}: {e}", flush=True)
    for child in RESPAWNED:
        child.kill()
    moto.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""moto_server, answering one request at a time, with a faster TransactWriteItems; and, when
it checks IAM, signed GETs verified and each refusal logged (see the two patches at the end).

moto's TransactWriteItems snapshots whole tables and restores them on failure, which is not
safe when requests run in parallel threads: a failing transaction can undo another's
committed writes. DynamoDB itself applies transactions atomically, so the emulator is run
serially to behave the same.

moto (5.x) takes that snapshot as a deep copy of the table per item of the transaction,
stream records included, so every transaction costs time and memory in proportion to all
writes ever made, times its items. The patch below copies each table once per call and
leaves the stream out of the copy; on failure it drops the stream records the rolled-back
writes appended, so the stream still shows only committed changes.
"""
import copy
import json
import sys

import moto.dynamodb.models as dynamodb
import moto.iam.access_control as access_control
from botocore.awsrequest import AWSRequest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


class SnapshotOncePerCall:
    """Stands in for the `copy` module inside one transact_write_items call."""

    def __init__(self, shared):
        self.shared = shared
        self.copies = {}

    def deepcopy(self, original, memo=None):
        # Keyed by identity; the original is kept so its id cannot be reused meanwhile.
        if id(original) not in self.copies:
            memo = {id(kept): kept for kept in self.shared}
            self.copies[id(original)] = (original, copy.deepcopy(original, memo))
        return self.copies[id(original)][1]

    def copy(self, original):
        return copy.copy(original)


transact_write_items = dynamodb.DynamoDBBackend.transact_write_items


def transact_write_items_snapshotting_once(self, transact_items):
    shards = [table.stream_shard for table in self.tables.values() if table.stream_shard is not None]
    committed = [(shard, len(shard.items)) for shard in shards]
    dynamodb.copy = SnapshotOncePerCall(shards)
    try:
        return transact_write_items(self, transact_items)
    except BaseException:
        for shard, length in committed:
            del shard.items[length:]
        raise
    finally:
        dynamodb.copy = copy


dynamodb.DynamoDBBackend.transact_write_items = transact_write_items_snapshotting_once

def aws_request_over_the_body_sent(self):
    """The request as its client signed it, when the emulator checks IAM: moto (5.x) hashes a
    body-less request's query or headers as its body, so that no signed GET or DELETE (the
    Scheduler's ListSchedules, GetSchedule, DeleteSchedule) verifies; their body is empty."""
    signed_headers = self._get_string_between("SignedHeaders=", ",", self._headers["Authorization"]).split(";")
    headers = self._create_headers_for_aws_request(signed_headers, self._headers)
    body = b"" if self._method in ("GET", "HEAD", "DELETE") else (self._body or self._data)
    request = AWSRequest(method=self._method, url=self._path, data=body, headers=headers)
    request.context["timestamp"] = headers["X-Amz-Date"]
    return request


access_control.IAMRequestBase._create_aws_request = aws_request_over_the_body_sent

check_action_permitted = access_control.IAMRequestBase.check_action_permitted


def check_action_permitted_and_say_what_was_denied(self, resource):
    """One line on stderr for each call IAM checks: a refusal naming the caller and the action
    (a JSON service's client sees only a 403 it cannot read: moto answers it in XML), and each
    allowed call with its caller, action and the items it carries (tests/stack/bill.py counts
    them)."""
    try:
        check_action_permitted(self, resource)
    except Exception:
        print(f"IAM denied: {self._access_key.arn} {self._action} on {resource}", file=sys.stderr, flush=True)
        raise
    print(f"IAM allowed: {self._access_key.arn} {self._action} {items_of(self._action, self._body)}", file=sys.stderr, flush=True)


def items_of(action, body):
    """The items a DynamoDB batch or transaction carries (1 for any other call)."""
    if not action.startswith("dynamodb:") or not body:
        return 1
    try:
        request = json.loads(body)
    except ValueError:
        return 1
    if "TransactItems" in request:
        return len(request["TransactItems"])
    if "RequestItems" in request:
        return sum(len(v.get("Keys", v) if isinstance(v, dict) else v) for v in request["RequestItems"].values())
    return 1


access_control.IAMRequestBase.check_action_permitted = check_action_permitted_and_say_what_was_denied

run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False)

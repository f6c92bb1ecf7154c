"""moto_server, answering one request at a time, made to behave and scale as the services
it stands in for where the tests and benches need it; and, when it checks IAM, signed GETs
verified and each refusal logged (the two patches at the end).

moto's TransactWriteItems snapshots whole tables and restores them on failure, which is not
safe when requests run in parallel threads: a failing transaction can undo another's
committed writes. DynamoDB itself applies transactions atomically, so the emulator is run
serially to behave the same.

The patches, in order:
- Transactions: moto (5.x) takes that snapshot as a deep copy of the whole table per item of
  the transaction, so each costs time and memory in proportion to all the table holds. Kept
  instead: a copy of each item the transaction names, put back on failure, with the stream
  records the rolled-back writes appended dropped, so the stream shows only committed changes.
- Queries: moto sorts and filters every item of the table for each query, on the table or an
  index. Each query here reads its own partition, the indexes' partitions kept on each write.
- Answers: moto writes each answer by walking botocore's model of it; the calls that carry
  items answer in plain JSON, as DynamoDB does.
- Sends, receives and deletes: moto counts every message of a queue on each send and each
  message received, and walks them all twice on each delete; here neither counts, and a
  delete looks among the messages in flight.
- SQS's fair queues: moto delivers a standard queue's messages first come, first served,
  whatever their message group; SQS delivers a quiet tenant's messages ahead of a noisy one's,
  as `FairQueue` does from SQS's documentation.
"""
import base64
import copy
import datetime
import inspect
import json
import sys
import time
from collections import Counter, deque

import moto.dynamodb.models as dynamodb
import moto.dynamodb.responses as dynamodb_responses
import moto.dynamodbstreams.responses as streams_responses
import moto.iam.access_control as access_control
import moto.sqs.models as sqs
from botocore.awsrequest import AWSRequest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


class TablesUncopied:
    """Stands in for the `copy` module inside one transact_write_items call: the whole-table
    snapshot becomes the table itself (the items it names are kept aside instead)."""

    def deepcopy(self, original, memo=None):
        return original if isinstance(original, dynamodb.Table) else copy.deepcopy(original, memo)

    def copy(self, original):
        return copy.copy(original)


transact_write_items = dynamodb.DynamoDBBackend.transact_write_items


def named_items(backend, transact_items):
    """(table, hash key, range key, a copy of the item or None) for each item the transaction
    names; those it could not name are left to the call, which refuses them."""
    kept = []
    for entry in transact_items:
        for op_type, op in entry.items():
            table = backend.tables.get(op.get("TableName"))
            attrs = op.get("Item") if op_type == "Put" else op.get("Key")
            if table is None or not isinstance(attrs, dict) or table.hash_key_attr not in attrs:
                continue
            hash_key = dynamodb.DynamoType(attrs[table.hash_key_attr])
            range_key = None
            if table.range_key_attr is not None:
                if table.range_key_attr not in attrs:
                    continue
                range_key = dynamodb.DynamoType(attrs[table.range_key_attr])
            kept.append((table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))))
    return kept


def put_back(table, hash_key, range_key, item):
    if range_key is None:
        table.items.pop(hash_key, None)
        if item is not None:
            table.items[hash_key] = item
    else:
        table.items[hash_key].pop(range_key, None)
        if item is not None:
            table.items[hash_key][range_key] = item
    Partitions.after_write(table, hash_key, range_key)


def transact_write_items_keeping_named_items(self, transact_items):
    shards = [table.stream_shard for table in self.tables.values() if table.stream_shard is not None]
    committed = [(shard, len(shard.items)) for shard in shards]
    kept = named_items(self, transact_items)
    dynamodb.copy = TablesUncopied()
    try:
        return transact_write_items(self, transact_items)
    except BaseException:
        for table, hash_key, range_key, item in reversed(kept):
            put_back(table, hash_key, range_key, item)
        for shard, length in committed:
            del shard.items[length:]
        raise
    finally:
        dynamodb.copy = copy


dynamodb.DynamoDBBackend.transact_write_items = transact_write_items_keeping_named_items

class Partitions:
    """A table's global secondary indexes as DynamoDB keeps them: for each, its partition key's
    value → the keys of the items holding it, updated on every write. moto (5.x) answers every
    query, on the table or an index, by sorting and filtering every item of the table, so a
    query's cost grows with all the table holds; with these it reads its own partition."""

    def __init__(self, table):
        self.by_index = {}  # index name → partition value → {item key: None}
        self.of_item = {}  # index name → item key → partition value
        for index in table.global_indexes or []:
            hash_attrs = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
            if len(hash_attrs) == 1:
                self.by_index[index.name] = {}
                self.of_item[index.name] = {}
        self.attr = {
            index.name: [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"][0]
            for index in table.global_indexes or []
            if index.name in self.by_index
        }
        for item in table.all_items():
            self.written(table, item.hash_key, item.range_key)

    @staticmethod
    def of(table):
        names = tuple(sorted(i.name for i in table.global_indexes or []))
        kept = table.__dict__.get("_partitions")
        if kept is None or kept[0] != names:
            kept = table.__dict__["_partitions"] = (names, Partitions(table))
        return kept[1]

    @staticmethod
    def after_write(table, hash_key, range_key):
        kept = table.__dict__.get("_partitions")
        if kept is not None:
            kept[1].written(table, hash_key, range_key)

    def written(self, table, hash_key, range_key):
        key = (hash_key, range_key)
        item = None if table.range_key_attr is not None and range_key is None else table.get_item(hash_key, range_key)
        for name, attr in self.attr.items():
            before = self.of_item[name].pop(key, None)
            if before is not None:
                partition = self.by_index[name].get(before)
                if partition is not None:
                    partition.pop(key, None)
                    if not partition:
                        del self.by_index[name][before]
            value = item.attrs.get(attr) if item is not None else None
            if value is not None:
                self.by_index[name].setdefault(value, {})[key] = None
                self.of_item[name][key] = value

    def items(self, table, index_name, value):
        keys = self.by_index[index_name].get(value, {})
        return [item for item in (table.get_item(h, r) for h, r in keys) if item is not None]


query = dynamodb.Table.query
QUERY = inspect.signature(query)


def query_one_partition(self, *args, **kwargs):
    call = QUERY.bind(self, *args, **kwargs).arguments
    index_name = call.get("index_name")
    if not index_name:
        partition = self.items.get(call["hash_key"]) if call["hash_key"] is not None else None
        if partition is None:
            candidates = []
        elif self.range_key_attr is None:
            candidates = [partition]
        else:
            candidates = list(partition.values())
    else:
        partitions = Partitions.of(self)
        conditions = dict(call.get("hash_key_conditions") or [])
        attr = partitions.attr.get(index_name)
        if attr is None or attr not in conditions:
            return query(self, *args, **kwargs)
        candidates = partitions.items(self, index_name, conditions[attr])
    self.all_items = lambda: candidates
    try:
        return query(self, *args, **kwargs)
    finally:
        del self.all_items


def keeping_partitions(write, key_of):
    def written(*args, **kwargs):
        try:
            return write(*args, **kwargs)
        finally:
            for table, hash_key, range_key in key_of(*args, **kwargs):
                Partitions.after_write(table, hash_key, range_key)

    return written


def item_key(table, attrs):
    hash_key = dynamodb.DynamoType(attrs[table.hash_key_attr])
    range_attr = table.range_key_attr
    return hash_key, (dynamodb.DynamoType(attrs[range_attr]) if range_attr and range_attr in attrs else None)


def put_key(table, item_attrs, *args, **kwargs):
    if table.hash_key_attr not in item_attrs:
        return []
    return [(table, *item_key(table, item_attrs))]


def delete_key(table, hash_key, range_key, *args, **kwargs):
    return [(table, hash_key, range_key)]


def update_key(backend, table_name, key, *args, **kwargs):
    table = backend.tables.get(table_name)
    if table is None or table.hash_key_attr not in key:
        return []
    return [(table, *item_key(table, key))]


dynamodb.Table.query = query_one_partition
dynamodb.Table.put_item = keeping_partitions(dynamodb.Table.put_item, put_key)
dynamodb.Table.delete_item = keeping_partitions(dynamodb.Table.delete_item, delete_key)
dynamodb.DynamoDBBackend.update_item = keeping_partitions(dynamodb.DynamoDBBackend.update_item, update_key)


def plain_json(value):
    """What the JSON protocols send for a value json cannot write: a timestamp as epoch
    seconds, a blob in base64."""
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON")


def without_nulls(result):
    return {k: v for k, v in result.items() if v is not None}


def serialized_as_json(handler_class, actions):
    """moto (5.x) writes each answer by walking botocore's model of it, which costs more than
    the read itself for the calls that carry items; these calls' answers are plain JSON already,
    so they are written as such, as DynamoDB does."""
    serialized = handler_class.serialized

    def as_json(self, action_result):
        result = action_result.result
        if self._get_action() not in actions or not isinstance(result, dict):
            return serialized(self, action_result)
        try:
            body = json.dumps(without_nulls(result), default=plain_json)
        except TypeError:
            return serialized(self, action_result)
        headers = dict(self.response_headers)
        headers.update({"Content-Type": "application/x-amz-json-1.0", "status": 200})
        return 200, headers, body

    handler_class.serialized = as_json


serialized_as_json(dynamodb_responses.DynamoHandler, {"GetItem", "BatchGetItem", "Query"})
serialized_as_json(streams_responses.DynamoDBStreamsHandler, {"GetRecords"})


class FairQueue:
    """What SQS's fair queues do, as their documentation ("How Amazon SQS fair queues work")
    describes it, for a standard queue whose messages carry a MessageGroupId (the tenant; a
    message without one is a tenant of its own). A tenant is noisy when it holds more than 10 %
    of the queue's in-flight messages and at least 30 of them, or more than 10 % of the
    consumers' recent processing time (receive to delete). While a quiet tenant has a message
    waiting, a receive gets it first; noisy tenants' messages come after, the noisy tenant with
    the fewest in flight first. Nothing is dropped or delayed otherwise."""

    RECENT_SECONDS = 60.0

    def __init__(self):
        self.processing = deque()  # (deleted at, tenant, seconds from receive to delete)

    @staticmethod
    def of(queue):
        if "_fair" not in queue.__dict__:
            queue.__dict__["_fair"] = FairQueue()
        return queue.__dict__["_fair"]

    def deleted(self, message):
        received_at = getattr(message, "_fair_received_at", None)
        if received_at is not None and message.group_id is not None:
            now = time.monotonic()
            self.processing.append((now, message.group_id, now - received_at))

    def noisy(self, queue):
        in_flight = Counter(m.group_id for m in queue.pending_messages if not m.visible)
        all_in_flight = sum(in_flight.values())
        noisy = {t for t, n in in_flight.items() if t is not None and n >= 30 and n > all_in_flight / 10}
        horizon = time.monotonic() - self.RECENT_SECONDS
        while self.processing and self.processing[0][0] < horizon:
            self.processing.popleft()
        spent = Counter()
        for _, tenant, seconds in self.processing:
            spent[tenant] += seconds
        all_spent = sum(spent.values())
        noisy |= {t for t, s in spent.items() if all_spent > 0 and s > all_spent / 10}
        return noisy, in_flight


visible_messages = sqs.Queue.messages.fget


def visible_messages_quiet_tenants_first(self):
    visible = visible_messages(self)
    if self.fifo_queue or not visible or not self.__dict__.get("_receiving"):
        return visible
    noisy, in_flight = FairQueue.of(self).noisy(self)
    if not noisy:
        return visible
    quiet = [m for m in visible if m.group_id not in noisy]
    loud = sorted((m for m in visible if m.group_id in noisy), key=lambda m: in_flight[m.group_id])
    return quiet + loud


mark_received = sqs.Message.mark_received


def mark_received_at(self, *args, **kwargs):
    self._fair_received_at = time.monotonic()
    return mark_received(self, *args, **kwargs)


delete_message = sqs.Queue.delete_message


def delete_message_timed(self, receipt_handle):
    """moto looks for the message to delete among all the queue's, twice; a message being
    deleted is almost always in flight, so it is looked for there first."""
    for message in list(self.pending_messages):
        if message.had_receipt_handle(receipt_handle):
            FairQueue.of(self).deleted(message)
            self.pending_messages.discard(message)
            self.deleted_messages.update(message.all_receipt_handles)
            self._messages.remove(message)
            return None
    return delete_message(self, receipt_handle)


def flagged_on_the_queue(flags, method):
    """`method` of the SQS backend, with `flags` set on its queue while it runs."""

    def call(self, queue_name, *args, **kwargs):
        queue = self.get_queue(queue_name)
        for flag in flags:
            queue.__dict__[flag] = True
        try:
            return method(self, queue_name, *args, **kwargs)
        finally:
            for flag in flags:
                queue.__dict__.pop(flag, None)

    return call


def uncounted_while_moving_messages(count):
    """moto reads all of a queue's attributes on each send and on each message received, for
    one setting; their message counts walk every message, so each costs as much as the queue
    holds. Neither needs them."""

    def counted(self):
        return 0 if self.__dict__.get("_uncounted") else count.fget(self)

    return property(counted)


sqs.Queue.messages = property(visible_messages_quiet_tenants_first)
sqs.SQSBackend.receive_message = flagged_on_the_queue(("_receiving", "_uncounted"), sqs.SQSBackend.receive_message)
sqs.SQSBackend.send_message = flagged_on_the_queue(("_uncounted",), sqs.SQSBackend.send_message)
for name in ("approximate_number_of_messages", "approximate_number_of_messages_not_visible", "approximate_number_of_messages_delayed"):
    setattr(sqs.Queue, name, uncounted_while_moving_messages(getattr(sqs.Queue, name)))
sqs.Message.mark_received = mark_received_at
sqs.Queue.delete_message = delete_message_timed


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

"""moto_server, answering one request at a time, with a faster TransactWriteItems.

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
import sys

import moto.dynamodb.models as dynamodb
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

run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False)

"""What Lambda's pollers and EventBridge Scheduler do for a deployed stack, for the stack that
`sam local` serves: nothing in `sam local` reads a stream or a queue, so this does.

Everything it does is read from the template as SAM transforms it: each
`AWS::Lambda::EventSourceMapping` (its stream or queue, filters, batch size and window,
`ReportBatchItemFailures`, retries and on-failure destination), each `AWS::Scheduler::Schedule`
of the stack (its rate), and each function's dead-letter queue. A template change (a filter, a
renamed queue) changes what the driver does without touching it. Records are read, deleted
and dead-lettered with the credentials of the function they are for, as Lambda does with the
function's role; the function is invoked through `sam local start-lambda`'s Invoke API.

Where it differs from Lambda: one poller per mapping (Lambda scales up to the mapping's
maximum concurrency), each mapping of a stream reading it on its own as Lambda's do; a failing stream batch is retried whole, not bisected; an asynchronous
invocation is retried at once rather than after a minute and two; the customers' schedules are
fired at their start date and then at each period of a `rate(…)` expression (a `cron(…)`
schedule's later occurrences are not computed here).
"""

import base64
import datetime
import json
import re
import threading
import time
import uuid

import boto3
from botocore.config import Config

import template

RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)")
UNIT_MINUTES = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}


class Driver:
    def __init__(self, cfn, resolver, emulator, credentials, lambda_endpoint, minute_seconds=60.0, log=print):
        self.cfn = cfn
        self.resolver = resolver
        self.emulator = emulator
        self.credentials = credentials
        self.minute_seconds = minute_seconds
        self.log = log
        self.stopping = threading.Event()
        self.invoker = boto3.client(
            "lambda",
            endpoint_url=lambda_endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(read_timeout=900, connect_timeout=10, retries={"max_attempts": 0}),
        )
        self.functions = template.functions(cfn)
        # A function's ARN (as the service names it, by FunctionName) → its logical id.
        self.by_arn = {}
        for logical, function in self.functions.items():
            name = function["Properties"].get("FunctionName")
            name = resolver(name) if name else logical
            self.by_arn[f"arn:aws:lambda:us-east-1:123456789012:function:{name}"] = logical
        # A queue's ARN → its URL, as a poller knows it (it never asks the queue's owner).
        self.queue_urls = {
            resolver({"Fn::GetAtt": [k, "Arn"]}): resolver({"Ref": k})
            for k, r in cfn["Resources"].items()
            if r["Type"] == "AWS::SQS::Queue"
        }
        self.threads = []
        self.invocations = 0
        self.lock = threading.Lock()

    # Starting and stopping.

    def start(self):
        for mapping in self._of_type("AWS::Lambda::EventSourceMapping"):
            source = self.resolver(mapping["EventSourceArn"])
            target = mapping["FunctionName"]["Ref"]
            run = self._stream if ":dynamodb:" in source else self._queue
            self._spawn(run, target, source, mapping)
        for schedule in self._of_type("AWS::Scheduler::Schedule"):
            self._spawn(self._rate, schedule)
        self._spawn(self._customer_schedules)

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _spawn(self, run, *args):
        def guarded():
            while not self.stopping.is_set():
                try:
                    run(*args)
                    return
                except Exception as error:  # the driver goes on, as Lambda's pollers do
                    self.log(f"driver: {run.__name__}{args[:1]}: {error!r}; again in a second")
                    time.sleep(1)

        thread = threading.Thread(target=guarded, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _of_type(self, kind):
        return [r["Properties"] for r in self.cfn["Resources"].values() if r["Type"] == kind]

    def _client(self, service, function):
        return self.emulator.client(service, self.credentials[function])

    # Invoking.

    def invoke(self, function, payload):
        """Invokes `function` synchronously: (its answer, whether it failed)."""
        with self.lock:
            self.invocations += 1
        answer = self.invoker.invoke(FunctionName=function, Payload=json.dumps(payload).encode())
        body = answer["Payload"].read()
        failed = "FunctionError" in answer
        try:
            body = json.loads(body) if body else None
        except ValueError:
            failed = True
        return body, failed

    # DynamoDB streams.

    def _stream(self, function, stream_arn, mapping):
        streams = self._client("dynamodbstreams", function)
        batch_size = int(mapping.get("BatchSize", 100))
        window = float(mapping.get("MaximumBatchingWindowInSeconds", 0))
        retries = int(mapping.get("MaximumRetryAttempts", -1))
        partial = "ReportBatchItemFailures" in mapping.get("FunctionResponseTypes", [])
        patterns = [json.loads(f["Pattern"]) for f in mapping.get("FilterCriteria", {}).get("Filters", [])]
        destination = self.resolver(mapping.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination"))
        shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        iterators = {
            s["ShardId"]: streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=s["ShardId"], ShardIteratorType=mapping.get("StartingPosition", "TRIM_HORIZON")
            )["ShardIterator"]
            for s in shards
        }
        while not self.stopping.is_set():
            busy = False
            for shard, iterator in list(iterators.items()):
                # A batch is what the shard holds, up to its size, gathered for at most the
                # batching window from its first record (as Lambda's poller does).
                records, first = [], None
                while len(records) < batch_size and not self.stopping.is_set():
                    page = streams.get_records(ShardIterator=iterator, Limit=batch_size - len(records))
                    iterator = iterators[shard] = page.get("NextShardIterator") or iterator
                    records += [_lambda_record(r, stream_arn) for r in page["Records"]]
                    if records and first is None:
                        first = time.time()
                    if not records or time.time() - first >= window:
                        break
                    time.sleep(0.1)
                batch = [r for r in records if not patterns or any(_matches(p, r) for p in patterns)]
                busy = busy or bool(records)
                attempts = 0
                while batch and not self.stopping.is_set():
                    answer, failed = self.invoke(function, {"Records": batch})
                    if not failed:
                        failures = (answer or {}).get("batchItemFailures") or [] if partial else []
                        if not failures:
                            break
                        first = min(int(f["itemIdentifier"]) for f in failures)
                        batch = [r for r in batch if int(r["dynamodb"]["SequenceNumber"]) >= first]
                    attempts += 1
                    if 0 <= retries < attempts:
                        self._batch_failed(function, stream_arn, shard, batch, destination, attempts)
                        break
                    time.sleep(0.2)
            if not busy:
                time.sleep(max(window, 0.2))

    def _batch_failed(self, function, stream_arn, shard, batch, destination, attempts):
        """Lambda's on-failure record of a stream batch whose retries ran out."""
        if not destination:
            return
        arrivals = [r["dynamodb"]["ApproximateCreationDateTime"] for r in batch]
        note = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": f"arn:aws:lambda:us-east-1:123456789012:function:{self._name(function)}",
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": attempts,
            },
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "version": "1.0",
            "timestamp": _iso(time.time()),
            "DDBStreamBatchInfo": {
                "shardId": shard,
                "startSequenceNumber": batch[0]["dynamodb"]["SequenceNumber"],
                "endSequenceNumber": batch[-1]["dynamodb"]["SequenceNumber"],
                "approximateArrivalOfFirstRecord": _iso(min(arrivals)),
                "approximateArrivalOfLastRecord": _iso(max(arrivals)),
                "batchSize": len(batch),
                "streamArn": stream_arn,
            },
        }
        self._send(function, destination, json.dumps(note))

    def _name(self, function):
        for arn, logical in self.by_arn.items():
            if logical == function:
                return arn.rsplit(":", 1)[-1]
        return function

    def _send(self, function, queue_arn, body):
        self._client("sqs", function).send_message(QueueUrl=self.queue_urls[queue_arn], MessageBody=body)

    # SQS.

    def _queue(self, function, queue_arn, mapping):
        sqs = self._client("sqs", function)
        url = self.queue_urls[queue_arn]
        batch_size = int(mapping.get("BatchSize", 10))
        partial = "ReportBatchItemFailures" in mapping.get("FunctionResponseTypes", [])
        while not self.stopping.is_set():
            # No long poll: the emulator answers one request at a time.
            messages = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=min(batch_size, 10),
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                time.sleep(0.2)
                continue
            records = [_sqs_record(m, queue_arn) for m in messages]
            answer, failed = self.invoke(function, {"Records": records})
            if failed:
                continue  # every message comes back after its visibility timeout
            failures = {f["itemIdentifier"] for f in ((answer or {}).get("batchItemFailures") or [])} if partial else set()
            done = [m for m in messages if m["MessageId"] not in failures]
            for start in range(0, len(done), 10):
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start : start + 10])],
                )

    # Schedules.

    def _rate(self, schedule):
        """One of the stack's own schedules (the status poll, the sweep): its function at each
        period, a minute lasting `minute_seconds` here."""
        expression = schedule["ScheduleExpression"]
        minutes = _rate_minutes(expression)
        target = schedule["Target"]
        function = target["Arn"]["Fn::GetAtt"][0]
        payload = json.loads(target.get("Input", "{}"))
        while not self.stopping.wait(minutes * self.minute_seconds):
            self._invoke_async(function, payload)

    def _customer_schedules(self):
        """The schedules the service makes on EventBridge Scheduler, fired as the Scheduler would:
        each at its start date, then at each period of a rate."""
        scheduler = self.emulator.client("scheduler")
        groups = [self.resolver({"Ref": k}) for k, r in self.cfn["Resources"].items() if r["Type"] == "AWS::Scheduler::ScheduleGroup"]
        fired = {}
        while not self.stopping.wait(0.5):
            now = time.time()
            for group in groups:
                for listed in scheduler.list_schedules(GroupName=group).get("Schedules", []):
                    name = listed["Name"]
                    shown = scheduler.get_schedule(Name=name, GroupName=group)
                    if shown.get("State") != "ENABLED":
                        continue
                    start = shown.get("StartDate")
                    start = start.timestamp() if start else None
                    last = fired.get(name)
                    due = None
                    if start is not None and (last is None or last < start) and now >= start:
                        due = start
                    elif last is None and start is None:
                        due = now
                    elif last is not None and RATE.match(shown["ScheduleExpression"]):
                        period = _rate_minutes(shown["ScheduleExpression"]) * 60
                        if now >= last + period:
                            due = last + period
                    if due is None:
                        continue
                    fired[name] = due
                    target = shown["Target"]
                    function = self.by_arn.get(target["Arn"])
                    if function is None:
                        self.log(f"driver: schedule {name} targets {target['Arn']}, no function of the stack")
                        continue
                    payload = json.loads(target["Input"].replace("<aws.scheduler.scheduled-time>", _iso(due)))
                    self._invoke_async(function, payload)

    def _invoke_async(self, function, payload):
        """An asynchronous invocation: tried three times, then the event goes to the function's
        dead-letter queue when it has one."""
        for _ in range(3):
            _, failed = self.invoke(function, payload)
            if not failed:
                return
        dead_letters = self.functions[function]["Properties"].get("DeadLetterConfig", {}).get("TargetArn")
        if dead_letters:
            self._send(function, self.resolver(dead_letters), json.dumps(payload))


def _rate_minutes(expression):
    match = RATE.match(expression)
    if not match:
        raise ValueError(f"{expression}: the driver fires rate schedules only")
    return int(match.group(1)) * UNIT_MINUTES[match.group(2)]


def _iso(epoch):
    if isinstance(epoch, datetime.datetime):
        epoch = epoch.timestamp()
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _jsonable(value):
    """A stream record as Lambda's event carries it: binary values base64, times in seconds."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.datetime):
        return int(value.timestamp())
    return value


def _lambda_record(record, stream_arn):
    record = _jsonable(record)
    record["eventSourceARN"] = stream_arn
    record.setdefault("awsRegion", "us-east-1")
    record.setdefault("eventSource", "aws:dynamodb")
    return record


def _sqs_record(message, queue_arn):
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {
            k: {"stringValue": v.get("StringValue"), "dataType": v.get("DataType")}
            for k, v in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    }


def _matches(pattern, value):
    """Lambda's event filtering: every key of the pattern matches the record."""
    for key, expected in pattern.items():
        if isinstance(expected, dict):
            if not isinstance(value, dict) or not isinstance(value.get(key), dict):
                return False
            if not _matches(expected, value[key]):
                return False
            continue
        present = isinstance(value, dict) and key in value
        if not any(_matches_one(option, present, value.get(key) if present else None) for option in expected):
            return False
    return True


def _matches_one(option, present, actual):
    if isinstance(option, dict):
        if "exists" in option:
            return present == option["exists"]
        if "prefix" in option:
            return present and isinstance(actual, str) and actual.startswith(option["prefix"])
        raise ValueError(f"filter {option} is not read by the driver")
    return present and actual == option

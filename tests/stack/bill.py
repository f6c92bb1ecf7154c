"""The whole bill of a payout and of a payroll file, read off the stack as SAM deploys it
(`stack.py up`, STACK_STATE): the functions' REPORT lines from `sam local` (invocations, billed
duration, memory), every AWS call each function made as the emulator logged it when it checked
IAM (DynamoDB items, SQS, EventBridge, Scheduler, S3, Secrets Manager), the API requests made,
and the bytes the functions logged. Priced at AWS's on-demand prices (us-east-1).

    STACK_STATE=target/stack/state.json python bill.py [--file-lines 1000]

Prints BENCHMARKS.md's table. The stack's own timers (the status poll each minute, the daily
sweep) cost the same whatever is paid: they are counted apart, per month.
"""

import argparse
import re
import time
from collections import Counter
from pathlib import Path

from client import Receiver, approver, call, customer, ok, payout, state, status_of

PRICES = {
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm64": 0.0000133334,
    "api_request": 1.00 / 1e6,  # HTTP API
    "write_unit": 0.625 / 1e6,
    "read_unit": 0.125 / 1e6,
    "sqs_request": 0.40 / 1e6,
    "event": 1.00 / 1e6,
    "scheduler_invocation": 1.00 / 1e6,
    "s3_put": 0.005 / 1e3,
    "s3_get": 0.0004 / 1e3,
    "secrets_call": 0.05 / 1e4,
    "log_gb": 0.50,
}
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "ConditionCheckItem"}
READS = {"GetItem", "Query", "BatchGetItem"}
TIMERS = {"schedule-status-poll", "schedule-secret-sweep"}
# The measuring script's own waiting: it reads the operation and the file until they are done.
WAITING = ("api-get-", "api-list-")
WAITING_USERS = ("Get", "List")


class Logs:
    """What the stack's logs gained since the mark."""

    def __init__(self, work):
        self.files = {name: work / name for name in ("sam-api.log", "sam-lambda.log", "moto.log")}
        self.mark()

    def mark(self):
        self.offsets = {name: path.stat().st_size for name, path in self.files.items()}

    def since(self, name):
        with open(self.files[name], "rb") as f:
            f.seek(self.offsets[name])
            return f.read().decode(errors="replace")


def measure(logs, api_requests, scheduler_invocations, baseline=None, seconds=0.0):
    """The bill of what the logs gained: a dict of counts and its price. `baseline` (counts per
    second of an idle stack: the timers' own reads and writes) is taken off for `seconds`."""
    functions = Counter()
    gb_seconds = {}
    log_bytes = 0
    for name in ("sam-api.log", "sam-lambda.log"):
        current = None
        for line in logs.since(name).splitlines():
            invoked = re.match(r"Invoking (\S+) ", line)
            if invoked:
                current = invoked.group(1)
                continue
            report = re.match(r"REPORT RequestId: \S+\s+(?:Init Duration: [\d.]+ ms\s+)?Duration: [\d.]+ ms\s+Billed Duration: (\d+) ms\s+Memory Size: (\d+) MB", line)
            if report:
                functions[current] += 1
                gb_seconds[current] = gb_seconds.get(current, 0) + int(report.group(1)) / 1000 * int(report.group(2)) / 1024
            if line.startswith(("{", "START ", "END ", "REPORT ")):
                log_bytes += len(line) + 1  # what CloudWatch Logs would take in
    calls = Counter()
    units = Counter()
    for line in logs.since("moto.log").splitlines():
        allowed = re.match(r"IAM allowed: \S+/fn-(\S+) (\S+):(\S+) (\d+)", line)
        if not allowed or allowed.group(1).startswith(WAITING_USERS):
            continue
        service, action, items = allowed.group(2), allowed.group(3), int(allowed.group(4))
        calls[f"{service}:{action}"] += 1
        if service == "dynamodb":
            if action == "TransactWriteItems":
                units["write"] += 2 * items
            elif action in WRITES:
                units["write"] += items
            elif action in READS:
                units["read"] += 0.5 * items  # eventually consistent, up to 4 KB
    paid = {k: v for k, v in functions.items() if k not in TIMERS and not k.startswith(WAITING)}
    counts = {
        "lambda_invocations": sum(paid.values()),
        "gb_seconds": sum(v for k, v in gb_seconds.items() if k in paid),
        "api_requests": api_requests,
        "write_units": units["write"],
        "read_units": units["read"],
        # Sends, and a receive and a delete for each batch taken (the driver's deletes): the
        # pollers' empty receives are theirs whatever is paid (long polls, on AWS).
        "sqs_requests": sum(v for k, v in calls.items() if k.startswith("sqs:Send"))
        + 2 * sum(v for k, v in calls.items() if k.startswith("sqs:Delete")),
        "events": calls["events:PutEvents"],
        "scheduler_invocations": scheduler_invocations,
        "s3_puts": calls["s3:PutObject"],
        "s3_gets": calls["s3:GetObject"],
        "secrets_calls": sum(v for k, v in calls.items() if k.startswith("secretsmanager:")),
        "log_bytes": log_bytes,
        "functions": dict(paid),
    }
    for name, rate in (baseline or {}).items():
        counts[name] = max(0, counts[name] - rate * seconds)
    price = (
        counts["lambda_invocations"] * PRICES["lambda_request"]
        + counts["gb_seconds"] * PRICES["lambda_gb_second_arm64"]
        + api_requests * PRICES["api_request"]
        + counts["write_units"] * PRICES["write_unit"]
        + counts["read_units"] * PRICES["read_unit"]
        + counts["sqs_requests"] * PRICES["sqs_request"]
        + counts["events"] * PRICES["event"]
        + scheduler_invocations * PRICES["scheduler_invocation"]
        + counts["s3_puts"] * PRICES["s3_put"]
        + counts["s3_gets"] * PRICES["s3_get"]
        + counts["secrets_calls"] * PRICES["secrets_call"]
        + log_bytes / 1e9 * PRICES["log_gb"]
    )
    return counts, price


class Counted:
    """Counts the API requests a scenario makes."""

    def __init__(self):
        self.requests = 0

    def __call__(self, *args, **kwargs):
        self.requests += 1
        return call(*args, **kwargs)


def payout_setting():
    """A customer with a webhook endpoint and an approver: the set-up a payout is measured in."""
    customer_id, key = customer()
    receiver = Receiver()
    ok(call("POST", "/v1/webhook_endpoints", key, {"url": receiver.url, "events": ["*"]}), 201)
    signer = approver(customer_id, key)
    time.sleep(3)  # the set-up's own stream work, before the mark
    return customer_id, key, signer, receiver


def payout_lifecycle(api, key, customer_id, signer):
    created = ok(api("POST", "/v1/operations", key, payout(customer_id, "two_step", [125_000])), 201)
    ok(api("POST", f"/v1/operations/{created['id']}/approve", signer, {}))
    status_of(f"/v1/operations/{created['id']}", key, {"completed"})


def payroll_file(api, key, lines):
    csv = "beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\n" + "".join(
        f"RUT,{i}-K,psp-local:sandbox,{i:08},{1_000 + 10 * i},CLP,line {i}\n" for i in range(lines)
    )
    file = ok(api("POST", "/v1/files?workflow=auto", key, data=csv.encode(), headers={"Content-Type": "text/csv"}), 202)
    status_of(f"/v1/files/{file['id']}", key, {"completed"})
    for operation in ok(call("GET", "/v1/operations?limit=100", key))["data"]:
        status_of(f"/v1/operations/{operation['id']}", key, {"completed"})


def settle(logs, quiet_seconds=4):
    """Waits until the functions have been idle (but for the timers) for a few seconds."""
    last = None
    while True:
        text = logs.since("sam-lambda.log")
        busy = len([l for l in text.splitlines() if l.startswith("Invoking ") and "schedule-" not in l])
        if busy == last:
            return
        last = busy
        time.sleep(quiet_seconds)


def row(label, counts, price):
    c = counts
    return (
        f"| {label} | {c['lambda_invocations']} | {c['gb_seconds']:.2f} | {c['api_requests']} | {c['write_units']:.0f} | "
        f"{c['read_units']:.1f} | {c['sqs_requests']} | {c['events']} | {c['scheduler_invocations']} | "
        f"{c['s3_puts']} / {c['s3_gets']} | {c['secrets_calls']} | {c['log_bytes'] / 1024:.1f} | ${price:.6f} |"
    )


def idle_rates(logs, seconds=20):
    """What an idle stack's timers read and write each second."""
    logs.mark()
    time.sleep(seconds)
    counts, _ = measure(logs, 0, 0)
    return {k: counts[k] / seconds for k in ("write_units", "read_units", "sqs_requests", "events", "secrets_calls")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--file-lines", type=int, default=1000)
    args = parser.parse_args()
    logs = Logs(Path(state()["emulator_log"]).parent)
    customer_id, key, signer, _receiver = payout_setting()
    settle(logs)
    baseline = idle_rates(logs)
    print("| what | Lambda invocations | billed GB-s (x86_64 debug, emulator) | API requests | DynamoDB write units | read units | SQS requests | EventBridge events | Scheduler invocations | S3 puts / gets | Secrets Manager calls | logs KB | on demand |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    logs.mark()
    started = time.time()
    api = Counted()
    payout_lifecycle(api, key, customer_id, signer)
    settle(logs)
    counts, price = measure(logs, api.requests, 0, baseline, time.time() - started)
    print(row("one-item payout lifecycle (two_step, one webhook endpoint)", counts, price))
    print(f"<!-- functions: {counts['functions']}; idle timers each second: {baseline} -->")
    _, file_key = customer()
    logs.mark()
    started = time.time()
    api = Counted()
    payroll_file(api, file_key, args.file_lines)
    settle(logs)
    counts, price = measure(logs, api.requests, 0, baseline, time.time() - started)
    print(row(f"payroll file of {args.file_lines} lines (auto, no webhook endpoint)", counts, price))
    print(f"<!-- functions: {counts['functions']} -->")


if __name__ == "__main__":
    main()

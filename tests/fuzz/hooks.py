"""Schemathesis hooks for `scripts/test`'s fuzzing: alongside each generated body, a copy made
realistic (the customer `scripts/test` created, an active currency, a workflow that exists, the
sandbox rail), so the fuzzer's creates succeed and the document's links carry real ids on to
the operations that act on them (approve, cancel, retry, pause, adjust, ...). The generated
body is still sent as it is half of the time: validation is fuzzed as before.

Rail reports are signed with the server's rail secret half of the time, and a realistic one
names a transaction the service holds, so the reports reach the transaction's state machine
and not only the signature check."""

import hashlib
import hmac
import json
import os
import time
import urllib.request
import uuid

import schemathesis
from hypothesis import strategies as st

CUSTOMER = os.environ["FUZZ_CUSTOMER_ID"]
KEPT_KEYS = os.environ["FUZZ_KEEP_KEYS"].split()
BASE_URL = os.environ["FUZZ_BASE_URL"]
ADMIN_KEY = os.environ["FUZZ_ADMIN_KEY"]
RAIL_SECRET = os.environ["FUZZ_RAIL_SECRET"]


def get(path):
    request = urllib.request.Request(BASE_URL + path, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    return json.load(urllib.request.urlopen(request))["data"]


known_transactions = {"at": 0.0, "ids": []}


def transaction_ids():
    """Transactions of the customer's newest operations (the fuzzer's creates made them),
    looked up again once a second at most."""
    if time.monotonic() - known_transactions["at"] > 1:
        operations = get(f"/v1/operations?customer_id={CUSTOMER}&limit=10")
        known_transactions["ids"] = [t["id"] for o in operations for t in get(f"/v1/transactions?operation_id={o['id']}")]
        known_transactions["at"] = time.monotonic()
    return known_transactions["ids"]


def realistic_operation(operation):
    operation = dict(operation)
    operation["type"] = "payout" if operation.get("type") != "collection" else "collection"
    operation["currency"] = "CLP"
    operation["workflow"] = "two_step" if len(operation.get("items", [])) % 2 else "auto"
    operation.pop("source_account_id", None)
    operation.pop("destination_account_id", None)
    operation["items"] = [
        {
            **item,
            # A whole number written without a point: 500.0 is refused (see the document).
            "amount": int(item.get("amount", 100)),
            "destination": {"rail": "psp-local:sandbox", "account": item.get("destination", {}).get("account", "000123")},
        }
        for item in operation.get("items", [])
    ]
    return operation


def realistic(label, body):
    if label == "POST /v1/operations":
        return {**realistic_operation(body), "customer_id": CUSTOMER}
    if label == "POST /v1/schedules":
        return {
            "customer_id": CUSTOMER,
            "expression": "rate(1 hours)" if len(body.get("expression", "")) % 2 else "cron(0 9 1 * ? *)",
            "timezone": "America/Santiago",
            "operation": realistic_operation(body.get("operation", {})),
        }
    if label == "POST /v1/accounts":
        return {"customer_id": CUSTOMER, "currency": "CLP" if len(body) % 2 else "USD"}
    if label == "POST /v1/webhook_endpoints":
        return {"customer_id": CUSTOMER, "url": "https://hooks.example.com/operations", "events": ["*"]}
    if label == "POST /v1/api_keys":
        return {**{k: v for k, v in body.items() if k != "user_id"}, "customer_id": CUSTOMER}
    if label == "POST /v1/rail_reports":
        known = transaction_ids()
        if not known:
            return None
        return {
            **body,
            "id": str(uuid.uuid4()),
            "rail": "psp-local:sandbox",
            "transaction_id": known[len(body.get("id", "")) % len(known)],
        }
    return None


@schemathesis.hook
def flatmap_body(ctx, body):
    try:
        made = realistic(ctx.operation.label, body)
    except (AttributeError, TypeError, ValueError):
        made = None  # a body generated to be invalid, shaped too far off to mend: sent as it is
    return st.just(body) if made is None else st.sampled_from([body, made])


KEY_CHANGES = ("DELETE /v1/api_keys/{id}", "POST /v1/api_keys/{id}/rotate")


@schemathesis.hook
def filter_path_parameters(ctx, path_parameters):
    # The keys the fuzzer runs with stay usable: revoked or rotated away, every later request
    # is a 401.
    on_keys = ctx.operation.label in KEY_CHANGES
    return not (on_keys and (path_parameters or {}).get("id") in KEPT_KEYS)


@schemathesis.hook
def flatmap_headers(ctx, headers):
    # Generated keys repeat ("0", "a") across different bodies, a 422 each time; half the
    # cases get a key of their own.
    if not headers or "Idempotency-Key" not in headers:
        return st.just(headers)
    return st.sampled_from([headers, {**headers, "Idempotency-Key": str(uuid.uuid4())}])


@schemathesis.hook
def before_call(ctx, case, kwargs):
    # However a case came by a kept key's id (generated, or taken from a response's data, which
    # the filter above does not see), the key is neither rotated nor revoked.
    if ctx.operation.label in KEY_CHANGES and (case.path_parameters or {}).get("id") in KEPT_KEYS:
        case.path_parameters = {**case.path_parameters, "id": "key_0fuzzkept"}
    # Nor is the customer suspended: its key's run would be refused whole.
    if ctx.operation.label == "POST /v1/customers/{id}" and (case.path_parameters or {}).get("id") == CUSTOMER:
        case.path_parameters = {**case.path_parameters, "id": "cus_0fuzzkept"}
    # A rail report's signature covers its exact bytes: the hook writes them, and signs half.
    if ctx.operation.label != "POST /v1/rail_reports" or not isinstance(case.body, dict):
        return
    body = json.dumps(case.body).encode()
    if len(body) % 2:
        return
    timestamp = int(time.time())
    signature = hmac.new(RAIL_SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    case.headers = {**(case.headers or {}), "X-Service-Signature": f"t={timestamp},v1={signature}"}
    kwargs["data"] = body

"""A client of the stack `stack.py up` started: the state file STACK_STATE names (read when
first needed), requests to its API, and the customers, approvers and payouts the scenarios use."""

import hashlib
import hmac
import json
import os
import re
import threading
import time
import uuid
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import requests

WAIT = float(os.environ.get("STACK_WAIT_SECONDS", "120"))
REPOSITORY = Path(__file__).resolve().parents[2]


@cache
def state():
    return json.loads(Path(os.environ["STACK_STATE"]).read_text())


def platform():
    return state()["platform_key"]


def call(method, path, key, body=None, **kwargs):
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": str(uuid.uuid4())}
    if body is not None:
        headers["Content-Type"] = "application/json"
        kwargs["data"] = json.dumps(body)
    headers.update(kwargs.pop("headers", {}))
    return requests.request(method, state()["api"] + path, headers=headers, timeout=60, **kwargs)


def ok(answer, status=200):
    assert answer.status_code == status, f"{answer.status_code} {answer.text}"
    return answer.json()


def until(what, check):
    """Polls `check` until it answers something truthy: that answer."""
    deadline = time.time() + WAIT
    while True:
        found = check()
        if found:
            return found
        assert time.time() < deadline, f"waited {WAIT} s for {what}"
        time.sleep(0.5)


def payout(customer_id, workflow, amounts):
    items = [
        {
            "beneficiary": {"id_type": "RUT", "id": f"7654321-{i}"},
            "destination": {"rail": "psp-local:sandbox", "account": f"00012345{i}"},
            "amount": amount,
            "reference": f"salary {i}",
        }
        for i, amount in enumerate(amounts)
    ]
    return {"customer_id": customer_id, "type": "payout", "currency": "CLP", "workflow": workflow, "items": items}


SCOPES = ["webhooks:manage", "operations:read", "operations:write", "operations:approve", "workflows:manage", "users:manage"]


def customer():
    made = ok(call("POST", "/v1/customers", platform(), {"name": "Stack Payroll"}), 201)
    key = ok(call("POST", "/v1/api_keys", platform(), {"customer_id": made["id"], "scopes": SCOPES}), 201)
    return made["id"], key["secret"]


def approver(customer_id, key):
    """A user of the customer with the approver role, and a key of theirs minted by the
    platform (a key the operation's creator minted could not decide on it)."""
    email = f"approver-{uuid.uuid4().hex[:8]}@acme.example"
    user = ok(call("POST", f"/v1/customers/{customer_id}/users", key, {"name": "Approver", "email": email, "roles": ["approver"]}), 201)
    minted = {"customer_id": customer_id, "user_id": user["id"], "scopes": ["operations:read", "operations:approve"]}
    return ok(call("POST", "/v1/api_keys", platform(), minted), 201)["secret"]


def status_of(path, key, wanted):
    def check():
        shown = ok(call("GET", path, key))
        return shown if shown["status"] in wanted else None

    return until(f"{path} to be {wanted}", check)


class Receiver:
    """A customer's webhook receiver over real HTTP: every delivery kept with its headers."""

    def __init__(self):
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def events(self, secret):
        """The events received, each checked against its signature."""
        found = []
        for headers, body in list(self.received):
            signature = headers["x-service-signature"]
            stamp = re.search(r"t=(\d+)", signature).group(1)
            expected = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
            assert f"v1={expected}" in signature, f"a delivery whose signature does not verify: {signature}"
            found.append(json.loads(body))
        return found


def one_line_file(key):
    """A one-line payroll file of the key's customer, made into its operation: the file."""
    csv = b"beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\nRUT,1-K,psp-local:sandbox,00000001,4000,CLP,line 1\n"
    file = ok(call("POST", "/v1/files?workflow=auto", key, data=csv, headers={"Content-Type": "text/csv"}), 202)
    status_of(f"/v1/files/{file['id']}", key, {"completed"})
    return file


def dead_letter(queue, task):
    """What SQS does with a message received too often: moves it to `queue`, a dead-letter
    queue of the stack (its logical id)."""
    sqs = boto3.client(
        "sqs",
        endpoint_url=state()["emulator"],
        region_name="us-east-1",
        aws_access_key_id=state()["admin_credentials"][0],
        aws_secret_access_key=state()["admin_credentials"][1],
    )
    sqs.send_message(QueueUrl=state()["queues"][queue], MessageBody=json.dumps(task))


def work_item_about(customer_id, subject_type):
    """The customer's one exceptions work item about a `subject_type`, once it is open."""

    def found():
        items = ok(call("GET", f"/v1/work_items?queue=exceptions&customer_id={customer_id}", platform()))["data"]
        return [i for i in items if i["subject"]["type"] == subject_type]

    (item,) = until(f"the {subject_type} work item", found)
    return item


def denials():
    """Each call the emulator refused a function, as `IAM denied: <user> <action> on <resource>`."""
    return [line for line in Path(state()["emulator_log"]).read_text().splitlines() if line.startswith("IAM denied:")]

"""The service end to end through the stack as SAM deploys it (`stack.py up`): every request
goes through `sam local start-api` to the function the template routes it to, every trigger
through the driver and `sam local start-lambda`, every AWS call signed as its function's own
IAM user in the emulator. STACK_STATE names the state file `stack.py up` wrote."""

import base64
import json
import subprocess
import time
import uuid
from pathlib import Path

from client import (
    REPOSITORY,
    Receiver,
    approver,
    call,
    customer,
    dead_letter,
    denials,
    ok,
    one_line_file,
    payout,
    platform,
    state,
    status_of,
    until,
    work_item_about,
)

def test_a_payout_is_approved_submitted_confirmed_and_its_signed_webhooks_received():
    customer_id, key = customer()
    receiver = Receiver()
    endpoint = ok(call("POST", "/v1/webhook_endpoints", key, {"url": receiver.url, "events": ["*"]}), 201)
    created = ok(call("POST", "/v1/operations", key, payout(customer_id, "two_step", [125_000])), 201)
    assert created["status"] == "pending_approval"
    path = f"/v1/operations/{created['id']}"
    # Four-eyes: its creator cannot approve it; another user of the customer can.
    assert call("POST", f"{path}/approve", key, {}).status_code == 403
    ok(call("POST", f"{path}/approve", approver(customer_id, key), {"comment": "checked"}))
    completed = status_of(path, key, {"completed"})
    transactions = ok(call("GET", f"/v1/transactions?operation_id={created['id']}", key))["data"]
    assert [t["status"] for t in transactions] == ["confirmed"], transactions

    def delivered():
        types = [e["type"] for e in receiver.events(endpoint["secret"])]
        return types if "operation.completed" in types else None

    types = until("operation.completed to reach the receiver", delivered)
    for expected in ("operation.created", "operation.approved", "transaction.pending", "transaction.confirmed"):
        assert expected in types, types
    assert completed["version"] > created["version"]


def test_a_rejected_and_a_cancelled_operation_make_no_transaction():
    customer_id, key = customer()
    rejected = ok(call("POST", "/v1/operations", key, payout(customer_id, "two_step", [10_000])), 201)
    ok(call("POST", f"/v1/operations/{rejected['id']}/reject", approver(customer_id, key), {"reason": "not ours"}))
    cancelled = ok(call("POST", "/v1/operations", key, payout(customer_id, "two_step", [20_000])), 201)
    ok(call("POST", f"/v1/operations/{cancelled['id']}/cancel", key, {"reason": "sent twice"}))
    assert ok(call("GET", f"/v1/operations/{rejected['id']}", key))["status"] == "rejected"
    assert ok(call("GET", f"/v1/operations/{cancelled['id']}", key))["status"] == "cancelled"
    time.sleep(3)  # time for the stream to have made any transaction it wrongly would
    for operation in (rejected, cancelled):
        assert ok(call("GET", f"/v1/transactions?operation_id={operation['id']}", key))["data"] == []


def test_a_rail_failure_is_an_exception_on_the_desk():
    customer_id, key = customer()
    # The sandbox answers an amount ending in 07 with transient errors for ever: the submit
    # function retries with backoff (about a minute in all), then the transaction needs an
    # operator, and the desk's stream function opens its exceptions item.
    created = ok(call("POST", "/v1/operations", key, payout(customer_id, "auto", [30_007])), 201)

    def stuck():
        found = ok(call("GET", f"/v1/transactions?operation_id={created['id']}", key))["data"]
        return found if found and found[0]["status"] == "needs_attention" else None

    (transaction,) = until("the transaction to need attention", stuck)

    def item():
        items = ok(call("GET", f"/v1/work_items?queue=exceptions&customer_id={customer_id}", platform()))["data"]
        return [i for i in items if i["subject"]["id"] == transaction["id"]]

    (exception,) = until("the exceptions work item", item)
    assert exception["kind"] == "transaction_needs_attention", exception
    # The operator, having asked the rail, resolves it as failed: the item closes with it.
    body = {"status": "failed", "reason": "The rail never took it"}
    ok(call("POST", f"/v1/transactions/{transaction['id']}/resolve", platform(), body))

    def closed():
        shown = ok(call("GET", f"/v1/work_items/{exception['id']}", platform()))
        return shown if shown["status"] == "done" else None

    until("the work item to close", closed)


def test_a_dead_letter_becomes_a_work_item_and_is_redriven_to_its_queue():
    customer_id, key = customer()
    file = one_line_file(key)
    dead_letter("FilesDeadLetterQueue", {"task": "split_file.v1", "file_id": file["id"]})
    dead = work_item_about(customer_id, "dead_letter")
    # Redriven: back to the files queue (the resolve function's grant on it), where the
    # split, idempotent by the file's id, makes nothing twice.
    resolved = ok(call("POST", f"/v1/work_items/{dead['id']}/resolve", platform(), {}))
    assert resolved["status"] == "done", resolved
    time.sleep(3)
    operations = ok(call("GET", "/v1/operations", key))["data"]
    assert len(operations) == 1, operations


def test_a_payroll_file_becomes_its_operations():
    customer_id, key = customer()
    # Amounts ending in 0: the sandbox confirms each (other endings choose its failures).
    lines = "".join(f"RUT,{i}-K,psp-local:sandbox,{i:08},{1_000 + 10 * i},CLP,line {i}\n" for i in range(25))
    csv = "beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\n" + lines
    file = ok(call("POST", "/v1/files?workflow=auto", key, data=csv.encode(), headers={"Content-Type": "text/csv"}), 202)
    shown = status_of(f"/v1/files/{file['id']}", key, {"completed"})
    operations = ok(call("GET", "/v1/operations", key))["data"]
    assert sum(len(o["items"]) for o in operations) == 25, shown
    for operation in operations:
        status_of(f"/v1/operations/{operation['id']}", key, {"completed"})


def test_a_schedule_fires_through_eventbridge_scheduler_and_makes_its_operation():
    customer_id, key = customer()
    operation = payout(customer_id, "auto", [15_000])
    operation.pop("customer_id")
    schedule = ok(call("POST", "/v1/schedules", key, {"expression": "rate(1 minutes)", "operation": operation}), 201)

    def made():
        occurrences = ok(call("GET", f"/v1/schedules/{schedule['id']}/occurrences", key))["data"]
        return [o for o in occurrences if o["status"] == "created"]

    (first, *_) = until("the schedule's first occurrence", made)
    status_of(f"/v1/operations/{first['operation_id']}", key, {"completed"})
    ok(call("DELETE", f"/v1/schedules/{schedule['id']}", key))


def test_a_reconciliation_matches_what_was_paid_and_opens_a_break_for_what_was_not():
    customer_id, key = customer()
    created = ok(call("POST", "/v1/operations", key, payout(customer_id, "auto", [42_000])), 201)
    status_of(f"/v1/operations/{created['id']}", key, {"completed"})
    (transaction,) = ok(call("GET", f"/v1/transactions?operation_id={created['id']}", key))["data"]
    day = transaction["created_at"][:10]
    statement = (
        "rail_reference,transaction_id,amount,currency,status,booked_on,direction\n"
        f"{transaction['rail_reference']},{transaction['id']},42000,CLP,confirmed,{day},debit\n"
        f"SBX-UNKNOWN-{uuid.uuid4().hex[:8]},,99000,CLP,confirmed,{day},debit\n"
    )
    body = {"rail": "psp-local:sandbox", "format": "csv", "statement": base64.b64encode(statement.encode()).decode()}
    reconciliation = ok(call("POST", "/v1/reconciliations", platform(), body), 201)
    assert reconciliation["outcomes"]["matched"] >= 1, reconciliation
    assert reconciliation["outcomes"]["unmatched"] == 1, reconciliation
    again = ok(call("POST", "/v1/reconciliations", platform(), body), 201)
    assert again["transitions_applied"] == 0, "the same statement again changes nothing"


def test_the_board_page_reads_the_stacks_api_in_chromium(tmp_path):
    customer_id, key = customer()
    waiting = ok(call("POST", "/v1/operations", key, payout(customer_id, "two_step", [125_000])), 201)
    run = subprocess.run(
        ["node", "stack-board.mjs", state()["api"], approver(customer_id, key), waiting["id"], str(tmp_path)],
        cwd=REPOSITORY / "tests/browser",
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    status_of(f"/v1/operations/{waiting['id']}", key, {"approved", "processing", "completed"})


def test_no_function_was_refused_a_call_by_its_policy():
    """Last: every call each function made above was within its own IAM policy."""
    assert denials() == [], "\n".join(denials())

"""Least privilege, read from the roles SAM makes of template.yaml: what each function may do
is what its code calls, and the wide grants a first deploy had cannot come back."""

import pytest

import template

CFN = template.transformed()
FUNCTIONS = template.functions(CFN)


def handler(function):
    return function["Properties"]["Handler"]


def grants():
    """(handler, statement) for every statement of every function's role."""
    for function in FUNCTIONS.values():
        for statement in template.statements(CFN, template.role_of(CFN, function)):
            if statement.get("Effect", "Allow") == "Allow":
                yield handler(function), statement


def holders(action, resource_part):
    """The handlers granted `action` on a resource that contains `resource_part`."""
    return sorted(
        {
            name
            for name, statement in grants()
            if action in template.actions(statement)
            and any(resource_part in str(r) for r in template.resources(statement))
        }
    )


def test_no_function_scans_the_table_or_holds_a_wildcard_action():
    for name, statement in grants():
        for action in template.actions(statement):
            assert action != "dynamodb:Scan", f"{name} may scan the table; the code never does"
            assert not action.endswith(":*") and action != "*", f"{name} holds {action}"


def test_webhook_signing_secrets_are_read_by_the_sender_alone():
    assert holders("secretsmanager:GetSecretValue", "secret:ops/${Environment}/webhook/") == ["queue-webhook-send"]
    for name, statement in grants():
        if "secretsmanager:GetSecretValue" in template.actions(statement):
            for resource in template.resources(statement):
                assert not str(resource).endswith(("ops/${Environment}/*", ":secret:*")), f"{name}: {resource}"


def test_signing_secrets_are_made_and_let_go_only_where_the_code_does():
    made = ["api-create-webhook-endpoint", "api-rotate-webhook-secret"]
    assert holders("secretsmanager:CreateSecret", "webhook/") == made
    assert holders("secretsmanager:PutSecretValue", "webhook/") == made
    assert holders("secretsmanager:DeleteSecret", "webhook/") == sorted(
        made + ["api-delete-webhook-endpoint", "schedule-secret-sweep"]
    )


def test_every_function_that_builds_the_service_reads_the_pepper_and_the_rail_secret():
    # Every function but stream-outbox, which needs the table alone, starts the service:
    # it reads the API-key pepper (and the rail secret, with HTTP rails) before anything else.
    for function in FUNCTIONS.values():
        if handler(function) == "stream-outbox":
            continue
        readable = [
            r
            for s in template.statements(CFN, template.role_of(CFN, function))
            if "secretsmanager:GetSecretValue" in template.actions(s)
            for r in template.resources(s)
        ]
        for secret in ({"Ref": "ApiKeyPepper"}, {"Ref": "RailSecret"}):
            assert secret in readable, f"{handler(function)} cannot read {secret['Ref']}"


@pytest.mark.parametrize("service", ["sqs", "s3", "dynamodb", "events", "scheduler"])
def test_queues_streams_buckets_and_buses_are_granted_by_name(service):
    for name, statement in grants():
        if not any(a.startswith(service + ":") for a in template.actions(statement)):
            continue
        for resource in template.resources(statement):
            assert resource != "*", f"{name} holds {service} on every resource"
            if service == "s3":
                # Objects under one prefix, never the bucket itself.
                assert any(f"/{p}/*" in str(resource) for p in ("files", "answers", "reconciliations", "bank_files")), (
                    f"{name}: {resource}"
                )


def test_bank_files_are_written_by_the_submitter_and_read_where_they_are_sent_or_shown():
    # The submissions worker writes a file rail's pain.001 at the cut-off and reads it back to
    # hand it over again; an operator reads it through GET /v1/bank_files/{id}.
    assert holders("s3:PutObject", "/bank_files/") == ["queue-rail-submit"]
    assert holders("s3:GetObject", "/bank_files/") == ["api-get-bank-file", "queue-rail-submit"]


def test_stream_and_queue_consumers_read_only_their_own_source():
    sources = {}
    for mapping in CFN["Resources"].values():
        if mapping["Type"] == "AWS::Lambda::EventSourceMapping":
            function = mapping["Properties"]["FunctionName"]["Ref"]
            sources.setdefault(handler(FUNCTIONS[function]), []).append(mapping["Properties"]["EventSourceArn"])
    for function in FUNCTIONS.values():
        consumed = sources.get(handler(function), [])
        for statement in template.statements(CFN, template.role_of(CFN, function)):
            acts = template.actions(statement)
            if "sqs:ReceiveMessage" in acts or "dynamodb:GetRecords" in acts:
                for resource in template.resources(statement):
                    if handler(function) == "stream-replay":
                        continue  # reads its notes queue and the stream by hand
                    assert resource in consumed, f"{handler(function)} reads {resource}, which it does not consume"

"""A grant taken out of a copy of template.yaml (the files queue, from the function that
redrives dead letters, as it was before it was granted) makes the stack run on that copy fail
where the function calls outside its policy: the operator's redrive is refused, and the
emulator names the function and the action. STACK_STATE names the state file of a stack
`stack.py up --template` started on the copy `--write-copy` makes."""

import re
import sys

from client import call, customer, dead_letter, denials, one_line_file, platform, work_item_about

GRANT = "        - SQSSendMessagePolicy:\n            QueueName: !GetAtt FilesQueue.QueueName\n"
FUNCTION = "  ResolveWorkItemFunction:\n"


def without_the_grant(template):
    """`template` with the files-queue grant taken out of the resolve function alone."""
    start = template.index(FUNCTION) + len(FUNCTION)
    end = start + re.search(r"\n  [A-Za-z]", template[start:]).start()
    at = template.index(GRANT, start)
    assert at < end, "the grant is no longer in the resolve function's policy"
    return template[:at] + template[at + len(GRANT) :]


def test_the_function_outside_its_policy_is_named_with_the_action():
    customer_id, key = customer()
    file = one_line_file(key)
    dead_letter("FilesDeadLetterQueue", {"task": "split_file.v1", "file_id": file["id"]})
    dead = work_item_about(customer_id, "dead_letter")
    redriven = call("POST", f"/v1/work_items/{dead['id']}/resolve", platform(), {})
    assert redriven.status_code >= 500, redriven.text
    refused = [d for d in denials() if "user/fn-ResolveWorkItemFunction sqs:SendMessage on " in d]
    assert refused and refused[0].endswith("-FilesQueue"), "\n".join(denials())


if __name__ == "__main__" and sys.argv[1:2] == ["--write-copy"]:
    source, copy = sys.argv[2], sys.argv[3]
    with open(source) as f, open(copy, "w") as out:
        out.write(without_the_grant(f.read()))

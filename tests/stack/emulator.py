"""The stack's resources in the AWS emulator, made from template.yaml as SAM transforms it, and
one emulator IAM user per function holding exactly the policies of the function's role.

The emulator (moto_server) is started with INITIAL_NO_AUTH_ACTION_COUNT: its first calls make
the harness's own administrator, and every call after is checked against the IAM policies of
the user whose access key signed it (403 outside them). moto checks actions, and resources for
SQS; it does not evaluate conditions, resource policies or, for the other services, resources.
"""

import json
import secrets

import boto3
from botocore.config import Config

import template

ACCOUNT = "123456789012"
REGION = "us-east-1"
# Calls the emulator answers before it checks IAM: the administrator's user, policy and key.
UNCHECKED_CALLS = 3
# The services whose requests moto checks against a statement's resources. For the others it
# checks the action against "*", which no resource-scoped statement matches: their statements
# are given to it with "*" as the resource, so that their actions are enforced here and their
# resources by tests/stack/test_policies.py.
RESOURCES_CHECKED = ("sqs", "s3")
# Calls AWS authorizes by another action than their own name, which moto knows them by: a batch
# by the single action, a transaction by the actions of its items.
AUTHORIZED_AS = {
    "sqs:SendMessage": ["sqs:SendMessageBatch"],
    "sqs:DeleteMessage": ["sqs:DeleteMessageBatch"],
    "sqs:ChangeMessageVisibility": ["sqs:ChangeMessageVisibilityBatch"],
    "dynamodb:PutItem": ["dynamodb:TransactWriteItems"],
    "dynamodb:UpdateItem": ["dynamodb:TransactWriteItems"],
    "dynamodb:DeleteItem": ["dynamodb:TransactWriteItems"],
    "dynamodb:ConditionCheckItem": ["dynamodb:TransactWriteItems"],
    "dynamodb:GetItem": ["dynamodb:TransactGetItems"],
}


class Emulator:
    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.admin = None

    def client(self, service, credentials=None):
        key, secret = credentials or self.admin or ("bootstrap", "bootstrap")
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(retries={"max_attempts": 2, "mode": "standard"}),
        )

    def make_admin(self):
        """The harness's own user, allowed everything: the first (unchecked) calls."""
        iam = self.client("iam")
        iam.create_user(UserName="stack-harness")
        iam.put_user_policy(
            UserName="stack-harness",
            PolicyName="everything",
            PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
            ),
        )
        key = iam.create_access_key(UserName="stack-harness")["AccessKey"]
        self.admin = (key["AccessKeyId"], key["SecretAccessKey"])


def provision(emulator, cfn, stack, parameters):
    """Makes the template's tables, queues, buckets, secrets, buses, schedule groups, managed
    policies and the Scheduler's role in the emulator. Answers the resolver of the stack's
    intrinsic functions."""
    names, attributes = {}, {}
    resolver = template.Resolver(cfn, parameters, names, attributes, REGION, ACCOUNT, stack)
    resources = cfn["Resources"]

    def of_type(kind):
        return [(k, v.get("Properties", {})) for k, v in resources.items() if v["Type"] == kind]

    dynamodb = emulator.client("dynamodb")
    for logical, props in of_type("AWS::DynamoDB::Table"):
        name = f"{stack}-{logical}"
        spec = props["StreamSpecification"]
        dynamodb.create_table(
            TableName=name,
            AttributeDefinitions=props["AttributeDefinitions"],
            KeySchema=props["KeySchema"],
            GlobalSecondaryIndexes=props.get("GlobalSecondaryIndexes", []),
            BillingMode=props["BillingMode"],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": spec["StreamViewType"]},
        )
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
        table = dynamodb.describe_table(TableName=name)["Table"]
        names[logical] = name
        attributes[f"{logical}.Arn"] = table["TableArn"]
        attributes[f"{logical}.StreamArn"] = table["LatestStreamArn"]

    sqs = emulator.client("sqs")
    queues = of_type("AWS::SQS::Queue")
    # Dead-letter queues first: a queue's redrive policy names its dead-letter queue's ARN.
    queues.sort(key=lambda q: "RedrivePolicy" in q[1])
    for logical, props in queues:
        name = f"{stack}-{logical}"
        attrs = {k: str(props[k]) for k in ("VisibilityTimeout", "MessageRetentionPeriod") if k in props}
        if "RedrivePolicy" in props:
            attrs["RedrivePolicy"] = json.dumps(resolver(props["RedrivePolicy"]))
        url = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
        names[logical] = url
        attributes[f"{logical}.Arn"] = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
        attributes[f"{logical}.QueueName"] = name

    s3 = emulator.client("s3")
    for logical, _ in of_type("AWS::S3::Bucket"):
        name = f"{stack}-{logical}".lower()
        s3.create_bucket(Bucket=name)
        names[logical] = name
        attributes[f"{logical}.Arn"] = f"arn:aws:s3:::{name}"

    manager = emulator.client("secretsmanager")
    for logical, props in of_type("AWS::SecretsManager::Secret"):
        name = resolver(props["Name"])
        arn = manager.create_secret(Name=name, SecretString=secrets.token_hex(32))["ARN"]
        names[logical] = arn

    events = emulator.client("events")
    for logical, props in of_type("AWS::Events::EventBus"):
        name = resolver(props["Name"])
        arn = events.create_event_bus(Name=name)["EventBusArn"]
        names[logical] = name
        attributes[f"{logical}.Arn"] = arn
        attributes[f"{logical}.Name"] = name

    scheduler = emulator.client("scheduler")
    for logical, props in of_type("AWS::Scheduler::ScheduleGroup"):
        name = resolver(props["Name"])
        scheduler.create_schedule_group(Name=name)
        names[logical] = name

    iam = emulator.client("iam")
    for logical, props in of_type("AWS::IAM::ManagedPolicy"):
        document = as_checked_by_the_emulator(resolver(props["PolicyDocument"]))
        arn = iam.create_policy(PolicyName=f"{stack}-{logical}", PolicyDocument=json.dumps(document))["Policy"]["Arn"]
        names[logical] = arn
    # Roles the functions do not run as (the Scheduler's): named, for iam:PassRole.
    for logical, props in of_type("AWS::IAM::Role"):
        assumed_by = json.dumps(props.get("AssumeRolePolicyDocument", {}))
        if "lambda.amazonaws.com" in assumed_by:
            continue
        role = iam.create_role(RoleName=f"{stack}-{logical}", AssumeRolePolicyDocument=json.dumps(resolver(props["AssumeRolePolicyDocument"])))
        attributes[f"{logical}.Arn"] = role["Role"]["Arn"]
        names[logical] = role["Role"]["RoleName"]

    # What no function calls locally: a name is enough.
    for logical, resource in resources.items():
        if logical not in names and resource["Type"] in ("AWS::Logs::LogGroup", "AWS::SNS::Topic"):
            names[logical] = f"{stack}-{logical}"
            attributes[f"{logical}.Arn"] = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{stack}-{logical}:*"
    for logical, resource in resources.items():
        if resource["Type"] == "AWS::Lambda::Function":
            names[logical] = logical
            attributes[f"{logical}.Arn"] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical}"
        if resource["Type"] == "AWS::ApiGatewayV2::Api":
            names[logical] = "local"
    return resolver


def function_users(emulator, cfn, resolver):
    """One IAM user per function, holding its role's policies as the transform made them:
    inline policies as the user's own, the template's managed policies attached. Answers each
    function's logical id → (access key, secret key)."""
    iam = emulator.client("iam")
    credentials = {}
    for logical, function in template.functions(cfn).items():
        role = cfn["Resources"][template.role_of(cfn, function)]["Properties"]
        user = f"fn-{logical}"[:64]
        iam.create_user(UserName=user)
        for index, policy in enumerate(role.get("Policies", [])):
            document = {"Version": "2012-10-17", **resolver(policy["PolicyDocument"])}
            document = as_checked_by_the_emulator(document)
            iam.put_user_policy(UserName=user, PolicyName=f"p{index}", PolicyDocument=json.dumps(document))
        for arn in role.get("ManagedPolicyArns", []):
            if isinstance(arn, dict) and "Ref" in arn:
                iam.attach_user_policy(UserName=user, PolicyArn=resolver(arn))
            else:
                name = template._text(arn).rsplit("/", 1)[-1]
                if name not in template.AWS_MANAGED:
                    raise ValueError(f"{logical} attaches {name}, which this harness does not know")
        key = iam.create_access_key(UserName=user)["AccessKey"]
        credentials[logical] = (key["AccessKeyId"], key["SecretAccessKey"])
    return credentials


def as_checked_by_the_emulator(document):
    """`document` as the emulator can check it (RESOURCES_CHECKED, AUTHORIZED_AS)."""
    statements = []
    for statement in template._listed(document["Statement"]):
        actions = template._listed(statement["Action"])
        actions = list(dict.fromkeys(actions + [alias for a in actions for alias in AUTHORIZED_AS.get(a, [])]))
        scoped = [a for a in actions if a.split(":")[0] in RESOURCES_CHECKED]
        unscoped = [a for a in actions if a not in scoped]
        if scoped:
            statements.append({**statement, "Action": scoped})
        if unscoped:
            statements.append({**statement, "Action": unscoped, "Resource": "*"})
    return {**document, "Statement": statements}

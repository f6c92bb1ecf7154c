"""template.yaml as SAM deploys it: transformed by aws-sam-translator (the same library `sam
deploy` and CloudFormation use), each function's role read back as the policies it holds, and
the intrinsic functions resolved against one stack's resources."""

import json
import os
import re
from pathlib import Path

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

REPOSITORY = Path(__file__).resolve().parents[2]
# Policies AWS manages, which the transform names by ARN: what a local stack grants for them.
# Logs and traces go to stdout and nowhere, locally: they grant nothing the functions call here.
AWS_MANAGED = {
    "AWSLambdaBasicExecutionRole": [],
    "AWSXrayWriteOnlyAccess": [],
}


def load(path=REPOSITORY / "template.yaml"):
    """The template as written (intrinsics as `Fn::…` dicts)."""
    return yaml_parse(Path(path).read_text())


class _NoManagedPolicies:
    def load(self):
        return {}


def transformed(template=None, parameters=None):
    """The CloudFormation template SAM makes of `template` (CodeUri as after `sam package`)."""
    template = json.loads(json.dumps(template if template is not None else load()))
    template["Globals"]["Function"]["CodeUri"] = "s3://code/bootstrap.zip"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(template, parameters or {}, _NoManagedPolicies())


def functions(cfn):
    """Each Lambda function's logical id and its resource, in the template's order."""
    return {k: v for k, v in cfn["Resources"].items() if v["Type"] == "AWS::Lambda::Function"}


def role_of(cfn, function):
    """The logical id of the role a function runs as."""
    role = function["Properties"]["Role"]
    return role["Fn::GetAtt"][0]


def statements(cfn, role_id):
    """Every statement of a role: its inline policies and the template's managed policies it
    attaches; AWS's managed policies by what AWS_MANAGED says they grant here."""
    role = cfn["Resources"][role_id]["Properties"]
    found = []
    for policy in role.get("Policies", []):
        found.extend(_listed(policy["PolicyDocument"]["Statement"]))
    for arn in role.get("ManagedPolicyArns", []):
        if isinstance(arn, dict) and "Ref" in arn:
            document = cfn["Resources"][arn["Ref"]]["Properties"]["PolicyDocument"]
            found.extend(_listed(document["Statement"]))
        else:
            name = _text(arn).rsplit("/", 1)[-1]
            if name not in AWS_MANAGED:
                raise ValueError(f"{role_id} attaches {name}, which this harness does not know")
            found.extend(AWS_MANAGED[name])
    return found


def _listed(value):
    return value if isinstance(value, list) else [value]


def _text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Sub" in value:
        return value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
    return json.dumps(value)


def actions(statement):
    return _listed(statement["Action"])


def resources(statement):
    return [_text(r) if not isinstance(r, dict) or "Fn::Sub" in r else r for r in _listed(statement["Resource"])]


class Resolver:
    """Resolves the intrinsic functions of a template against one stack: `names` maps each
    logical id to its physical id (`Ref`), `attributes` each `Logical.Attribute` to its value."""

    def __init__(self, cfn, parameters, names, attributes, region="us-east-1", account="123456789012", stack="local"):
        self.cfn = cfn
        self.parameters = {k: str(v.get("Default", "")) for k, v in cfn.get("Parameters", {}).items()}
        self.parameters.update(parameters)
        self.names = names
        self.attributes = attributes
        self.pseudo = {
            "AWS::Region": region,
            "AWS::AccountId": account,
            "AWS::Partition": "aws",
            "AWS::StackName": stack,
            "AWS::URLSuffix": "amazonaws.com",
        }

    def condition(self, name):
        return self(self.cfn["Conditions"][name])

    def __call__(self, value):
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1 or not next(iter(value)).startswith(("Fn::", "Ref", "Condition")):
            return {k: self(v) for k, v in value.items()}
        (function, argument), = value.items()
        if function == "Ref":
            return self._ref(argument)
        if function == "Fn::GetAtt":
            logical, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
            return self.attributes[f"{logical}.{attribute}"]
        if function == "Fn::Sub":
            text, extra = (argument, {}) if isinstance(argument, str) else (argument[0], self(argument[1]))
            def substitute(match):
                name = match.group(1)
                if name in extra:
                    return str(extra[name])
                if "." in name and not name.startswith("AWS::"):
                    return str(self.attributes[name])
                return str(self._ref(name))
            return re.sub(r"\$\{([^}!]+)\}", substitute, text)
        if function == "Fn::If":
            name, yes, no = argument
            return self(yes) if self.condition(name) else self(no)
        if function == "Fn::Equals":
            left, right = self(argument)
            return str(left) == str(right)
        if function == "Fn::Not":
            return not self(argument[0])
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(str(p) for p in self(parts))
        if function == "Fn::Select":
            index, items = argument
            return self(items)[int(index)]
        if function == "Condition":
            return self.condition(argument)
        raise ValueError(f"{function} is not resolved by this harness")

    def _ref(self, name):
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        return self.names[name]

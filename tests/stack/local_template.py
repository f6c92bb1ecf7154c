"""What `sam local` is given: template.yaml with each function's code where this machine built
it, and an environment file with the stack's resources as the emulator named them and each
function's own emulator credentials.

`sam local` gives every function its own process's AWS credentials; its `--env-vars` file
overrides only variables the template declares. The copy given to `sam local` therefore declares
the credentials (and the emulator's endpoint) among the functions' variables, empty, and the
file sets them per function: one `start-api` and one `start-lambda` serve every function, each
signing its calls as its own IAM user. Nothing else of the template is changed: handlers,
routes, memory, timeouts and event sources are as deployed.
"""

import json

import template

# Declared for `sam local` only: AWS sets these itself in a deployed function.
LOCAL_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def local_template(sam_template, code_dirs):
    """`sam_template` (as written) for `sam local`: each function's CodeUri the directory holding
    its bootstrap (`code_dirs`: binary name → directory), its build metadata gone (nothing is
    built by SAM), and the local variables declared."""
    local = json.loads(json.dumps(sam_template))
    function_globals = local["Globals"]["Function"]
    function_globals.pop("CodeUri", None)
    variables = function_globals["Environment"]["Variables"]
    for name in LOCAL_VARIABLES:
        variables[name] = ""
    for logical, resource in local["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        binary = resource["Metadata"]["BuildProperties"]["Binary"]
        resource.pop("Metadata")
        resource["Properties"]["CodeUri"] = str(code_dirs[binary])
    return local


def environment(sam_template, resolver, endpoint, credentials):
    """The `--env-vars` file: every function's variables resolved against the emulator's
    resources, with its own credentials."""
    shared = {k: _text(resolver(v)) for k, v in sam_template["Globals"]["Function"]["Environment"]["Variables"].items()}
    shared["AWS_ENDPOINT_URL"] = endpoint
    env = {}
    for logical, resource in sam_template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        own = resource["Properties"].get("Environment", {}).get("Variables", {})
        variables = {**shared, **{k: _text(resolver(v)) for k, v in own.items()}}
        key, secret = credentials[logical]
        variables["AWS_ACCESS_KEY_ID"] = key
        variables["AWS_SECRET_ACCESS_KEY"] = secret
        env[logical] = variables
    return env


def _text(value):
    return value if isinstance(value, str) else json.dumps(value)

"""The stack as SAM deploys it, on this machine: template.yaml's resources in the AWS emulator
(IAM enforced, one user per function holding its role's policies), every function served by
`sam local start-api` and `sam local start-lambda` in AWS's runtime interface emulator, and the
trigger driver doing what Lambda's pollers and EventBridge Scheduler do.

    python stack.py up --state target/stack/state.json

starts it all and writes what a client needs (the API's URL, the platform's first key, the
emulator's endpoint) to the state file; it runs until interrupted. `scripts/stack` does the
set-up around it (Docker's engine, the base image, the bootstraps built for this machine).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import template
from driver import Driver
from emulator import UNCHECKED_CALLS, Emulator, function_users, provision
from local_template import environment, local_template

HERE = Path(__file__).resolve().parent
PARAMETERS = {
    "Environment": "test",
    "SandboxRail": "true",
    "WebhookAllowLocal": "true",
    "Architecture": "x86_64",
}


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url, process, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args[2:4]} stopped: see its log")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except Exception:
            time.sleep(0.3)
    raise SystemExit(f"timed out waiting for {url}")


def start_emulator(work, python):
    port = free_port()
    log = open(work / "moto.log", "w")
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(UNCHECKED_CALLS)}
    process = subprocess.Popen(
        [python, str(HERE.parents[1] / "scripts/moto-serial.py"), str(port)],
        stdout=log,
        stderr=log,
        env=env,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    wait_for(f"{endpoint}/moto-api/", process)
    return process, endpoint


def start_sam(command, work, python, sam_template, env_file, port, name):
    log = open(work / f"sam-{name}.log", "w")
    args = [
        python,
        str(HERE / "sam_host_network.py"),
        "local",
        command,
        "--template",
        str(sam_template),
        "--env-vars",
        str(env_file),
        "--parameter-overrides",
        " ".join(f"{k}={v}" for k, v in PARAMETERS.items()),
        "--docker-network",
        "host",
        "--skip-pull-image",
        "--warm-containers",
        "LAZY",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def up(args):
    try:
        _up(args)
    finally:
        _stop_children()


_children = []


def _stop_children():
    for process in _children:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for process in _children:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    # The functions' containers sam local started, stopped with it.
    subprocess.run(
        "docker ps -aq --filter label=sam.cli.container.type=lambda | xargs -r docker rm -f",
        shell=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _up(args):
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    sam = template.load(args.template)
    cfn = template.transformed(sam)
    processes = _children

    def stop(*_):
        sys.exit(0)  # the children are stopped on the way out

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    moto, endpoint = start_emulator(work, python)
    processes.append(moto)
    emulator = Emulator(endpoint)
    emulator.make_admin()
    resolver = provision(emulator, cfn, args.stack, PARAMETERS)
    credentials = function_users(emulator, cfn, resolver)

    code_dirs = {}
    for binary in ("ops-api", "ops-schedules", "ops-triggers"):
        directory = work / "code" / binary
        directory.mkdir(parents=True, exist_ok=True)
        built = Path(args.bootstraps) / binary
        target = directory / "bootstrap"
        if target.exists():
            target.unlink()
        os.link(built, target) if os.stat(built).st_dev == os.stat(directory).st_dev else target.write_bytes(built.read_bytes())
        target.chmod(0o755)
        code_dirs[binary] = directory
    local = work / "template.json"
    local.write_text(json.dumps(local_template(sam, code_dirs), indent=1))
    env_file = work / "env.json"
    env_file.write_text(json.dumps(environment(sam, resolver, endpoint, credentials), indent=1))

    api_port, lambda_port = free_port(), free_port()
    api = start_sam("start-api", work, python, local, env_file, api_port, "api")
    processes.append(api)
    lambdas = start_sam("start-lambda", work, python, local, env_file, lambda_port, "lambda")
    processes.append(lambdas)
    wait_for(f"http://127.0.0.1:{api_port}/health", api, 300)
    wait_for(f"http://127.0.0.1:{lambda_port}/2015-03-31/functions/HealthFunction/invocations", lambdas, 300)

    driver = Driver(
        cfn,
        resolver,
        emulator,
        credentials,
        f"http://127.0.0.1:{lambda_port}",
        minute_seconds=float(args.minute_seconds),
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    first_key, failed = driver.invoke("FirstPlatformKeyFunction", {})
    if failed or not first_key:
        raise SystemExit(f"first-platform-key failed: {first_key}")
    driver.start()
    state = {
        "api": f"http://127.0.0.1:{api_port}",
        "lambda": f"http://127.0.0.1:{lambda_port}",
        "emulator": endpoint,
        "emulator_log": str(work / "moto.log"),
        "admin_credentials": list(emulator.admin),
        "platform_key": first_key["secret"],
        "queues": {k: resolver({"Ref": k}) for k, r in cfn["Resources"].items() if r["Type"] == "AWS::SQS::Queue"},
        "table": resolver({"Ref": "Table"}),
        "pid": os.getpid(),
    }
    state_file = Path(args.state)
    with tempfile.NamedTemporaryFile("w", dir=state_file.parent, delete=False) as f:
        json.dump(state, f, indent=1)
    os.replace(f.name, state_file)
    print(f"API: {state['api']}  platform key: {state['platform_key']}", flush=True)
    while True:
        time.sleep(3600)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("up", help="start the stack; runs until interrupted")
    start.add_argument("--template", default=str(template.REPOSITORY / "template.yaml"))
    start.add_argument("--work", default=str(template.REPOSITORY / "target/stack"))
    start.add_argument("--state", default=str(template.REPOSITORY / "target/stack/state.json"))
    start.add_argument("--bootstraps", default=str(template.REPOSITORY / "target/debug"))
    start.add_argument("--stack", default="ops-local")
    start.add_argument("--minute-seconds", default="60", help="how long a minute of the stack's own rate schedules lasts")
    args = parser.parse_args()
    if args.command == "up":
        up(args)


if __name__ == "__main__":
    main()

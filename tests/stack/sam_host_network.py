"""`sam`, with `--docker-network host` meaning the host's network.

SAM CLI takes `--docker-network host` but still starts each function's container on Docker's
default bridge, reaching its runtime emulator through a published port; a function there
cannot reach the emulator's services on loopback, and the bridge's private addresses are not
to be used on these machines. This runs the same SAM CLI with one change: a container asked
for the host network gets it (`network_mode: host`), and its runtime interface emulator listens
on the loopback port SAM chose for it (`--runtime-interface-emulator-address`) with its runtime
API on another free port (`--runtime-api-address`), so that several functions' containers
share the host's network without sharing a port. Everything else is SAM's own.
"""

import sys

from docker.models.containers import ContainerCollection
from samcli.cli.main import cli
from samcli.local.docker import container
from samcli.local.docker.utils import find_free_port

_create = container.Container.create


def _create_on_the_host_network(self, context):
    if self.network_id == "host":
        runtime_api = find_free_port(network_interface="127.0.0.1", start=9001, end=12000)
        self._entrypoint = list(self._entrypoint or []) + [
            "--runtime-interface-emulator-address",
            f"127.0.0.1:{self.rapid_port_host}",
            "--runtime-api-address",
            f"127.0.0.1:{runtime_api}",
        ]
        self._container_opts = {**(self._container_opts or {}), "network_mode": "host"}
    return _create(self, context)


container.Container.create = _create_on_the_host_network

_docker_create = ContainerCollection.create


def _docker_create_without_published_ports(self, image, command=None, **kwargs):
    # The host's network publishes nothing: the emulator listens on its loopback port itself.
    if kwargs.get("network_mode") == "host":
        kwargs.pop("ports", None)
    return _docker_create(self, image, command, **kwargs)


ContainerCollection.create = _docker_create_without_published_ports

if __name__ == "__main__":
    sys.argv[0] = "sam"
    sys.exit(cli())

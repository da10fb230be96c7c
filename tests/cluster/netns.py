"""Test hosts on this machine: network namespaces on one bridge (``ip netns``, veth pairs).

A :class:`TestNet` is a private /24 on a bridge in the root namespace (the "submitting
machine", address ``.1``) and any number of hosts, each a network namespace with its own
veth pair and address. Nothing is routed: the namespaces have no default route, so a host
reaches the bridge's subnet and nothing else (no cloud metadata endpoint, no outside
network), and nothing outside this machine can reach them (``ip_forward`` is not touched).

Commands run on a host with :meth:`TestNet.exec_argv`: ``ip netns exec`` plus ``unshare``
for a UTS namespace (the host's own hostname) and a private mount namespace in which the
``hide`` directories are covered by empty read-only tmpfs mounts (a worker does not see
the checkout's venv or sources).

Every net records its owner's pid under :data:`STATE_DIR`; a net whose owner is dead (a
killed test session) is removed by the next one (:func:`reap_stale`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.pg_server import pid_alive

STATE_DIR = Path("/tmp/slatelib-testnets")


class NetUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, no ``ip``, no ``unshare``)."""


def _run(*argv: str) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise NetUnavailable(f"{shlex.join(argv)}: {done.stderr.strip() or done.returncode}")


def can_make_nets() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "unshare", "mount", "hostname"):
        if shutil.which(tool) is None:
            return f"no {tool} command"
    return None


def _used_subnets() -> set[str]:
    done = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True)
    nets = set()
    for line in done.stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            addr = parts[parts.index("inet") + 1]
            nets.add(str(ipaddress.ip_interface(addr).network))
    return nets


@dataclass
class TestNet:
    """A bridge with a /24 and the hosts (namespaces) on it."""

    token: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: ipaddress.IPv4Network = field(init=False)
    hosts: dict[str, str] = field(default_factory=dict)
    """host name -> namespace name."""
    addresses: dict[str, str] = field(default_factory=dict)
    """host name -> address (the bridge is ``gateway``)."""

    def __post_init__(self) -> None:
        used = _used_subnets()
        for third in range(200, 250):
            candidate = ipaddress.ip_network(f"10.213.{third}.0/24")
            if str(candidate) not in used:
                self.subnet = candidate
                break
        else:
            raise NetUnavailable("no free 10.213.x.0/24 subnet")

    @property
    def bridge(self) -> str:
        return f"slc{self.token}br"

    @property
    def gateway(self) -> str:
        """The submitting machine's address on the net (the bridge)."""
        return str(self.subnet.network_address + 1)

    def create(self) -> None:
        """Make the bridge and record the owner.

        Raises:
            NetUnavailable: a command failed.
        """
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        (STATE_DIR / self.token).write_text(json.dumps({"pid": os.getpid(), "hosts": []}))
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    def add_host(self, name: str) -> str:
        """A new host ``name`` (a namespace with its own address); returns the address.

        Raises:
            NetUnavailable: a command failed.
        """
        index = len(self.hosts) + 2
        ns = f"slc{self.token}{name}"
        address = str(self.subnet.network_address + index)
        host_end, ns_end = f"slc{self.token}h{index}", f"slc{self.token}n{index}"
        self.hosts[name] = ns
        self.addresses[name] = address
        (STATE_DIR / self.token).write_text(
            json.dumps({"pid": os.getpid(), "hosts": list(self.hosts.values())}))
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
        _run("ip", "link", "set", ns_end, "netns", ns)
        _run("ip", "link", "set", host_end, "master", self.bridge)
        _run("ip", "link", "set", host_end, "up")
        _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", ns_end)
        _run("ip", "netns", "exec", ns, "ip", "link", "set", ns_end, "up")
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        return address

    def exec_argv(self, host: str, argv: list[str], *, hide: tuple[Path, ...] = ()) -> list[str]:
        """``argv`` run on ``host``: its network, its own hostname (``host``), and the
        ``hide`` directories covered by empty read-only tmpfs mounts."""
        mounts = "".join(f"mount -t tmpfs -o ro,size=4k slatelib-hidden {shlex.quote(str(d))} && "
                         for d in hide if d.is_dir())
        script = f"hostname {shlex.quote(host)} && {mounts}exec \"$@\""
        return ["ip", "netns", "exec", self.hosts[host], "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c", script, "sh", *argv]

    def pids(self, host: str) -> list[int]:
        """The processes running on ``host`` (in its namespace)."""
        done = subprocess.run(["ip", "netns", "pids", self.hosts[host]], capture_output=True,
                              text=True)
        return [int(p) for p in done.stdout.split()]

    def destroy(self) -> None:
        """Kill what runs on the hosts, then remove the namespaces and the bridge."""
        _destroy(self.token, list(self.hosts.values()))


def _destroy(token: str, namespaces: list[str]) -> None:
    for ns in namespaces:
        done = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        for pid in done.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["ip", "link", "del", f"slc{token}br"], capture_output=True)
    with contextlib.suppress(FileNotFoundError):
        (STATE_DIR / token).unlink()


def reap_stale() -> None:
    """Remove the nets of test sessions that died without removing theirs."""
    if not STATE_DIR.is_dir():
        return
    for entry in STATE_DIR.iterdir():
        try:
            state = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if not pid_alive(int(state.get("pid", 0))):
            _destroy(entry.name, list(state.get("hosts", [])))

"""A network namespace joined to the host by a veth pair: a test host of our own whose
link to the rest of the machine the test can cut (needs root, as CI has)."""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass, field


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class NetnsHost:
    name: str
    host_if: str
    ns_if: str
    host_addr: str
    ns_addr: str
    extra_links: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, subnet: int) -> NetnsHost:
        tag = uuid.uuid4().hex[:6]
        host = cls(
            name=f"sp-{tag}",
            host_if=f"sph{tag}",
            ns_if=f"spn{tag}",
            host_addr=f"10.213.{subnet}.1",
            ns_addr=f"10.213.{subnet}.2",
        )
        _ip("netns", "add", host.name)
        try:
            _ip("link", "add", host.host_if, "type", "veth", "peer", "name", host.ns_if)
            _ip("link", "set", host.ns_if, "netns", host.name)
            _ip("addr", "add", f"{host.host_addr}/30", "dev", host.host_if)
            _ip("link", "set", host.host_if, "up")
            host.exec_ip("addr", "add", f"{host.ns_addr}/30", "dev", host.ns_if)
            host.exec_ip("link", "set", host.ns_if, "up")
            host.exec_ip("link", "set", "lo", "up")
        except subprocess.CalledProcessError:
            host.destroy()
            raise
        return host

    @property
    def prefix(self) -> list[str]:
        """Prepend to a command to run it inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def exec_ip(self, *args: str) -> None:
        _ip("netns", "exec", self.name, "ip", *args)

    def add_link(self, subnet: int) -> tuple[str, str, str]:
        """A second veth pair into the namespace: (host interface, host address, namespace
        address) — so one link can be cut while the other keeps working."""
        tag = uuid.uuid4().hex[:6]
        host_if, ns_if = f"sph{tag}", f"spn{tag}"
        host_addr, ns_addr = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        self.extra_links.append(host_if)
        _ip("link", "set", ns_if, "netns", self.name)
        _ip("addr", "add", f"{host_addr}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        self.exec_ip("addr", "add", f"{ns_addr}/30", "dev", ns_if)
        self.exec_ip("link", "set", ns_if, "up")
        return host_if, host_addr, ns_addr

    def cut(self) -> None:
        _ip("link", "set", self.host_if, "down")

    def restore(self) -> None:
        _ip("link", "set", self.host_if, "up")

    def destroy(self) -> None:
        for link in [self.host_if, *self.extra_links]:
            subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)

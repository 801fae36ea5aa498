"""A real local Ray cluster of several nodes on this machine, for tests/integration/test_ray.py and
bench/ray_ceiling.py.

`start_local_cluster` runs ``ray start --head`` and then ``ray start --address`` once per further node, each
node with ``--num-cpus`` of its own and a custom resource ``node_<i>``, in a private ``--temp-dir`` and on
ports of its own (so it collides with no other cluster on the machine). Each ``ray start`` runs in a new
session, which its daemons and their workers inherit (workers get process groups of their own, not sessions):
`LocalRayCluster.stop` kills exactly the processes of those sessions (``ray stop`` would stop every Ray
process of the user).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LocalRayCluster", "start_local_cluster"]

_RAY = Path(sys.executable).with_name("ray")
_ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_raylet_start_wait_time_s": "120"}
"""Ray's own setting for how long ``ray start`` waits for its node to register (30 s by default): beside the
suite's other lanes on two cores the head once took longer, and ``ray start`` failed naming this setting."""


@dataclass
class LocalRayCluster:
    """A started cluster: its head's address, its temp dir, and the sessions whose processes are its own."""

    address: str
    temp_dir: Path
    nodes: int
    sessions: list[int] = field(default_factory=list)

    def processes(self) -> list[int]:
        """The pids of every process of the cluster (daemons and workers)."""
        mine = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    zombie = (entry / "stat").read_text().rpartition(")")[2].split()[0] == "Z"
                    if not zombie and os.getsid(int(entry.name)) in self.sessions:
                        mine.append(int(entry.name))
        return mine

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self.processes():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and self.processes():
                time.sleep(0.1)
            if not self.processes():
                break
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _start(args: list[str], cluster: LocalRayCluster) -> None:
    process = subprocess.Popen([str(_RAY), "start", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=_ENV, start_new_session=True)
    cluster.sessions.append(process.pid)
    output, _ = process.communicate(timeout=120)
    if process.returncode != 0:
        cluster.stop()
        raise RuntimeError(f"ray start {' '.join(args)} failed: {output[-2000:]}")


def start_local_cluster(nodes: int = 2, cpus_per_node: int = 1, object_store_mb: int = 200) -> LocalRayCluster:
    """Start a head and ``nodes - 1`` more nodes on this machine; wait until all of them are alive."""
    temp = Path(tempfile.mkdtemp(prefix="tkr", dir="/tmp"))  # short: Ray's socket paths must stay < 108 bytes
    gcs, dashboard, *ports = _free_ports(2 + 4 * nodes)  # all at once: none handed out twice
    cluster = LocalRayCluster(f"127.0.0.1:{gcs}", temp, nodes)
    common = ["--disable-usage-stats", f"--num-cpus={cpus_per_node}", "--num-gpus=0",
              f"--object-store-memory={object_store_mb * 1_000_000}", "--node-ip-address=127.0.0.1"]
    for i in range(nodes):
        agent, grpc, runtime_env, metrics = ports[4 * i:4 * i + 4]
        own = [f'--resources={{"node_{i}": 1}}', f"--dashboard-agent-listen-port={agent}",
               f"--dashboard-agent-grpc-port={grpc}", f"--runtime-env-agent-port={runtime_env}",
               f"--metrics-export-port={metrics}"]
        if i == 0:
            _start(["--head", f"--port={gcs}", f"--temp-dir={temp}", "--include-dashboard=false",
                    f"--dashboard-port={dashboard}", *common, *own], cluster)
        else:
            _start([f"--address={cluster.address}", *common, *own], cluster)
    _wait_for_nodes(cluster)
    return cluster


def _wait_for_nodes(cluster: LocalRayCluster, timeout_s: float = 60) -> None:
    code = ("import sys, time, ray\n"
            f"ray.init(address={cluster.address!r}, log_to_driver=False, logging_level='ERROR')\n"
            f"deadline = time.monotonic() + {timeout_s}\n"
            f"while sum(n['Alive'] for n in ray.nodes()) < {cluster.nodes} and time.monotonic() < deadline:\n"
            "    time.sleep(0.2)\n"
            f"sys.exit(0 if sum(n['Alive'] for n in ray.nodes()) >= {cluster.nodes} else 1)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_ENV,
                          timeout=timeout_s + 60)
    if done.returncode != 0:
        cluster.stop()
        raise RuntimeError(f"the local Ray cluster did not come up with {cluster.nodes} nodes: {done.stderr[-2000:]}")

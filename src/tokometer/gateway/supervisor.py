"""``tokometer gateway --workers N``: N gateway processes on one port, under a supervisor.

The supervisor (the process the command started) binds the listening socket, then forks N workers
that inherit it; each runs its own event loop (`tokometer.gateway.server.serve`) and accepts
connections from the shared socket, so the kernel hands each new connection to one of them. The
supervisor serves nothing itself:

- it prints the URL line once, when every worker has reported ready (a pipe);
- a worker that dies is restarted, after a pause that grows while workers keep dying young; one that
  dies before the first URL line was printed stops them all (a config the workers cannot run with);
- SIGTERM or SIGINT stops every worker (SIGTERM: uvicorn finishes the requests in flight), kills
  what is left after ``stop_timeout_s``, and exits;
- a worker whose supervisor vanished stops by itself (the "lifeline" pipe closes).

Workers are separate processes, each with its own in-process state; what they share goes through
Redis (``[replicas] redis_url``: cache, budgets, breakers, slow windows), exactly as replicas on
other hosts do. Their Prometheus counters and histograms are added up at ``/metrics`` through
prometheus_client's multiprocess mode, in a temporary directory the supervisor creates and removes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field

from tokometer.gateway.config import GatewayConfig
from tokometer.util.errors import ConfigError, TokometerError
from tokometer.util.shown import one_line

__all__ = ["Supervisor"]

logger = logging.getLogger("tokometer.gateway")

_YOUNG_S = 5.0  # a worker that dies sooner than this after its start counts as crash-looping
_MAX_PAUSE_S = 30.0


def _use_multiprocess_metrics(directory: str) -> None:
    """Every metric created from now on (in the workers) writes to ``directory``; /metrics adds them up."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    from prometheus_client import values

    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]  # chosen at import, maybe already


@dataclass
class _Worker:
    index: int
    pid: int
    started: float
    ready: bool = False


@dataclass
class Supervisor:
    """Runs ``workers`` gateway processes on ``sock`` until SIGTERM or SIGINT."""

    config: GatewayConfig
    sock: socket.socket
    workers: int
    log_level: str = "warning"
    stop_timeout_s: float = 10.0
    restarts: int = field(default=0, init=False)
    _children: dict[int, _Worker] = field(default_factory=dict, init=False)
    _stopping: bool = field(default=False, init=False)

    def run(self) -> None:
        """Start the workers, print the URL line once all are ready, keep them running; return once stopped."""
        if not hasattr(os, "fork"):
            raise ConfigError("--workers needs fork(), which this system lacks: run one gateway per port instead")
        from tokometer.gateway.server import setup_logging, url_line

        setup_logging(self.log_level)
        metrics_dir = tempfile.mkdtemp(prefix="tokometer-gateway-metrics-")
        _use_multiprocess_metrics(metrics_dir)
        ready_r, ready_w = os.pipe()
        lifeline_r, lifeline_w = os.pipe()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        announced = False
        pending: dict[int, float] = {}  # worker index -> when to start it again
        young_deaths = 0
        try:
            for index in range(self.workers):
                self._spawn(index, ready_w, ready_r, lifeline_w, lifeline_r)
            while not self._stopping:
                readable, _, _ = select.select([ready_r], [], [], 0.1)
                if readable:
                    for index in os.read(ready_r, 1024):
                        worker = next((w for w in self._children.values() if w.index == index), None)
                        if worker is not None:
                            worker.ready = True
                if not announced and sum(w.ready for w in self._children.values()) == self.workers:
                    print(url_line(self.sock), flush=True)
                    logger.info("%d workers ready: pids %s", self.workers,
                                ", ".join(str(pid) for pid in sorted(self._children)))
                    announced = True
                for worker, status in self._reap():
                    how = _describe(status)
                    if self._stopping:  # Ctrl-C reaches the workers too: their exit is the stop, not a failure
                        break
                    if not announced:
                        raise ConfigError(f"gateway worker {worker.index} {how} before it was ready (see its "
                                          "message above)")
                    young = time.monotonic() - worker.started < _YOUNG_S
                    young_deaths = young_deaths + 1 if young else 0
                    pause = min(_MAX_PAUSE_S, 0.5 * 2 ** (young_deaths - 1)) if young else 0.0
                    logger.warning("worker %d (pid %d) %s: restarting it%s", worker.index, worker.pid, how,
                                   f" in {pause:g} s" if pause else "")
                    pending[worker.index] = time.monotonic() + pause
                for index, when in list(pending.items()):
                    if time.monotonic() >= when and not self._stopping:
                        del pending[index]
                        self._spawn(index, ready_w, ready_r, lifeline_w, lifeline_r)
                        self.restarts += 1
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for fd in (ready_r, ready_w, lifeline_r, lifeline_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            shutil.rmtree(metrics_dir, ignore_errors=True)

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _spawn(self, index: int, ready_w: int, ready_r: int, lifeline_w: int, lifeline_r: int) -> None:
        pid = os.fork()
        if pid:
            self._children[pid] = _Worker(index, pid, time.monotonic())
            return
        # The worker: never returns into the supervisor's code.
        code = 1
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.close(ready_r)
            os.close(lifeline_w)
            from tokometer.gateway.server import serve

            def ready() -> None:
                os.write(ready_w, bytes([index]))

            serve(self.config, self.sock, log_level=self.log_level, worker=index, ready=ready, lifeline=lifeline_r)
            code = 0
        except KeyboardInterrupt:
            code = 0
        except TokometerError as exc:
            print(f"tokometer gateway: worker {index}: error: {one_line(str(exc))}", file=sys.stderr,
                  flush=True)
            code = 2
        except BaseException as exc:  # a worker must die with one line, never fall back into the supervisor
            print(f"tokometer gateway: worker {index}: {type(exc).__name__}: {one_line(str(exc))}",
                  file=sys.stderr, flush=True)
        finally:
            os._exit(code)

    def _reap(self) -> list[tuple[_Worker, int]]:
        """The workers that have exited since the last call (no longer counted as running), with their status."""
        dead = []
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:  # none left at all
                dead += [(worker, 0) for worker in self._children.values()]
                self._children.clear()
                break
            if pid == 0:
                break
            if pid in self._children:
                dead.append((self._children.pop(pid), status))
        return dead

    def _stop_all(self) -> None:
        for pid in self._children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        while self._children and time.monotonic() < deadline:
            self._reap()
            if self._children:
                time.sleep(0.02)
        for pid in list(self._children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            self._children.pop(pid, None)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"

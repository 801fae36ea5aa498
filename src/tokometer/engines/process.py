"""A child engine process that never outlives us.

Each engine runs in its own process group (its own session on POSIX) so that stopping it also
stops anything it forked (vLLM's workers, ``ollama serve``'s runners). ``stop()`` sends SIGTERM to
the group, waits a grace period, then SIGKILLs it, and reaps the child; an ``atexit`` hook stops
whatever is still running when the interpreter exits. The engine's stdout and stderr go to a temp
log file, whose tail is what error messages quote.

If tokometer itself is killed outright (SIGKILL, the OOM killer), neither ``stop()`` nor ``atexit``
runs. On Linux the engine still dies with it: the child asks the kernel for SIGKILL when its parent
goes (``prctl(PR_SET_PDEATHSIG)``, set between fork and exec). The kernel sends it when the *thread*
that forked the child ends, so children are forked from the main thread or, from any other thread,
by one long-lived spawner thread. Only the engine's leader gets that signal; helpers it forked
(vLLM's workers) are left to notice their parent is gone. Other POSIX systems have no such call:
there an engine outlives a SIGKILLed tokometer.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import psutil

from tokometer.util.errors import EngineError

__all__ = ["EngineProcess", "busy_port_error", "connect_host", "free_port", "port_in_use"]

_LIVE: set[EngineProcess] = set()  # strong refs: an engine nobody stopped is still stopped at exit


def _stop_all() -> None:
    for process in list(_LIVE):
        process.stop()


atexit.register(_stop_all)


_PR_SET_PDEATHSIG = 1


def _die_with_parent_hook(death_signal: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A pre-exec hook that makes the child get ``death_signal`` when this process dies (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the hook runs in the forked child
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), death_signal)

    return hook


class _Spawner:
    """One daemon thread that forks children for other short-lived threads: PR_SET_PDEATHSIG fires when
    the forking *thread* ends, and this one lives as long as the process."""

    def __init__(self) -> None:
        self._jobs: list[tuple[Callable[[], subprocess.Popen[bytes]], Future[subprocess.Popen[bytes]]]] = []
        self._ready = threading.Condition()
        threading.Thread(target=self._run, name="tokometer-engine-spawner", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._jobs:
                    self._ready.wait()
                start, future = self._jobs.pop(0)
            try:
                future.set_result(start())
            except BaseException as exc:  # handed to the waiting thread
                future.set_exception(exc)

    def call(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        future: Future[subprocess.Popen[bytes]] = Future()
        with self._ready:
            self._jobs.append((start, future))
            self._ready.notify()
        return future.result()


_SPAWNER: _Spawner | None = None
_SPAWNER_LOCK = threading.Lock()


def _popen(argv: list[str], log_fd: int, env: dict[str, str] | None,
           death_signal: int = signal.SIGKILL) -> subprocess.Popen[bytes]:
    windows = sys.platform == "win32"
    hook = _die_with_parent_hook(death_signal)

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=subprocess.STDOUT, env=env,
            start_new_session=not windows, preexec_fn=hook,
            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0) if windows else 0,
        )

    if hook is None or threading.current_thread() is threading.main_thread():
        return start()
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = _Spawner()
    return _SPAWNER.call(start)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on ``host`` a moment ago (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(host: str, port: int) -> bool:
    """True if something already listens on (host, port) so that a server could not bind it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR as servers set it: a TIME_WAIT leftover is not "in use", a listener is.
        if sys.platform != "win32":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES, getattr(errno, "WSAEADDRINUSE", -1))
    return False


def _listener(port: int) -> str:
    """' (by pid N, name)' for whatever listens on ``port``, if we may see it."""
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections("tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                return f" (by pid {conn.pid}, {psutil.Process(conn.pid).name()})"
    return ""


def busy_port_error(host: str, port: int) -> EngineError:
    """The one-line error for a port something else already listens on."""
    return EngineError(f"port {port} on {host} is already in use{_listener(port)}: choose another with --port "
                       "(0 picks a free one) or stop what is listening there")


def connect_host(host: str) -> str:
    """Where a client should connect for a server bound to ``host`` (a wildcard means loopback), URL-ready."""
    connect = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{connect}]" if ":" in connect else connect


REAPER = Path(__file__).with_name("reaper.py")


class EngineProcess:
    """One engine child process with its own process group and log file.

    ``reap=True`` (engines that fork helpers, like vLLM; Linux) starts it under `tokometer.engines.reaper`,
    which leads the group: the helpers then go too when the engine's leader dies, however it dies, and
    when this process dies (the reaper's parent-death signal is SIGTERM, passed on to the group).
    ``pid`` is then the reaper's; the engine's leader is its only child.
    """

    def __init__(self, argv: Sequence[str], name: str, env: dict[str, str] | None = None, *,
                 reap: bool = False) -> None:
        self.argv = list(argv)
        self.name = name
        reaped = reap and sys.platform.startswith("linux")
        launch = [sys.executable, str(REAPER), *self.argv] if reaped else self.argv
        log_fd, log_name = tempfile.mkstemp(prefix=f"tokometer-{name}-", suffix=".log")
        self.log_path = Path(log_name)
        self._saved_tail: list[str] | None = None
        self._lock = threading.Lock()
        self.ready_ns: int | None = None
        """When it first answered (`mark_ready`, ``perf_counter_ns``); None until then."""
        self.started_ns: int = time.perf_counter_ns()
        """When it was started (just before the fork, ``perf_counter_ns``): the start of its start-up time."""
        try:
            self._popen: subprocess.Popen[bytes] = _popen(launch, log_fd, env,
                                                          signal.SIGTERM if reaped else signal.SIGKILL)
        except OSError:
            os.close(log_fd)
            self.log_path.unlink(missing_ok=True)
            raise
        os.close(log_fd)  # the child holds its own copy
        self.pid: int = self._popen.pid
        _LIVE.add(self)

    def mark_ready(self) -> None:
        """Stamp the moment it first answered a request (`tokometer.engines.ready.wait_ready` does, once)."""
        if self.ready_ns is None:
            self.ready_ns = time.perf_counter_ns()

    def startup_s(self) -> float | None:
        """Seconds from its process start to its first answer; None until it has answered."""
        return (self.ready_ns - self.started_ns) / 1e9 if self.ready_ns is not None else None

    def alive(self) -> bool:
        """True while the engine process has not exited."""
        return self._popen.poll() is None

    def exit_code(self) -> int | None:
        """The exit status once it has exited (negative: killed by that signal), else None."""
        return self._popen.poll()

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines the engine wrote (kept after ``stop()``)."""
        if self._saved_tail is not None:
            return "\n".join(self._saved_tail[-lines:])
        try:
            with self.log_path.open("r", encoding="utf-8", errors="replace") as handle:
                return "\n".join(line.rstrip("\n") for line in deque(handle, maxlen=lines))
        except OSError:
            return ""

    def _signal_group(self, sig: int) -> None:
        if sys.platform == "win32":  # pragma: no cover
            if sig == signal.SIGTERM:
                self._popen.send_signal(signal.CTRL_BREAK_EVENT)
            else:
                self._popen.kill()
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def stop_for(self, exc: BaseException, lines: int = 40) -> None:
        """Stop it because ``exc`` happened; an EngineError then carries this engine's command line and the last
        ``lines`` of its log (``command_line``, ``engine_log``)."""
        self.stop()
        if isinstance(exc, EngineError) and not exc.command_line:
            exc.command_line = tuple(self.argv)
            exc.engine_log = self.log_tail(lines)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop the whole process group (TERM, then KILL after ``grace_s``); idempotent. Returns the exit code."""
        with self._lock:
            if self._saved_tail is None:
                if self._popen.poll() is None:
                    self._signal_group(signal.SIGTERM)
                    try:
                        self._popen.wait(grace_s)
                    except subprocess.TimeoutExpired:
                        self._signal_group(signal.SIGKILL)
                        self._popen.wait()
                # The leader may be gone while grandchildren it forked are not: sweep the group.
                self._signal_group(signal.SIGKILL)
                self._saved_tail = self.log_tail(200).splitlines()
                self.log_path.unlink(missing_ok=True)
                _LIVE.discard(self)
            return self._popen.returncode

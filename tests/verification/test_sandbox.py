"""The audit guard: what a verification worker may not do, even if code ran in it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from traac.verification import sandbox

GUARD_ATTEMPTS = {
    "write": "open('WRITTEN', 'w')",
    "append": "open('APPENDED', 'a')",
    "create": "os.close(os.open('CREATED', os.O_RDONLY | os.O_CREAT))",
    "mkdir": "os.mkdir('DIR')",
    "remove": "os.remove('EXISTING')",
    "rename": "os.rename('EXISTING', 'RENAMED')",
    "system": "os.system('touch SPAWNED_SYSTEM')",
    "popen": "subprocess.run(['touch', 'SPAWNED_POPEN'])",
    "fork": "os.fork()",
    "posix_spawn": "os.posix_spawn('/bin/touch', ['touch', 'SPAWNED_SPAWN'], {})",
    "exec": "os.execv('/bin/touch', ['touch', 'SPAWNED_EXEC'])",
    "fork_exec": "subprocess._fork_exec",
    "fork_exec_reimport": (
        "importlib.util.module_from_spec(importlib.util.find_spec('_posixsubprocess'))"
    ),
    "socket": "socket.create_connection(('127.0.0.1', PORT), timeout=2)",
    "ctypes": "ctypes.CDLL(None).system(b'touch SPAWNED_CTYPES')",
    "kill": "os.kill(os.getppid(), 0)",
    "rlimit": "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))",
    "code": "(lambda: 0).__setattr__('__code__', (lambda: 1).__code__)",
}


def test_the_guard_refuses_writes_spawns_and_sockets(tmp_path):
    """install_guard in a fresh interpreter: every attempt raises PermissionError, nothing
    appears on disk or on the listening socket, and reading and importing still work."""
    import socket

    (tmp_path / "EXISTING").write_text("x")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    program = "\n".join(
        [
            "import ctypes, importlib.util, os, resource, socket, subprocess, sys",
            "from traac.verification.sandbox import install_guard",
            "original = [subprocess._fork_exec]  # a module global would be replaced too",
            "install_guard()",
            "assert subprocess._fork_exec is not original[0]",
            "for name, attempt in ATTEMPTS.items():",
            "    try:",
            "        value = eval(attempt)",
            "        if name == 'fork_exec':",
            "            value(*[None] * 23)",
            "        print(name, 'ALLOWED', flush=True)",
            "    except PermissionError:",
            "        print(name, 'refused', flush=True)",
            "    except Exception as exc:",
            "        print(name, 'ERROR', type(exc).__name__, exc, flush=True)",
            "print('read', open('EXISTING').read())",
            "import decimal, fractions, json",
            "print('imports ok')",
        ]
    )
    attempts = {k: v.replace("PORT", str(port)) for k, v in GUARD_ATTEMPTS.items()}
    package_root = str(Path(sandbox.__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", f"ATTEMPTS = {attempts!r}\n{program}"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    lines = done.stdout.splitlines()
    assert [f"{name} refused" for name in GUARD_ATTEMPTS] == lines[: len(GUARD_ATTEMPTS)], (
        done.stdout + done.stderr
    )
    assert lines[len(GUARD_ATTEMPTS) :] == ["read x", "imports ok"]
    assert {p.name for p in tmp_path.iterdir()} == {"EXISTING"}
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()


def test_workers_refuse_even_if_code_ran(trap, tmp_path):
    """Second line of defence, bypassing the screening on purpose: n_queens' scorer evals the
    answer inside a real worker, which writes, spawns and connects nothing."""
    import socket

    _, pool = trap
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    entry = {"answer": "Q", "metadata": {"source_dataset": "n_queens", "valid_answers": ["Q"]}}
    out = str(tmp_path / "OUT")
    attacks = [
        f"open({out!r}, 'w').write('payload')",
        f"__import__('os').system('touch {out}')",
        f"__import__('subprocess').run(['touch', {out!r}])",
        f"__import__('socket').create_connection(('127.0.0.1', {port}), timeout=2)",
        f"__import__('os').mkdir({out!r})",
    ]
    for attack in attacks:
        message = {"op": "task", "task": "n_queens", "answer": attack, "entry": entry}
        assert pool.call(message, 30, task="n_queens") == 0.0, attack
    assert not (tmp_path / "OUT").exists()
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    good = {"op": "task", "task": "n_queens", "answer": "Q", "entry": entry}
    assert pool.call(good, 30, task="n_queens") == 1.0  # and the worker still serves

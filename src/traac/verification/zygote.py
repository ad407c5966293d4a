"""The verification processes' side: the zygote and the workers it forks.

The zygote is a fresh interpreter (never a copy of the caller) that imports and warms up
math-verify, sympy and, where the extra is installed, reasoning-gym once, under the sandbox's
resource limits. Each worker is a fork of it (milliseconds, every task loaded so far included)
that installs the audit guard and then answers one JSON request per line.
`traac.verification.workers` is the caller's side.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
from typing import Any

from traac.common.reasoning_gym_extra import missing, reasoning_gym_installed
from traac.verification.chain_sum import OWN_SCORERS
from traac.verification.sandbox import die_with_parent, install_guard, limit_resources


class _Checker:
    """What a worker runs: math-verify, traac's own task scorers (`OWN_SCORERS`) and the
    reasoning-gym scorers the zygote loaded (reasoning-gym is an optional extra)."""

    def __init__(self) -> None:
        logging.disable(logging.WARNING)  # math-verify warns that its own timeout is off
        # The parsers are imported here, in the zygote, never by the process that verifies
        # through the pool: they load in the process whose guard then contains them.
        import sympy
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

        self._reasoning_gym: Any = None
        if reasoning_gym_installed():  # here, before any guard: a worker could not import it
            import reasoning_gym

            self._reasoning_gym = reasoning_gym
        self._parse, self._verify = parse, verify
        self._extraction = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
        self.scorers: dict[str, Any] = {}
        # Warm-up before any guard: the LaTeX grammar, parse_expr, differentiation and
        # simplification import and build what they need on first use.
        self.math("\\boxed{1}", "\\boxed{1}")
        self.math("\\boxed{\\frac{1}{2}, 3}", "1+2*3")
        x = sympy.Symbol("x")
        expr = sympy.parse_expr("-4*(-2*x - 8)**(3/2)/3 + exp(x)*sin(x)", local_dict={"x": x})
        sympy.simplify(sympy.diff(expr, x) - expr)

    def math(self, gold_text: str, pred_text: str) -> bool:
        gold = self._parse(gold_text, extraction_config=self._extraction, parsing_timeout=None)
        pred = self._parse(pred_text, extraction_config=self._extraction, parsing_timeout=None)
        return bool(gold and pred and self._verify(gold, pred, timeout_seconds=None))

    def parses(self, text: str) -> bool:
        """Does math-verify read an expression in `text`? (An answer that does not cast no vote
        in maj@k.)"""
        return bool(self._parse(text, extraction_config=self._extraction, parsing_timeout=None))

    def load(self, name: str) -> None:
        if name in self.scorers:
            return
        if name in OWN_SCORERS:
            self.scorers[name] = OWN_SCORERS[name]
        elif self._reasoning_gym is None:
            raise ModuleNotFoundError(missing(f"reasoning-gym task {name!r}"))
        else:
            self.scorers[name] = self._reasoning_gym.get_score_answer_fn(name)

    def handle(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        if op == "load":  # a task the zygote loaded after this worker was forked
            self.load(request["task"])
            return True
        try:  # a scorer that chokes on an answer has judged it wrong
            if op == "math":
                return self.math(request["gold"], request["pred"])
            if op == "parses":
                return self.parses(request["text"])
            if op == "task":
                return float(self.scorers[request["task"]](request["answer"], request["entry"]))
        except Exception:
            return 0.0 if op == "task" else False
        raise ValueError(f"unknown op {op!r}")


def _serve(checker: _Checker, requests_fd: int, replies_fd: int) -> None:
    """A worker, just forked from the zygote: guard, then one JSON reply per request line.
    Never returns: the zygote's loop must not run on in a copy of it."""
    try:
        requests = os.fdopen(requests_fd, "r", encoding="utf-8")
        replies = os.fdopen(replies_fd, "w", encoding="utf-8")
        die_with_parent()
        install_guard()
        replies.write('{"ok": true, "value": "ready"}\n')
        replies.flush()
        for line in requests:
            try:
                reply = {"ok": True, "value": checker.handle(json.loads(line))}
            except Exception as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
    finally:
        os._exit(0)


def main() -> None:
    """The zygote: imports and warms up once, then, one datagram per command on its socket (fd 0),
    forks workers (handing each the two pipe ends that came with the command), loads a
    reasoning-gym task's scorer for all later workers, or kills and reaps a worker."""
    limit_resources()
    checker = _Checker()
    channel = socket.socket(fileno=0)
    channel.send(b'{"ok": true}')
    while True:
        data, fds, _, _ = socket.recv_fds(channel, 1 << 16, 2)
        if not data:  # the pool is gone
            return
        request = json.loads(data)
        reply: dict[str, Any] = {"ok": True}
        try:
            if request["op"] == "fork":
                pid = os.fork()
                if pid == 0:
                    channel.close()
                    _serve(checker, *fds)
                reply["pid"], reply["tasks"] = pid, sorted(checker.scorers)
            elif request["op"] == "load":
                checker.load(request["task"])
            elif request["op"] == "kill":
                os.kill(request["pid"], signal.SIGKILL)
                os.waitpid(request["pid"], 0)
        except Exception as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                os.close(fd)
        channel.send(json.dumps(reply).encode())

"""The worker pool: deadlines, recovery from dead workers and zygotes, threads and subprocesses."""

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from traac.verification import answers, verifiers
from traac.verification.workers import VerifierPool, _Worker, get_pool


def say(answer: str) -> str:
    return f"<think>\nLet me work.\n</think>\n{answer}"


def test_a_stuck_check_times_out_and_the_pool_recovers():
    pool = get_pool()
    before = pool.timeouts
    start = time.monotonic()
    assert not verifiers.verify_math(say("\\boxed{9^{9^{9^{9}}}}"), "1", timeout=1.0)
    assert time.monotonic() - start < 30
    assert pool.timeouts == before + 1
    assert verifiers.verify_math(say("\\boxed{2}"), "2")


def test_the_pool_recovers_when_its_zygote_dies():
    """The zygote killed (say, for memory): its workers die with it (a call that meets one counts
    as a timeout), and later calls get workers of a new zygote with the pool's tasks loaded."""
    pool = VerifierPool(1)
    entry = {"answer": "Q", "metadata": {"valid_answers": ["Q"]}}
    message = {"op": "task", "task": "n_queens", "answer": "Q", "entry": entry}
    try:
        assert pool.call(message, 30, task="n_queens") == 1.0
        old = pool._zygote.proc
        os.kill(old.pid, signal.SIGKILL)
        old.wait()
        deadline = time.monotonic() + 120
        while pool.call(message, 30, task="n_queens") is None:
            assert time.monotonic() < deadline
        assert pool._zygote.proc is not old and pool.timeouts <= 1
        assert pool.call(message, 30, task="n_queens") == 1.0
    finally:
        pool.close()


def wait_for(condition, limit_s: float = 120) -> None:
    """Until `condition()` holds; the limit only turns a hang into a failure."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def test_closing_the_pool_under_a_call(monkeypatch):
    """A call in flight when its pool closes returns None at once; nothing fails in the
    background (its worker is closed once, by whichever side gets there first)."""
    import threading

    errors = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    pool = VerifierPool(1)
    message = {"op": "math", "gold": "\\boxed{1}", "pred": "\\boxed{9^{9^{9^{9}}}}"}
    before = set(threading.enumerate())
    with ThreadPoolExecutor(max_workers=1) as threads:
        pending = threads.submit(pool.call, message, 30)
        wait_for(lambda: not pool._free)  # the call holds the only worker
        pool.close()
        assert pending.result(timeout=10) is None  # 10 s: far below the call's own 30 s
    for thread in set(threading.enumerate()) - before:  # the retiring thread included
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert not errors, errors


def test_a_worker_is_closed_once():
    """Its pipes close on the first close only: a second os.close could hit a descriptor number
    reused meanwhile (the pool and a retiring thread may both close a worker)."""
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    worker = _Worker(0, requests_write, replies_read, frozenset())
    worker.close()
    reused = [os.open(os.devnull, os.O_RDONLY) for _ in range(2)]  # take the freed numbers
    worker.close()
    for fd in (*reused, requests_read, replies_write):
        os.fstat(fd)  # still open
        os.close(fd)


def test_waiting_for_a_worker_counts_against_the_deadline():
    """One worker, held by a check that only its 60 s deadline ends: a second call with a 1 s
    deadline gives up while the first still runs, instead of queueing behind it."""
    pool = VerifierPool(1)
    stuck = {"op": "math", "gold": "\\boxed{1}", "pred": "\\boxed{9^{9^{9^{9}}}}"}
    quick = {"op": "math", "gold": "\\boxed{2}", "pred": "\\boxed{2}"}
    try:
        with ThreadPoolExecutor(max_workers=1) as threads:
            first = threads.submit(pool.call, stuck, 60)
            wait_for(lambda: not pool._free)
            assert pool.call(quick, 1.0) is None
            assert not first.done() and pool.timeouts == 1
            pool.close()
    finally:
        pool.close()


HOSTILE_TIMEOUT_S = 2.0


def test_hostile_answers_from_4_threads_end_at_their_deadline(evaluating_entries, monkeypatch):
    """Hostile answers from 4 threads on 2 workers: worker-killing checks, a 10 MB answer, a
    regex-pathological run, parser-pathological nesting and sums. Each is judged wrong, the
    pool's deadline ends the ones a worker cannot finish, and the replacements come up.

    The promise is a call's timeout plus about a second (waiting for a worker and replacing a
    killed one included; the worst call is printed). The assertion bounds a hang, not the
    speed: a busy or slow CPU stretches the in-process extraction, and that must not fail it.
    That waiting counts against the deadline is checked without a clock above."""
    pool = VerifierPool(2)
    monkeypatch.setattr(verifiers, "get_pool", lambda: pool)
    t = HOSTILE_TIMEOUT_S
    n = answers.MAX_ANSWER_CHARS - 100
    puzzle, queens = evaluating_entries["puzzle24"][0], evaluating_entries["n_queens"][0]
    poly = evaluating_entries["polynomial_multiplication"][0]
    integral = evaluating_entries["intermediate_integration"][0]
    x = integral["metadata"]["variable"]
    heavy = f"({x}+1)**999*sin({x})**999*exp({x})*log({x})**999 + C"
    cases = [
        lambda: verifiers.verify_math(say("\\boxed{9^{9^{9^{9}}}}"), "1", timeout=t),
        lambda: verifiers.verify_task(say(heavy), integral, timeout=t),
        lambda: verifiers.verify_math(say("\\boxed{1}" * 1_000_000), "1", timeout=t),
        lambda: verifiers.verify_task(say("1" + " +" * (n // 2) + "2"), puzzle, timeout=t),
        lambda: verifiers.verify_task(say("[" * n), queens, timeout=t),
        lambda: verifiers.verify_task(say("x+" * (n // 2) + "x"), poly, timeout=t),
        lambda: verifiers.verify_choice(say("answer is A or B, " * (n // 18)), "A"),
    ]
    for entry in (puzzle, queens, poly, integral):  # setup: load the scorers
        verifiers.verify_task(say("1"), entry)

    def timed(case):
        start = time.monotonic()
        assert not case()
        return time.monotonic() - start

    try:
        with ThreadPoolExecutor(max_workers=4) as threads:
            seconds = list(threads.map(timed, cases * 2))
        print(f"\nworst call from 4 threads on 2 workers: {max(seconds):.2f} s")
        assert pool.timeouts >= 2  # the tower of powers, twice, cannot finish
        assert max(seconds) < t + 60, seconds  # a hang; no check runs past its deadline
        assert verifiers.verify_math(say("\\boxed{2}"), "2")  # replacements are up
    finally:
        pool.close()


def _check_in_child(queue):
    queue.put(
        verifiers.verify_math(say("\\boxed{3}"), "3") and not verifiers.verify_math(say("4"), "3")
    )


def test_works_in_forked_and_spawned_subprocesses():
    assert verifiers.verify_math(say("\\boxed{5}"), "5")  # the parent's pool exists before the fork
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_check_in_child, args=(queue,))
    child.start()
    assert queue.get(timeout=120) is True
    child.join(timeout=30)
    code = (
        "from traac.verification import verify_math; "
        "print(verify_math('</think>\\\\boxed{2}', '2'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.stdout.strip() == "True", done.stderr
    assert verifiers.verify_math(say("\\boxed{5}"), "5")  # the parent's pool is untouched

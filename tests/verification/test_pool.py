"""The worker pool: deadlines, recovery from dead workers and zygotes, threads and subprocesses."""

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from traac.verification import answers, verifiers
from traac.verification.pool import VerifierPool, _Worker, get_pool


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


def test_closing_the_pool_under_a_call(monkeypatch):
    """A call in flight when its pool closes returns None at once; nothing fails in the
    background (its worker is closed once, by whichever side gets there first)."""
    import threading

    errors = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    pool = VerifierPool(1)
    message = {"op": "math", "gold": "\\boxed{1}", "pred": "\\boxed{9^{9^{9^{9}}}}"}
    with ThreadPoolExecutor(max_workers=1) as threads:
        pending = threads.submit(pool.call, message, 30)
        time.sleep(0.5)
        start = time.monotonic()
        pool.close()
        assert pending.result(timeout=10) is None
        assert time.monotonic() - start < 5
    time.sleep(0.5)  # the retiring thread has run
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


BOUND_TIMEOUT_S = 2.0


def test_one_call_takes_its_timeout_plus_one_second_from_4_threads(evaluating_entries, monkeypatch):
    """Hostile answers from 4 threads on 2 workers: worker-killing checks, a 10 MB answer, a
    regex-pathological run, parser-pathological nesting and sums. No call may take more than its
    timeout + 1 s (waiting for a worker and replacing a killed one included); the pool's start
    and each task's first load are setup, done before timing."""
    pool = VerifierPool(2)
    monkeypatch.setattr(verifiers, "get_pool", lambda: pool)
    t = BOUND_TIMEOUT_S
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
        assert max(seconds) <= t + 1.0, seconds
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
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr
    assert verifiers.verify_math(say("\\boxed{5}"), "5")  # the parent's pool is untouched

"""Each reasoning-gym task's answer brought into the shape its scorer reads, in linear time."""

import json
import time

from traac.verification import answers, screening, task_answers, verifiers


def oracle(entry):
    """The gold answer (propositional logic has none: its metadata carries a valid conclusion)."""
    return entry["answer"] if entry["answer"] is not None else entry["metadata"]["example_answer"]


def say(answer: str) -> str:
    return f"<think>\nLet me work.\n</think>\n{answer}"


def test_odd_answer_shapes(entries):
    def first(name):
        return entries[name][0]

    knight = entries["knight_swap"][0]
    moves = json.loads(knight["answer"])
    multi_line = "Moves:\n[\n" + ",\n".join(f'  "{m}"' for m in moves) + "\n]"
    single_quotes = "\\boxed{[" + ", ".join(f"'{m}'" for m in moves) + "]}"
    assert verifiers.verify_task(say(multi_line), knight)
    assert verifiers.verify_task(say(single_quotes), knight)

    ab = first("ab")
    escaped = ab["answer"].replace("#", "\\#")
    assert verifiers.verify_task(say(f"\\boxed{{{escaped}}}"), ab)
    lock = first("quantum_lock")
    arrows = lock["answer"].replace("→", "\\to")
    assert verifiers.verify_task(say(f"\\boxed{{{arrows}}}"), lock)
    assert verifiers.verify_task(
        say(f"Press {lock['answer'].replace('→', '->')} (shortest)."), lock
    )
    logic = first("propositional_logic")
    latex = oracle(logic).replace("∧", "\\land ").replace("∨", "\\lor ").replace("¬", "\\neg ")
    latex = latex.replace("→", "\\rightarrow ").replace("↔", "\\leftrightarrow ")
    assert verifiers.verify_task(say(f"Therefore $\\boxed{{{latex}}}$"), logic)
    go = first("tsumego")
    assert verifiers.verify_task(say(f"The best move is {go['answer'].lower()}."), go)
    maze = first("maze")
    assert verifiers.verify_task(say(f"The minimum number of steps is {maze['answer']}."), maze)
    assert verifiers.verify_task(
        say(f"**{first('letter_counting')['answer']}**"), first("letter_counting")
    )
    bits = first("bitwise_arithmetic")
    assert verifiers.verify_task(say(f"The result is `{bits['answer']}`."), bits)
    fraction = first("fraction_simplification")
    n, d = (
        fraction["metadata"]["simplified_numerator"],
        fraction["metadata"]["simplified_denominator"],
    )
    assert verifiers.verify_task(say(f"\\boxed{{\\dfrac{{{n}}}{{{d}}}}}"), fraction)
    puzzle = first("puzzle24")
    assert verifiers.verify_task(say(f"{puzzle['answer'].replace('*', '×')} = 24"), puzzle)
    assert verifiers.verify_task(say(f"{puzzle['answer']} (each number once)."), puzzle)


def test_degenerate_outputs_cost_linear_time(entries):
    """Extraction runs in this process, outside the workers' deadline: no regex may backtrack
    badly on the repetitive junk RL policies emit."""
    junk = [
        "\\boxed{" * 20_000,
        "(" * 50_000,
        "1" * 50_000 + "x",
        "A" + " " * 50_000 + "x",
        "answer is" + " " * 50_000 + "x",
        "1, " * 20_000,
        "8 " + "\\ " * 20_000,
        "1" + " +" * 30_000 + "2",  # was quadratic in the arithmetic extractor: 45 s at 64K
        "1" + " " * 60_000 + "2",
        "1" + "." * 60_000 + "2",
        "w, A1, " * 9_000,
        "P ∧ " * 16_000,
        "A or B, " * 8_000,
    ]
    start = time.process_time()  # CPU seconds of this process: other jobs on the cores don't count
    for text in (t[: answers.MAX_ANSWER_CHARS - 50] for t in junk):  # longer is wrong unread
        response = say(text)
        assert not verifiers.verify_choice(response, "B")
        assert not verifiers.verify_text(response, "yes")
        answers.extract_answer(response)
        for name, task_entries in entries.items():
            candidate = task_answers.task_answer(text, name, task_entries[0]["metadata"])
            screening.task_answer_allowed(name, candidate, task_entries[0]["metadata"])
    assert time.process_time() - start < 20  # the quadratic " +" run alone took 45 s


def test_puzzle24_must_use_the_given_numbers(entries):
    puzzle = entries["puzzle24"][0]
    assert puzzle["metadata"]["numbers"] != [6, 4, 1, 1]
    assert not verifiers.verify_task(say("6*4*1*1"), puzzle)  # reasoning-gym alone would accept it

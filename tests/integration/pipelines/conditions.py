"""Conditions: If/Elif/Else on a string and an int, legacy dsl.Condition, nesting, dsl.OneOf.

Which branches run is decided by the pipeline parameters `mode` (str) and `level` (int); the
chosen branch's value and artifact come back through dsl.OneOf pipeline outputs.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Output


@dsl.component
def say(message: str) -> str:
    return message


@dsl.component
def make_note(text: str, note: Output[Artifact]):
    with open(note.path, "w") as f:
        f.write(text)
    note.metadata["text"] = text


@dsl.component
def count_chars(text: str) -> int:
    return len(text)


class Outputs(NamedTuple):
    mode_branch: str
    note: Artifact


@dsl.pipeline
def conditions(mode: str = "b", level: int = 5) -> Outputs:
    with dsl.If(mode == "a"):
        branch_a = say(message="branch-a")
        note_a = make_note(text="note-a")
    with dsl.Elif(mode == "b"):
        branch_b = say(message="branch-b")
        note_b = make_note(text="note-b")
    with dsl.Else():
        branch_other = say(message="branch-other")
        note_other = make_note(text="note-other")

    # int pipeline parameter: the compiler wraps it as int(...) in CEL.
    with dsl.If(level > 3):
        say(message="level-above-3")
        with dsl.If(level >= 10):
            say(message="level-at-least-10")
    with dsl.Else():
        say(message="level-at-most-3")

    # Legacy API (DeprecationWarning at definition time) and a condition on a task output.
    with dsl.Condition(mode == "b"):
        say(message="legacy-b")
    length = count_chars(text=mode)
    with dsl.If(length.output == 1):
        say(message="single-char-mode")

    chosen = dsl.OneOf(branch_a.output, branch_b.output, branch_other.output)
    say(message=chosen)
    return Outputs(
        mode_branch=chosen,
        note=dsl.OneOf(note_a.outputs["note"], note_b.outputs["note"], note_other.outputs["note"]),
    )

"""Outcomes that are failures beside successes, each task appending a line to
`<scratch>/calls-<label>.txt` when it runs: three tuning trials through the real trial wrapper
(one trains, one raises, one reports no objective), two tasks of which one marks its own
outcome a failure (`headwater.outcome.mark_failed`), and a last task that fails."""

from kfp import dsl

from headwater.hpo import trial_component


@dsl.component
def train(scratch: str, hyperparameters: dict = {}) -> dict:
    import os

    x = hyperparameters["x"]
    with open(os.path.join(scratch, f"calls-train-{x}.txt"), "a") as f:
        f.write("ran\n")
    if x < 0:
        raise ValueError(f"diverged at x={x}")
    return {"loss": x} if x < 1 else {"accuracy": x}


trial = trial_component(train, objective="loss")


@dsl.component
def judge(scratch: str, ok: bool) -> str:
    import os

    from headwater.outcome import mark_failed

    label = "judge-ok" if ok else "judge-bad"
    with open(os.path.join(scratch, f"calls-{label}.txt"), "a") as f:
        f.write("ran\n")
    if not ok:
        mark_failed("the data was bad")
    return label


@dsl.component
def boom(scratch: str) -> None:
    import os

    with open(os.path.join(scratch, "calls-boom.txt"), "a") as f:
        f.write("ran\n")
    raise RuntimeError("boom")


@dsl.pipeline
def storage_failures(scratch: str):
    tasks = [
        trial(trial={"trial_index": i, "parameters": {"x": x}}, scratch=scratch)
        for i, x in enumerate([0.5, -1.0, 2.0])
    ]
    tasks += [judge(scratch=scratch, ok=True), judge(scratch=scratch, ok=False)]
    boom(scratch=scratch).after(*tasks)

"""A task that profiles one tiny torch step with Headwater's own profiler helper and keeps the
trace and its summary as the PyTorch training component does (a folder artifact holding
trace.json.gz, and an HTML page)."""

from kfp import dsl
from kfp.dsl import HTML, Artifact, Output


@dsl.component
def profile(profile_trace: Output[Artifact], profile_summary: Output[HTML]):
    import os

    import torch

    from headwater.components.torch.profiling import StepProfile

    os.makedirs(profile_trace.path, exist_ok=True)
    trace = os.path.join(profile_trace.path, "trace.json.gz")
    steps = StepProfile(trace, profile_summary.path, wait=0, warmup=0, active=1, top=5)
    steps.start()
    x = torch.ones(8, 8)
    (x @ x).sum()
    steps.step()
    steps.finish()
    profile_trace.metadata.update({"format": "chrome-trace", "file": "trace.json.gz"})


@dsl.pipeline
def ui_profile():
    profile()

"""`profiler_callback`: a real Lightning fit profiled into a gzip trace and an HTML table."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from headwater.components.torch.profiling import profiler_callback, render_summary
from headwater.errors import InvalidArgumentError


class Tiny(pl.LightningModule):
    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 2)
        self.fail_at = fail_at

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if batch_idx == self.fail_at:
            raise RuntimeError("boom")
        x, y = batch
        return torch.nn.functional.cross_entropy(self.layer(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(tmp_path: Path, steps: int, fail_at: int | None = None) -> tuple[Path, Path]:
    """Train `Tiny` for `steps` batches under the profiler; return (trace, summary)."""
    trace, summary = tmp_path / "out" / "trace.json.gz", tmp_path / "out" / "summary.html"
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(4 * steps, 8, generator=generator), torch.arange(4 * steps) % 2
    )
    trainer = pl.Trainer(
        max_steps=steps,
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=[profiler_callback(str(trace), str(summary))],
    )
    trainer.fit(Tiny(fail_at), DataLoader(data, batch_size=4))
    return trace, summary


def trace_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    assert isinstance(events, list)
    return events


def table_rows(page: str) -> list[tuple[str, float]]:
    """(operator, self CPU microseconds) of each row of the summary's table, in page order."""
    units = {"us": 1.0, "ms": 1e3, "s": 1e6}
    rows = re.findall(r'<td class="name">([^<]*)</td><td>\d+</td><td>([\d.]+) (us|ms|s)</td>', page)
    return [(name, float(value) * units[unit]) for name, value, unit in rows]


def test_six_steps_give_a_gzip_trace_of_aten_ops_and_a_table_by_self_time(
    tmp_path: Path,
) -> None:
    trace, summary = fit(tmp_path, steps=6)
    names = {str(e.get("name", "")) for e in trace_events(trace)}
    assert any(n.startswith("aten::") for n in names), sorted(names)[:20]
    # The recorded window is steps 2 to 4 (one skipped, one warm-up), and no others.
    steps = {n for n in names if n.startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}
    page = summary.read_text(encoding="utf-8")
    assert "<script" not in page and "<link" not in page and "steps 2 to 4" in page
    assert "ui.perfetto.dev" in page and "trace.json.gz" in page
    rows = table_rows(page)
    assert 0 < len(rows) <= 25
    assert any(name.startswith("aten::") for name, _ in rows)
    self_times = [t for _, t in rows]
    assert self_times == sorted(self_times, reverse=True)
    assert sorted(p.name for p in trace.parent.iterdir()) == ["summary.html", "trace.json.gz"]


def test_a_fit_shorter_than_the_window_still_writes_what_it_recorded(tmp_path: Path) -> None:
    trace, summary = fit(tmp_path, steps=3)  # step 2 recorded, then training ends
    names = {str(e.get("name", "")) for e in trace_events(trace)}
    assert "ProfilerStep#2" in names and any(n.startswith("aten::") for n in names)
    assert "step 2 (counting from 0)" in summary.read_text(encoding="utf-8")


def test_a_fit_that_ends_before_recording_writes_an_empty_trace_and_says_why(
    tmp_path: Path,
) -> None:
    trace, summary = fit(tmp_path, steps=1)
    assert trace_events(trace) == []
    page = summary.read_text(encoding="utf-8")
    assert "no steps recorded" in page and "Training ran 1 step(s)" in page


def test_a_failed_fit_writes_nothing_and_leaves_no_profiler_running(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        fit(tmp_path / "failed", steps=6, fail_at=3)
    assert not (tmp_path / "failed" / "out").exists()
    assert not torch._C._autograd._profiler_enabled()  # stopped, not left recording
    trace, _ = fit(tmp_path / "next", steps=6)
    assert any(str(e.get("name", "")).startswith("aten::") for e in trace_events(trace))


def test_ranks_other_than_0_profile_nothing(tmp_path: Path) -> None:
    trace, summary = tmp_path / "trace.json.gz", tmp_path / "summary.html"
    callback = profiler_callback(str(trace), str(summary))
    trainer = SimpleNamespace(is_global_zero=False)
    callback.on_train_start(trainer, None)
    for _ in range(6):
        callback.on_train_batch_end(trainer, None, None, None, 0)
    callback.on_train_end(trainer, None)
    assert not trace.exists() and not summary.exists()
    assert not torch._C._autograd._profiler_enabled()


def test_the_summary_escapes_names_and_adds_device_columns_only_with_device_time() -> None:
    rows = [
        {"name": "aten::mm", "calls": 3, "self_cpu_us": 1500.0, "cpu_total_us": 2000.0},
        {"name": "<b>&evil</b>", "calls": 1, "self_cpu_us": 500.0, "cpu_total_us": 500.0},
    ]
    page = render_summary(rows, "a <title>", top=1)
    assert "&lt;b&gt;&amp;evil&lt;/b&gt;" not in page  # beyond top=1
    assert "<title>a &lt;title&gt;</title>" in page
    assert table_rows(page) == [("aten::mm", 1500.0)]
    assert "75.0%" in page and "Self device" not in page
    page = render_summary(
        [*rows, {"name": "k", "calls": 1, "self_cpu_us": 0.0, "cpu_total_us": 0.0,
                 "self_device_us": 10.0, "device_total_us": 10.0}],
        "t",
    )  # fmt: skip
    assert "&lt;b&gt;&amp;evil&lt;/b&gt;" in page and "<b>&evil" not in page
    assert "Self device" in page and "100.0%" in page


@pytest.mark.parametrize(
    "options",
    [{"active": 0}, {"wait": -1}, {"top": 0}, {"warmup": 1.5}],
    ids=["no-active-step", "negative-wait", "no-rows", "fractional-warmup"],
)
def test_bad_schedules_are_refused(tmp_path: Path, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError, match=next(iter(options))):
        profiler_callback(str(tmp_path / "t.json.gz"), str(tmp_path / "s.html"), **options)

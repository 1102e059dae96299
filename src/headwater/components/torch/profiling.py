"""Profile a few training steps: a Chrome/Perfetto trace and an HTML table of the costliest ops.

`profiler_callback(trace_path, summary_path)` is a Lightning callback. On global rank 0 it runs
`torch.profiler` over a window of training steps (`wait` skipped, `warmup` warmed up, `active`
recorded: the profiler slows a step about tenfold and a trace grows by megabytes a step, so the
window is short) and writes:

* `trace_path`: the window's trace, gzip-compressed Chrome trace JSON, whatever the file is
  called (`trace.json.gz` is the usual name). Open it at https://ui.perfetto.dev ("Open trace
  file") or in chrome://tracing ("Load"); both read gzip. TensorBoard's profiler plugin
  (`torch-tb-profiler`) is deprecated and is not needed.
* `summary_path`: one self-contained HTML page (no scripts, no external style sheets) with the
  operators that took the most self time, from `key_averages()`.

A fit shorter than the window still writes both files, with what was recorded. `render_summary`
draws the page from plain rows, so it is usable (and tested) without a profiler.
"""

from __future__ import annotations

import functools
import gzip
import html
import json
import os
from collections.abc import Sequence
from typing import Any

from headwater.components.torch import _library
from headwater.errors import InvalidArgumentError

__all__ = ["StepProfile", "operator_rows", "profiler_callback", "render_summary"]

PERFETTO_URL = "https://ui.perfetto.dev"


def profiler_callback(
    trace_path: str,
    summary_path: str,
    *,
    wait: int = 1,
    warmup: int = 1,
    active: int = 3,
    top: int = 25,
) -> Any:
    """A Lightning callback that profiles training steps `wait + warmup` to
    `wait + warmup + active - 1` (counting from 0) on global rank 0.

    Args:
        trace_path: Where the gzip-compressed Chrome/Perfetto trace goes.
        summary_path: Where the HTML table of operators goes.
        wait: Steps run before the profiler starts (the first is slow for reasons of its own).
        warmup: Steps profiled but thrown away, so that start-up costs stay out of the trace.
        active: Steps recorded.
        top: Operators in the table, by self CPU time.

    Returns:
        A `lightning.pytorch.Callback` to pass to `Trainer(callbacks=[...])`.

    Raises:
        InvalidArgumentError: A step count or `top` is out of range.
        MissingDependencyError: torch or lightning is not installed.
    """
    bounds = {"wait": (wait, 0), "warmup": (warmup, 0), "active": (active, 1), "top": (top, 1)}
    for name, (value, least) in bounds.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidArgumentError(
                f"profiler {name}={value!r} must be a whole number of at least {least}"
            )
    pl = _library.lightning()
    profile = StepProfile(
        trace_path, summary_path, wait=wait, warmup=warmup, active=active, top=top
    )
    return _callback_class(pl.Callback)(profile)


@functools.cache
def _callback_class(base: type) -> type:
    """`StepProfiler(lightning.pytorch.Callback)`, defined on first use so that importing this
    module imports neither torch nor lightning."""

    class StepProfiler(base):  # type: ignore[misc]
        """Runs a `StepProfile` over the training loop of global rank 0."""

        def __init__(self, profile: StepProfile) -> None:
            super().__init__()
            self.profile = profile

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            if trainer.is_global_zero:
                device = getattr(trainer.strategy.root_device, "type", "cpu")
                self.profile.start(cuda=device == "cuda")

        def on_train_batch_end(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
            self.profile.step()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self.profile.finish()

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self.profile.abandon()

    return StepProfiler


class StepProfile:
    """`torch.profiler` over a window of steps, writing the trace and the summary once.

    Call `start()`, then `step()` after each step, then `finish()`; the files are written when
    the window closes, or by `finish()` if training ends first. Without `start()` (ranks other
    than 0) every call does nothing.
    """

    def __init__(
        self,
        trace_path: str,
        summary_path: str,
        *,
        wait: int = 1,
        warmup: int = 1,
        active: int = 3,
        top: int = 25,
    ) -> None:
        self.trace_path = trace_path
        self.summary_path = summary_path
        self.wait, self.warmup, self.active, self.top = wait, warmup, active, top
        self.steps = 0
        self.written = False
        self._profiler: Any = None

    def start(self, *, cuda: bool = False) -> None:
        """Start profiling; `cuda` adds CUDA kernels to the trace (when CUDA is available)."""
        torch = _library.torch()
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda and torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(
                wait=self.wait, warmup=self.warmup, active=self.active, repeat=1
            ),
            on_trace_ready=self._write,
            record_shapes=True,
            with_stack=False,
        )
        self._profiler.start()

    def step(self) -> None:
        """Mark the end of one step."""
        if self._profiler is None or self.written:
            return
        self.steps += 1
        self._profiler.step()

    def finish(self) -> None:
        """Stop profiling; write the files now if the window has not closed yet."""
        if self._profiler is None:
            return
        profiler, self._profiler = self._profiler, None
        profiler.stop()  # inside the recorded steps this writes them, through `_write`
        if not self.written:
            self._write_nothing_recorded()

    def abandon(self) -> None:
        """Stop profiling without writing (training failed)."""
        if self._profiler is not None:
            profiler, self._profiler = self._profiler, None
            self.written = True  # what stop() hands over now is not written either
            profiler.stop()

    @property
    def recorded(self) -> int:
        """Steps recorded so far (none while skipping or warming up)."""
        return max(0, min(self.active, self.steps - self.wait - self.warmup))

    def _write(self, profiler: Any) -> None:
        if self.written:
            return
        self.written = True
        _replace(self.trace_path, lambda tmp: profiler.export_chrome_trace(tmp), ".json.gz")
        first, last = self.wait + self.warmup, self.wait + self.warmup + self.recorded - 1
        shown = f"steps {first} to {last}" if last > first else f"step {first}"
        page = render_summary(
            operator_rows(profiler),
            f"Training profile: {shown} (counting from 0)",
            top=self.top,
            trace_file=os.path.basename(self.trace_path),
        )
        _replace(self.summary_path, lambda tmp: _write_text(tmp, page), ".html")

    def _write_nothing_recorded(self) -> None:
        self.written = True
        empty = json.dumps({"traceEvents": []}).encode()
        _replace(self.trace_path, lambda tmp: _write_bytes(tmp, gzip.compress(empty)), ".gz")
        note = (
            f"Training ran {self.steps} step(s), and the profiler records steps "
            f"{self.wait + self.warmup} to {self.wait + self.warmup + self.active - 1} (it skips "
            f"{self.wait} and warms up for {self.warmup}): train for more steps, or lower "
            "wait and warmup."
        )
        page = render_summary(
            [],
            "Training profile: no steps recorded",
            note=note,
            trace_file=os.path.basename(self.trace_path),
        )
        _replace(self.summary_path, lambda tmp: _write_text(tmp, page), ".html")


def operator_rows(profiler: Any) -> list[dict[str, Any]]:
    """One row per operator from `profiler.key_averages()`: `name`, `calls`, `self_cpu_us`,
    `cpu_total_us`, `self_device_us`, `device_total_us` (microseconds)."""
    return [
        {
            "name": str(avg.key),
            "calls": int(avg.count),
            "self_cpu_us": float(avg.self_cpu_time_total),
            "cpu_total_us": float(avg.cpu_time_total),
            "self_device_us": float(getattr(avg, "self_device_time_total", 0.0) or 0.0),
            "device_total_us": float(getattr(avg, "device_time_total", 0.0) or 0.0),
        }
        for avg in profiler.key_averages()
    ]


def render_summary(
    rows: Sequence[dict[str, Any]],
    title: str,
    *,
    top: int = 25,
    trace_file: str | None = None,
    note: str = "",
) -> str:
    """A self-contained HTML page: the `top` operators of `rows` by self CPU time.

    Args:
        rows: Operators as `operator_rows` gives them (all of them: percentages are of their
            sum). Device columns appear when some row has self device time.
        title: The page's heading.
        top: How many operators to show.
        trace_file: The trace's file name, for the line on how to open it.
        note: A paragraph under the heading (why the table is empty, say).

    Returns:
        The page, with every name HTML-escaped.
    """
    ordered = sorted(rows, key=lambda r: (-float(r["self_cpu_us"]), str(r["name"])))
    total_cpu = sum(float(r["self_cpu_us"]) for r in rows)
    total_device = sum(float(r.get("self_device_us") or 0.0) for r in rows)
    device = total_device > 0
    head = ["Operator", "Calls", "Self CPU", "Total CPU", "% of self CPU"]
    if device:
        head += ["Self device", "Total device", "% of self device"]
    lines = ["<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for r in ordered[:top]:
        cells = [
            f'<td class="name">{html.escape(str(r["name"]))}</td>',
            f"<td>{int(r['calls'])}</td>",
            f"<td>{_duration(r['self_cpu_us'])}</td>",
            f"<td>{_duration(r['cpu_total_us'])}</td>",
            f"<td>{_percent(r['self_cpu_us'], total_cpu)}</td>",
        ]
        if device:
            cells += [
                f"<td>{_duration(r.get('self_device_us') or 0.0)}</td>",
                f"<td>{_duration(r.get('device_total_us') or 0.0)}</td>",
                f"<td>{_percent(r.get('self_device_us') or 0.0, total_device)}</td>",
            ]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    shown = min(top, len(ordered))
    caption = f"Top {shown} of {len(ordered)} operators by self CPU time"
    if device:
        caption += f"; {_duration(total_device)} self device time in all"
    caption += f"; {_duration(total_cpu)} self CPU time in all."
    trace = html.escape(trace_file or "the trace file")
    return _PAGE.format(
        title=html.escape(title),
        note=f"<p>{html.escape(note)}</p>" if note else "",
        how=(
            f"To see the timeline, download <code>{trace}</code> and open it at "
            f'<a href="{PERFETTO_URL}">{PERFETTO_URL}</a> ("Open trace file") or in '
            '<code>chrome://tracing</code> ("Load"); both read the gzip file as it is.'
        ),
        caption=html.escape(caption),
        table="\n".join(lines),
    )


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f4f4f4; }}
td.name, th:first-child {{ text-align: left; font-family: ui-monospace, monospace; }}
caption {{ text-align: left; padding: 0.4em 0; }}
</style>
</head>
<body>
<h1>{title}</h1>
{note}<p>{how}</p>
<table>
<caption>{caption}</caption>
{table}
</table>
</body>
</html>
"""


def _duration(us: Any) -> str:
    value = float(us)
    if value >= 1e6:
        return f"{value / 1e6:.3f} s"
    if value >= 1e3:
        return f"{value / 1e3:.3f} ms"
    return f"{value:.1f} us"


def _percent(part: Any, whole: float) -> str:
    return f"{100.0 * float(part) / whole:.1f}%" if whole > 0 else ""


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _replace(path: str, write: Any, suffix: str) -> None:
    """Write `path` through a temporary file beside it (named with `suffix`, which is how
    torch's exporter decides to gzip), so that a reader never sees half a file. The file is
    created as any other (mode from the umask), not private as `tempfile` makes it."""
    folder, base = os.path.split(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.partial{suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

"""Tests for machine facts: resource quantities, GPUs, CPUs and memory."""

from typing import Any

import pytest

from headwater import machine
from headwater.errors import ResourceError
from headwater.machine import detect_gpus, parse_cpu, parse_memory

GiB = 2**30
MiB = 2**20


@pytest.mark.parametrize(
    ("text", "cores"),
    [("500m", 0.5), ("250m", 0.25), ("2", 2.0), ("0.5", 0.5), (" 4 ", 4.0), (1.5, 1.5), (3, 3.0)],
    ids=["millis", "quarter", "whole", "fraction", "spaces", "float", "int"],
)
def test_parse_cpu(text: Any, cores: float) -> None:
    assert parse_cpu(text) == pytest.approx(cores)


@pytest.mark.parametrize("text", ["", "two", "1x", "m", "1.2.3"], ids=repr)
def test_parse_cpu_rejects_bad_quantities(text: str) -> None:
    with pytest.raises(ResourceError, match="bad CPU quantity"):
        parse_cpu(text)


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("1G", 1e9),
        ("512Mi", 512 * MiB),
        ("2Gi", 2 * GiB),
        ("1.5Gi", 1.5 * GiB),
        ("100", 100),
        ("64K", 64_000),
        ("1Ti", 2**40),
        ("2GB", 2e9),
        ("4GiB", 4 * GiB),
        ("8 Gi", 8 * GiB),
    ],
    ids=["G", "Mi", "Gi", "fractional", "bytes", "K", "Ti", "GB", "GiB", "space"],
)
def test_parse_memory(text: str, nbytes: float) -> None:
    assert parse_memory(text) == pytest.approx(nbytes)


@pytest.mark.parametrize("text", ["", "lots", "1Zi", "-1G", "G", "1G2"], ids=repr)
def test_parse_memory_rejects_bad_quantities(text: str) -> None:
    with pytest.raises(ResourceError, match="bad memory quantity") as info:
        parse_memory(text)
    assert repr(text.strip()) in str(info.value)


@pytest.mark.parametrize(
    ("visible", "expected"),
    [("0,2", ["0", "2"]), ("", []), ("-1", []), ("1", ["1"])],
    ids=["two", "empty", "disabled", "one"],
)
def test_detect_gpus_honours_cuda_visible_devices(
    monkeypatch: pytest.MonkeyPatch, visible: str, expected: list[str]
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert detect_gpus() == expected


def test_detect_gpus_without_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(machine.shutil, "which", lambda name: None)
    assert detect_gpus() == []


def test_machine_cpus_and_memory_are_positive() -> None:
    assert machine.machine_cpus() >= 1
    assert machine.machine_memory() > 0

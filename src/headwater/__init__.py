"""Headwater: run Kubeflow Pipelines (KFP v2) pipelines anywhere."""

from __future__ import annotations

__version__ = "0.1.0"

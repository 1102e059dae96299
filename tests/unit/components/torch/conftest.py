"""The PyTorch components' parts that run in this process: training, loading, metrics, files.

Lightning warns in ways a test cannot avoid (a deprecated pytree API inside Lightning itself;
"few batches"/"no dataloader workers" hints on tiny data), so those categories are ignored
here and only here.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("lightning")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(
            pytest.mark.filterwarnings(
                "ignore::lightning.fabric.utilities.warnings.PossibleUserWarning"
            )
        )
        item.add_marker(pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"))

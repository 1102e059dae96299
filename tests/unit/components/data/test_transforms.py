"""preprocess, groupby_summary and ingest against pandas computing the same thing in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from headwater.components.data.ingestion import ingest
from headwater.components.data.preprocessing import SPLITS, add_features, preprocess, split_uniform
from headwater.components.data.summary import groupby_summary


def _run_preprocess(src: Path, out: Path, seed: int = 0) -> dict[str, object]:
    return preprocess(
        str(src),
        *(str(out / s) for s in SPLITS),
        str(out / "stats.md"),
        seed=seed,
    )


def test_the_split_is_deterministic_disjoint_and_complete(tmp_path: Path, higgs_dir: Path) -> None:
    done = _run_preprocess(higgs_dir, tmp_path / "one")
    again = _run_preprocess(higgs_dir, tmp_path / "two")
    assert done == again
    for split in SPLITS:
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "one" / split), pd.read_parquet(tmp_path / "two" / split)
        )
    rows = done["rows"]
    assert isinstance(rows, dict) and sum(rows.values()) == 30_000
    assert 0.77 < rows["train"] / 30_000 < 0.83
    source = add_features(pd.read_parquet(higgs_dir))
    joined = pd.concat([pd.read_parquet(tmp_path / "one" / s) for s in SPLITS])
    assert len(joined.drop_duplicates()) == len(source)
    # The split is what the row's position and the seed say, nothing else.
    which = np.searchsorted([0.8, 0.9], split_uniform(0, 0, len(source)), side="right")
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "one" / "test"),
        source[which == 2].reset_index(drop=True),
    )


def test_another_seed_splits_differently(tmp_path: Path, higgs_dir: Path) -> None:
    _run_preprocess(higgs_dir, tmp_path / "one", seed=0)
    _run_preprocess(higgs_dir, tmp_path / "two", seed=1)
    assert not pd.read_parquet(tmp_path / "one" / "test").equals(
        pd.read_parquet(tmp_path / "two" / "test")
    )


def test_nulls_drop_unlabelled_rows_and_fill_features_with_the_mean(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    pd.DataFrame({"label": [1.0, None, 0.0], "x": [1.0, 5.0, None]}).to_parquet(
        src / "part-0.parquet"
    )
    pd.DataFrame({"label": [0.0, 1.0], "x": [3.0, 2.0]}).to_parquet(src / "part-1.parquet")
    done = _run_preprocess(src, tmp_path / "out")
    assert done["dropped"] == 1 and done["filled"] == ["x"]
    joined = pd.concat([pd.read_parquet(tmp_path / "out" / s) for s in SPLITS])
    assert sorted(joined["x"]) == [1.0, 2.0, 2.75, 3.0]  # mean of 1, 5, 3, 2
    stats = (tmp_path / "out" / "stats.md").read_text()
    assert "| x | 1 | 4 |" in stats and "1 dropped (no label)" in stats


def test_column_statistics_match_pandas(tmp_path: Path, higgs_dir: Path) -> None:
    _run_preprocess(higgs_dir, tmp_path)
    frame = add_features(pd.read_parquet(higgs_dir)).astype("float64")
    stats = (tmp_path / "stats.md").read_text()
    row = next(line for line in stats.splitlines() if line.startswith("| m_bb |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[3]) == pytest.approx(frame["m_bb"].mean(), rel=1e-5)
    assert float(cells[4]) == pytest.approx(frame["m_bb"].std(ddof=0), rel=1e-4)
    assert "| jets_pt_sum |" in stats and "| n_btag |" in stats


def test_groupby_summary_matches_pandas(tmp_path: Path, higgs_dir: Path) -> None:
    table = groupby_summary(str(higgs_dir), str(tmp_path / "t.csv"), str(tmp_path / "r.md"), bins=5)
    frame = pd.read_parquet(higgs_dir).astype("float64")
    by_label = frame.groupby("label").mean()
    got = table[table["group_by"] == "label"].set_index("group")
    for column in ("lepton_pT", "m_bb", "m_wwbb"):
        np.testing.assert_allclose(got[column].to_numpy(), by_label[column].to_numpy(), rtol=1e-9)
    low, high = frame["m_bb"].min(), frame["m_bb"].max()
    bins = ((frame["m_bb"] - low) // ((high - low) / 5)).clip(-1, 4)
    by_bin = frame.groupby(bins).agg(["mean", "size"])
    got = table[table["group_by"] == "m_bb"].set_index("group")
    np.testing.assert_array_equal(got["rows"].to_numpy(), by_bin[("label", "size")].to_numpy())
    np.testing.assert_allclose(
        got["label"].to_numpy(), by_bin[("label", "mean")].to_numpy(), rtol=1e-9
    )
    assert pd.read_csv(tmp_path / "t.csv").shape == table.shape
    assert (tmp_path / "r.md").read_text().startswith("# Feature means by group")


def test_ingest_recuts_parquet_into_parts_of_the_target_size(
    tmp_path: Path, higgs_dir: Path
) -> None:
    done = ingest(str(higgs_dir), str(tmp_path / "out"), partition_size_mb=0.5)
    assert done["rows"] == 30_000 and done["partitions"] == 7
    assert done["schema"]["label"] == "int8" and done["schema"]["m_bb"] == "float"
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out"), pd.read_parquet(higgs_dir))


@pytest.mark.parametrize("compression", ["", ".gz"], ids=["plain", "gzip"])
def test_ingest_reads_csv_with_or_without_a_header(
    tmp_path: Path, higgs_dir: Path, compression: str
) -> None:
    frame = pd.read_parquet(higgs_dir)[:5000]
    csv = tmp_path / f"higgs.csv{compression}"
    frame.to_csv(csv, index=False, header=False)
    done = ingest(
        str(csv), str(tmp_path / "out"), partition_size_mb=0.2, column_names=list(frame.columns)
    )
    assert done["rows"] == 5000 and done["partitions"] > 1
    back = pd.read_parquet(tmp_path / "out")
    assert list(back.columns) == list(frame.columns)
    np.testing.assert_allclose(back["m_bb"], frame["m_bb"], rtol=1e-6)


def test_the_served_transform_makes_what_preprocess_made_from_the_same_raw_rows(
    tmp_path: Path, higgs_dir: Path
) -> None:
    # Train/serve skew: the model server applies the transform preprocess recorded to a raw
    # row; every row preprocess wrote must come out of it identically, nulls filled included.
    from headwater.components.data.higgs import FEATURES
    from headwater.models.transform import SPEC_FILE, loads

    raw = pd.read_parquet(higgs_dir)[:6000].reset_index(drop=True)
    rng = np.random.default_rng(7)
    for column in ("jet1pt", "jet3b-tag", "m_bb"):
        raw.loc[rng.random(len(raw)) < 0.05, column] = np.nan
    raw.loc[10, "label"] = None  # dropped: the transform never sees a label
    src = tmp_path / "src"
    src.mkdir()
    for i, part in enumerate((raw[:2500], raw[2500:])):  # two parts: one fill value for both
        part.to_parquet(src / f"part-{i}.parquet")
    out = tmp_path / "out"
    # Everything into train, so its rows are the labelled raw rows in order.
    done = preprocess(str(src), *(str(out / s) for s in SPLITS), str(out / "stats.md"),
                      fractions=(1.0, 0.0, 0.0))  # fmt: skip
    spec = loads((out / "train" / SPEC_FILE).read_text(), where="train")
    assert {s: (out / s / SPEC_FILE).exists() for s in SPLITS} == dict.fromkeys(SPLITS, True)
    assert done["transform"] == spec.to_json()
    assert spec.inputs == FEATURES and sorted(spec.fill) == ["jet1pt", "jet3b-tag", "m_bb"]
    assert [d.name for d in spec.derived] == ["jets_pt_sum", "n_btag"]
    processed = pd.read_parquet(out / "train")
    assert tuple(processed.columns.drop("label")) == spec.outputs
    labelled = raw.drop(index=10)
    served = spec.apply(labelled[list(spec.inputs)].to_numpy(dtype=np.float32))
    # What the model sees: float32 (XGBoost's own type), compared bit for bit.
    written = processed[list(spec.outputs)].to_numpy(dtype=np.float32)
    assert written.shape == served.shape == (5999, 30)
    np.testing.assert_array_equal(served, written)
    assert not np.isnan(written[:, spec.outputs.index("m_bb")]).any()

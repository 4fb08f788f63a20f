"""The fsspec adapter: pandas and pyarrow through nokv://, create-only and replace writes."""

from __future__ import annotations

import pathlib

import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import nokv
from nokv.fsspec import NoKVFileSystem

from conftest import PENGUINS_CSV


@pytest.fixture
def penguins(store: nokv.Store) -> nokv.Store:
    store.create_workbench("penguins").put("input/penguins.csv", PENGUINS_CSV)
    return store


def test_pandas_reads_the_penguins_csv_through_nokv_urls(penguins: nokv.Store) -> None:
    df = pd.read_csv("nokv://penguins/input/penguins.csv", storage_options={"store": penguins})
    expected = pd.read_csv(PENGUINS_CSV)
    assert df.shape == (344, 8)
    pd.testing.assert_frame_equal(df, expected)
    gentoo = df[df.species == "Gentoo"].body_mass_g.mean()
    assert round(gentoo, 2) == 5076.02


def test_store_option_may_be_a_directory(store_dir: pathlib.Path) -> None:
    with nokv.open(store_dir) as s:
        s.create_workbench("d").put("input/x.csv", "a\n1\n")
    df = pd.read_csv("nokv://d/input/x.csv", storage_options={"store": str(store_dir)})
    assert df.a.tolist() == [1]
    fs = fsspec.filesystem("nokv", store=str(store_dir), workbench="d")
    fs.workbench.store.close()


def test_writing_an_existing_path_without_replace_is_already_exists(penguins: nokv.Store) -> None:
    fs = NoKVFileSystem(store=penguins, workbench="penguins")
    with pytest.raises(nokv.AlreadyExists):
        with fs.open("input/penguins.csv", "wb") as f:
            f.write(b"x")
    with pytest.raises(nokv.AlreadyExists):
        pd.DataFrame({"a": [1]}).to_csv("nokv://penguins/input/penguins.csv", storage_options={"store": penguins})
    assert penguins.workbench("penguins").read_bytes("input/penguins.csv") == PENGUINS_CSV.read_bytes()
    with fs.open("input/penguins.csv", "wb", replace=True) as f:
        f.write(b"species\nGentoo\n")
    assert fs.cat("input/penguins.csv") == b"species\nGentoo\n"


def test_unsupported_modes_are_refused(penguins: nokv.Store) -> None:
    fs = NoKVFileSystem(store=penguins, workbench="penguins")
    for mode in ("ab", "r+b", "a"):
        with pytest.raises(nokv.InvalidArguments):
            fs.open("input/penguins.csv", mode)


def test_write_publishes_on_close_only_and_exception_discards(penguins: nokv.Store) -> None:
    fs = NoKVFileSystem(store=penguins, workbench="penguins")
    f = fs.open("outputs/new.txt", "wb")
    f.write(b"part")
    assert not fs.exists("outputs/new.txt")
    f.close()
    assert fs.cat_file("outputs/new.txt") == b"part"
    with pytest.raises(RuntimeError):
        with fs.open("outputs/never.txt", "wb") as g:
            g.write(b"x")
            raise RuntimeError("boom")
    assert not fs.exists("outputs/never.txt")


def test_listing_info_find_and_ranges(penguins: nokv.Store) -> None:
    fs = NoKVFileSystem(store=penguins, workbench="penguins")
    fs.pipe_file("outputs/a/b.txt", b"0123456789")
    assert fs.ls("", detail=False) == ["input", "logs", "metadata", "outputs", "scripts"]
    assert fs.ls("outputs/a", detail=False) == ["outputs/a/b.txt"]
    info = fs.info("nokv://penguins/outputs/a/b.txt")
    assert info["type"] == "file" and info["size"] == 10 and info["generation"] > 0
    assert fs.info("outputs/a")["type"] == "directory"
    assert fs.find("") == ["input/penguins.csv", "outputs/a/b.txt"]
    assert fs.find("outputs/a/b.txt") == ["outputs/a/b.txt"]
    assert fs.cat_file("outputs/a/b.txt", start=2, end=5) == b"234"
    assert fs.cat_file("outputs/a/b.txt", start=-3) == b"789"
    assert fs.isdir("outputs") and fs.isfile("outputs/a/b.txt")
    fs.makedirs("outputs/empty", exist_ok=True)
    assert not fs.exists("outputs/empty")
    assert fs.unstrip_protocol("outputs/a/b.txt") == "nokv://penguins/outputs/a/b.txt"
    with pytest.raises(FileNotFoundError):
        fs.info("outputs/none")


def test_pyarrow_writes_and_reads_parquet(penguins: nokv.Store) -> None:
    fs = NoKVFileSystem(store=penguins, workbench="penguins")
    table = pa.table({"species": ["Adelie", "Gentoo"], "mass": [3700.66, 5076.02]})
    pq.write_table(table, "outputs/t.parquet", filesystem=fs)
    back = pq.read_table("outputs/t.parquet", filesystem=fs)
    assert back.equals(table)
    df = pd.read_parquet("nokv://penguins/outputs/t.parquet", storage_options={"store": penguins})
    assert df.species.tolist() == ["Adelie", "Gentoo"]
    with fs.open("input/penguins.csv", "rb") as f:
        assert pacsv.read_csv(f).num_rows == 344

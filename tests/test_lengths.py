"""Length sources: the shipped histograms against their published summary, files, mixes."""

import numpy as np
import pytest

from ipusim import lengths


@pytest.mark.parametrize(
    ("name", "n", "max_len", "mean", "padding", "padding_tol"),
    [
        # ipusim/data/README.md and docs/facts.md §4.1 (GC-TUT, recomputed): 16,279,552
        # sequences, mean 255.8 tokens, 50.0% padding at 512 (50.03%).
        ("wikipedia-512", 16_279_552, 512, 255.8, 0.5003, 5e-5),
        # ipusim/data/README.md: 88,641 sequences, mean 172.0, 55.2% padding at 384.
        ("squad-384", 88_641, 384, 172.0, 0.552, 5e-4),
    ],
)
def test_histogram_matches_published_summary(name, n, max_len, mean, padding, padding_tol):
    h = lengths.dataset(name)
    assert h.n == n
    assert h.max_len == max_len
    assert h.mean == pytest.approx(mean, abs=0.05)
    assert h.padding_fraction() == pytest.approx(padding, abs=padding_tol)


def test_attribution_ships_beside_the_data():
    from importlib import resources

    text = resources.files("ipusim").joinpath("data", "README.md").read_text()
    assert "arXiv:2107.02027" in text and "graphcore/tutorials" in text


def test_csv_round_trip_with_and_without_header(tmp_path):
    f = tmp_path / "h.csv"
    f.write_text("length,count\n3,2\n5,1\n")
    h = lengths.load_histogram(f)
    assert h.max_len == 5 and list(h.counts) == [0, 0, 2, 0, 1]
    g = tmp_path / "g.csv"
    g.write_text("3,2\n5,1\n")
    assert list(lengths.load_histogram(g, max_len=8).counts) == [0, 0, 2, 0, 1, 0, 0, 0]


@pytest.mark.parametrize(
    "text, words",
    [
        ("length,count\n3,-1\n", "negative count"),
        ("length,count\n3,1.5\n", "whole numbers"),
        ("length,count\n0,1\n", ">= 1"),
        ("length,count\n3,1\n3,2\n", "more than one row"),
        ("length,count\n", "no length,count rows"),
        ("length,count\n3,0\n", "empty"),
    ],
)
def test_bad_histogram_files_name_the_problem(tmp_path, text, words):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(ValueError, match=words):
        lengths.load_histogram(f)


def test_negative_counts_in_code_name_the_length():
    with pytest.raises(ValueError, match="negative count .* at length 2"):
        lengths.Histogram(np.array([1, -3, 2]))


def test_lengths_file(tmp_path):
    f = tmp_path / "l.txt"
    f.write_text("5\n7, 9\n")
    assert list(lengths.load_lengths(f)) == [5, 7, 9]
    f.write_text("5\n0\n")
    with pytest.raises(ValueError, match=">= 1"):
        lengths.load_lengths(f)


def test_from_lengths_counts():
    h = lengths.from_lengths([1, 3, 3], max_len=4)
    assert list(h.counts) == [1, 0, 2, 0]
    assert h.tokens == 7 and h.n == 3
    with pytest.raises(ValueError, match="longer than the maximum 4"):
        lengths.from_lengths([5], max_len=4)


@pytest.mark.parametrize("p", [0.0, 0.4, 1.0])
def test_long_text_mix_mean_is_the_closed_form(p):
    h = lengths.long_text_mix(p)
    # mean of uniform [a, b] is (a + b) / 2; mixture weights p and 1 - p
    expected = (1 - p) * (16 + 128) / 2 + p * (256 + 512) / 2
    # whole counts out of 1e6 spread over ~100-250 lengths: the mean is off by < 1e-4
    assert h.mean == pytest.approx(expected, rel=1e-4)
    long_share = h.counts[255:].sum() / h.n
    assert long_share == pytest.approx(p, abs=1e-6)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_sampled_mix_is_seeded_and_matches_the_expected_mix(p):
    a = lengths.sample_long_text_mix(50_000, p, seed=7)
    assert a.dtype == np.int64 and np.array_equal(
        a, lengths.sample_long_text_mix(50_000, p, seed=7)
    )
    short, long = a[a < 256], a[a >= 256]
    assert short.size + long.size == a.size
    assert (short.min() if short.size else 16) >= 16 and (short.max() if short.size else 128) <= 128
    assert (long.min() if long.size else 256) >= 256 and (long.max() if long.size else 512) <= 512
    # binomial share: standard error sqrt(p (1 - p) / n) <= 0.0023; allow 5 of them
    assert abs(long.size / a.size - p) < 0.012
    # mean of the same mix as expected counts; the std of a length is <= 130 tokens, so the
    # standard error of the mean is <= 0.6 tokens: allow 5 of them
    assert a.mean() == pytest.approx(lengths.long_text_mix(p).mean, abs=3.0)


def test_mix_ranges_are_checked():
    with pytest.raises(ValueError, match="start <= end"):
        lengths.sample_long_text_mix(10, 0.5, short=(100, 50))
    with pytest.raises(ValueError, match="max_len=512"):
        lengths.long_text_mix(0.5, long=(256, 600))


def test_sample_is_seeded_and_follows_the_histogram():
    h = lengths.dataset("squad-384")
    a = h.sample(20_000, seed=3)
    assert np.array_equal(a, h.sample(20_000, seed=3))
    assert not np.array_equal(a, h.sample(20_000, seed=4))
    # standard error of the mean ~ std / sqrt(n) ~ 60 / 141 ~ 0.4 tokens; allow 5 of them
    assert a.mean() == pytest.approx(h.mean, abs=2.0)


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(ValueError, match="wikipedia-512"):
        lengths.dataset("glue")


def test_with_max_len_refuses_to_cut_sequences():
    with pytest.raises(ValueError, match="shorter than the longest"):
        lengths.dataset("squad-384").with_max_len(128)


def test_truncate_keeps_every_sequence():
    h = lengths.dataset("squad-384").truncate(256)
    assert h.n == 88_641 and h.max_len == 256
    assert h.counts[-1] == lengths.dataset("squad-384").counts[255:].sum()


def test_source_reads_every_kind_of_length_source(tmp_path):
    """``lengths.source``: what --lengths means in serve, simulate and checklist."""
    squad = lengths.source("squad")  # a short name and the full one are the same histogram
    assert squad.name == "squad-384" and np.array_equal(
        squad.counts, lengths.source("SQuAD-384").counts
    )
    csv_file = tmp_path / "h.csv"
    csv_file.write_text("# a comment\nlength,count\n3,2\n5,1\n")
    h = lengths.source(csv_file)
    assert h.counts.tolist() == [0, 0, 2, 0, 1]
    listed = tmp_path / "l.txt"
    listed.write_text("3\n3\n5\n")
    assert lengths.source(listed).counts.tolist() == [0, 0, 2, 0, 1]  # a list becomes its histogram
    assert lengths.load_file(listed).tolist() == [3, 3, 5]  # load_file keeps the list as it is
    with pytest.raises(ValueError, match="not found: neither a file nor a dataset name"):
        lengths.source(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="holds no lengths"):
        (tmp_path / "empty.txt").write_text("# nothing\n\n")
        lengths.load_file(tmp_path / "empty.txt")
    with pytest.raises(ValueError, match="expected 'length,count' rows or one length a line"):
        (tmp_path / "bad.csv").write_text("3,2\n5,x\n")
        lengths.load_file(tmp_path / "bad.csv")


@pytest.mark.parametrize(
    ("text", "got"),
    [
        (
            "3,2,1\n",
            [3, 2, 1],
        ),  # a list on one line, separated by commas (as pack has always read it)
        ("5\n7, 9\n", [5, 7, 9]),
        ("100\n200\n300,\n", [100, 200, 300]),
        ("1 2 3\n", [1, 2, 3]),
        (
            "7,9\n8,1\n",
            "histogram",
        ),  # two or more rows of two fields: length,count without a header
        ("# made by hand\nlength,count\n7,9\n", "histogram"),
    ],
)
def test_load_file_tells_a_list_from_a_histogram(tmp_path, text, got):
    f = tmp_path / "f.txt"
    f.write_text(text)
    x = lengths.load_file(f)
    if got == "histogram":
        assert isinstance(x, lengths.Histogram) and x.counts[6] == 9
    else:
        assert x.tolist() == got


def test_one_pair_without_a_header_is_refused_as_ambiguous(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("7, 9\n")
    with pytest.raises(ValueError, match="could be two lengths or a length and its count"):
        lengths.load_file(f)


def test_a_directory_named_like_a_dataset_does_not_hide_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "squad").mkdir()
    assert lengths.load("squad").name == "squad-384"
    (tmp_path / "notes").mkdir()
    with pytest.raises(ValueError, match="directory"):
        lengths.load("notes")

"""servelab.engines.prometheus: /metrics text through prometheus_client's parser, tolerant of odd lines."""

from __future__ import annotations

from servelab.engines.prometheus import first_labels, metric_counts, metric_sums, samples

TEXT = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 1000.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 24
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{tp_rank="0"} 1.5
sglang:spec_accept_length{tp_rank="1"} 1.7
vllm:cache_config_info{block_size="16",cache_dtype="fp8_e5m2",note="a \\"quoted\\" word"} 1.0
plain_untyped 3 1700000000000
"""


def test_sums_add_label_sets_and_keep_the_names_as_written() -> None:
    sums = metric_sums(TEXT, ("vllm:spec_decode_num_drafts_total", "plain_untyped", "absent"))
    assert sums == {"vllm:spec_decode_num_drafts_total": 1024.0, "plain_untyped": 3.0}


def test_counts_series_of_one_name() -> None:
    assert metric_counts(TEXT, "sglang:spec_accept_length") == 2
    assert metric_counts(TEXT, "sglang:spec_accept") == 0  # a prefix is not the name


def test_first_labels_of_an_info_gauge_unescaped() -> None:
    assert first_labels(TEXT, "vllm:cache_config_info") == {
        "block_size": "16",
        "cache_dtype": "fp8_e5m2",
        "note": 'a "quoted" word',
    }
    assert first_labels(TEXT, "absent") == {}


def test_a_malformed_line_is_skipped_and_the_rest_still_read() -> None:
    text = "good 1\nthis is not a sample\nbad{a=1} 2\n" + TEXT
    assert metric_sums(text, ("good", "plain_untyped")) == {"good": 1.0, "plain_untyped": 3.0}
    assert samples("") == [] and samples("# only a comment\n") == []

"""The template language: captures, the safe subset enforced at load time, and hostile input."""

from __future__ import annotations

import pytest

from servelab.diagnose.logs import MAX_LINE_CHARS, read_lines, scan_lines
from servelab.diagnose.signatures import load_signatures, parse_signature_file
from servelab.diagnose.signatures.template import TemplateError, compile_template
from servelab.errors import ConfigError


def test_captures_typed_fields():
    template = compile_template("accept len: {length:num}, accept rate: {rate:num}, ")
    assert template.match("Decode batch, accept len: 1.07, accept rate: 0.02, cuda graph: True") == {
        "length": "1.07",
        "rate": "0.02",
    }


def test_int_takes_printf_padding():
    template = compile_template(
        "draft acceptance = {rate:num} ({accepted:int} accepted / {drafted:int} generated)"
    )
    captures = template.match("draft acceptance = 0.00000 (    0 accepted /  3595 generated)")
    assert captures == {"rate": "0.00000", "accepted": "0", "drafted": "3595"}


def test_later_occurrence_matches_when_the_first_fails():
    template = compile_template("n_slots = {n:int},")
    assert template.match("n_slots = x, then n_slots = 4, end") == {"n": "4"}


def test_no_match_returns_none():
    assert compile_template("n_slots = {n:int},").match("n_slots = 4; nothing") is None


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{x:int} starts with a capture", "must start with a literal"),
        ("abc", "must start with a literal"),
        ("prefix {x:int}5", "would swallow the '5'"),
        ("prefix {x:int}{y:int}", "touch"),
        ("prefix {x:word} {y:regex}", "unknown capture kind 'regex'"),
        ("prefix {x:rest} more", "must be the last part"),
        ("prefix { stray", "lone '{'"),
        ("prefix {x:int} and {x:int}.", "used twice"),
    ],
)
def test_unsafe_templates_are_rejected(source, message):
    with pytest.raises(TemplateError, match=message):
        compile_template(source)


def _entry(**overrides):
    entry = {
        "id": "t.one",
        "versions_seen": ["test"],
        "source": "here",
        "severity": "warning",
        "match": "something {n:int} happened",
        "meaning": "n = {n}",
        "fix": "do it",
    }
    entry.update(overrides)
    return entry


def _yaml(entry) -> str:
    import yaml

    return yaml.safe_dump({"engine": "test", "signatures": [entry]})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (_entry(severity="fatal"), "severity 'fatal' is not one of critical, warning, info"),
        (_entry(match="{n:int} first"), r"entry 0 \(t.one\): match .* must start with a literal"),
        (_entry(fix="use {missing}"), "fix uses {missing}, which the match does not capture"),
        (_entry(when="n >> 3"), "must read 'LEFT OP RIGHT'"),
        ({"id": "t.two"}, r"entry 0 \(t.two\): missing versions_seen, source, severity, match, meaning, fix"),
    ],
)
def test_bad_signature_files_name_the_file_and_entry(entry, message):
    with pytest.raises(ConfigError, match=message) as info:
        parse_signature_file(_yaml(entry), "my.yaml")
    assert "signature file my.yaml" in str(info.value)


def test_invalid_yaml_and_duplicate_ids_are_config_errors():
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_signature_file("signatures: [", "bad.yaml")
    import yaml

    text = yaml.safe_dump({"engine": "t", "signatures": [_entry(), _entry()]})
    with pytest.raises(ConfigError, match="defined twice"):
        parse_signature_file(text, "dup.yaml")


def test_hostile_ten_megabyte_lines_complete_without_matching():
    """Each must finish (the timing figure is in benchmarks/logs_speed.py); a backtracking matcher would hang."""
    signatures = load_signatures()
    size = 10**7
    hostile = [
        "a" * size,
        "accept len: " + "1" * size,
        "Using [" * (size // 7) + "] all-reduce backends (in dispatch order) for group",
        "n_slots = " * (size // 10) + ", n_ctx_slot = ",
        "initializing, n_slots = " + "9" * size + ", n_ctx_slot = x",
        "draft acceptance = " + " " * size + "0.5 (",
    ]
    for line in hostile:
        assert scan_lines([line], signatures) == []


def test_near_miss_repetitions_still_find_the_real_match_at_the_end():
    template = compile_template("slot context shift, n_keep = {k:int}, n_left = {l:int}, n_discard = {d:int}")
    line = (
        "slot context shift, n_keep = 1, n_left = " * 200_000
        + "slot context shift, n_keep = 0, n_left = 5, n_discard = 2"
    )
    assert template.match(line) == {"k": "0", "l": "5", "d": "2"}


def test_overlong_lines_are_cut_and_line_numbers_stay_right(tmp_path):
    path = tmp_path / "long.log"
    path.write_text("x" * (3 * MAX_LINE_CHARS) + "\n" + "load_tensors: offloaded 3/29 layers to GPU\n")
    with path.open() as stream:
        lines = list(read_lines(stream))
    assert [len(line) for line in lines] == [MAX_LINE_CHARS, 42]
    (finding,) = scan_lines(lines, load_signatures(["llamacpp"]))
    assert (finding.id, finding.line) == ("llamacpp.offload.partial", 2)

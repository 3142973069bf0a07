"""The predicate grammar as pure functions: every kind parses its example,
a malformed predicate of every kind is refused with the accepted fields and
an example, the tolerated spellings rewrite, and the value matcher."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import reticle

KINDS = list(reticle._PREDICATE_KINDS)

# One malformed predicate per kind, and a word its error must contain.
MALFORMED = {
    "element": ({"kind": "element", "query": {"role": "button", "colour": "red"}}, "unknown field query.colour"),
    "text": ({"kind": "text"}, "give exactly one of contains, equals, matches"),
    "frame": ({"kind": "frame", "equals": 1}, "`equals` needs a `path`"),
    "net": ({"kind": "net", "status": "200"}, "status"),
    "server": ({"kind": "server", "writes": {"op": "upsert"}}, "writes/op"),
    "route": ({"kind": "route", "pathname": 5}, "pathname"),
    "console": ({"kind": "console", "level": "fatal"}, "level"),
    "animation": ({"kind": "animation", "completed": "yes"}, "completed"),
    "signal": ({"kind": "signal", "name": "x", "count": -1}, "count"),
    "state": ({"kind": "state", "equals": 1}, "'path' is required"),
    "storage": ({"kind": "storage", "key": "k", "area": "disk"}, "area"),
    "stored": ({"kind": "stored", "table": "notes", "op": "upsert"}, "op"),
    "settled": ({"kind": "settled", "quietMs": 0}, "quietMs"),
    "allOf": ({"kind": "allOf", "predicates": []}, "predicates"),
    "anyOf": ({"kind": "anyOf", "predicates": [{"kind": "nope"}]}, "'nope' is not a predicate kind"),
    "not": ({"kind": "not"}, "'predicate' is required"),
}


def test_every_kind_has_a_malformed_case():
    assert set(MALFORMED) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_each_example_parses(kind):
    example = reticle._PREDICATE_KINDS[kind].example
    parsed = reticle.parse_predicate(example)
    assert parsed["kind"] == kind


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_predicate_names_accepted_fields_and_an_example(kind):
    raw, needle = MALFORMED[kind]
    with pytest.raises(reticle.PredicateError) as info:
        reticle.parse_predicate(raw)
    err = info.value
    assert needle in err.error, err.error
    assert "Nothing ran" in err.error and "no verdict" in err.error
    payload = err.payload()
    assert payload["noVerdict"] is True
    if kind in ("anyOf",):  # the child's own kind is what failed
        assert "element, text, net" in err.error
    else:
        assert "%s accepts: kind" % kind in err.error
        assert payload["example"] == reticle._PREDICATE_KINDS[kind].example
        for field in reticle._PREDICATE_KINDS[kind].properties:
            assert field in payload["accepts"]


@pytest.mark.parametrize("raw,expected", [
    ({"type": "net", "url": "/api"}, {"kind": "net", "urlContains": "/api"}),
    ({"kind": "text", "text": "Hi"}, {"kind": "text", "contains": "Hi"}),
    ({"kind": "text", "value": "Hi"}, {"kind": "text", "contains": "Hi"}),
    ({"kind": "text", "contains": "A", "text": "B"}, {"kind": "text", "contains": "A"}),
    ({"kind": "route", "path": "/x"}, {"kind": "route", "pathname": "/x"}),
    ({"kind": "route", "urlContains": "x"}, {"kind": "route", "contains": "x"}),
    ({"kind": "route", "url": "x"}, {"kind": "route", "contains": "x"}),
    ({"kind": "console", "textContains": "boom"}, {"kind": "console", "contains": "boom"}),
    ({"kind": "signal", "name": "s", "data": {"a": 1}}, {"kind": "signal", "name": "s", "dataMatches": {"a": 1}}),
    ({"kind": "element", "role": "button", "name": "Pay"},
     {"kind": "element", "query": {"role": "button", "name": "Pay"}}),
    ({"kind": "element", "query": {"testid": "a"}, "role": "button"}, {"kind": "element", "query": {"testid": "a"}}),
    ({"kind": "element", "query": {"testid": "a"}, "state": "visible"},
     {"kind": "element", "query": {"testid": "a"}, "state": ["visible"]}),
    ({"kind": "allOf", "of": [{"type": "text", "text": "a"}]},
     {"kind": "allOf", "predicates": [{"kind": "text", "contains": "a"}]}),
    ({"kind": "anyOf", "of": [{"kind": "route", "path": "/"}]},
     {"kind": "anyOf", "predicates": [{"kind": "route", "pathname": "/"}]}),
    ({"kind": "not", "of": {"kind": "console", "textContains": "x"}},
     {"kind": "not", "predicate": {"kind": "console", "contains": "x"}}),
])
def test_tolerated_spellings(raw, expected):
    assert reticle.parse_predicate(raw) == expected


@pytest.mark.parametrize("raw,needle", [
    ({"allOf": [{"kind": "text", "contains": "a"}]}, "no `kind`"),
    ({"kind": "allOf", "allOf": [{"kind": "text", "contains": "a"}]}, "unknown field allOf"),
    ("text", "must be an object"),
    ({"kind": "net", "urlcontains": "/api"}, "unknown field urlcontains"),
    ({"kind": "not", "predicate": {"kind": "text"}}, "predicate.predicate"),
])
def test_refused_shapes(raw, needle):
    with pytest.raises(reticle.PredicateError) as info:
        reticle.parse_predicate(raw)
    assert needle in info.value.error


def test_grammar_resource_is_the_same_source():
    doc = reticle._predicate_grammar_doc()
    assert set(doc["kinds"]) == set(KINDS)
    for kind, spec in doc["kinds"].items():
        assert spec["schema"]["additionalProperties"] is False
        assert set(spec["schema"]["properties"]) == {"kind"} | set(reticle._PREDICATE_KINDS[kind].properties)
    json.dumps(doc)


@pytest.mark.parametrize("expected,actual,ok", [
    ("*", 0, True), ("*", None, False),
    ({"$gte": 2}, 2, True), ({"$gt": 2}, 2, False), ({"$lt": 3, "$gt": 1}, 2, True), ({"$lte": 1}, "a", False),
    ({"$contains": "ab"}, "xaby", True), ({"$contains": 3}, [1, 2], False), ({"$length": 2}, [1, 2], True),
    ({"$nope": 1}, 1, False),
    (1, True, False), (True, True, True), (1, 1.0, True),
    ({"a": [1, 2]}, {"a": [1, 2]}, True), ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ({"a": 1}, {"a": 1, "b": 2}, False),
])
def test_value_matcher(expected, actual, ok):
    assert reticle._value_matches(expected, actual) is ok


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.integers(), st.text(max_size=8)), max_size=4))
def test_arbitrary_objects_parse_or_are_refused_cleanly(raw):
    try:
        parsed = reticle.parse_predicate(raw)
    except reticle.PredicateError as exc:
        assert "Nothing ran" in exc.error
    else:
        assert parsed["kind"] in KINDS


@pytest.mark.parametrize("body,needle", [
    ('{"ok": false}', "ok: false"),
    ('{"success": false, "data": 1}', "success: false"),
    ('{"errors": ["bad"]}', "errors"),
    ('{"results": [{"ok": true}, {"ok": false}, {"error": "dup"}]}', "2 of 3 results FAILED"),
])
def test_partial_failure_detector(body, needle):
    assert needle in reticle._partial_failure(body)


@pytest.mark.parametrize("body", ['{"ok": true}', '{"results": [{"ok": true}]}', "plain text", "", None, '{"error": null}'])
def test_partial_failure_detector_passes_clean_bodies(body):
    assert reticle._partial_failure(body) is None


def test_grades():
    parse = reticle.parse_predicate
    assert reticle._grade(parse({"kind": "signal", "name": "s"})) == "signal"
    assert reticle._grade(parse({"kind": "net", "method": "POST"})) == "presence"
    assert reticle._grade(parse({"kind": "allOf", "predicates": [{"kind": "net", "urlContains": "/a"},
                                                                  {"kind": "state", "path": "x"}]})) == "net"
    assert reticle._grade(parse({"kind": "not", "predicate": {"kind": "signal", "name": "s"}})) == "presence"
    assert reticle._presence_only(parse({"kind": "text", "contains": "x"}))
    assert not reticle._presence_only(parse({"kind": "allOf", "predicates": [{"kind": "text", "contains": "x"},
                                                                              {"kind": "net", "urlContains": "/a"}]}))

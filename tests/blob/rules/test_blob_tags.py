"""Blob index tags: tag-set validation with Azure's codes, the x-ms-tags header, the tag XML
documents (read back by the SDK's own deserializer), and the filter language: parser errors,
where/if-tags differences, a render -> parse round trip and the evaluator against a model."""

from __future__ import annotations

import operator
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabulae.blob.api.tag_formats import parse_tags_document, render_found_blobs, render_tags_document
from tabulae.blob.rules import tags
from tabulae.blob.rules.tags import AllOf, AnyOf, Comparison, Node
from tabulae.model.errors import ServiceError


def error_of(action: object) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        action()  # type: ignore[operator]
    return caught.value


# ------------------------------------------------------------------------------ tag sets


def test_valid_tags_keep_their_order_and_case() -> None:
    pairs = [("+-./:=_ ", "firsttag"), ("tag2", "+-./:=_"), ("Tag2", ""), ("k" * 128, "v" * 256)]
    assert list(tags.check_tags(pairs).items()) == pairs


@pytest.mark.parametrize(
    ("pairs", "code"),
    [
        ([(f"k{i}", "v") for i in range(11)], "TagsTooLarge"),
        ([("", "v")], "EmptyTagName"),
        ([("k" * 129, "v")], "TagsTooLarge"),
        ([("k", "v" * 257)], "TagsTooLarge"),
        ([("k!", "v")], "InvalidTag"),
        ([("k", "v&")], "InvalidTag"),
        ([("ké", "v")], "InvalidTag"),
        ([("k", "a"), ("k", "b")], "DuplicateTagNames"),
    ],
)
def test_invalid_tag_sets(pairs: list[tuple[str, str]], code: str) -> None:
    error = error_of(lambda: tags.check_tags(pairs))
    assert (error.status, error.code) == (400, code)


def test_x_ms_tags_header_is_url_encoded_query_form() -> None:
    assert tags.parse_tags_header("tag1=firsttag&tag2=second%20tag&%2B-.%2F%3A%3D_%20=x") == {
        "tag1": "firsttag",
        "tag2": "second tag",
        "+-./:=_ ": "x",
    }
    assert tags.parse_tags_header("") == {}
    assert tags.parse_tags_header("empty=") == {"empty": ""}
    assert error_of(lambda: tags.parse_tags_header("a=1&a=2")).code == "DuplicateTagNames"
    assert error_of(lambda: tags.parse_tags_header("a=%21")).code == "InvalidTag"


def test_x_ms_tags_header_round_trips() -> None:
    value = {"a b": "c+d", "e/f": "g:h=i", "j": ""}
    assert tags.parse_tags_header(tags.render_tags_header(value)) == value


# ----------------------------------------------------------------------- tag documents


def test_tags_document_round_trip_and_sdk_reads_it() -> None:
    from azure.storage.blob._generated import models
    from azure.storage.blob._generated._utils.serialization import Deserializer

    value = {"tag1": "firsttag", "+-./:=_ ": "", "Tag1": "x y"}
    body = render_tags_document(value)
    assert parse_tags_document(body) == value
    client_models = {k: v for k, v in vars(models).items() if isinstance(v, type)}
    parsed = Deserializer(client_models)("BlobTags", ET.fromstring(body))
    assert {t.key: t.value for t in parsed.blob_tag_set} == value


def test_tags_document_edge_cases() -> None:
    assert parse_tags_document(b"") == {}
    assert parse_tags_document(b"<Tags><TagSet/></Tags>") == {}
    assert parse_tags_document(b"<Tags><TagSet><Tag><Key>k</Key></Tag></TagSet></Tags>") == {"k": ""}
    assert error_of(
        lambda: parse_tags_document(b"<Tags><TagSet><Tag><Value>v</Value></Tag></TagSet></Tags>")
    ).code == ("EmptyTagName")
    assert error_of(lambda: parse_tags_document(b"<Tags><Other/></Tags>")).code == "InvalidXmlDocument"
    assert (
        error_of(lambda: parse_tags_document(b"<Tags><TagSet><X/></TagSet></Tags>")).code
        == "InvalidXmlDocument"
    )
    assert error_of(lambda: parse_tags_document(b"<Tag>")).code == "InvalidXmlDocument"


def test_found_blobs_listing_is_read_by_the_sdk() -> None:
    from azure.storage.blob._generated import models
    from azure.storage.blob._generated._utils.serialization import Deserializer

    body = render_found_blobs(
        "http://127.0.0.1:10000/devstoreaccount1/",
        "\"tag1\"='firsttag'",
        [("c1", "a&b", {"tag1": "firsttag"}), ("c2", "blob2", {"tag1": "firsttag"})],
        "marker!1",
    )
    client_models = {k: v for k, v in vars(models).items() if isinstance(v, type)}
    segment = Deserializer(client_models)("FilterBlobSegment", ET.fromstring(body))
    assert [(b.container_name, b.name) for b in segment.blobs] == [("c1", "a&b"), ("c2", "blob2")]
    assert segment.blobs[0].tags.blob_tag_set[0].key == "tag1"
    assert segment.next_marker == "marker!1"
    assert segment.where == "\"tag1\"='firsttag'"


# ------------------------------------------------------------------------------ filters


def test_filters_as_the_sdk_tests_write_them() -> None:
    node = tags.parse_filter("tag1='firsttag' and tag2='secondtag'")
    assert node == AllOf((Comparison("tag1", "=", "firsttag"), Comparison("tag2", "=", "secondtag")))
    node = tags.parse_filter("\"year\"='1000' and tag2 = 'secondtag' and tag3='thirdtag'")
    assert isinstance(node, AllOf) and len(node.terms) == 3
    node = tags.parse_filter(
        "@container='c1' AND \"Rank\" >= '010' AND \"Rank\" < '100'", allow_container=True
    )
    assert tags.container_scope(node) == "c1"
    assert tags.filter_keys(node) == ["Rank"]


def test_if_tags_allows_or_not_equal_and_groups() -> None:
    node = tags.parse_filter("\"Status\" <> 'Done' OR (\"a\" = 'b' AND \"c\" > 'd')", header="x-ms-if-tags")
    assert node == AnyOf(
        (Comparison("Status", "<>", "Done"), AllOf((Comparison("a", "=", "b"), Comparison("c", ">", "d"))))
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "tag1",
        "tag1 = firsttag",
        "tag1 = 'unterminated",
        "\"unterminated = 'x'",
        "tag1 = 'a' OR tag2 = 'b'",
        "tag1 <> 'a'",
        "tag1 = 'a' AND",
        "tag1 = 'a' tag2 = 'b'",
        "(tag1 = 'a'",
        "'key 1'='v'",
        "key-1='v'",
        "\"key!\"='v'",
        "tag='v!'",
        "@container > 'c'",
        "@other = 'c'",
        "\"\" = 'v'",
        "\"Rank\" > '10' AND \"Rank\" >= '15'",
        "\"Rank\" = '10' AND \"Rank\" < '15'",
        " AND ".join(f"k{i} = 'v'" for i in range(11)),
    ],
)
def test_where_syntax_errors_are_invalid_query_parameter_values(text: str) -> None:
    error = error_of(lambda: tags.parse_filter(text, allow_container=True))
    assert (error.status, error.code) == (400, "InvalidQueryParameterValue")
    assert error.fields[:2] == (("QueryParameterName", "where"), ("QueryParameterValue", text))
    assert error.message.startswith("Error parsing query")
    if "character position" in error.message:  # a syntax error gives Azure's Reason (findBlobsError)
        assert error.fields[2:] == (("Reason", "This query parameter value is invalid."),)


def test_container_scope_is_refused_where_the_container_is_in_the_uri() -> None:
    error = error_of(lambda: tags.parse_filter("@container = 'c'"))
    assert error.code == "InvalidQueryParameterValue"
    assert "unsupported parameter" in error.message


@pytest.mark.parametrize("text", ["", "tag1", "@container = 'c'", "a = 'b' OR", "a = b"])
def test_if_tags_syntax_errors_are_invalid_header_values(text: str) -> None:
    error = error_of(lambda: tags.parse_filter(text, header="x-ms-if-tags"))
    assert (error.status, error.code) == (400, "InvalidHeaderValue")
    assert error.fields == (("HeaderName", "x-ms-if-tags"), ("HeaderValue", text))


def test_lengths_are_checked_in_where_only() -> None:
    long_key, long_value = "k" * 129, "v" * 257
    for text in (f"\"{long_key}\" = 'v'", f"{long_key} = 'v'", f"k = '{long_value}'"):
        assert error_of(lambda text=text: tags.parse_filter(text)).code == "InvalidQueryParameterValue"
        node = tags.parse_filter(text, header="x-ms-if-tags")
        assert not tags.matches({"k": "v"}, node)


def test_ten_distinct_keys_pass_and_ranges_on_one_key_are_fine() -> None:
    tags.parse_filter(" AND ".join(f"k{i} = 'v'" for i in range(10)))
    tags.parse_filter("\"Rank\" > '10' AND \"Rank\" <= '15'")


def test_matching() -> None:
    blob = {"Status": "In Progress", "Priority": "05", "Date": "2018-06-18"}
    assert tags.matches(blob, tags.parse_filter("\"Status\" = 'In Progress' AND Priority >= '05'"))
    assert not tags.matches(blob, tags.parse_filter("\"status\" = 'In Progress'"))  # case-sensitive keys
    assert not tags.matches(blob, tags.parse_filter("Priority > '1'"))  # '05' < '1': ordinal strings
    assert tags.matches(blob, tags.parse_filter("Missing <> 'x' OR Date < '2019'", header="x-ms-if-tags"))
    assert not tags.matches(blob, tags.parse_filter("Missing <> 'x'", header="x-ms-if-tags"))
    scoped = tags.parse_filter("@container = 'c1' AND Status = 'In Progress'", allow_container=True)
    assert tags.matches(blob, scoped, "c1") and not tags.matches(blob, scoped, "c2")


# ------------------------------------------------------------------- property tests

tag_text = st.text(alphabet=sorted(tags.TAG_CHARS), min_size=1, max_size=12)
value_text = st.text(alphabet=sorted(tags.TAG_CHARS), max_size=12)
comparisons = st.builds(Comparison, tag_text, st.sampled_from(tags.OPERATORS), value_text)


def nodes() -> st.SearchStrategy[Node]:
    return st.recursive(
        comparisons,
        lambda children: st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda t: AllOf(tuple(t))),
            st.lists(children, min_size=2, max_size=3).map(lambda t: AnyOf(tuple(t))),
        ),
        max_leaves=8,
    )


def normal(node: Node) -> Node:
    """Nested ANDs inside AND (and ORs inside OR) are one level: the parser flattens them."""
    if isinstance(node, Comparison):
        return node
    kind = type(node)
    terms: list[Node] = []
    for term in (normal(t) for t in node.terms):
        terms.extend(term.terms if isinstance(term, kind) else (term,))
    return kind(tuple(terms))


@settings(max_examples=300, deadline=None)
@given(nodes())
def test_render_then_parse_round_trips(node: Node) -> None:
    text = tags.render_filter(node)
    assert tags.parse_filter(text, header="x-ms-if-tags") == normal(node)


OPS = {
    "=": operator.eq,
    "<>": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def model(blob: dict[str, str], node: Node) -> bool:
    """Evaluate through Python's own string comparisons and boolean folding."""
    if isinstance(node, Comparison):
        return node.key in blob and bool(OPS[node.operator](blob[node.key], node.value))
    results = [model(blob, t) for t in node.terms]
    return all(results) if isinstance(node, AllOf) else any(results)


keys = st.sampled_from(["a", "b", "c", "D"])
small_values = st.text(alphabet="abAB0 ", max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(keys, small_values, max_size=4),
    st.recursive(
        st.builds(Comparison, keys, st.sampled_from(tags.OPERATORS), small_values),
        lambda children: st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda t: AllOf(tuple(t))),
            st.lists(children, min_size=2, max_size=3).map(lambda t: AnyOf(tuple(t))),
        ),
        max_leaves=6,
    ),
)
def test_evaluator_agrees_with_a_model(blob: dict[str, str], node: Node) -> None:
    parsed = tags.parse_filter(tags.render_filter(node), header="x-ms-if-tags")
    assert tags.matches(blob, parsed) == model(blob, node)


# ------------------------------------------------------------------------ fuzzing


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("\"'()<>=@ aAnNdDoOrR_kv1 -!\t")), max_size=40), st.booleans())
def test_any_filter_text_parses_or_is_refused_with_azures_error(text: str, header: bool) -> None:
    try:
        node = tags.parse_filter(text, header="x-ms-if-tags" if header else None, allow_container=True)
    except ServiceError as error:
        assert error.status == 400
        assert error.code == ("InvalidHeaderValue" if header else "InvalidQueryParameterValue")
    else:
        assert (
            tags.parse_filter(tags.render_filter(node), header="x-ms-if-tags", allow_container=True)
            is not None
        )


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_tags_header_parses_or_is_refused(value: str) -> None:
    try:
        result = tags.parse_tags_header(value)
    except ServiceError as error:
        assert error.status == 400
    else:
        assert len(result) <= tags.MAX_TAGS


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120) | st.text(alphabet="<>/TagsSetKeyVlu =\"'&;x", max_size=80).map(str.encode))
def test_any_tags_document_parses_or_is_refused(body: bytes) -> None:
    try:
        parse_tags_document(body)
    except ServiceError as error:
        assert error.status == 400


def test_missing_operator_is_placed_at_the_key() -> None:
    """``garbageTag``: "at or near character position 1: expected an operator", as Azure answered
    the Java SDK's ServiceApiTests.findBlobsError (x-ms-version 2023-08-03)."""
    for text, position in (("garbageTag", 1), ("a = 'b' AND  cc", 14)):
        error = error_of(lambda text=text: tags.parse_filter(text))  # type: ignore[misc]
        assert (
            error.message
            == f"Error parsing query at or near character position {position}: expected an operator"
        )

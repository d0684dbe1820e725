"""DFS path rules: normalisation, parents, x-ms-rename-source, rename/create/delete decisions and
the order long operations walk a tree in."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabulae.dfs import paths
from tabulae.dfs.paths import Existing, Kind, RenameEffect
from tabulae.model.errors import ServiceError

FILE = Existing(Kind.FILE)
EMPTY_DIR = Existing(Kind.DIRECTORY)
FULL_DIR = Existing(Kind.DIRECTORY, has_children=True)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("a", "a"),
        ("/a/b/", "a/b"),
        ("a//b", "a/b"),
        ("", ""),
        ("/", ""),
        ("a b/c+d", "a b/c+d"),
        ("a./b", "a./b"),
    ],
)
def test_normalize(raw: str, canonical: str) -> None:
    assert paths.normalize(raw) == canonical


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("a/../b", "b"),
        ("./a", "a"),
        ("a/.", "a"),
        ("d/./x/../y/.././f", "d/f"),
        ("d/./x/../../y/.././f", "f"),
    ],
)
def test_dot_segments_are_resolved(raw: str, canonical: str) -> None:
    assert paths.normalize(raw) == canonical


@pytest.mark.parametrize("raw", ["..", "a/../..", "../a"])
def test_a_dot_dot_above_the_root_is_refused(raw: str) -> None:
    with pytest.raises(ServiceError) as raised:
        paths.normalize(raw)
    assert raised.value.code == "InvalidResourceName"
    assert raised.value.status == 400


def test_blob_name_rules_apply() -> None:
    with pytest.raises(ServiceError) as raised:
        paths.normalize("a" * 1025)
    assert raised.value.code == "OutOfRangeInput"
    with pytest.raises(ServiceError) as raised:
        paths.normalize("a\x01b")
    assert raised.value.code == "InvalidResourceName"
    with pytest.raises(ServiceError) as raised:
        paths.normalize("/".join(["d"] * 255))
    assert raised.value.code == "InvalidResourceName"
    assert paths.normalize("/".join(["d"] * 254)) == "/".join(["d"] * 254)


_segment = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters="/"),
    min_size=1,
    max_size=8,
).filter(lambda s: s not in (".", ".."))


@given(st.lists(_segment, min_size=1, max_size=8), st.booleans(), st.booleans())
def test_normalize_is_idempotent_and_drops_only_slashes(segments: list[str], lead: bool, trail: bool) -> None:
    raw = ("/" if lead else "") + "//".join(segments) + ("/" if trail else "")
    canonical = paths.normalize(raw)
    assert canonical == "/".join(segments)
    assert paths.normalize(canonical) == canonical


def test_parents() -> None:
    assert paths.parent("a/b/c") == "a/b"
    assert paths.parent("a") == ""
    assert paths.basename("a/b/c") == "c"
    assert paths.ancestors("a/b/c") == ["a", "a/b"]
    assert paths.ancestors("a") == []
    assert paths.depth("a/b/c") == 3 and paths.depth("") == 0
    assert paths.is_within("a/b", "a") and paths.is_within("a", "a") and paths.is_within("x", "")
    assert not paths.is_within("ab", "a")


def test_relocate() -> None:
    assert paths.relocate("src/x/y", "src", "dst/new") == "dst/new/x/y"
    assert paths.relocate("src", "src", "dst") == "dst"
    with pytest.raises(ValueError):
        paths.relocate("srcx/y", "src", "dst")


def test_listing_order_is_the_recorded_tree_order() -> None:
    """test_file_system.pyTestFileSystemtest_list_paths_recursively, as Azure listed it."""
    recorded = [
        "dir10", "dir10/subdir", "dir10/subdir/file", "dir10/subdir/subsub",
        "dir11", "dir11/subdir", "dir11/subdir/file", "dir11/subdir/subsub",
    ]  # fmt: skip
    assert sorted(reversed(recorded), key=paths.listing_key) == recorded
    assert sorted(["a-b", "a/c", "a"], key=paths.listing_key) == ["a", "a/c", "a-b"]


# --- x-ms-rename-source ------------------------------------------------------------------------


def test_rename_source_as_the_sdk_sends_it() -> None:
    """Captured from azure-storage-file-datalake (tests/dfs/test_dfs_routing.py)."""
    source = paths.parse_rename_source("/fs1/dir/a%20b%2Bc.txt")
    assert (source.filesystem, source.path, source.sas) == ("fs1", "dir/a b+c.txt", {})
    sas = "sv=2025-01-05&se=2030-01-01T00%3A00%3A00Z&sp=rwdlac&sig=abc%2Bdef%3D"
    source = paths.parse_rename_source(f"/fs1/dir/a.txt?{sas}")
    assert source.sas == {"sv": "2025-01-05", "se": "2030-01-01T00:00:00Z", "sp": "rwdlac", "sig": "abc+def="}
    assert paths.parse_rename_source("fs1/d/").path == "d"
    assert paths.parse_rename_source("/fs1/a%2Fb").path == "a/b"  # %2F is a separator once decoded


@pytest.mark.parametrize("bad", ["", "/", "/fs1", "/fs1/", "//a", "/fs1/%ff", "/fs1/%zz%", "/fs1/é"])
def test_bad_rename_source(bad: str) -> None:
    with pytest.raises(ServiceError) as raised:
        paths.parse_rename_source(bad)
    assert raised.value.code == "InvalidSourceUri"
    assert raised.value.status == 400


@given(st.lists(_segment, min_size=1, max_size=5))
def test_rename_source_round_trips_through_the_sdks_encoding(segments: list[str]) -> None:
    path = "/".join(segments)
    header = f"/fs/{urllib.parse.quote(path)}"
    assert paths.parse_rename_source(header).path == path


@given(st.text(max_size=30))
def test_rename_source_parser_only_raises_azures_errors(value: str) -> None:
    try:
        paths.parse_rename_source(value)
    except ServiceError as error:
        assert error.code in ("InvalidSourceUri", "InvalidResourceName", "OutOfRangeInput")


# --- rename rules ------------------------------------------------------------------------------


def _rename(
    source: str,
    found: Existing | None,
    destination: str,
    existing: Existing | None,
    parent: Existing | None = EMPTY_DIR,
    other_filesystem: bool = False,
) -> RenameEffect:
    return paths.check_rename(
        "fs", source, found, "fs2" if other_filesystem else "fs", destination, existing, parent
    )


def test_rename_moves_and_replaces() -> None:
    assert _rename("a", FILE, "b", None) is RenameEffect.MOVE
    assert _rename("a", FILE, "b", FILE) is RenameEffect.REPLACE
    assert _rename("d", FULL_DIR, "e", None) is RenameEffect.MOVE
    assert _rename("d", FULL_DIR, "e", EMPTY_DIR) is RenameEffect.REPLACE
    assert _rename("a", FILE, "a", FILE) is RenameEffect.NOTHING
    assert _rename("d", FULL_DIR, "d/sub", None, other_filesystem=True) is RenameEffect.MOVE


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        (("a", None, "b", None), "SourcePathNotFound", 404),
        (("d", FULL_DIR, "d/sub", None), "InvalidRenameSourcePath", 409),
        (("d", FULL_DIR, "d/sub/deeper", None, None), "InvalidRenameSourcePath", 409),
        (("d", EMPTY_DIR, "d", EMPTY_DIR), "InvalidRenameSourcePath", 409),
        (("a", FILE, "x/b", None, None), "RenameDestinationParentPathNotFound", 404),
        (("a", FILE, "x/b", None, FILE), "InvalidDestinationPath", 409),
        (("a", FILE, "e", EMPTY_DIR), "InvalidSourceOrDestinationResourceType", 409),
        (("d", EMPTY_DIR, "f", FILE), "InvalidSourceOrDestinationResourceType", 409),
        (("d", FULL_DIR, "e", FULL_DIR), "DirectoryNotEmpty", 409),
    ],
)
def test_rename_refusals(args: tuple, code: str, status: int) -> None:  # type: ignore[type-arg]
    with pytest.raises(ServiceError) as raised:
        _rename(*args)
    assert (raised.value.code, raised.value.status) == (code, status)


def test_rename_into_a_sibling_with_a_shared_prefix_is_fine() -> None:
    assert _rename("d", FULL_DIR, "d2/x", None) is RenameEffect.MOVE


def test_create_rules() -> None:
    assert paths.check_create(Kind.FILE, None, False) is True
    assert paths.check_create(Kind.FILE, FILE, False) is True  # overwritten
    assert paths.check_create(Kind.DIRECTORY, EMPTY_DIR, False) is False  # already there
    for args in ((Kind.FILE, EMPTY_DIR, False), (Kind.DIRECTORY, FILE, False), (Kind.FILE, None, True)):
        with pytest.raises(ServiceError) as raised:
            paths.check_create(*args)
        assert raised.value.code == "PathConflict"


def test_delete_rules() -> None:
    paths.check_delete(FILE, None)
    paths.check_delete(EMPTY_DIR, False)
    paths.check_delete(FULL_DIR, True)
    with pytest.raises(ServiceError) as raised:
        paths.check_delete(FULL_DIR, False)
    assert raised.value.code == "DirectoryNotEmpty"
    with pytest.raises(ServiceError) as raised:
        paths.check_delete(FULL_DIR, None)
    assert raised.value.code == "DirectoryNotEmpty"
    with pytest.raises(ServiceError) as raised:
        paths.check_delete(None, True)
    assert (raised.value.code, raised.value.status) == ("PathNotFound", 404)


# --- pieces ------------------------------------------------------------------------------------

_trees = st.sets(
    st.lists(st.sampled_from(["a", "b", "a-b", "c"]), min_size=1, max_size=4).map("/".join), max_size=30
)


def _closed(tree: set[str]) -> set[str]:
    """A tree: every ancestor of a path is in it."""
    return tree | {ancestor for path in tree for ancestor in paths.ancestors(path)}


@given(_trees, st.integers(1, 7))
def test_recursive_delete_in_pieces_never_orphans(tree: set[str], limit: int) -> None:
    remaining = _closed(tree)
    total = len(remaining)
    rounds = 0
    while remaining:
        piece = paths.delete_piece(remaining, limit)
        assert len(piece.paths) == min(limit, len(remaining))
        remaining -= set(piece.paths)
        assert all(paths.parent(path) in remaining or not paths.parent(path) for path in remaining)
        assert (piece.resume_after is None) == (not remaining)
        rounds += 1
        assert rounds <= total
    assert paths.delete_piece([], 3) == paths.Piece((), None)


@given(_trees, st.integers(1, 7))
def test_pieces_of_a_walk_cover_it_once(tree: set[str], limit: int) -> None:
    ordered = sorted(_closed(tree), key=paths.listing_key)
    seen: list[str] = []
    after = None
    while True:
        piece = paths.next_piece(ordered, after, limit)
        seen += piece.paths
        if piece.resume_after is None:
            break
        after = piece.resume_after
    assert seen == ordered


def test_a_walk_resumes_past_a_path_removed_meanwhile() -> None:
    ordered = ["a", "a/x", "b", "c"]
    piece = paths.next_piece(ordered, None, 2)
    assert piece == paths.Piece(("a", "a/x"), "a/x")
    assert paths.next_piece(["a", "b", "c"], piece.resume_after, 2) == paths.Piece(("b", "c"), None)
    with pytest.raises(ValueError):
        paths.next_piece(ordered, None, 0)

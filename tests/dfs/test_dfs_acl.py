"""POSIX ACLs and permissions of HNS accounts: Azure's recorded values, the rules, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabulae.dfs import acl
from tabulae.dfs.acl import SUPER, Entry, Kind, Need, Principal
from tabulae.model.errors import ServiceError

OID = "3c2e7c5e-0000-4000-8000-000000000001"
GID = "9a1b2c3d-0000-4000-8000-000000000002"


# --- facts recorded from real Azure --------------------------------------------------------------


def test_new_directory_under_the_root_reads_as_azure_shows_it() -> None:
    """test_file_system.pyTestFileSystemtest_list_paths / test_directory...test_get_access_control:
    a directory created with no permissions, or with 0777 alone, is rwxr-x--- with base entries."""
    for permissions in (None, 0o777):
        new = acl.for_new_path(acl.minimal_acl(0o750), directory=True, permissions=permissions)
        assert acl.render_permissions(new.mode, extended=acl.is_extended(new.acl)) == "rwxr-x---"
        assert acl.render_acl(new.acl) == "user::rwx,group::r-x,other::---"


def test_umask_0057_on_0777_is_rwx_w() -> None:
    """.NET FileClientTests.CreateAsync_PermissionAndUmask and the x-ms-umask example: 0720."""
    new = acl.for_new_path((), directory=False, permissions=0o777, umask=0o057)
    assert acl.render_permissions(new.mode) == "rwx-w----"
    assert new.mode == 0o720


def test_new_file_default_mode() -> None:
    new = acl.for_new_path((), directory=False)
    assert acl.render_permissions(new.mode) == "rw-r-----"


def test_set_acl_recursive_recording_round_trips() -> None:
    """test_directory.pyTestDirectorytest_set_access_control_recursive: the ACL set and read back
    and the permissions Azure derives from it."""
    entries = acl.complete(acl.parse_acl("user::rwx,group::r-x,other::rwx"))
    assert acl.render_acl(entries) == "user::rwx,group::r-x,other::rwx"
    assert acl.render_permissions(acl.mode_of(entries)) == "rwxr-xrwx"


@pytest.mark.parametrize(
    "bad", ["asdf", "", "user::rwx,group::r-x", "user:rwx", "users::rwx,group::r-x,other::---"]
)
def test_malformed_acl_is_invald_access_control_list(bad: str) -> None:
    """.NET FileClientTests.SetAccessControlAsync_Error: ``asdf`` is 400 InvaldAccessControlList."""
    with pytest.raises(ServiceError) as raised:
        acl.parse_acl(bad)
    assert raised.value.code == "InvaldAccessControlList"
    assert raised.value.status == 400
    assert raised.value.message == "The access control list value is invalid."


@pytest.mark.parametrize(
    "bad", ["asdf", "", "rwxr-x--", "rwxr-x---x", "2777", "0778", "777", "rwsr-x---", "RWXR-X---"]
)
def test_malformed_permissions_are_invalid_permission(bad: str) -> None:
    """.NET FileClientTests.SetPermissionsAsync_Error: ``asdf`` is 400 InvalidPermission."""
    with pytest.raises(ServiceError) as raised:
        acl.parse_permissions(bad)
    assert raised.value.code == "InvalidPermission"
    assert raised.value.message == "The permission value is invalid."


# --- ACL text ------------------------------------------------------------------------------------


def test_acl_is_returned_in_azures_order() -> None:
    text = f"other::---,mask::r-x,group:{GID}:r--,group::r-x,user:{OID}:rw-,user::rwx,default:user::rwx"
    entries = acl.complete(acl.parse_acl(text))
    assert acl.render_acl(entries) == (
        f"user::rwx,user:{OID}:rw-,group::r-x,group:{GID}:r--,mask::r-x,other::---,"
        "default:user::rwx,default:group::r-x,default:other::---"
    )


@pytest.mark.parametrize(
    "bad",
    [
        "user::rwx,user::r--,group::r-x,other::---",  # duplicate
        "user::rwx,group::r-x,other::---,mask:x:rwx",  # qualified mask
        "user::rwx,group::r-x,other:x:---",  # qualified other
        "user::rwx,group::r-x,other::--",  # short triple
        "user::rwx,group::r-x,other::xwr",  # letters out of place
        "user::rwx, group::r-x,other::---",  # whitespace
        "user::rwx,group::r-x,other::---,",  # empty entry
        "default:default:user::rwx,user::rwx,group::r-x,other::---",
        "user::rwx,group::r-x,other::---,user:a:b:rwx",
    ],
)
def test_bad_acl_entries(bad: str) -> None:
    with pytest.raises(ServiceError) as raised:
        acl.parse_acl(bad)
    assert raised.value.code == "InvaldAccessControlList"


def test_files_take_no_default_acl() -> None:
    with pytest.raises(ServiceError):
        acl.parse_acl("user::rwx,group::r-x,other::---,default:user::rwx", directory=False)
    with pytest.raises(ServiceError):
        acl.modify(acl.minimal_acl(0o640), acl.parse_acl("default:user:x:r--", full=False), directory=False)


def test_mask_is_calculated_when_named_entries_come_without_one() -> None:
    entries = acl.complete(acl.parse_acl(f"user::rwx,user:{OID}:rw-,group::r--,other::---"))
    assert (False, Kind.MASK, "") in {entry.key for entry in entries}
    assert acl.render_permissions(acl.mode_of(entries), extended=acl.is_extended(entries)) == "rwxrw----+"


def test_default_base_entries_are_filled_from_the_access_acl() -> None:
    entries = acl.complete(acl.parse_acl(f"user::rwx,group::r-x,other::---,default:user:{OID}:r-x"))
    assert acl.render_acl(entries) == (
        f"user::rwx,group::r-x,other::---,default:user::rwx,default:user:{OID}:r-x,"
        "default:group::r-x,default:mask::r-x,default:other::---"
    )


def test_modify_and_remove() -> None:
    start = acl.minimal_acl(0o750)
    changed = acl.modify(start, acl.parse_acl(f"user:{OID}:rwx,other::r--", full=False))
    assert acl.render_acl(changed) == f"user::rwx,user:{OID}:rwx,group::r-x,mask::rwx,other::r--"
    removed = acl.remove(changed, acl.parse_removal(f"user:{OID},mask"))
    assert acl.render_acl(removed) == "user::rwx,group::r-x,other::r--"
    with_default = acl.complete(acl.parse_acl("user::rwx,group::r-x,other::---,default:user::rwx"))
    assert acl.default_entries(acl.remove(with_default, acl.parse_removal("default:user:"))) == ()
    with pytest.raises(ServiceError):
        acl.parse_removal("user:")  # the owning user's entry cannot go
    with pytest.raises(ServiceError):
        acl.parse_removal("other")


def test_remove_acl_recursive_as_the_sdk_sends_it() -> None:
    """What ``remove_access_control_recursive(acl="mask,default:user:x")`` puts in x-ms-acl."""
    assert acl.parse_removal("mask,default:user:x") == ((False, Kind.MASK, ""), (True, Kind.USER, "x"))
    # the SDK's live tests name default base entries without a colon
    assert acl.parse_removal("default:user,default:group") == ((True, Kind.USER, ""), (True, Kind.GROUP, ""))


_qualifier = st.text(alphabet="abcdef0123456789-@.", min_size=1, max_size=12)
_perms = st.integers(0, 7)


@st.composite
def _acls(draw: st.DrawFn) -> tuple[Entry, ...]:
    entries = [Entry.of(kind, draw(_perms)) for kind in (Kind.USER, Kind.GROUP, Kind.OTHER)]
    for kind in (Kind.USER, Kind.GROUP):
        for name in draw(st.sets(_qualifier, max_size=3)):
            entries.append(Entry.of(kind, draw(_perms), name))
    if draw(st.booleans()):
        entries.append(Entry.of(Kind.MASK, draw(_perms)))
    if draw(st.booleans()):
        entries += [
            Entry.of(kind, draw(_perms), default=True) for kind in (Kind.USER, Kind.GROUP, Kind.OTHER)
        ]
        for name in draw(st.sets(_qualifier, max_size=2)):
            entries.append(Entry.of(Kind.GROUP, draw(_perms), name, default=True))
    return acl.complete(entries)


@given(_acls())
def test_acl_text_round_trips(entries: tuple[Entry, ...]) -> None:
    text = acl.render_acl(entries)
    assert acl.parse_acl(text) == entries
    assert acl.render_acl(acl.complete(acl.parse_acl(text))) == text


@given(st.text(max_size=40))
def test_acl_parser_only_raises_azures_error(text: str) -> None:
    try:
        acl.parse_acl(text)
        acl.parse_acl(text, full=False)
        acl.parse_removal(text)
    except ServiceError as error:
        assert error.code == "InvaldAccessControlList"


# --- permissions strings -------------------------------------------------------------------------


@given(st.integers(0, 0o1777))
def test_permissions_round_trip(mode: int) -> None:
    text = acl.render_permissions(mode)
    assert acl.parse_permissions(text) == mode
    assert acl.parse_permissions(f"{mode:04o}") == mode


def test_sticky_bit_spellings() -> None:
    """ "Path - Update": ``rwxrw-rw-`` with the sticky bit is ``rwxrw-rwT``, ``rwxrw-rwx`` with it
    ``rwxrw-rwt``; in octal the first digit: 1766 against 0766."""
    assert acl.parse_permissions("rwxrw-rwT") == 0o1766
    assert acl.parse_permissions("rwxrw-rwt") == 0o1767
    assert acl.parse_permissions("1766") == 0o1766
    assert acl.parse_permissions("0766") == 0o766
    assert acl.render_permissions(0o1766) == "rwxrw-rwT"
    assert acl.render_permissions(0o1767, extended=True) == "rwxrw-rwt+"


@given(st.text(max_size=12))
def test_permission_parser_only_raises_azures_error(text: str) -> None:
    try:
        mode = acl.parse_permissions(text)
    except ServiceError as error:
        assert error.code == "InvalidPermission"
    else:
        assert 0 <= mode <= 0o1777


def test_umask() -> None:
    assert acl.parse_umask("0027") == 0o027
    for bad in ("027", "0028", "00027", "rwx", ""):
        with pytest.raises(ServiceError) as raised:
            acl.parse_umask(bad)
        assert raised.value.code == "InvalidHeaderValue"


def test_chmod_sets_the_mask_of_an_extended_acl() -> None:
    entries = acl.complete(acl.parse_acl(f"user::rwx,user:{OID}:rwx,group::r-x,other::---"))
    changed = acl.apply_mode(entries, 0o740)
    by_key = {entry.key: entry.perms for entry in changed}
    assert by_key[(False, Kind.MASK, "")] == 0o4
    assert by_key[(False, Kind.GROUP, "")] == 0o5  # the owning group's own entry is kept
    assert acl.render_permissions(acl.mode_of(changed), extended=True) == "rwxr-----+"


# --- inheritance ---------------------------------------------------------------------------------


def test_default_acl_becomes_the_childs_acl_and_the_umask_is_ignored() -> None:
    parent = acl.complete(
        acl.parse_acl(
            f"user::rwx,group::r-x,other::---,default:user::rwx,default:user:{OID}:rwx,default:group::r-x,default:other::r-x"
        )
    )
    directory = acl.for_new_path(parent, directory=True, umask=0o777)
    assert (
        acl.render_acl(acl.access_entries(directory.acl))
        == f"user::rwx,user:{OID}:rwx,group::r-x,mask::rwx,other::r-x"
    )
    assert acl.default_entries(directory.acl) == acl.default_entries(parent)
    file = acl.for_new_path(parent, directory=False)  # 0666 meets the template
    assert acl.render_acl(file.acl) == f"user::rw-,user:{OID}:rwx,group::r-x,mask::rw-,other::r--"
    assert acl.default_entries(file.acl) == ()
    assert acl.render_permissions(file.mode, extended=acl.is_extended(file.acl)) == "rw-rw-r--+"


def test_explicit_acl_on_create() -> None:
    new = acl.for_new_path((), directory=True, acl=acl.parse_acl(f"user:{OID}:r-x", full=False))
    assert acl.render_acl(new.acl) == f"user::rwx,user:{OID}:r-x,group::r-x,mask::r-x,other::---"
    with pytest.raises(ServiceError):
        acl.for_new_path((), directory=False, acl=acl.parse_acl("default:user::rwx", full=False))


def test_sticky_permissions_on_create() -> None:
    new = acl.for_new_path((), directory=True, permissions=0o1777)
    assert acl.render_permissions(new.mode) == "rwxr-x--T"


def test_owner_and_group_of_new_paths() -> None:
    assert acl.new_owner_and_group(None, None) == ("$superuser", "$superuser")
    assert acl.new_owner_and_group(OID, None) == (OID, OID)
    assert acl.new_owner_and_group(OID, GID) == (OID, GID)


# --- the check -----------------------------------------------------------------------------------


def _acl(text: str) -> tuple[Entry, ...]:
    return acl.complete(acl.parse_acl(text))


def test_superuser_passes_everything() -> None:
    assert acl.allows(SUPER, acl.RWX, "someone", "group", acl.minimal_acl(0))


def test_owner_uses_the_owner_entry_without_the_mask() -> None:
    entries = _acl(f"user::rw-,user:{GID}:rwx,group::---,mask::---,other::---")
    owner = Principal(oid=OID)
    assert acl.allows(owner, acl.R | acl.W, OID, GID, entries)
    assert not acl.allows(owner, acl.X, OID, GID, entries)


def test_named_user_is_limited_by_the_mask() -> None:
    entries = _acl(f"user::rwx,user:{OID}:rwx,group::---,mask::r--,other::rwx")
    user = Principal(oid=OID)
    assert acl.allows(user, acl.R, "owner", GID, entries)
    assert not acl.allows(user, acl.W, "owner", GID, entries)  # not even through other


def test_groups_then_other() -> None:
    entries = _acl(f"user::rwx,group::r--,group:{GID}:-w-,mask::rw-,other::--x")
    member_of_both = Principal(oid=OID, groups=frozenset({"owners", GID}))
    assert acl.allows(member_of_both, acl.R, "owner", "owners", entries)
    assert acl.allows(member_of_both, acl.W, "owner", "owners", entries)
    assert not acl.allows(
        member_of_both, acl.R | acl.W, "owner", "owners", entries
    )  # no single group grants both
    stranger = Principal(oid="someone-else")
    assert not acl.allows(stranger, acl.X, "owner", "owners", entries)  # other --x under mask rw-
    assert acl.allows(stranger, acl.X, "owner", "owners", _acl("user::rwx,group::---,other::--x"))


def test_sticky_and_ownership_changes() -> None:
    caller = Principal(oid=OID, groups=frozenset({GID}))
    assert acl.sticky_allows(caller, "dir-owner", OID)
    assert acl.sticky_allows(caller, OID, "child-owner")
    assert not acl.sticky_allows(caller, "dir-owner", "child-owner")
    assert acl.sticky_allows(SUPER, "dir-owner", "child-owner")
    assert not acl.may_change_owner(caller) and acl.may_change_owner(SUPER)
    assert acl.may_change_group(caller, OID, GID)
    assert not acl.may_change_group(caller, OID, "other-group")
    assert not acl.may_change_group(caller, "someone", GID)


def test_needs_table() -> None:
    assert (Need.READ.ancestors, Need.READ.parent, Need.READ.target) == (acl.X, 0, acl.R)
    assert (Need.CREATE.parent, Need.DELETE.parent) == (acl.W | acl.X, acl.W | acl.X)
    assert Need.LIST.target == acl.R | acl.X

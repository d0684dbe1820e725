"""Text beyond ASCII survives the entity editor: every Edm type, opened, edited and saved in a
real browser, in both Replace and Merge, then read back with the SDK.

An entity's form once came out as escaped markup when any value held non-ASCII text, and saving
it (Replace) then deleted every property the form had failed to show. So each round trip here
checks the form shows every property as a field, changes one value, adds one property, saves,
and compares what the SDK reads with what was there before, property by property and type by
type. The texts cover two-byte, three-byte and four-byte UTF-8, the code points around the
surrogate block and at the ends of the planes, and what a browser's form handling alters in
transit (a leading newline, CR and CRLF line breaks) when the user did not touch the value.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.data.tables import EdmType, EntityProperty, TableClient, TableServiceClient
from playwright.sync_api import Page, expect

from tests.serverproc import ServerProcess

TEXTS = [
    "Édith Piaf",
    "李小龍",
    "𝄞 G clef, outside the BMP",
    "\ud7ff\ue000 around the surrogate block",
    "\ufffd\ufffe\uffff \U00010000 \U0010ffff",
    "\nstarts with a newline",
    "unix\nlines\n",
    "windows\r\nlines",
    "old mac\rlines",
    "  spaced  \t",
]
NEW_TEXT = "Ça marche, 𝄞\U0010ffff 中文"
ADDED_TEXT = "ajouté: Ünïcödé 🙂"


def _typed_properties() -> dict[str, Any]:
    """A property of every Edm type, each with a non-ASCII name; the strings hold every text."""
    return {
        **{f"Text_{index}_é": text for index, text in enumerate(TEXTS)},
        "Größe_Int32": EntityProperty(-2147483648, EdmType.INT32),
        "Größe_Int64": EntityProperty(9223372036854775807, EdmType.INT64),
        "Größe_Double": 1.0000000000000002,
        "Größe_Boolean": True,
        "Größe_DateTime": datetime(2024, 2, 29, 12, 34, 56, 123456, tzinfo=UTC),
        "Größe_Guid": uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e"),
        "Größe_Binary": "𝄞 \ud7ff\U0010ffff".encode() + b"\x00\xff\xfe",
        "名前": "値",
    }


def _open_entity(page: Page, console: str, table: str, rk: str) -> None:
    page.goto(f"{console}/tables/{table}")
    page.get_by_test_id("grid").get_by_role("link", name=rk, exact=True).click()
    expect(page.get_by_test_id("entity-form")).to_be_visible()


def _round_trip(page: Page, console: str, client: TableClient, table: str, mode: str) -> None:
    rk = f"row-{mode}-é𝄞"
    client.create_entity({"PartitionKey": "Ünïcödé 李", "RowKey": rk, **_typed_properties()})
    before = dict(client.get_entity("Ünïcödé 李", rk))
    _open_entity(page, console, table, rk)

    # Every property is a row of the form, with its exact name and type.
    names = [name for name in before if name not in ("PartitionKey", "RowKey")]
    form = page.get_by_test_id("properties")
    for index, name in enumerate(names):
        expect(form.locator(f'[name="name.{index}"]')).to_have_value(name)
    expect(page.get_by_text("<tr", exact=False)).to_have_count(0)  # no markup shown as text
    shown = {
        form.locator(f'[name="name.{index}"]').input_value(): form.locator(
            f'[name="type.{index}"]'
        ).input_value()
        for index in range(len(names))
    }
    assert shown["Größe_Int64"] == "Edm.Int64" and shown["Größe_Binary"] == "Edm.Binary"
    assert shown["Text_2_é"] == "Edm.String"

    # Edit one value, add a property, save.
    edited = names.index("Text_0_é")
    form.locator(f'[name="value.{edited}"]').fill(NEW_TEXT)
    blank = len(names)
    form.locator(f'[name="name.{blank}"]').fill("Neu_ß")
    form.locator(f'[name="value.{blank}"]').fill(ADDED_TEXT)
    page.locator(f'input[name="mode"][value="{mode}"]').check()
    page.get_by_test_id("save").click()
    expect(page.get_by_role("status")).to_contain_text("Entity saved")

    after = dict(client.get_entity("Ünïcödé 李", rk))
    expected = {**before, "Text_0_é": NEW_TEXT, "Neu_ß": ADDED_TEXT}
    assert set(after) == set(expected), set(after) ^ set(expected)
    for name, value in expected.items():
        assert after[name] == value, name
        assert type(after[name]) is type(value), name


@pytest.mark.parametrize("mode", ["replace", "merge"])
def test_every_edm_type_round_trips_through_the_editor_with_unicode(
    page: Page, server: ServerProcess, table_name: str, mode: str
) -> None:
    console = f"http://127.0.0.1:{server.port}/-/console"
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        client = service.create_table(table_name)
        try:
            page.goto(f"{console}/signin")
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_test_id("account")).to_have_text("devstoreaccount1")
            _round_trip(page, console, client, table_name, mode)
            # Unchanged, a second save writes back exactly what was there.
            rk = f"row-{mode}-é𝄞"
            before = client.get_entity("Ünïcödé 李", rk)
            _open_entity(page, console, table_name, rk)
            page.get_by_test_id("save").click()
            expect(page.get_by_role("status")).to_contain_text("Entity saved")
            after = client.get_entity("Ünïcödé 李", rk)
            assert dict(after) == dict(before)
        finally:
            service.delete_table(table_name)

"""The console in a real browser: sign in, create a table, add a typed entity, query it, edit it
through an ETag conflict, delete it, delete the table.

The conflicting write comes from the official SDK between the moment the page loaded the
entity and the moment the user saves, as it would from another program. Screenshots of the
steps are what the README shows (``TABULAE_SCREENSHOTS=docs/console``).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from azure.data.tables import EdmType, EntityProperty, TableServiceClient, UpdateMode
from playwright.sync_api import Page, expect

from tests.console.browser.conftest import screenshot_dir
from tests.serverproc import ServerProcess

HOSTILE = '<script>document.title="owned"</script><img src=x onerror=alert(1)>'


def _shoot(page: Page, name: str) -> None:
    target = screenshot_dir()
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(target) / f"{name}.png"), full_page=True)


def _sign_in(page: Page, server: ServerProcess) -> None:
    page.goto(f"http://127.0.0.1:{server.port}/-/console/")
    expect(page).to_have_url(re.compile(r"/-/console/signin$"))
    # On loopback the well-known development account is filled in.
    expect(page.get_by_label("Account name")).to_have_value("devstoreaccount1")
    _shoot(page, "sign-in")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("account")).to_have_text("devstoreaccount1")


def test_walkthrough_with_typed_values_query_class_and_an_etag_conflict(
    page: Page, server: ServerProcess, table_name: str
) -> None:
    console = f"http://127.0.0.1:{server.port}/-/console"
    _sign_in(page, server)

    # Create a table.
    page.get_by_label("Table name", exact=True).fill(table_name)
    page.get_by_role("button", name="Create table").click()
    expect(page.get_by_role("status")).to_contain_text(f"Table {table_name} created")
    page.get_by_role("link", name=table_name).click()
    expect(page.get_by_test_id("table-name")).to_have_text(table_name)

    # Add an entity with typed properties, one of them hostile markup.
    page.get_by_role("link", name="Add entity").click()
    page.get_by_label("PartitionKey").fill("customers")
    page.get_by_label("RowKey").fill("0042")
    guid = str(uuid.uuid4())
    values = [
        ("name", "Edm.String", HOSTILE),
        ("visits", "Edm.Int64", "9223372036854775807"),
        ("ratio", "Edm.Double", "NaN"),
        ("joined", "Edm.DateTime", "2024-02-29T12:34:56.1234567Z"),
        ("id", "Edm.Guid", guid),
        ("avatar", "Edm.Binary", "AAEC/w=="),
    ]
    add_row = page.get_by_role("button", name="Add a property row")
    for _ in range(len(values) - 3):
        add_row.click()
    for index, (name, kind, text) in enumerate(values):
        page.locator(f'[name="name.{index}"]').fill(name)
        page.locator(f'[name="type.{index}"]').select_option(kind)
        page.locator(f'[name="value.{index}"]').fill(text)
    _shoot(page, "add-entity")
    page.get_by_role("button", name="Add entity").click()
    expect(page.get_by_role("status")).to_contain_text("Entity added")
    assert page.title() != "owned"  # the hostile value was shown as text, not run

    grid = page.get_by_test_id("grid")
    expect(grid).to_contain_text(HOSTILE[:40])
    expect(grid).to_contain_text("9223372036854775807")
    expect(grid).to_contain_text("2024-02-29T12:34:56.1234567Z")
    expect(grid).to_contain_text("NaN")

    # What was stored is exactly what was typed, as the SDK reads it.
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        client = service.get_table_client(table_name)
        stored = client.get_entity("customers", "0042")
        assert stored["name"] == HOSTILE
        assert stored["visits"] == EntityProperty(9223372036854775807, EdmType.INT64)
        assert stored["ratio"] != stored["ratio"]  # NaN
        assert stored["id"] == uuid.UUID(guid)
        assert stored["avatar"] == b"\x00\x01\x02\xff"
        assert stored["joined"].tables_service_value == "2024-02-29T12:34:56.1234567Z"

        # A few more entities, so the queries below have something to skip.
        for number in range(150):
            client.upsert_entity({"PartitionKey": "noise", "RowKey": f"n{number:04d}", "n": number})

        # A point query, then a table scan that scans far more than it returns.
        page.get_by_label("$filter").fill("PartitionKey eq 'customers' and RowKey eq '0042'")
        page.get_by_role("button", name="Query").click()
        expect(page.get_by_test_id("query-class")).to_have_text("point query")
        expect(page.get_by_test_id("returned")).to_have_text("1")
        _shoot(page, "point-query")
        page.get_by_label("$filter").fill("visits eq 9223372036854775807L")
        page.get_by_role("button", name="Query").click()
        expect(page.get_by_test_id("query-class")).to_have_text("table scan")
        expect(page.get_by_test_id("scanned")).to_have_text("151")
        expect(page.get_by_test_id("advice")).to_contain_text("Put the PartitionKey")
        _shoot(page, "table-scan-advice")

        # Edit: the page holds the entity's ETag; the SDK changes the entity meanwhile.
        page.get_by_test_id("grid").get_by_role("link", name="0042", exact=True).click()
        first_etag = page.get_by_test_id("etag").inner_text()
        page.locator('[name="value.0"]').fill("Ada")
        client.update_entity(
            {"PartitionKey": "customers", "RowKey": "0042", "name": "Grace"}, UpdateMode.MERGE
        )
        page.get_by_test_id("save").click()
        conflict = page.get_by_test_id("conflict")
        expect(conflict).to_contain_text("ETag conflict")
        expect(conflict).to_contain_text("Grace")
        assert client.get_entity("customers", "0042")["name"] == "Grace"  # nothing was overwritten
        expect(page.locator('[name="value.0"]')).to_have_value("Ada")  # the user's edit is kept
        assert page.get_by_test_id("etag").inner_text() != first_etag
        _shoot(page, "etag-conflict")

        # Saving again, knowingly, replaces the version that won.
        page.get_by_test_id("save").click()
        expect(page.get_by_role("status")).to_contain_text("Entity saved")
        saved = client.get_entity("customers", "0042")
        assert saved["name"] == "Ada"
        assert saved["visits"] == EntityProperty(9223372036854775807, EdmType.INT64)

        # Merge keeps what the form does not name.
        page.goto(f"{console}/tables/{table_name}")
        page.get_by_test_id("grid").get_by_role("link", name="0042", exact=True).click()
        for index in range(1, len(values)):
            page.locator(f'[name="name.{index}"]').fill("")
        page.get_by_label("Merge").check()
        page.locator('[name="value.0"]').fill("Ada L.")
        page.get_by_test_id("save").click()
        expect(page.get_by_role("status")).to_contain_text("Entity saved")
        merged = client.get_entity("customers", "0042")
        assert merged["name"] == "Ada L." and merged["avatar"] == b"\x00\x01\x02\xff"

        # Delete the entity (the page asks first).
        page.get_by_test_id("grid").get_by_role("link", name="0042", exact=True).click()
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_test_id("delete-entity").click()
        expect(page.get_by_role("status")).to_contain_text("Entity deleted")
        assert not list(client.query_entities("PartitionKey eq 'customers'"))

        # Insight: the table scans above were seen.
        page.get_by_role("link", name="Insight").click()
        expect(page.get_by_role("heading", name=table_name)).to_be_visible()

        # Delete the table: only after typing its name.
        page.goto(f"{console}/tables/{table_name}")
        page.get_by_text("Delete this table").click()
        page.get_by_role("button", name="Delete table and all its entities").click()
        expect(page.get_by_role("alert")).to_contain_text("to confirm")
        page.get_by_text("Delete this table").click()
        page.get_by_label("to confirm").fill(table_name)
        page.get_by_role("button", name="Delete table and all its entities").click()
        expect(page.get_by_role("status")).to_contain_text(f"Table {table_name} deleted")
        assert table_name not in [t.name for t in service.list_tables()]

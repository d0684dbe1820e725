"""The data tools as a user runs them: ``tabulae table|entity|export|import|copy`` in a subprocess
against a real server, checked with the official SDK.

The round trips compare files and tables exactly (every Edm type, NaN and 100 ns included); the
resume tests kill an import and a copy half-way with SIGKILL and run them again.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from azure.data.tables import EdmType, EntityProperty, TableServiceClient

from tests.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

EXOTIC = [
    {
        "PartitionKey": "types",
        "RowKey": "max",
        "s": 'héllo \u2028 "quoted", with, commas\nand a line break',
        "empty": "",
        "b": True,
        "i": 2147483647,
        "l@odata.type": "Edm.Int64",
        "l": "9223372036854775807",
        "d@odata.type": "Edm.Double",
        "d": 1.0,
        "tiny@odata.type": "Edm.Double",
        "tiny": 5e-324,
        "neg0@odata.type": "Edm.Double",
        "neg0": -0.0,
        "nan@odata.type": "Edm.Double",
        "nan": "NaN",
        "inf@odata.type": "Edm.Double",
        "inf": "Infinity",
        "ninf@odata.type": "Edm.Double",
        "ninf": "-Infinity",
        "t@odata.type": "Edm.DateTime",
        "t": "2024-02-29T23:59:59.9999999Z",
        "g@odata.type": "Edm.Guid",
        "g": "0f8fad5b-d9cb-469f-a165-70867728950e",
        "bin@odata.type": "Edm.Binary",
        "bin": base64.b64encode(bytes(range(256))).decode(),
    },
    {
        "PartitionKey": "types",
        "RowKey": "min",
        "i": -2147483648,
        "l@odata.type": "Edm.Int64",
        "l": "-9223372036854775808",
        "t@odata.type": "Edm.DateTime",
        "t": "1601-01-01T00:00:00.0000001Z",
        "b": False,
        "s": "a different set of properties: i is Int32 here",
    },
    {"PartitionKey": "types", "RowKey": "other", "i@odata.type": "Edm.Int64", "i": "5", "only": "here"},
    {"PartitionKey": "quote's and ünïcode ☃", "RowKey": "it's", "x": 1},
    {"PartitionKey": "", "RowKey": "", "x": 2},
]


def tool(
    server: ServerProcess, *args: str, timeout: float = 300, **options: object
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": server.connection_string}
    return subprocess.run(
        [sys.executable, "-m", "tabulae", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        **options,
    )


def lines_without_timestamps(path: Path) -> list[bytes]:
    """A JSONL export with the server-set Timestamp removed, sorted: the entities themselves."""
    kept = []
    for raw in path.read_bytes().splitlines():
        entity = orjson.loads(raw)
        entity.pop("Timestamp", None)
        entity.pop("Timestamp@odata.type", None)
        kept.append(orjson.dumps(entity, option=orjson.OPT_SORT_KEYS))
    return sorted(kept)


@pytest.fixture
def tables(server: ServerProcess) -> Iterator[list[str]]:
    """Names for the test's tables, deleted afterwards."""
    names = [f"t{uuid.uuid4().hex[:12]}" for _ in range(4)]
    yield names
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        for name in names:
            service.delete_table(name)


def _write_source(path: Path, entities: list[dict[str, object]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e in entities))


def test_every_edm_type_round_trips_through_jsonl_and_csv(
    server: ServerProcess, tables: list[str], tmp_path: Path
) -> None:
    source, from_jsonl, from_csv, copied = tables
    original = tmp_path / "original.jsonl"
    _write_source(original, EXOTIC)
    loaded = tool(server, "import", str(original), source)
    assert loaded.returncode == 0, loaded.stderr
    assert "imported 5 records" in loaded.stderr and loaded.stdout == ""

    # The official SDK reads back exactly what the file said.
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        entity = service.get_table_client(source).get_entity("types", "max")
        assert entity["l"] == EntityProperty(9223372036854775807, EdmType.INT64)
        assert entity["t"].tables_service_value == "2024-02-29T23:59:59.9999999Z"
        assert entity["nan"] != entity["nan"] and entity["inf"] == float("inf")
        assert entity["bin"] == bytes(range(256)) and entity["empty"] == ""
        assert str(entity["g"]) == "0f8fad5b-d9cb-469f-a165-70867728950e"
        assert isinstance(entity["d"], float) and entity["d"] == 1.0

    exported = tmp_path / "exported.jsonl"
    assert tool(server, "export", source, str(exported)).returncode == 0
    assert lines_without_timestamps(exported) == lines_without_timestamps(original)

    as_csv = tmp_path / "exported.csv"
    assert tool(server, "export", source, str(as_csv)).returncode == 0
    header = next(csv.reader(io.StringIO(as_csv.read_text())))
    assert header[:3] == ["PartitionKey", "RowKey", "Timestamp"] and "l@type" in header
    for file, table in ((exported, from_jsonl), (as_csv, from_csv)):
        result = tool(server, "import", str(file), table)
        assert result.returncode == 0, result.stderr
        again = tmp_path / f"{table}.jsonl"
        assert tool(server, "export", table, str(again)).returncode == 0
        assert lines_without_timestamps(again) == lines_without_timestamps(original), file.suffix

    result = tool(server, "copy", source, copied)
    assert result.returncode == 0, result.stderr
    assert "count check: " in result.stderr
    again = tmp_path / "copied.jsonl"
    assert tool(server, "export", copied, str(again), "--filter", "PartitionKey ne 'nothing'").returncode == 0
    assert lines_without_timestamps(again) == lines_without_timestamps(original)


def test_table_and_entity_commands_and_their_exit_codes(server: ServerProcess, tables: list[str]) -> None:
    name = tables[0]
    assert tool(server, "table", "create", name).returncode == 0
    listed = tool(server, "table", "list", "--prefix", name[:6])
    assert name in listed.stdout.split()
    again = tool(server, "table", "create", name)
    assert again.returncode == 1 and "TableAlreadyExists" in again.stderr

    body = '{"PartitionKey":"p","RowKey":"r","v@odata.type":"Edm.Int64","v":"-1"}'
    assert tool(server, "entity", "put", name, body, "--mode", "insert").returncode == 0
    duplicate = tool(server, "entity", "put", name, body, "--mode", "insert")
    assert duplicate.returncode == 1 and "EntityAlreadyExists" in duplicate.stderr
    got = orjson.loads(tool(server, "entity", "get", name, "p", "r").stdout)
    assert got["v"] == "-1" and got["v@odata.type"] == "Edm.Int64"
    stale = tool(server, "entity", "put", name, body, "--etag", "W/\"datetime'2000-01-01T00%3A00%3A00Z'\"")
    assert stale.returncode == 1 and "UpdateConditionNotSatisfied" in stale.stderr
    merged = tool(server, "entity", "put", name, '{"PartitionKey":"p","RowKey":"r","w":1}', "--mode", "merge")
    assert merged.returncode == 0
    assert orjson.loads(tool(server, "entity", "get", name, "p", "r").stdout)["v"] == "-1"
    piped = tool(server, "entity", "put", name, "-", input='{"PartitionKey":"p","RowKey":"s"}')
    assert piped.returncode == 0
    queried = tool(server, "entity", "query", name, "--filter", "RowKey ge 's'")
    assert [orjson.loads(line)["RowKey"] for line in queried.stdout.splitlines()] == ["s"]
    assert tool(server, "entity", "delete", name, "p", "s").returncode == 0
    missing = tool(server, "entity", "get", name, "p", "s")
    assert missing.returncode == 1 and "ResourceNotFound" in missing.stderr
    bad_json = tool(server, "entity", "put", name, "{nope")
    assert bad_json.returncode == 1 and "not JSON" in bad_json.stderr
    assert tool(server, "entity", "frobnicate").returncode == 2
    assert tool(server, "table", "delete", name).returncode == 0


def test_a_bad_record_stops_the_import_and_names_its_line(
    server: ServerProcess, tables: list[str], tmp_path: Path
) -> None:
    source = tmp_path / "bad.jsonl"
    _write_source(
        source, [{"PartitionKey": "p", "RowKey": "1"}, {"PartitionKey": "p", "RowKey": "2", "bad name": 1}]
    )
    result = tool(server, "import", str(source), tables[0])
    assert result.returncode == 1
    assert "line 2" in result.stderr and "PropertyNameInvalid" in result.stderr
    source.write_text('{"PartitionKey":"p","RowKey":"1"}\nnot json\n')
    result = tool(server, "import", str(source), tables[0], "--restart")
    assert result.returncode == 1 and "line 2: not JSON" in result.stderr


def test_imports_ride_out_injected_503s_and_500s(tmp_path: Path) -> None:
    """A fifth of the requests fail, and a partition now and then goes offline for 1 to 3 s;
    every batch must get through within its 10 tries. (At 0.3 a batch whose first tries fell
    into an outage window could exhaust them, ending the import with the last injected error,
    often OperationTimedOut: the faults are seeded by pid, so they differ on every run and the
    test failed now and then.)"""
    faulty = ServerProcess(tmp_path / "data", extra_args=["--faults", "0.2", "--faults-seed", "7"]).start()
    try:
        source = tmp_path / "source.jsonl"
        entities = [{"PartitionKey": f"p{i % 37}", "RowKey": f"{i:06d}", "n": i} for i in range(5000)]
        _write_source(source, entities)
        result = tool(faulty, "import", str(source), "faulty", "--concurrency", "8")
        assert result.returncode == 0, result.stderr
        retried = int(result.stderr.split("; ")[-1].split(" ")[0])
        assert retried >= 5  # about a fifth of some 80 requests fail
        exported = tmp_path / "exported.jsonl"
        assert tool(faulty, "export", "faulty", str(exported)).returncode == 0  # its reads retry too
        assert lines_without_timestamps(exported) == lines_without_timestamps(source)
    finally:
        faulty.stop()


def _console_pages_stay_usable(server: ServerProcess) -> None:
    """The console's grid of a 100,000-entity table: 1,000 rows a page, quickly, page after page."""
    console = ConsoleClient(server.port)
    assert console.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
    path = "/tables/big"
    for _ in range(3):
        started = time.monotonic()
        page = console.get(path)
        elapsed = time.monotonic() - started
        assert page.status == 200 and page.text.count('<td class="key rk">') == 1000
        assert elapsed < 5, f"a grid page took {elapsed:.1f} s"
        path = html.unescape(
            page.text.split('rel="next" data-testid="next-page" href="/-/console', 1)[1].split('"', 1)[0]
        )
    filtered = console.get("/tables/big?filter=" + quote("PartitionKey eq 'p007' and RowKey eq '0000007'"))
    assert "point query" in filtered.text and filtered.text.count('<td class="key rk">') == 1


def _kill_when_resumable(process: subprocess.Popen[str], resume: Path, timeout: float = 120) -> None:
    """SIGKILL ``process`` once its resume file records a position past the start."""
    deadline = time.monotonic() + timeout
    while not (resume.exists() and orjson.loads(resume.read_bytes())["position"]["records"] > 0):
        assert process.poll() is None, "finished before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_100000_entities_round_trip_and_interrupted_loads_resume_exactly(tmp_path: Path) -> None:
    local = ServerProcess(tmp_path / "data").start()
    try:
        source = tmp_path / "source.jsonl"
        padding = "x" * 150
        with source.open("wb") as out:
            for i in range(100_000):
                entity = {
                    "PartitionKey": f"p{i % 250:03d}",
                    "RowKey": f"{i:07d}",
                    "n@odata.type": "Edm.Int64",
                    "n": str(i * 3_000_000_000),
                    "pad": padding,
                }
                out.write(orjson.dumps(entity, option=orjson.OPT_APPEND_NEWLINE))
        env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": local.connection_string}
        resume = tmp_path / "source.jsonl.big.resume"
        command = [sys.executable, "-m", "tabulae", "import", str(source), "big"]
        first = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
        )
        _kill_when_resumable(first, resume)
        position = orjson.loads(resume.read_bytes())["position"]
        assert 0 < position["records"] < 100_000
        second = tool(local, "import", str(source), "big")
        assert second.returncode == 0, second.stderr
        assert f"resuming source.jsonl after {position['records']:,} records" in second.stderr
        assert "imported 100,000 records" in second.stderr
        assert not resume.exists()

        _console_pages_stay_usable(local)

        exported = tmp_path / "exported.jsonl"
        result = tool(local, "export", "big", str(exported))
        assert result.returncode == 0 and "exported 100,000 entities" in result.stderr
        assert lines_without_timestamps(exported) == lines_without_timestamps(source)

        # A copy to another account's table, interrupted and resumed, then counted.
        other = (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
            f"TableEndpoint=http://localhost:{local.port}/{DEV_ACCOUNT};"
        )
        copy = [sys.executable, "-m", "tabulae", "copy", "big", "bigcopy", "--dest-connection-string", other]
        copy_resume = tmp_path / ".tabulae-copy-big-bigcopy.resume"
        first = subprocess.Popen(
            copy, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _kill_when_resumable(first, copy_resume)  # type: ignore[arg-type]
        finished = subprocess.run(copy, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert finished.returncode == 0, finished.stderr
        assert "resuming the copy after" in finished.stderr
        assert "count check: bigcopy holds 100,000 entities, as copied" in finished.stderr
        copied = tmp_path / "copied.jsonl"
        assert tool(local, "export", "bigcopy", str(copied)).returncode == 0
        assert lines_without_timestamps(copied) == lines_without_timestamps(source)

        # A copy into a table that already held something fails its count check.
        with TableServiceClient.from_connection_string(local.connection_string) as service:
            service.create_table("crowded").create_entity({"PartitionKey": "zzz", "RowKey": "extra"})
        crowded = tool(local, "copy", "big", "crowded", "--filter", "PartitionKey eq 'p001'", cwd=tmp_path)
        assert crowded.returncode == 3 and "count check failed" in crowded.stderr
        mismatch = tool(
            local,
            "import",
            str(source),
            "other",
            "--resume-file",
            str(tmp_path / ".tabulae-copy-big-crowded.resume"),
        )
        assert mismatch.returncode == 2 and "another load" in mismatch.stderr
    finally:
        local.stop()


def test_copy_from_a_table_url_with_a_sas(server: ServerProcess, tables: list[str], tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from azure.core.credentials import AzureNamedKeyCredential
    from azure.data.tables import TableSasPermissions, generate_table_sas

    source, dest = tables[:2]
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        table = service.create_table(source)
        for number in range(3):
            table.create_entity({"PartitionKey": "p", "RowKey": str(number), "n": number})
    sas = generate_table_sas(
        AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY),
        source,
        permission=TableSasPermissions(read=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    url = f"http://127.0.0.1:{server.port}/{DEV_ACCOUNT}/{source}?{sas}"
    result = tool(server, "copy", url, dest, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "count check: " in result.stderr and sas not in result.stderr
    no_sas = tool(server, "copy", url.split("?")[0], dest, cwd=tmp_path)
    assert no_sas.returncode == 2 and "carries a SAS" in no_sas.stderr

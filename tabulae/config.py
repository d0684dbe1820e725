"""One settings object for a Tabulae server, built from flags and the environment.

Accounts come from ``--account NAME:KEY[:KEY2]`` (repeatable) and from ``TABULAE_ACCOUNTS``
(``name1:key1:key2;name2:key1``, the format Azurite users already have in ``AZURITE_ACCOUNTS``,
which is read too). With none given, the emulator's well-known development account is served,
so ``UseDevelopmentStorage=true`` works unchanged. Keys are kept as bytes and never printed.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10002
DEFAULT_DATA_DIR = Path("tabulae-data")
ACCOUNTS_ENV = ("TABULAE_ACCOUNTS", "AZURITE_ACCOUNTS")
STORE_ENV = "TABULAE_STORE"  # the store URL, for `serve --store` and `db init --store`
SETTINGS_ENV = "TABULAE_WORKER_SETTINGS"  # how `serve --workers N` hands settings to its workers


class ConfigError(ValueError):
    """A setting that cannot be used; the message names it but never contains a key."""


def parse_account(spec: str) -> tuple[str, list[bytes]]:
    """``NAME:KEY[:KEY2]`` with base64 keys; the name follows Azure's 3-24 lower-case alphanumerics."""
    name, _, rest = spec.partition(":")
    keys = [k for k in rest.split(":") if k]
    if not name or not name.isalnum() or not keys:
        raise ConfigError(f"account {name!r}: expected NAME:BASE64KEY[:BASE64KEY2]")
    decoded: list[bytes] = []
    for key in keys[:2]:
        try:
            decoded.append(base64.b64decode(key, validate=True))
        except (binascii.Error, ValueError) as exc:
            raise ConfigError(f"account {name!r}: a key is not valid base64") from exc
    return name, decoded


def accounts_from(specs: list[str], environ: dict[str, str] | None = None) -> dict[str, list[bytes]]:
    """Accounts from flags plus the environment; the development account when there are none."""
    env = os.environ if environ is None else environ
    all_specs = list(specs)
    for variable in ACCOUNTS_ENV:
        value = env.get(variable, "")
        all_specs.extend(part.strip() for part in value.split(";") if part.strip())
    accounts: dict[str, list[bytes]] = {}
    for spec in all_specs:
        name, keys = parse_account(spec)
        accounts[name] = keys
    if not accounts:
        accounts[DEV_ACCOUNT] = [base64.b64decode(DEV_KEY)]
    return accounts


@dataclass(slots=True)
class Settings:
    """Everything a server process needs; picklable so worker processes can rebuild it."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    data_dir: Path = DEFAULT_DATA_DIR
    in_memory: bool = False
    store_url: str | None = None  # postgresql://… for the PostgreSQL backend; None is SQLite
    accounts: dict[str, list[bytes]] = field(default_factory=lambda: accounts_from([], {}))
    max_body_bytes: int = 4 * 1024 * 1024
    page_time_budget: float = 5.0
    body_timeout: float = 30.0  # seconds a client may pause while sending a request body
    targets: bool = False  # enforce the scalability targets below (503 ServerBusy over them)
    partition_target: float = 2000.0  # entities per second per partition
    account_target: float = 20000.0  # entities per second per account
    faults: float = 0.0  # probability of an injected transient 503/500
    faults_seed: int | None = None
    workers: int = 1
    access_log: bool = False  # one JSON line per request on stderr
    oauth: bool = False  # accept bearer tokens (basic checks, no signature validation)
    cert_file: Path | None = None
    key_file: Path | None = None

    def to_json(self) -> str:
        """Serialise for worker processes (keys travel base64-encoded, in the environment only)."""
        data: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "data_dir": str(self.data_dir),
            "in_memory": self.in_memory,
            "store_url": self.store_url,
            "accounts": {
                name: [base64.b64encode(k).decode() for k in keys] for name, keys in self.accounts.items()
            },
            "max_body_bytes": self.max_body_bytes,
            "page_time_budget": self.page_time_budget,
            "body_timeout": self.body_timeout,
            "oauth": self.oauth,
            "access_log": self.access_log,
            "targets": self.targets,
            "partition_target": self.partition_target,
            "account_target": self.account_target,
            "faults": self.faults,
            "faults_seed": self.faults_seed,
            "workers": self.workers,
            "cert_file": str(self.cert_file) if self.cert_file else None,
            "key_file": str(self.key_file) if self.key_file else None,
        }
        return orjson.dumps(data).decode()

    @classmethod
    def from_json(cls, text: str) -> Settings:
        data = orjson.loads(text)
        data["data_dir"] = Path(data["data_dir"])
        data["accounts"] = {
            name: [base64.b64decode(k) for k in keys] for name, keys in data["accounts"].items()
        }
        for name in ("cert_file", "key_file"):
            data[name] = Path(data[name]) if data[name] else None
        return cls(**data)

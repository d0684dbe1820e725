"""The settings of a Tabulae server: one table of name, default and help, read by the CLI.

Every setting is a field of :class:`Settings`; a field that users set has a ``flag`` in its
metadata, and ``tabulae serve --help`` is built from those (``cli.add_setting_flags``), so a
default or a help text is written once, here.

Accounts come from ``--account NAME:KEY[:KEY2]`` (repeatable) and from ``TABULAE_ACCOUNTS``
(``name1:key1:key2;name2:key1``, the format Azurite users already have in ``AZURITE_ACCOUNTS``,
which is read too). With none given, the emulator's well-known development account is served,
so ``UseDevelopmentStorage=true`` works unchanged. Keys are kept as bytes and never printed.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import ipaddress
import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson

from tabulae.model.accounts import AccountFeatures, apply, check_combination, parse

DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10002  # the Table service's port, as the storage emulators use it
DEFAULT_QUEUE_PORT = 10001
DEFAULT_BLOB_PORT = 10000
SERVICES = ("table", "queue", "blob")  # the services this server has; `--services` picks among them
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


def setting(
    default: Any = MISSING,
    *,
    flag: str | None = None,
    help: str = "",
    default_factory: Any = MISSING,
    **argparse_options: Any,
) -> Any:
    """A settings field; with ``flag`` it is also a ``tabulae serve`` option. ``argparse_options``
    go to ``add_argument`` as they are (``type``, ``choices``, ``metavar``, ``action``)."""
    metadata = {"flag": flag, "help": help, "argparse": argparse_options}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def is_loopback(host: str) -> bool:
    """Whether a bind address, or a name a client gives the server, is this machine's alone:
    ``localhost``, a name under it (RFC 6761: resolved so without asking DNS) or a loopback
    address."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


@dataclass(slots=True)
class Settings:
    """Everything a server process needs; serialisable so worker processes can rebuild it."""

    host: str = setting(
        DEFAULT_HOST,
        flag="--host",
        help="address to listen on (the Table service's, and the others' unless given)",
    )
    queue_host: str | None = setting(
        None, flag="--queue-host", help="address the Queue service listens on (default: --host)"
    )
    blob_host: str | None = setting(
        None, flag="--blob-host", help="address the Blob service listens on (default: --host)"
    )
    port: int = setting(DEFAULT_PORT, flag="--port", help="port of the Table service", type=int)
    queue_port: int = setting(
        DEFAULT_QUEUE_PORT, flag="--queue-port", help="port of the Queue service", type=int
    )
    blob_port: int = setting(DEFAULT_BLOB_PORT, flag="--blob-port", help="port of the Blob service", type=int)
    services: tuple[str, ...] = setting(
        SERVICES,
        flag="--services",
        help="the services to serve, comma-separated (default: all of " + ",".join(SERVICES) + ")",
        metavar="LIST",
    )
    data_dir: Path = setting(
        DEFAULT_DATA_DIR,
        flag="--data-dir",
        help="directory of the SQLite database and blob content",
        type=Path,
        metavar="DIR",
    )
    disk_reserve: int = setting(
        64,
        flag="--disk-reserve",
        help="keep this much of the data volume in reserve (a preallocated file in --data-dir), "
        "released when the volume fills so that deletes can make room; writes get 503 ServerBusy "
        "until it can be taken back (0: no reserve)",
        type=int,
        metavar="MIB",
    )
    disk_warn: int = setting(
        1024,
        flag="--disk-warn",
        help="warn (log, /metrics, the console's Insight page) when the data volume has less free space",
        type=int,
        metavar="MIB",
    )
    blob_garbage_grace: float = setting(
        300.0,
        flag="--blob-garbage-grace",
        help="seconds blob content that a write replaced or a delete removed stays readable for "
        "downloads under way before its space is given back (collected as often); on PostgreSQL "
        "it must cover the longest download, on SQLite the time to reach each block of one",
        type=float,
        metavar="SECONDS",
    )
    in_memory: bool = setting(
        False,
        flag="--in-memory",
        help="keep data in memory only (for tests and demos): everything is lost when the server stops",
        action="store_true",
    )
    store_url: str | None = setting(
        None,
        flag="--store",
        help=f"postgresql://user@host/db to keep data in PostgreSQL (or Citus) instead of SQLite; also "
        f"read from {STORE_ENV}. The schema is created on an empty database",
        metavar="URL",
    )
    accounts: dict[str, list[bytes]] = setting(
        default_factory=lambda: accounts_from([], {}),
        flag="--account",
        help="an account and its keys; repeatable; also read from TABULAE_ACCOUNTS or AZURITE_ACCOUNTS "
        "('name1:key1:key2;name2:key1'). Default: the development account devstoreaccount1",
        metavar="NAME:BASE64KEY[:BASE64KEY2]",
        action="append",
    )
    workers: int = setting(
        default_factory=lambda: os.cpu_count() or 1,
        flag="--workers",
        help="worker processes sharing the store (default: the number of cores)",
        type=int,
        metavar="N",
    )
    cert_file: Path | None = setting(
        None,
        flag="--cert",
        help="TLS certificate (PEM): serve HTTPS instead of HTTP",
        type=Path,
        metavar="FILE",
    )
    key_file: Path | None = setting(
        None, flag="--key", help="TLS private key (PEM) for --cert", type=Path, metavar="FILE"
    )
    oauth: bool = setting(
        False,
        flag="--oauth",
        help="'basic': accept bearer tokens, checking audience, issuer and expiry but NOT the "
        "signature (local development only; needs --cert, as the SDKs send tokens over HTTPS only)",
        choices=["off", "basic"],
    )
    oauth_roles: tuple[str, ...] = setting(
        (),
        flag="--oauth-role",
        help="give the bearer-token identity (or group) OID an Azure data role on every account: "
        "OID=owner (Storage Blob Data Owner: a superuser), OID=contributor (read, write, delete), "
        "OID=reader (read, list), queue-contributor, queue-reader, queue-processor, queue-sender, "
        "table-contributor, table-reader, account-contributor (Storage Account Contributor: the "
        "services' properties, containers, queues, tables, no data) (or Azure's role names); once "
        "any is given, every bearer "
        "token is held to its roles on every service (403 without one); checked before a "
        "hierarchical namespace's ACLs; repeatable",
        metavar="OID=ROLE",
        action="append",
    )
    clock_skew: float = setting(
        900.0,
        flag="--clock-skew",
        help="refuse Shared Key requests dated more than this many seconds ago (403 "
        "AuthenticationFailed, as Azure does after 15 minutes) or ahead, so a captured request "
        "cannot be replayed; 0 turns the check off, for replaying recorded requests",
        type=float,
        metavar="SECONDS",
    )
    targets: bool = setting(
        False,
        flag="--targets",
        help="'azure': enforce Azure's scalability targets, entities/s per partition, messages/s per "
        "queue and operations/s per account (every entity written or scanned, every message and "
        "every blob request counts); over them requests get 503 ServerBusy",
        choices=["azure"],
    )
    partition_target: float = setting(
        2000.0, flag="--partition-target", help="entities/s per partition", type=float
    )
    account_target: float = setting(
        20000.0,
        flag="--account-target",
        help="entities, messages and blob requests/s per account",
        type=float,
    )
    queue_target: float = setting(2000.0, flag="--queue-target", help="messages/s per queue", type=float)
    poison_threshold: int = setting(
        5,
        flag="--poison-threshold",
        help="/metrics warns about queue messages dequeued more than this many times",
        type=int,
        metavar="N",
    )
    metrics_token: str | None = setting(
        None,
        flag="--metrics-token",
        help="also let requests with 'Authorization: Bearer TOKEN' read /metrics (off loopback, "
        "/metrics needs this or a request signed with an account key; on loopback it is open)",
        metavar="TOKEN",
    )
    metrics_keys: str = setting(
        "plain",
        flag="--metrics-keys",
        help="'hashed': /metrics shows PartitionKeys and table, queue and container names as a keyed "
        "hash (stable while the server runs) instead of their values",
        choices=["plain", "hashed"],
    )
    faults: float = setting(
        0.0,
        flag="--faults",
        help="inject transient 503/500 answers with probability P, and brief partition outages, "
        "to test client retry code (never affects data)",
        type=float,
        metavar="P",
    )
    faults_seed: int | None = setting(
        None, flag="--faults-seed", help="seed for --faults", type=int, metavar="N"
    )
    body_timeout: float = setting(
        30.0,
        flag="--request-timeout",
        help="cut off a client that takes longer than this to send its headers, pauses this long "
        "in its body, or after this long sends its body slower than Azure's 10 minutes per MiB "
        "on average (500 OperationTimedOut, and the connection is closed), and close a connection "
        "that sends nothing for this long; idle connections are closed 5 s after their last answer",
        type=float,
        metavar="SECONDS",
    )
    max_connections_per_client: int = setting(
        256,
        flag="--max-connections-per-client",
        help="connections one client address may hold open to each worker process; one more is "
        "answered 503 ServerBusy and closed (0: no limit). Per worker: the kernel spreads a "
        "client's connections over the workers, so with --workers N it may hold up to N times this",
        type=int,
        metavar="N",
    )
    shutdown_timeout: float = setting(
        5.0,
        flag="--shutdown-timeout",
        help="on SIGTERM or SIGINT, stop accepting connections, close idle ones, and give requests "
        "in flight this long to finish before their connections are cut and the server exits",
        type=float,
        metavar="SECONDS",
    )
    access_log: bool = setting(
        False,
        flag="--access-log",
        help="log one JSON line per request to stderr (method, path without query, status, ms, request id)",
        action="store_true",
    )
    log_level: str = setting(
        "warning",
        flag="--log-level",
        help="server log level",
        choices=["critical", "error", "warning", "info", "debug"],
    )
    console: bool | None = setting(
        None,
        flag="--console",
        help="serve the web console at /-/console/ (default: on when listening on loopback, else off)",
        action=argparse.BooleanOptionalAction,
    )
    console_hosts: tuple[str, ...] = setting(
        (),
        flag="--console-host",
        help="a host name (or address) the console answers at besides localhost, 127.0.0.1 and "
        "[::1], as a browser's address bar shows it; repeatable. Others get 403, so a site whose "
        "name is pointed at this machine cannot reach the console",
        metavar="NAME",
        action="append",
    )
    skip_api_version_check: bool = setting(
        False,
        flag="--skip-api-version-check",
        help="serve requests whatever x-ms-version they name, instead of refusing a version Azure does "
        "not know (400 InvalidHeaderValue); Azurite's --skipApiVersionCheck",
        action="store_true",
    )
    path_style_only: bool = setting(
        False,
        flag="--path-style-only",
        help="always take the account from the first path segment, never from the host name (by default "
        "a host whose first label is a known account, as acct.blob.example, names it); Azurite's "
        "--disableProductStyleUrl",
        action="store_true",
    )
    copy_from_remote: bool = setting(
        True,
        flag="--copy-from-remote",
        help="'off': Blob copies from a URL (Copy Blob, Put Blob/Block From URL, Append Block From URL) "
        "may only read blobs of this server, never fetch a URL outside it (refused with 403 "
        "CannotVerifyCopySource). 'on' (default): any http(s) URL, never a link-local address",
        choices=["on", "off"],
    )
    otel: bool = setting(
        False,
        flag="--otel",
        help="emit an OpenTelemetry span per request (service, operation, account, status, storage time) "
        "to the exporter OTEL_TRACES_EXPORTER names (otlp or console); needs pip install 'tabulae[otel]'",
        action="store_true",
    )
    default_access_tier: str = setting(
        "Hot",
        flag="--default-access-tier",
        help="the accounts' default access tier: block blobs without a tier of their own report it, "
        "as inferred (Azure's account setting)",
        choices=["Hot", "Cool", "Cold"],
    )
    rehydrate_delay: float = setting(
        10.0,
        flag="--rehydrate-delay",
        help="seconds a Standard-priority rehydration of an archived blob takes (High priority: half "
        "of it); Azure takes hours",
        type=float,
        metavar="SECONDS",
    )
    # Features Azure sets in its management plane (tabulae.model.accounts), for every account;
    encryption_scopes: tuple[str, ...] = setting(
        (),
        flag="--encryption-scope",
        help="an encryption scope blob writes may name (x-ms-encryption-scope, a container's default "
        "scope): NAME for every account, ACCOUNT:NAME for one; repeatable. Azure creates them in its "
        "management plane",
        metavar="[ACCOUNT:]NAME",
        action="append",
    )
    # ``[account-features.NAME]`` of ``--config`` sets them per account, ``/-/accounts`` at run time.
    blob_versioning: bool = setting(
        False,
        flag="--blob-versioning",
        help="keep a version of every blob write (x-ms-version-id), in every account",
        action="store_true",
    )
    blob_change_feed: bool = setting(
        False,
        flag="--blob-change-feed",
        help="record blob changes in the $blobchangefeed container, in every account without a hierarchical"
        " namespace (Azure has no change feed there)",
        action="store_true",
    )
    container_soft_delete: int = setting(
        0,
        flag="--container-soft-delete",
        help="keep deleted containers this many days (1-365) for Restore Container, in every account; 0: off",
        type=int,
        metavar="DAYS",
    )
    last_access_tracking: bool = setting(
        False,
        flag="--last-access-tracking",
        help="keep each blob's last access time (x-ms-last-access-time), in every account",
        action="store_true",
    )
    blob_permanent_delete: bool = setting(
        False,
        flag="--blob-permanent-delete",
        help="let Delete Blob with deletetype=permanent remove soft-deleted snapshots and versions "
        "for good, in every account",
        action="store_true",
    )
    version_level_immutability: bool = setting(
        False,
        flag="--version-level-immutability",
        help="version-level immutability support in every account (needs --blob-versioning): a "
        "container holding any blob cannot be deleted",
        action="store_true",
    )
    default_immutability_days: int = setting(
        0,
        flag="--default-immutability-days",
        help="every account's default version-level retention policy (needs "
        "--version-level-immutability): each new blob version without a policy of its own is "
        "protected this many days (1-146000); 0: none",
        type=int,
        metavar="DAYS",
    )
    default_immutability_locked: bool = setting(
        False,
        flag="--default-immutability-locked",
        help="lock that default policy (it may then only be extended)",
        action="store_true",
    )
    hns_accounts: tuple[str, ...] = setting(
        (),
        flag="--hns",
        help="give ACCOUNT a hierarchical namespace (Data Lake Storage Gen2: its containers are file "
        "systems); repeatable. The development account stays flat unless named",
        metavar="ACCOUNT",
        action="append",
    )
    premium_accounts: tuple[str, ...] = setting(
        (),
        flag="--premium-page-blobs",
        help="make ACCOUNT a premium page blob account (Azure's Premium_LRS SKU): page blobs only, each "
        "with a tier P4..P80; repeatable",
        metavar="ACCOUNT",
        action="append",
    )
    # ``[account-features.NAME]`` of ``--config``: per account, by feature name (model.accounts.NAMES).
    account_features: dict[str, dict[str, Any]] = setting(default_factory=dict)
    # Default CORS rules (``[[cors]]`` of ``--config``) for accounts that have set none of their
    # own: the fields of model.policies.CorsRule, as plain data so that workers receive them.
    cors_defaults: list[dict[str, Any]] = setting(default_factory=list)
    # Signs console sessions; made at start-up and shared by the worker processes (never printed).
    console_secret: bytes = setting(b"")
    # Where the worker processes share the signed-out console sessions; made at start-up.
    console_dir: str = setting("")
    # Keys the --metrics-keys hash; made at start-up, shared by the workers (never printed).
    metrics_secret: bytes = setting(b"")
    # The directory the workers of one server share their counters through (made by serve).
    peers_dir: str = setting("")
    frontend: str = setting("")  # "host:pid" of the serving process: /metrics covers this front-end
    max_body_bytes: int = setting(4 * 1024 * 1024)  # larger bodies get 413 RequestBodyTooLarge
    page_time_budget: float = setting(5.0)  # seconds a query page may scan before it ends with a token

    def ports(self) -> dict[str, int]:
        """The port of each service this server runs."""
        every = {"table": self.port, "queue": self.queue_port, "blob": self.blob_port}
        return {service: every[service] for service in self.services}

    def features_of(self, account: str) -> AccountFeatures:
        """``account``'s features as the settings give them (before run-time changes): the
        flags' values, then its ``[account-features.NAME]`` section, ``--hns`` and
        ``--premium-page-blobs``."""
        hns = account in self.hns_accounts
        features = AccountFeatures(
            blob_versioning=self.blob_versioning,
            blob_change_feed=self.blob_change_feed and not hns,  # the flag: every account that can
            container_soft_delete=self.container_soft_delete,
            last_access_tracking=self.last_access_tracking,
            blob_permanent_delete=self.blob_permanent_delete,
            version_level_immutability=self.version_level_immutability and not hns,
            default_immutability_days=self.default_immutability_days if not hns else 0,
            default_immutability_locked=self.default_immutability_locked and not hns,
            hns=hns,
            premium_page_blobs=account in self.premium_accounts,
        )
        return check_combination(apply(features, parse(self.account_features.get(account, {}))))

    def hns_set(self) -> frozenset[str]:
        """The served accounts with a hierarchical namespace (from ``--hns`` or the config file)."""
        return frozenset(account for account in self.accounts if self.features_of(account).hns)

    def host_of(self, service: str) -> str:
        """The address ``service`` listens on: its own ``--queue-host``/``--blob-host``, else
        ``--host`` (the Table service, and with it the console and /metrics, always use that)."""
        own = {"queue": self.queue_host, "blob": self.blob_host}.get(service)
        return own or self.host

    def connection_string(self, account: str) -> str:
        """A connection string for ``account`` naming every endpoint this server serves. Only the
        development account's well-known key (public, the emulators' own) is written out; any
        other account gets ``<your key>`` in its place: keys are never printed."""
        scheme = "https" if self.cert_file else "http"
        well_known = account == DEV_ACCOUNT and self.accounts.get(account) == [base64.b64decode(DEV_KEY)]
        parts = [
            f"DefaultEndpointsProtocol={scheme}",
            f"AccountName={account}",
            f"AccountKey={DEV_KEY if well_known else '<your key>'}",
        ]
        ports = self.ports()
        for service in ("blob", "queue", "table"):  # the order the SDKs' own strings use
            if service in ports:
                host = url_host(self.host_of(service))
                parts.append(f"{service.capitalize()}Endpoint={scheme}://{host}:{ports[service]}/{account}")
        return ";".join(parts) + ";"

    def loopback(self) -> bool:
        """Whether the server listens on the loopback interface only (every service)."""
        return all(is_loopback(self.host_of(service)) for service in self.services)

    def console_on(self) -> bool:
        """``--console`` / ``--no-console`` when given; else on exactly when on loopback."""
        return self.loopback() if self.console is None else self.console

    @classmethod
    def flags(cls) -> list[Any]:
        """The fields users set from the command line, in the order ``--help`` lists them."""
        return [f for f in fields(cls) if f.metadata.get("flag")]

    def to_json(self) -> str:
        """Serialise for worker processes (keys travel base64-encoded, in the environment only)."""
        data: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "accounts":
                value = {name: [base64.b64encode(k).decode() for k in keys] for name, keys in value.items()}
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, bytes):
                value = base64.b64encode(value).decode()
            data[item.name] = value
        return orjson.dumps(data).decode()

    @classmethod
    def from_json(cls, text: str) -> Settings:
        data = orjson.loads(text)
        data["accounts"] = {
            name: [base64.b64decode(k) for k in keys] for name, keys in data["accounts"].items()
        }
        for name in ("data_dir", "cert_file", "key_file"):
            data[name] = Path(data[name]) if data[name] else None
        data["services"] = tuple(data["services"])
        data["console_hosts"] = tuple(data["console_hosts"])
        data["hns_accounts"] = tuple(data["hns_accounts"])
        data["encryption_scopes"] = tuple(data["encryption_scopes"])
        data["oauth_roles"] = tuple(data["oauth_roles"])
        data["console_secret"] = base64.b64decode(data["console_secret"])
        data["metrics_secret"] = base64.b64decode(data["metrics_secret"])
        return cls(**data)

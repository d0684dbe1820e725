"""``tabulae serve --config FILE``: the settings table, read from a TOML file.

Every ``tabulae serve`` flag is a key, spelled as the flag without its dashes and with the
flag's value (``queue-port = 10001``, ``data-dir = "/var/lib/tabulae"``, ``access-log = true``),
so the file needs no documentation of its own beyond ``tabulae serve --help``. A few sections
read better than flags for what is a list or a group:

```toml
store = "postgresql://tabulae@db/tabulae"
[ports]          # table, queue, blob
table = 10002
[accounts]       # name = "base64 key" or ["key1", "key2"]
devstoreaccount1 = "Eby8vdM0…"
[targets]        # or: targets = "azure"
partition = 2000
[[cors]]         # default CORS rules, for accounts that have set none of their own
allowed-origins = ["http://localhost:3000"]
allowed-methods = ["GET", "PUT"]
[account-features.devstoreaccount1]   # what Azure sets in its management plane, per account
blob-versioning = true
container-soft-delete = 7
[oauth-roles]    # bearer-token object ID = a data role or a list of them (--oauth-role)
"00000000-0000-0000-0000-0000000000aa" = "owner"
```

The file's values become the command line's defaults, so a flag given on the command line wins
over the file. An unknown key or a value of the wrong type is refused, naming the key.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from tabulae.config import ConfigError, Settings
from tabulae.model.accounts import FeatureError, parse
from tabulae.model.policies import CORS_METHOD_ORDER as CORS_METHODS
from tabulae.model.roles import ROLE_CHOICES, role_name

_PORTS = {"table": "port", "queue": "queue_port", "blob": "blob_port"}
_TARGETS = {"partition": "partition_target", "queue": "queue_target", "account": "account_target"}
_CORS_KEYS = {
    "allowed-origins": "allowed_origins",
    "allowed-methods": "allowed_methods",
    "allowed-headers": "allowed_headers",
    "exposed-headers": "exposed_headers",
    "max-age": "max_age_seconds",
}


def read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The file's settings as command-line defaults (by argparse destination), its default
    CORS rules and its accounts' features (which have no flags of their own)."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--config {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: not valid TOML: {exc}") from None
    by_key = {item.metadata["flag"].removeprefix("--"): item for item in Settings.flags()}
    defaults: dict[str, Any] = {}
    cors: list[dict[str, Any]] = []
    features: dict[str, dict[str, Any]] = {}
    for key, value in document.items():
        where = f"{path}: {key}"
        if key == "ports":
            for service, port in _table(where, value).items():
                if service not in _PORTS:
                    raise ConfigError(f"{where}.{service}: expected table, queue or blob")
                defaults[_PORTS[service]] = _int(f"{where}.{service}", port)
        elif key in ("accounts", "account"):
            defaults["accounts"] = _accounts(where, value)
        elif key == "targets" and isinstance(value, dict):
            defaults["targets"] = "azure"
            for name, rate in value.items():
                if name not in _TARGETS:
                    raise ConfigError(f"{where}.{name}: expected partition, queue or account")
                if not isinstance(rate, int | float) or isinstance(rate, bool) or rate <= 0:
                    raise ConfigError(f"{where}.{name}: expected a positive number")
                defaults[_TARGETS[name]] = float(rate)
        elif key == "account-features":
            for account, section in _table(where, value).items():
                try:
                    parse(_table(f"{where}.{account}", section))
                except FeatureError as exc:
                    raise ConfigError(f"{where}.{account}.{exc}") from None
                features[account] = section
        elif key == "oauth-roles":
            defaults["oauth_roles"] = _roles(where, value)
        elif key == "cors":
            rules = value if isinstance(value, list) else [value]
            cors = [_cors_rule(f"{where}[{i}]", rule) for i, rule in enumerate(rules)]
        elif key in by_key:
            defaults[by_key[key].name] = _flag_value(where, by_key[key], value)
        else:
            raise ConfigError(
                f"{where}: not a setting (the keys are `tabulae serve` flags without their dashes)"
            )
    return defaults, cors, features


def _table(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table")
    return value


def _int(where: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{where}: expected a whole number")
    return value


def _accounts(where: str, value: Any) -> list[str]:
    """``[accounts] name = key | [key1, key2]``, or a list of ``"name:key1[:key2]"``, as specs."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    specs = []
    for name, keys in _table(where, value).items():
        keys = [keys] if isinstance(keys, str) else keys
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise ConfigError(f"{where}.{name}: expected a base64 key or a list of one or two")
        specs.append(":".join([name, *keys]))
    return specs


def _roles(where: str, value: Any) -> list[str]:
    """``[oauth-roles] OID = "owner"`` (or a list of roles) as ``--oauth-role`` values."""
    specs: list[str] = []
    for oid, roles in _table(where, value).items():
        roles = [roles] if isinstance(roles, str) else roles
        if (
            not isinstance(roles, list)
            or not roles
            or not all(isinstance(role, str) and role_name(role) for role in roles)
        ):
            raise ConfigError(f"{where}.{oid}: expected a role or a list of roles ({ROLE_CHOICES})")
        specs.extend(f"{oid}={role}" for role in roles)
    return specs


def _flag_value(where: str, item: Any, value: Any) -> Any:
    """The value as the flag's option would hold it after parsing (its type, a choice's name)."""
    options = item.metadata["argparse"]
    action = options.get("action")
    if item.name == "services":
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
    elif item.name in ("oauth", "targets") and isinstance(value, bool):
        return (
            ("basic" if item.name == "oauth" else "azure")
            if value
            else ("off" if item.name == "oauth" else None)
        )
    elif item.name == "copy_from_remote" and isinstance(value, bool):
        return "on" if value else "off"
    if action == "append" and isinstance(value, list):  # a repeatable flag: a list of its values
        if not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: expected a list of strings")
        return list(value)
    if action == "append" and isinstance(value, str):
        return [value]
    if action == "store_true" or (action is not None and "Boolean" in getattr(action, "__name__", "")):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false")
        return value
    kind = options.get("type")
    if kind is int:
        return _int(where, value)
    if kind is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"{where}: expected a number")
        return float(value)
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string")
    if kind is Path:
        return Path(value)
    choices = options.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(f"{where}: expected one of {', '.join(choices)}")
    return value


def _cors_rule(where: str, value: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "allowed_origins": [],
        "allowed_methods": [],
        "allowed_headers": [],
        "exposed_headers": [],
        "max_age_seconds": 0,
    }
    for key, item in _table(where, value).items():
        if key not in _CORS_KEYS:
            raise ConfigError(f"{where}.{key}: expected one of {', '.join(_CORS_KEYS)}")
        if key == "max-age":
            rule["max_age_seconds"] = _int(f"{where}.{key}", item)
            continue
        items = [item] if isinstance(item, str) else item
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise ConfigError(f"{where}.{key}: expected a list of strings")
        rule[_CORS_KEYS[key]] = [v.upper() for v in items] if key == "allowed-methods" else list(items)
    if not rule["allowed_origins"] or not rule["allowed_methods"]:
        raise ConfigError(f"{where}: a CORS rule needs allowed-origins and allowed-methods")
    wrong = [m for m in rule["allowed_methods"] if m not in CORS_METHODS]
    if wrong:
        raise ConfigError(
            f"{where}.allowed-methods: {', '.join(wrong)} is not one of {', '.join(CORS_METHODS)}"
        )
    return rule

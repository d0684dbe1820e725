"""``tabulae azurite``: the peer emulator's command line, so a script that starts Azurite starts
Tabulae after a one-word change.

CI files, editor tasks and test fixtures start the emulator as ``azurite --silent --location X
--blobPort P`` (or one service alone, ``azurite-blob``, ``azurite-queue``, ``azurite-table``).
This module reads exactly that command line, with the meaning each flag has there, and turns it
into the ``tabulae serve`` command line that does the same here. Nothing is guessed: a flag Azurite
does not have (or one another single-service form has) is refused with its name.
``--install-shims DIR`` writes ``azurite``, ``azurite-blob``, ``azurite-queue``
and ``azurite-table`` scripts for tools that call the peer by name; it is opt-in, so installing
Tabulae never shadows a real Azurite.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tabulae import __version__
from tabulae.tools.failures import EXIT_USAGE, Failure

SERVICES = ("blob", "queue", "table")  # in the order Azurite announces them
FORMS: dict[str, tuple[str, ...]] = {
    "azurite": SERVICES,
    "azurite-blob": ("blob",),
    "azurite-queue": ("queue",),
    "azurite-table": ("table",),
}
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORTS = {"blob": 10000, "queue": 10001, "table": 10002}
_SERVE_PORT_FLAG = {"blob": "--blob-port", "queue": "--queue-port", "table": "--port"}


class AzuriteFlagError(ValueError):
    """A command line the peer would not accept, or that Tabulae cannot honour; says which flag."""


@dataclass(frozen=True, slots=True)
class Flag:
    """One of Azurite's flags: its spellings, whether it takes a value, which forms have it, and
    what it does here (the README's table and ``--help`` are made from these)."""

    long: str
    short: str = ""
    value: str = ""  # the value's name when the flag takes one
    service: str = ""  # only the forms that run this service accept it
    here: str = ""


FLAGS: tuple[Flag, ...] = (
    Flag("blobHost", value="HOST", service="blob", here="address of the Blob service (`--blob-host`)"),
    Flag("blobPort", value="PORT", service="blob", here="port of the Blob service (`--blob-port`)"),
    Flag("blobKeepAliveTimeout", value="S", service="blob", here="accepted; idle connections close 5 s after "
         "their last answer"),
    Flag("queueHost", value="HOST", service="queue", here="address of the Queue service (`--queue-host`)"),
    Flag("queuePort", value="PORT", service="queue", here="port of the Queue service (`--queue-port`)"),
    Flag("queueKeepAliveTimeout", value="S", service="queue", here="accepted, as `--blobKeepAliveTimeout`"),
    Flag("tableHost", value="HOST", service="table", here="address of the Table service (`--host`)"),
    Flag("tablePort", value="PORT", service="table", here="port of the Table service (`--port`)"),
    Flag("tableKeepAliveTimeout", value="S", service="table", here="accepted, as `--blobKeepAliveTimeout`"),
    Flag("location", "l", "DIR", here="the data directory (`--data-dir`); default the current directory, "
         "as Azurite's. Tabulae's files (`tabulae.db`, `blobs/`) sit beside Azurite's, which are left "
         "alone (`tabulae migrate azurite` copies them over)"),
    Flag("silent", "s", here="no access log; without it one JSON line per request goes to stderr "
         "(`--access-log`)"),
    Flag("debug", "d", "FILE", here="debug log and access log appended to FILE (`--log-level debug "
         "--access-log`, stderr to FILE)"),
    Flag("loose", "L", here="accepted; Tabulae already ignores headers and parameters it does not use, "
         "as Azure does"),
    Flag("skipApiVersionCheck", here="serve any `x-ms-version` (`--skip-api-version-check`)"),
    Flag("disableProductStyleUrl", here="account always from the path, never the host name "
         "(`--path-style-only`)"),
    Flag("inMemoryPersistence", here="keep data in memory only (`--in-memory`); not with `--location`, "
         "as in Azurite"),
    Flag("extentMemoryLimit", value="MB", here="accepted with `--inMemoryPersistence`; memory is bounded by "
         "the size of /dev/shm"),
    Flag("cert", value="FILE", here="serve HTTPS (`--cert`): a PEM certificate with `--key`, or a PFX "
         "file with `--pwd`"),
    Flag("key", value="FILE", here="PEM private key for `--cert` (`--key`)"),
    Flag("pwd", value="PASSWORD", here="password of a PFX `--cert`; the PFX is converted to PEM files "
         "in a private temporary directory, removed at exit"),
    Flag("oauth", value="basic", here="accept bearer tokens with basic checks (`--oauth basic`); needs "
         "`--cert`"),
    Flag("disableTelemetry", here="accepted; Tabulae collects no telemetry"),
)  # fmt: skip
_BY_NAME = {f"--{flag.long}": flag for flag in FLAGS} | {
    f"-{flag.short}": flag for flag in FLAGS if flag.short
}


@dataclass(slots=True)
class Plan:
    """What an Azurite command line asks for, as ``tabulae serve`` arguments and the few things
    done around serving (the debug file, a PFX to convert)."""

    form: str
    serve_args: list[str] = field(default_factory=list)
    debug_file: Path | None = None
    pfx: Path | None = None
    pfx_password: str = ""
    announce: dict[str, tuple[str, int]] = field(default_factory=dict)  # service -> (host, port)


def parse(form: str, argv: list[str]) -> dict[str, str | bool]:
    """Azurite's flags as given: ``--name value``, ``--name=value``, ``-l DIR``, ``-sL``."""
    services = FORMS[form]
    given: dict[str, str | bool] = {}
    items = iter(argv)
    for arg in items:
        if arg.startswith("--"):
            name, eq, inline = arg.partition("=")
            names = [name]
        elif arg.startswith("-") and len(arg) > 1:
            name, eq, inline = arg[:2], "", ""
            if len(arg) > 2:  # -sL: a bundle of switches, or -lDIR: a value stuck to its flag
                first = _BY_NAME.get(name)
                if first is not None and first.value:
                    eq, inline = "=", arg[2:]
                    names = [name]
                else:
                    names = [f"-{letter}" for letter in arg[1:]]
            else:
                names = [name]
        else:
            raise AzuriteFlagError(f"unexpected argument {arg!r}: {form} takes flags only")
        for spelled in names:
            flag = _BY_NAME.get(spelled)
            if flag is None or (flag.service and flag.service not in services):
                raise AzuriteFlagError(f"unknown flag {spelled} for {form} (see `tabulae {form} --help`)")
            if flag.value:
                if eq:
                    value = inline
                else:
                    value = next(items, None)  # type: ignore[assignment]
                    if value is None or (value.startswith("-") and value != "-"):
                        raise AzuriteFlagError(f"{spelled} needs a value ({flag.value})")
                given[flag.long] = value
            else:
                if eq:
                    raise AzuriteFlagError(f"{spelled} takes no value")
                given[flag.long] = True
    return given


def plan(form: str, argv: list[str], cwd: Path | None = None) -> Plan:
    """The ``tabulae serve`` arguments that do what ``form argv`` does in Azurite."""
    given = parse(form, argv)
    result = Plan(form)
    args = result.serve_args
    services = FORMS[form]
    args += ["--services", ",".join(s for s in ("table", "queue", "blob") if s in services)]
    hosts = {service: str(given.get(f"{service}Host", DEFAULT_HOST)) for service in services}
    host = hosts.get("table", next(iter(hosts.values())))
    args += ["--host", host]
    for service in ("queue", "blob"):
        if service in hosts and hosts[service] != host:
            args += [f"--{service}-host", hosts[service]]
    for service in services:
        text = str(given.get(f"{service}Port", DEFAULT_PORTS[service]))
        if not text.isdigit() or not 0 <= int(text) <= 65535:
            raise AzuriteFlagError(f"--{service}Port: expected a port number, not {text!r}")
        args += [_SERVE_PORT_FLAG[service], text]
        result.announce[service] = (hosts[service], int(text))
    if given.get("inMemoryPersistence"):
        if "location" in given:
            raise AzuriteFlagError("The --inMemoryPersistence option is not supported when --location is set")
        args.append("--in-memory")
    else:
        if "extentMemoryLimit" in given:
            raise AzuriteFlagError("--extentMemoryLimit is only supported with --inMemoryPersistence")
        location = Path(str(given["location"])) if "location" in given else (cwd or Path.cwd())
        args += ["--data-dir", str(location)]
    if "debug" in given:
        result.debug_file = Path(str(given["debug"]))
        args += ["--log-level", "debug", "--access-log"]
    elif not given.get("silent"):
        args.append("--access-log")
    if given.get("skipApiVersionCheck"):
        args.append("--skip-api-version-check")
    if given.get("disableProductStyleUrl"):
        args.append("--path-style-only")
    if "oauth" in given:
        if given["oauth"] != "basic":
            raise AzuriteFlagError(f"--oauth: the only level is 'basic', not {given['oauth']!r}")
        args += ["--oauth", "basic"]
    cert, key, pwd = given.get("cert"), given.get("key"), given.get("pwd")
    if cert and key:
        args += ["--cert", str(cert), "--key", str(key)]
    elif cert and pwd is not None:
        result.pfx, result.pfx_password = Path(str(cert)), str(pwd)
    elif cert or key or pwd is not None:
        raise AzuriteFlagError("--cert needs --key (a PEM certificate) or --pwd (a PFX file)")
    return result


@contextlib.contextmanager
def pem_from_pfx(pfx: Path, password: str) -> Iterator[tuple[Path, Path]]:
    """The certificate chain and key of a PFX file as PEM files in a private directory, for the
    server's TLS; removed when serving ends (the key never lands anywhere else)."""
    try:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )
    except ImportError:  # pragma: no cover - the `azurite` extra installs it
        raise AzuriteFlagError(
            "a PFX --cert needs the cryptography package: pip install 'tabulae[azurite]'"
        ) from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(pfx.read_bytes(), password.encode() or None)
    except OSError as exc:
        raise AzuriteFlagError(f"--cert {pfx}: {exc.strerror or exc}") from None
    except ValueError:
        raise AzuriteFlagError(f"--cert {pfx}: not a PFX file, or --pwd is not its password") from None
    if key is None or cert is None:
        raise AzuriteFlagError(f"--cert {pfx}: the PFX file holds no certificate and key")
    folder = Path(tempfile.mkdtemp(prefix="tabulae-tls-"))  # mode 0700
    try:
        cert_path, key_path = folder / "cert.pem", folder / "key.pem"
        chain = b"".join(c.public_bytes(Encoding.PEM) for c in [cert, *(extra or [])])
        cert_path.write_bytes(chain)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
        yield cert_path, key_path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def announce(targets: dict[str, tuple[str, int]], scheme: str, timeout: float = 120.0) -> None:
    """Print Azurite's "successfully listening" lines once each port answers, in the background:
    tools that wait for them (log-watching test containers, editor tasks) keep working."""

    def watch() -> None:
        deadline = time.monotonic() + timeout
        for service, (host, port) in targets.items():
            probe = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
            while time.monotonic() < deadline:
                try:
                    with socket.create_connection((probe, port), timeout=1):
                        break
                except OSError:
                    time.sleep(0.1)
            else:
                return
            print(
                f"Azurite {service.capitalize()} service is successfully listening at "
                f"{scheme}://{host}:{port}",
                flush=True,
            )

    threading.Thread(target=watch, name="azurite-announce", daemon=True).start()


def install_shims(folder: Path) -> list[Path]:
    """Write ``azurite``, ``azurite-blob``, ``azurite-queue`` and ``azurite-table`` into ``folder``:
    small scripts that run this Python's Tabulae with the same arguments."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    python = sys.executable
    for form in FORMS:
        path = folder / form
        path.write_text(
            "#!/bin/sh\n"
            "# Written by `tabulae azurite --install-shims`: Tabulae, started with Azurite's command line.\n"
            f'exec {_sh_quote(python)} -m tabulae {form} "$@"\n'
        )
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        written.append(path)
    return written


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def help_text(form: str) -> str:
    services = FORMS[form]
    lines = [
        f"usage: tabulae {form} [FLAGS]",
        "",
        f"Tabulae with Azurite's command line ({', '.join(services)}). Flags and what they do here:",
        "",
    ]
    for flag in FLAGS:
        if flag.service and flag.service not in services:
            continue
        spelled = (
            (f"-{flag.short}, " if flag.short else "")
            + f"--{flag.long}"
            + (f" {flag.value}" if flag.value else "")
        )
        lines.append(f"  {spelled:<34} {flag.here.replace('`', '')}")
    lines += [
        "",
        "Accounts come from AZURITE_ACCOUNTS ('name:key1:key2;name2:key1'), as in Azurite.",
        "  --install-shims DIR                 write azurite, azurite-blob, azurite-queue and azurite-table",
        "                                      scripts into DIR that run Tabulae (put DIR on PATH)",
    ]
    return "\n".join(lines)


def main(form: str, argv: list[str], serve: Callable[[list[str]], None]) -> None:
    """Run ``form argv`` as Azurite would, by calling ``serve`` with ``tabulae serve`` arguments."""
    if argv[:1] in (["-h"], ["--help"]):
        print(help_text(form))
        return
    if argv[:1] in (["-v"], ["--version"]):
        print(f"tabulae {__version__} (Azurite command line)")
        return
    if argv[:1] == ["--install-shims"]:
        if len(argv) != 2:
            raise Failure("InvalidArguments", f"{form} --install-shims takes one directory", EXIT_USAGE)
        for path in install_shims(Path(argv[1])):
            print(f"wrote {path}")
        return
    try:
        todo = plan(form, argv)
        with contextlib.ExitStack() as stack:
            args = list(todo.serve_args)
            if todo.pfx is not None:
                cert, key = stack.enter_context(pem_from_pfx(todo.pfx, todo.pfx_password))
                args += ["--cert", str(cert), "--key", str(key)]
            if todo.debug_file is not None:
                _log_to(todo.debug_file)
            scheme = "https" if "--cert" in args else "http"
            announce(todo.announce, scheme)
            serve(args)
    except AzuriteFlagError as exc:
        raise Failure("InvalidArguments", f"{form}: {exc}", EXIT_USAGE) from None


def _log_to(path: Path) -> None:
    """Send this process's stderr (and so its workers' logs) to ``path``, appended."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise AzuriteFlagError(f"--debug {path}: {exc.strerror or exc}") from None
    sys.stderr.flush()
    os.dup2(descriptor, 2)
    os.close(descriptor)

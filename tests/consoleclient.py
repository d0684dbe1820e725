"""A console client over raw HTTP: one cookie jar, forms posted with the page's CSRF token.

The browser tests show the console works for a person; this client checks what a browser hides:
headers, cookie attributes, refused requests and the exact bytes of a page.
"""

from __future__ import annotations

import http.client
import re
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlencode

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    text: str
    body: bytes = b""  # the exact bytes (a download is not text)

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


@dataclass
class ConsoleClient:
    port: int
    cookie: str | None = None
    csrf: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = {**self.extra_headers, **(headers or {})}
            if self.cookie is not None:
                sent.setdefault("Cookie", self.cookie)
            connection.request(method, "/-/console" + path, body=body, headers=sent)
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        set_cookie = response.headers.get("set-cookie")
        if set_cookie:
            self.cookie = set_cookie.split(";", 1)[0]
        text = body.decode("utf-8") if response.headers.get_content_maintype() == "text" else ""
        found = _CSRF.search(text)
        if found:
            self.csrf = found.group(1)
        return Answer(response.status, response.headers, text, body)

    def get(self, path: str) -> Answer:
        return self.request("GET", path)

    def post(
        self, path: str, fields: dict[str, str], *, csrf: bool = True, headers: dict[str, str] | None = None
    ) -> Answer:
        data = dict(fields)
        if csrf and self.csrf is not None:
            data.setdefault("csrf", self.csrf)
        body = urlencode(data).encode()
        sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
        return self.request("POST", path, body, sent)

    def post_file(
        self, path: str, fields: dict[str, str], file: tuple[str, str, bytes], *, csrf: bool = True
    ) -> Answer:
        """A ``multipart/form-data`` form with ``fields`` and one file (name, content type, bytes)."""
        boundary = "----tabulae" + uuid.uuid4().hex
        data = dict(fields)
        if csrf and self.csrf is not None:
            data.setdefault("csrf", self.csrf)
        parts = []
        for name, value in data.items():
            head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            parts.append(head.encode() + value.encode() + b"\r\n")
        filename, content_type, content = file
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            f"Content-Type: {content_type}\r\n\r\n"
        )
        parts.append(head.encode() + content + b"\r\n")
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        return self.request("POST", path, body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})

    def sign_in(self, account: str, key: str) -> Answer:
        """Sign in, then load a page so that the CSRF token is the new session's."""
        self.get("/signin")
        answer = self.post("/signin", {"account": account, "key": key})
        if answer.status == 303:
            self.get("/tables")
        return answer

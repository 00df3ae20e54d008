"""Mailing a digest: one multipart message (plain text + HTML) over SMTP with STARTTLS, SSL or (loopback) none.

Settings come from, highest first: the command's options, the environment (``SEMSEARCH_SMTP_HOST``,
``_PORT``, ``_USER``, ``_PASSWORD``, ``_SECURITY``, ``_FROM``, ``_CAFILE``, ``_PASSWORD_FILE``), and a small
TOML file (``--smtp-config``, ``SEMSEARCH_SMTP_CONFIG``, else ``~/.config/semsearch/mail.toml``) with the same
keys in lower case (``host``, ``port``, ``user``, ``password_file``, ``security``, ``from``, ``cafile``).
The password is never an option: an environment variable or a file.
"""

from __future__ import annotations

import os
import smtplib
import socket
import ssl
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from typing import Any

from semsearch.core.errors import MailError
from semsearch.core.options import SMTP_SECURITIES

SECURITIES = SMTP_SECURITIES
PORTS = {"starttls": 587, "ssl": 465, "none": 25}
ENV_PREFIX = "SEMSEARCH_SMTP_"
KEYS = ("host", "port", "user", "password", "password_file", "security", "from", "cafile")
TIMEOUT_S = 30.0


@dataclass
class MailSettings:
    """Where and how to send."""

    host: str
    port: int
    security: str
    sender: str
    user: str = ""
    password: str = ""
    cafile: str = ""
    timeout: float = TIMEOUT_S


def default_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "semsearch" / "mail.toml"


def _read_config(path: Path, *, required: bool) -> dict[str, Any]:
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if required:
            raise MailError(f"no mail settings file {path}") from None
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise MailError(f"cannot read mail settings {path}: {exc}") from exc
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise MailError(f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(KEYS)})")
    if "password" in data:
        raise MailError(f"{path}: keep the password in its own file (password_file) or in {ENV_PREFIX}PASSWORD")
    return {k: str(v) for k, v in data.items()}


def resolve_settings(
    options: Mapping[str, Any], env: Mapping[str, str] | None = None, config: Path | None = None
) -> MailSettings:
    """The settings from options (None: unset), then the environment, then the config file."""
    env = os.environ if env is None else env
    named = config or (Path(env[ENV_PREFIX + "CONFIG"]) if env.get(ENV_PREFIX + "CONFIG") else None)
    from_file = _read_config(named or default_config_path(env), required=named is not None)

    def get(key: str) -> str:
        value = options.get(key)
        if value not in (None, ""):
            return str(value)
        return env.get(ENV_PREFIX + key.upper(), "") or from_file.get(key, "")

    host = get("host")
    if not host:
        raise MailError(f"no SMTP host: give --smtp-host, set {ENV_PREFIX}HOST, or write host in the mail settings")
    security = get("security").lower() or "starttls"
    if security not in SECURITIES:
        raise MailError(f"unknown SMTP security {security!r} (choose from {', '.join(SECURITIES)})")
    port_text = get("port") or str(PORTS[security])
    try:
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError
    except ValueError:
        raise MailError(f"bad SMTP port {port_text!r} (1..65535)") from None
    password = env.get(ENV_PREFIX + "PASSWORD", "")
    password_file = get("password_file")
    if not password and password_file:
        password = read_secret_file(Path(password_file).expanduser(), "SMTP password file")
    user = get("user")
    if user and not password:
        raise MailError(f"SMTP user {user!r} but no password: set {ENV_PREFIX}PASSWORD or password_file")
    if user and security == "none" and host not in ("localhost", "127.0.0.1", "::1"):
        raise MailError(f"refusing to send the SMTP password unencrypted to {host}: use starttls or ssl")
    sender = check_address(get("from") or user or f"semsearch@{socket.gethostname()}", "sender")
    cafile = get("cafile")
    if cafile and not Path(cafile).expanduser().is_file():
        raise MailError(f"no CA file {cafile}")
    return MailSettings(host, port, security, sender, user, password, cafile)


def read_secret_file(path: Path, what: str) -> str:
    """A secret's text from a file only its owner may read; MailError (as ssh refuses a private key) otherwise.

    A file that the group or others can read (or write) has leaked, or will: it is refused with the chmod that
    fixes it. Read through one descriptor, so the file checked is the file read.
    """
    try:
        with path.open("rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if os.name == "posix" and mode & 0o077:
                raise MailError(
                    f"permissions {stat.S_IMODE(mode):04o} for the {what} {path} are too open: it must be "
                    f"readable only by you (chmod 600 {path})"
                )
            return fh.read().decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise MailError(f"cannot read the {what} {path}: {exc}") from exc


def check_address(value: str, what: str = "--mail-to") -> str:
    """An address fit for a mail header (``Name <a@b>`` or ``a@b``); MailError for a line break, a control
    character or no address at all (the mail library would fail with a traceback, after the digest was made)."""
    from email.utils import parseaddr

    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value) or not parseaddr(value)[1]:
        raise MailError(f"bad {what} address {value!r}: give one address like me@example.org")
    return value


def build_message(subject: str, sender: str, to: list[str], text: str, html: str) -> EmailMessage:
    """A multipart/alternative message: the plain text first, the HTML part preferred by mail readers."""
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = make_msgid(domain="semsearch.local")
    msg.set_content(text)
    msg.add_alternative(html, subtype="html")
    return msg


def _tls_context(settings: MailSettings) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=str(Path(settings.cafile).expanduser()) if settings.cafile else None)
    except (OSError, ssl.SSLError) as exc:
        raise MailError(f"cannot use the CA file {settings.cafile}: {exc}") from exc


def send(settings: MailSettings, message: EmailMessage) -> None:
    """Send one message; any failure is one MailError line naming the server and what went wrong."""
    where = f"{settings.host}:{settings.port}"
    try:
        smtp: smtplib.SMTP
        if settings.security == "ssl":
            smtp = smtplib.SMTP_SSL(
                settings.host, settings.port, timeout=settings.timeout, context=_tls_context(settings)
            )
        else:
            smtp = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout)
        with smtp:
            smtp.ehlo()
            if settings.security == "starttls":
                if not smtp.has_extn("starttls"):
                    raise MailError(f"{where} does not offer STARTTLS (use --smtp-security ssl, or none on loopback)")
                smtp.starttls(context=_tls_context(settings))
                smtp.ehlo()
            if settings.user:
                smtp.login(settings.user, settings.password)
            refused = smtp.send_message(message)
            if refused:
                raise MailError(f"{where} refused {', '.join(sorted(refused))}")
    except MailError:
        raise
    except smtplib.SMTPAuthenticationError as exc:
        raise MailError(f"{where} refused the login of {settings.user!r} ({_reply(exc)})") from exc
    except smtplib.SMTPRecipientsRefused as exc:
        raise MailError(f"{where} refused the recipients {', '.join(sorted(exc.recipients))}") from exc
    except smtplib.SMTPServerDisconnected as exc:
        raise MailError(f"{where} closed the connection before the digest was sent ({exc or 'no reason'})") from exc
    except smtplib.SMTPResponseException as exc:
        raise MailError(f"{where} refused the digest ({_reply(exc)})") from exc
    except smtplib.SMTPException as exc:
        raise MailError(f"sending to {where} failed: {exc}") from exc
    except ssl.SSLError as exc:
        raise MailError(f"TLS with {where} failed: {exc.reason or exc} (a private CA: --smtp-cafile)") from exc
    except OSError as exc:
        raise MailError(f"cannot reach {where}: {exc.strerror or exc}") from exc


def _reply(exc: smtplib.SMTPResponseException) -> str:
    text = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
    return f"{exc.smtp_code} {' '.join(text.split())}"

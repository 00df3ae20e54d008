"""digest --mail-to: a multipart message to a real SMTP server on loopback (aiosmtpd), STARTTLS, SSL and failures."""

from __future__ import annotations

import datetime
import email
import json
import os
import shutil
import socket
import ssl
import threading
from collections.abc import Iterator
from email.message import Message
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.helpers import SEEDS, SHARED, FakeEmbedder

pytest.importorskip("aiosmtpd", reason="the dev extra (aiosmtpd) is not installed")

from aiosmtpd.controller import Controller  # noqa: E402
from aiosmtpd.smtp import AuthResult, LoginPassword  # noqa: E402

from semsearch import build_index  # noqa: E402
from semsearch.curate.arrivals import BOOKMARKS_FILE  # noqa: E402
from semsearch.curate.mail import MailError, resolve_settings  # noqa: E402
from semsearch.faces.cli import cli  # noqa: E402
from semsearch.write.build import BuildOptions  # noqa: E402

USER, PASSWORD = "reader", "s3cret-word"
# The implicit-TLS server sets auth_require_tls=False (aiosmtpd only counts STARTTLS as TLS) and warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


class Inbox:
    """An aiosmtpd handler that keeps what it receives."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.envelopes: list[tuple[str, list[str]]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.original_content or envelope.content))
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 OK"


def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and data.login == USER.encode() and data.password == PASSWORD.encode()
    return AuthResult(success=ok, handled=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA), and its key."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "semsearch test SMTP")])
    now = datetime.datetime.now(datetime.timezone.utc)
    built = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(built.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def server_context(cert: tuple[Path, Path]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx


@pytest.fixture
def smtp(request: pytest.FixtureRequest, cert: tuple[Path, Path]) -> Iterator[tuple[Inbox, int, str]]:
    """A loopback SMTP server: ``starttls`` (STARTTLS required, login required) or ``ssl`` (implicit TLS)."""
    kind = getattr(request, "param", "starttls")
    inbox = Inbox()
    port = free_port()
    kwargs: dict[str, Any] = {"authenticator": authenticator, "auth_required": True}
    if kind == "starttls":
        kwargs.update(tls_context=server_context(cert), require_starttls=True)
    else:
        # aiosmtpd counts only STARTTLS as TLS for AUTH; this whole connection is TLS from the first byte.
        kwargs.update(ssl_context=server_context(cert), server_hostname="127.0.0.1", auth_require_tls=False)
    controller = Controller(inbox, hostname="127.0.0.1", port=port, **kwargs)
    controller.start()
    try:
        yield inbox, port, kind
    finally:
        controller.stop()


@pytest.fixture
def index(seeded_index_copy: Path) -> Path:
    path = seeded_index_copy
    run(path, ["watch", "add", "fed", "federated learning differential privacy"], {})
    return path


def run(index: Path, args: list[str], env: dict[str, str]) -> Result:
    return CliRunner(env=env).invoke(cli, [*args, "--index", str(index)], obj={"embedder": FakeEmbedder()})


class _Styles(HTMLParser):
    """Every element of an HTML document's body that carries no style of its own, and any <style> or class."""

    def __init__(self) -> None:
        super().__init__()
        self.in_body = False
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = dict(attrs)
        if tag == "style" or "class" in given:
            self.problems.append(f"<{tag}> relies on a style sheet")
        self.in_body = self.in_body or tag == "body"
        if self.in_body and tag != "br" and not (given.get("style") or "").strip():
            self.problems.append(f"<{tag}> has no inline style")


def unstyled(page: str) -> list[str]:
    """What mail clients that drop <head> styles would show unstyled (empty: every element is styled inline)."""
    parser = _Styles()
    parser.feed(page)
    assert parser.in_body, "no <body>"
    return parser.problems


def test_the_style_check_finds_what_a_mail_client_would_drop() -> None:
    styled = '<html><head></head><body style="a:b"><p style="c:d">x<br>y</p></body></html>'
    assert unstyled(styled) == []
    assert unstyled('<html><head><style>p{}</style></head><body style="a:b"><p>x</p></body></html>') == [
        "<style> relies on a style sheet",
        "<p> has no inline style",
    ]
    assert unstyled('<body style="a:b"><i class="x" style="e:f">z</i></body>') == ["<i> relies on a style sheet"]


def mail_args(port: int, security: str, cert: tuple[Path, Path] | None) -> list[str]:
    args = ["digest", "--name", "daily", "--mail-to", "me@example.org", "--smtp-host", "127.0.0.1"]
    args += ["--smtp-port", str(port), "--smtp-security", security, "--smtp-user", USER]
    return args + (["--smtp-cafile", str(cert[0])] if cert else [])


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No SMTP settings from the machine running the tests: an empty config home."""
    env = {k: "" for k in os.environ if k.startswith("SEMSEARCH_SMTP_")}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "config"), **extra}


@pytest.mark.parametrize("smtp", ["starttls", "ssl"], indirect=True)
def test_digest_is_mailed_as_text_and_html(
    smtp: tuple[Inbox, int, str], cert: tuple[Path, Path], index: Path, tmp_path: Path
) -> None:
    inbox, port, kind = smtp
    env = clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD=PASSWORD)
    result = run(index, mail_args(port, kind, cert), env)
    assert result.exit_code == 0, result.output
    assert "mailed to me@example.org" in result.output and PASSWORD not in result.output
    assert len(inbox.messages) == 1 and inbox.envelopes[0] == (USER, ["me@example.org"])
    msg = inbox.messages[0]
    assert msg.get_content_type() == "multipart/alternative"
    assert msg["Subject"].startswith("semsearch digest daily: 91 new")
    parts = {
        p.get_content_type(): p.get_payload(decode=True).decode("utf-8") for p in msg.walk() if not p.is_multipart()
    }
    assert set(parts) == {"text/plain", "text/html"}
    assert parts["text/plain"].startswith("# semsearch digest: daily")
    assert ">Saved query: fed</h2>" in parts["text/html"]
    assert unstyled(parts["text/html"]) == []
    assert "daily" in json.loads((index / BOOKMARKS_FILE).read_text(encoding="utf-8"))


@pytest.mark.parametrize("smtp", ["starttls"], indirect=True)
def test_a_quiet_day_mails_nothing_unless_asked(
    smtp: tuple[Inbox, int, str], cert: tuple[Path, Path], index: Path, tmp_path: Path
) -> None:
    inbox, port, kind = smtp
    env = clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD=PASSWORD)
    assert run(index, mail_args(port, kind, cert), env).exit_code == 0  # everything, the first time
    assert len(inbox.messages) == 1
    quiet = run(index, mail_args(port, kind, cert), env)  # nothing arrived since
    assert quiet.exit_code == 0, quiet.output
    assert "0 arrived" in quiet.output and "no mail sent" in quiet.output and "--mail-empty" in quiet.output
    assert len(inbox.messages) == 1
    asked = run(index, [*mail_args(port, kind, cert), "--mail-empty"], env)
    assert asked.exit_code == 0, asked.output
    assert len(inbox.messages) == 2 and inbox.messages[1]["Subject"].startswith("semsearch digest daily: 0 new")


def test_refused_login_is_one_line_and_keeps_the_bookmark(
    smtp: tuple[Inbox, int, str], cert: tuple[Path, Path], index: Path, tmp_path: Path
) -> None:
    inbox, port, _ = smtp
    result = run(index, mail_args(port, "starttls", cert), clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD="wrong"))
    assert result.exit_code == 2 and "refused the login of 'reader'" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not inbox.messages and not (index / BOOKMARKS_FILE).exists()


def test_an_untrusted_certificate_is_one_line(smtp: tuple[Inbox, int, str], index: Path, tmp_path: Path) -> None:
    _, port, _ = smtp
    result = run(index, mail_args(port, "starttls", None), clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD=PASSWORD))
    assert result.exit_code == 2 and "TLS with 127.0.0.1" in result.output and "--smtp-cafile" in result.output
    assert not (index / BOOKMARKS_FILE).exists()


def test_a_server_that_drops_the_connection(index: Path, tmp_path: Path) -> None:
    """A server greets, reads one command and hangs up: one line, exit 2, no bookmark."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"220 flaky.test ESMTP\r\n")
            conn.recv(1024)
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    result = run(index, mail_args(port, "none", None), clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD=PASSWORD))
    thread.join(5)
    assert result.exit_code == 2 and "closed the connection" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (index / BOOKMARKS_FILE).exists()
    # Nothing listening at all: also one line.
    closed = run(index, mail_args(free_port(), "none", None), clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD=PASSWORD))
    assert closed.exit_code == 2 and "cannot reach 127.0.0.1" in closed.output
    assert not (index / BOOKMARKS_FILE).exists()


def test_settings_from_the_environment_and_a_config_file(
    smtp: tuple[Inbox, int, str], cert: tuple[Path, Path], index: Path, tmp_path: Path
) -> None:
    inbox, port, _ = smtp
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n", encoding="utf-8")
    secret.chmod(0o600)  # a password file others can read is refused
    config = tmp_path / "config" / "semsearch" / "mail.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'host = "127.0.0.1"\nport = {port}\nuser = "{USER}"\npassword_file = "{secret}"\ncafile = "{cert[0]}"\n',
        encoding="utf-8",
    )
    result = run(index, ["digest", "--mail-to", "me@example.org"], clean_env(tmp_path))
    assert result.exit_code == 0, result.output
    assert len(inbox.messages) == 1
    # The environment overrides the file, the options override both.
    env = {"SEMSEARCH_SMTP_HOST": "mail.example", "SEMSEARCH_SMTP_PORT": "2525"}
    assert resolve_settings({}, env={**env, "XDG_CONFIG_HOME": str(tmp_path / "config")}).host == "mail.example"
    settings = resolve_settings({"port": 26}, env={**env, "XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert (settings.host, settings.port, settings.password, settings.security) == (
        "mail.example",
        26,
        PASSWORD,
        "starttls",
    )


@pytest.mark.parametrize(
    ("options", "env", "config", "fragment"),
    [
        ({}, {}, "", "no SMTP host"),
        ({"host": "h", "security": "tls9"}, {}, "", "unknown SMTP security 'tls9'"),
        ({"host": "h", "port": "99999"}, {}, "", "bad SMTP port"),
        ({"host": "h", "user": "u"}, {}, "", "no password"),
        (
            {"host": "mail.example", "user": "u", "security": "none"},
            {"SEMSEARCH_SMTP_PASSWORD": "p"},
            "",
            "unencrypted",
        ),
        ({"host": "h", "cafile": "/nonexistent/ca.pem"}, {}, "", "no CA file"),
        ({}, {}, 'host = "h"\npassword = "x"\n', "keep the password in its own file"),
        ({}, {}, 'host = "h"\nhots = "x"\n', "unknown setting 'hots'"),
        ({}, {}, "host = [", "cannot read mail settings"),
        ({"host": "h", "user": "u", "password_file": "/nonexistent/pw"}, {}, "", "cannot read the SMTP password file"),
    ],
)
def test_bad_settings_are_one_line(
    tmp_path: Path, options: dict[str, Any], env: dict[str, str], config: str, fragment: str
) -> None:
    named = None
    if config:
        named = tmp_path / "mail.toml"
        named.write_text(config, encoding="utf-8")
    with pytest.raises(MailError, match=fragment.replace("(", r"\(")):
        resolve_settings(options, env={"XDG_CONFIG_HOME": str(tmp_path / "none"), **env}, config=named)


def test_bad_settings_fail_before_the_digest_and_keep_the_bookmark(index: Path, tmp_path: Path) -> None:
    result = run(index, ["digest", "--mail-to", "me@example.org"], clean_env(tmp_path))
    assert result.exit_code == 2 and "no SMTP host" in result.output and "Traceback" not in result.output
    assert not (index / BOOKMARKS_FILE).exists()
    missing = run(
        index, ["digest", "--mail-to", "a@b", "--smtp-config", str(tmp_path / "no.toml")], clean_env(tmp_path)
    )
    assert missing.exit_code == 2 and "no mail settings file" in missing.output


@pytest.mark.slow
def test_a_digest_of_the_real_seeds_is_mailed(
    smtp: tuple[Inbox, int, str], cert: tuple[Path, Path], tmp_path: Path
) -> None:
    """The real model on the seeds: a file re-added under a tag and a saved query, mailed over STARTTLS.

    With SEMSEARCH_SAVE_MAIL_HTML=PATH the received HTML part is saved there (to look at it).
    """
    inbox, port, _ = smtp
    seeds = Path(shutil.copytree(SEEDS, tmp_path / "seeds"))
    index = tmp_path / "idx"
    aside = tmp_path / "aside.txt"
    shutil.move(seeds / "004_f68119e40157f770.txt", aside)
    # With the NeurIPS catalogue when it is there (titles, authors and links, as a reader's index has them).
    catalogue = SHARED / "data" / "mlanthology" / "neurips2025.jsonl.gz"
    options = BuildOptions(progress=False, catalogues=[str(catalogue)] if catalogue.is_file() else [])
    build_index([str(seeds)], index, options)

    def cli_run(args: list[str], env: dict[str, str]) -> Result:
        return CliRunner(env=env).invoke(cli, [*args, "--index", str(index)], obj={"embedder": None})

    env = clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD=PASSWORD)
    from semsearch import Index as Idx

    with Idx.open(index) as idx:
        fed = next(d.id for d in idx.store.iter_documents() if "federated" in d.text.lower())
    assert cli_run(["tag", "add", "liked", fed], env).exit_code == 0
    assert (
        cli_run(["watch", "add", "dp", "differentially private training of large language models"], env).exit_code == 0
    )
    assert cli_run(["digest", "--name", "daily", "--format", "json"], env).exit_code == 0  # the bookmark
    shutil.move(aside, seeds / "004_f68119e40157f770.txt")
    build_index(None, index, options)
    result = cli_run(mail_args(port, "starttls", cert), env)
    assert result.exit_code == 0, result.output
    msg = inbox.messages[-1]
    html_part = next(p for p in msg.walk() if p.get_content_type() == "text/html")
    text = html_part.get_payload(decode=True).decode("utf-8")
    assert "19 papers arrived" in text and ">Saved query: dp</h2>" in text
    saved = os.environ.get("SEMSEARCH_SAVE_MAIL_HTML")
    if saved:
        Path(saved).write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--mail-to", "me@example.org\r\nBcc: other@example.org"], "bad --mail-to address"),
        (["--mail-to", ""], "bad --mail-to address"),
        (["--mail-to", "me@example.org", "--smtp-from", "me@example.org\nBcc: other@example.org"], "bad sender"),
    ],
)
def test_a_bad_address_is_one_line_before_the_digest(
    index: Path, tmp_path: Path, args: list[str], fragment: str
) -> None:
    """A line break in an address (header injection, or a pasted address) fails as one line, bookmark kept."""
    result = run(index, ["digest", *args, "--smtp-host", "127.0.0.1", "--smtp-port", "9"], clean_env(tmp_path))
    assert result.exit_code == 2 and fragment in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (index / BOOKMARKS_FILE).exists()


def test_an_out_file_that_cannot_be_written_fails_before_mailing(
    smtp: tuple[Inbox, int, str], cert: tuple[Path, Path], index: Path, tmp_path: Path
) -> None:
    """--mail-to with --out: a path that cannot be written is one line naming it; nothing is mailed (the bookmark
    stays, so a mailed digest is never mailed twice because its file failed afterwards)."""
    inbox, port, _ = smtp
    out = tmp_path / "no" / "such" / "digest.md"
    args = [*mail_args(port, "starttls", cert), "--out", str(out)]
    result = run(index, args, clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD=PASSWORD))
    assert result.exit_code == 2 and f"cannot write {out}" in result.output, result.output
    assert ".tmp" not in result.output and not inbox.messages and not (index / BOOKMARKS_FILE).exists()
    written = tmp_path / "digest.md"
    done = run(
        index,
        [*mail_args(port, "starttls", cert), "--out", str(written)],
        clean_env(tmp_path, SEMSEARCH_SMTP_PASSWORD=PASSWORD),
    )
    assert done.exit_code == 0, done.output
    assert written.read_text(encoding="utf-8").startswith("# semsearch digest: daily") and len(inbox.messages) == 1

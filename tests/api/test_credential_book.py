"""The node credential book (grid/api/credential_book.py, issue 22): every credential issued is
listed without a secret, a revocation is durable and refuses the credential at its next use, a
host-wide revocation also refuses credentials the book never saw (minted before it existed), and
an unreadable book is moved aside with a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grid.api.auth import Credentials, NodeIdentity
from grid.api.credential_book import BOOK_NAME, CredentialBook
from grid.fleet.errors import GridError

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
KEYS = Credentials(operator_token="o" * 32, node_signing_key="s" * 32)


def refused(book: CredentialBook, identity: NodeIdentity) -> str | None:
    try:
        book.check(identity, NOW + 10)
    except GridError as err:
        assert err.details["http_status"] == 403
        return err.code
    return None


def test_issued_credentials_are_listed_without_secrets_and_revoked_durably(
    tmp_path: Path,
) -> None:
    path = tmp_path / BOOK_NAME
    book = CredentialBook(path)
    first = book.issue(KEYS, "h1", now=NOW, ttl_s=3600.0, source="token_write")
    second = book.issue(KEYS, "h1", now=NOW + 1, ttl_s=3600.0, source="enrollment")
    rows = book.listing(NOW + 2, "h1")
    assert [(r.credential_id, r.source, r.state) for r in rows] == [
        (first.credential_id, "token_write", "valid"),
        (second.credential_id, "enrollment", "valid"),
    ]
    text = path.read_text()
    for secret in (first.token, first.reply_key, KEYS.node_signing_key):
        assert secret not in text and secret not in json.dumps(
            [r.model_dump(mode="json") for r in rows]
        )
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert book.revoke(credential_id=first.credential_id, host_id=None, now=NOW + 3) == [
        first.credential_id
    ]
    again = CredentialBook(path)  # a controller restart keeps the revocation
    one = KEYS.verify_node_token(first.token, now=NOW + 10)
    other = KEYS.verify_node_token(second.token, now=NOW + 10)
    assert refused(again, one) == "revoked_node_credential"
    assert refused(again, other) is None
    assert {r.credential_id: r.state for r in again.listing(NOW + 4)} == {
        first.credential_id: "revoked",
        second.credential_id: "valid",
    }
    assert again.listing(NOW + 7200)[1].state == "expired"


def test_a_credential_minted_before_the_book_is_recorded_and_revocable_by_host(
    tmp_path: Path,
) -> None:
    book = CredentialBook(tmp_path / BOOK_NAME)
    token, _exp = KEYS.mint_node_token("h2", now=NOW, ttl_s=3600.0)  # never through the book
    legacy = KEYS.verify_node_token(token, now=NOW)
    legacy = NodeIdentity(legacy.host_id, legacy.expires_at, legacy.reply_key, "", None)
    assert refused(book, legacy) is None  # no id, no issue time: an older credential
    seen = KEYS.verify_node_token(token, now=NOW)
    assert refused(book, seen) is None
    assert [r.source for r in book.listing(NOW, "h2")] == ["seen"]
    book.revoke(credential_id=None, host_id="h2", now=NOW + 5)
    assert refused(book, legacy) == "revoked_node_credential"  # issued before the cutoff
    assert refused(book, seen) == "revoked_node_credential"
    fresh = book.issue(KEYS, "h2", now=NOW + 6, ttl_s=3600.0, source="token_write")
    assert refused(book, KEYS.verify_node_token(fresh.token, now=NOW + 10)) is None


def test_an_unknown_id_is_refused_with_the_listing_command(tmp_path: Path) -> None:
    book = CredentialBook(tmp_path / BOOK_NAME)
    with pytest.raises(GridError) as err:
        book.revoke(credential_id="nope", host_id=None, now=NOW)
    assert err.value.code == "unknown_node_credential"
    assert err.value.next_command == "grid allocator node-credential list"


@pytest.mark.parametrize(
    "content",
    ["[" * 100_000 + "]" * 100_000, "{not json", '{"schema_version": 1, "credentials": [1]}'],
)
def test_an_unreadable_book_is_moved_aside_with_a_warning(tmp_path: Path, content: str) -> None:
    path = tmp_path / BOOK_NAME
    path.write_text(content)
    book = CredentialBook(path)
    assert "moved to node-credentials.json.corrupt-1" in book.warning
    assert (tmp_path / f"{BOOK_NAME}.corrupt-1").read_text() == content
    assert book.listing(NOW) == []
    book.issue(KEYS, "h3", now=NOW, ttl_s=60.0, source="token_write")
    assert len(CredentialBook(path).listing(NOW)) == 1

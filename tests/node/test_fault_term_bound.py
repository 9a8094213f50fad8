"""Issue 15, defect 3 (second guard): a controller term may jump only by a bounded amount, so
a reply cannot lock the real controller out by handing the node term 10^12. Issue 22: the bound
holds per reply (several commands of one reply cannot add up), and every credential path
carries the reply key: a node without one does not start."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.fleet.wire import reply_key_path
from grid.node.agent.admission import Authority, admit, admit_batch
from grid.node.agent.config import NodeConfig
from grid.node.agent.credential import parse_credential
from grid.node.agent.fence import MAX_TERM_STEP
from grid.node.agent.main import build_agent, read_credential
from tests.node.agent_helpers import HOST, command

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("highest", [0, 5, 23])
def test_a_term_beyond_the_bound_is_refused_and_the_fence_unchanged(highest: int) -> None:
    authority = Authority(highest_term=highest, controller_id="ctl-1")
    for term in (highest + MAX_TERM_STEP + 1, 10**12):
        verdict, after = admit(
            command("warm", term=term, controller_id="evil"),
            host_id=HOST,
            authority=authority,
            ttl_remaining_s=10.0,
        )
        assert not verdict.accepted and verdict.code == "term_jump_too_large"
        assert after == authority
    # The real controller's next term (and any within the bound) is still accepted.
    for term in (highest + 1, highest + MAX_TERM_STEP):
        verdict, after = admit(
            command("warm", term=term, controller_id="ctl-2"),
            host_id=HOST,
            authority=authority,
            ttl_remaining_s=10.0,
        )
        assert verdict.accepted and after.highest_term == term


def test_the_bound_is_large_enough_for_many_controller_restarts() -> None:
    assert 1_000 <= MAX_TERM_STEP < 10**9


def test_the_bound_holds_per_reply_not_per_command() -> None:
    """Issue 22 finding 5: three commands of one reply moved a node from term 4 to 30,004.
    Every command of a reply is measured from the fence the reply found."""
    authority = Authority(highest_term=4, controller_id="ctl-1")
    steps = [command("warm", term=4 + k * MAX_TERM_STEP, controller_id="evil") for k in (1, 2, 3)]
    for index, raw in enumerate(steps):
        raw["action_id"] = f"a{index}"
    verdicts, after = admit_batch(steps, host_id=HOST, authority=authority, ttl_remaining_s=10.0)
    assert [v.accepted for _c, v in verdicts] == [True, False, False]
    assert [v.code for _c, v in verdicts][1:] == ["term_jump_too_large"] * 2
    assert after.highest_term == 4 + MAX_TERM_STEP


def test_the_agent_verifies_replies_with_the_key_in_its_credential_file(tmp_path: Path) -> None:
    token = tmp_path / "node.token"
    token.write_text("gan1.payload.sig\nreply-key k3y\n", encoding="utf-8")  # `token write`
    config = NodeConfig(host_id="h1", grid_url="http://127.0.0.1:1", token_file=str(token))
    assert read_credential(config, from_stdin=False) == ("gan1.payload.sig", "k3y")
    agent = build_agent(config, tmp_path / "state", *read_credential(config, from_stdin=False))
    try:
        assert agent.deps.client.reply_key == "k3y"
    finally:
        agent.deps.client.close()
    # The key beside the file (as earlier versions wrote it) is read too.
    token.write_text("gan1.payload.sig\n", encoding="utf-8")
    reply_key_path(token).write_text("side\n", encoding="utf-8")
    assert read_credential(config, from_stdin=False) == ("gan1.payload.sig", "side")
    # One line (an environment variable) carries both as well.
    assert parse_credential("gan1.a.b reply-key k") == ("gan1.a.b", "k")
    assert parse_credential("gan1.a.b\nreply-key k\n") == ("gan1.a.b", "k")


def test_a_credential_without_a_reply_key_does_not_start_the_agent(tmp_path: Path) -> None:
    """Issue 22 finding 5: replies were verified only when the key file sat beside the token."""
    token = tmp_path / "node.token"
    token.write_text("gan1.payload.sig\n", encoding="utf-8")
    config = NodeConfig(host_id="h1", grid_url="http://127.0.0.1:1", token_file=str(token))
    with pytest.raises(GridError) as refusal:
        read_credential(config, from_stdin=False)
    assert refusal.value.code == "no_reply_key"
    assert refusal.value.next_command == "grid allocator token write FILE --host-id ID"


def test_a_credential_file_is_reused_only_for_its_host_with_its_key_and_time_left(
    tmp_path: Path,
) -> None:
    """Issue 22: every agent start minted another 30-day credential; a file is now reused when
    it names the host, carries its reply key, and lives past a day."""
    import base64
    import json

    from grid.node.agent.credential import REUSE_MARGIN_S, credential_text, reusable

    def token(host: str, expires: float) -> str:
        claims = json.dumps({"h": host, "exp": expires, "n": "abcd"}).encode()
        return "gan1." + base64.urlsafe_b64encode(claims).decode().rstrip("=") + ".sig"

    now = 1_800_000_000.0
    path = tmp_path / "node.token"
    good = token("h1", now + 30 * 86_400)
    cases = [
        (credential_text(good, "k"), "h1", good),
        (credential_text(good, "k"), "h2", None),  # another host's
        (good + "\n", "h1", None),  # no reply key
        (credential_text(token("h1", now + REUSE_MARGIN_S - 1), "k"), "h1", None),  # expiring
        ("junk\n", "h1", None),
    ]
    for text, host, expected in cases:
        path.write_text(text)
        assert reusable(path, host, now) == expected, (text, host)
    path.unlink()
    assert reusable(path, "h1", now) is None

"""Issue 15, defect 3 (second guard): a controller term may jump only by a bounded amount, so
an unsigned reply (an older credential without a reply key) cannot lock the real controller out
by handing the node term 10^12."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.wire import reply_key_path
from grid.node.agent.admission import Authority, admit
from grid.node.agent.config import NodeConfig
from grid.node.agent.fence import MAX_TERM_STEP
from grid.node.agent.main import build_agent, credential_lines, read_reply_key, read_token
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


def test_the_agent_verifies_replies_with_the_key_in_its_credential_file(tmp_path: Path) -> None:
    token = tmp_path / "node.token"
    token.write_text("gan1.payload.sig\n", encoding="utf-8")
    reply_key_path(token).write_text("k3y\n", encoding="utf-8")  # as `token write` leaves it
    config = NodeConfig(host_id="h1", grid_url="http://127.0.0.1:1", token_file=str(token))
    assert read_token(config, from_stdin=False) == "gan1.payload.sig"
    agent = build_agent(config, tmp_path / "state", read_token(config, from_stdin=False))
    try:
        assert agent.deps.client.reply_key == "k3y"
    finally:
        agent.deps.client.close()
    reply_key_path(token).unlink()  # an older credential: no key, replies only bounded
    assert read_reply_key(config) is None
    assert credential_lines("gan1.a.b\nreply-key k\n") == ("gan1.a.b", "k")

"""A profile's chat template reaches llama-server's argv (issue 14, item 8): unit checks of the
pieces; tests/e2e/test_chat_templates.py runs the chain on real llama.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from grid.fleet.models import ModelProfile
from grid.fleet.wire import WireCommand
from grid.node.engines.launch import LlamaCppConfig, build_argv

pytestmark = [pytest.mark.unit, pytest.mark.smoke]


def _argv(template: str | None) -> list[str]:
    config = LlamaCppConfig(state_dir=Path("/tmp/x"))
    return build_argv(
        config, Path("/bin/llama-server"), "m", Path("/w/m.gguf"), 39100, Path("/k"), template
    )


def test_argv_names_the_template_only_when_given() -> None:
    with_template = _argv("gemma")
    i = with_template.index("--chat-template")
    assert with_template[i + 1] == "gemma"
    assert "--chat-template" not in _argv(None)
    assert [a for a in with_template if a != "--chat-template" and a != "gemma"] == _argv(None)


@pytest.mark.parametrize("bad", ["-rf", "a b", "", "x" * 65, "{% jinja %}"])
def test_a_template_is_a_plain_name(bad: str) -> None:
    with pytest.raises(ValidationError):
        ModelProfile(model_id="m", memory_mb=1, chat_template=bad)
    with pytest.raises(ValidationError):
        WireCommand(action_id="a", kind="warm", model_id="m", chat_template=bad)


def test_names_llama_cpp_knows_are_accepted() -> None:
    for name in ("gemma", "chatml", "llama3", "phi3", "deepseek2", "mistral-v7"):
        assert ModelProfile(model_id="m", memory_mb=1, chat_template=name).chat_template == name
    assert ModelProfile(model_id="m", memory_mb=1).chat_template is None

"""The newcomer test (issue 14): every command in README.md's `sh` blocks, run exactly as
written, in order, the way a new user copies them, with a fresh HOME and the documented folder
variables (GRID_STATE_DIR, GRID_NODE_DIR, GRID_TEST_DIR) pointing into a temporary folder.

Each command must exit 0 and print its key line. A few are not run, each for a stated reason
(SKIPPED); a README command that is neither run nor skipped with a reason fails the test, so a
new README line is covered the day it is written. Real processes throughout: the controller of
`grid up`, a node agent with real llama.cpp, the logical fleet of `grid test`, curl.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.engine]

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
COMMAND_TIMEOUT_S = 400

# Not run, and why (matched as a prefix of the command).
SKIPPED = {
    "scripts/install.sh": "installs the environment this test runs in (minutes of compiling)",
    "scripts/test.sh -m smoke": "a test suite inside a test would tie this test to every other "
    "test; CI runs the suite, and tests/cli/test_smoke_selection.py checks the selection",
    "scripts/test.sh": "the full suite, which contains this test",
    # README "Several machines": they need a second machine at 10.0.0.x; tests/e2e/test_netns.py
    # runs the same commands between two network namespaces it creates.
    "grid up --host 10.0.0.5": "needs a second machine (tests/e2e/test_netns.py)",
    "grid allocator enroll --host-id worker-01": "needs a second machine (test_netns.py)",
    "grid allocator join https://10.0.0.5": "needs a second machine (tests/e2e/test_netns.py)",
    "grid models": "needs the second machine's node (tests/e2e/test_netns.py)",
    "grid node install-service": "needs a joined node; tests/cli/test_install_service.py writes "
    "and runs the unit's command",
    "grid chat -m smollm2-135m": "needs a second machine (tests/e2e/test_netns.py)",
    ".venv/bin/python bench/": "benchmarks print figures for minutes and assert nothing",
    # README "The dashboard": actions on a running `grid up` fleet with a host laptop-ana;
    # tests/ui/test_ui_service.py and the browser tests run the same routes on real fleets.
    "'TOKEN=": "reads a running controller's config (tests/ui/test_ui_service.py)",
    "curl -X PUT http://127.0.0.1:22101": "needs a fleet with laptop-ana (tests/ui)",
    "curl -X DELETE http://127.0.0.1:22101": "needs a fleet with laptop-ana (tests/ui)",
    "curl -X PATCH http://127.0.0.1:22101": "needs a running controller (tests/ui)",
    ".venv/bin/grid allocator snapshot": "needs a running controller "
    "(tests/cli/test_desired_reasons.py)",
    ".venv/bin/jupyter nbconvert": "executes the notebook (tests/notebooks runs it)",
    ".venv/bin/grid test graduate": "a minute of all four strategies on six fleets "
    "(tests/lab/test_scenario_gates.py checks the gates)",
    ".venv/bin/grid test demo": "its own logical fleet on real llama.cpp (tests/e2e/test_demo.py)",
}

# What each command must print (matched as a prefix of the command; first match wins).
EXPECT = [
    (".venv/bin/grid plan models/fleets/fleet-64.json --unmet-only", "Unmet replicas"),
    (".venv/bin/grid plan models/fleets/office.json --json", '"assignments"'),
    (".venv/bin/grid plan", "Plan: "),
    (".venv/bin/grid validate", "OK models/fleets/office.json"),
    (".venv/bin/grid lab generate-fleet", "wrote /tmp/fleet.json: 256 hosts, 96 models"),
    (".venv/bin/grid reconcile", "Actions"),
    (".venv/bin/grid up", "Started controller (pid"),
    (".venv/bin/grid allocator status", "mode "),
    (".venv/bin/grid allocator apply models/catalog.toml --dry-run", "Dry run: 8 changes"),
    (".venv/bin/grid allocator model set smollm2-135m", "Saved profile smollm2-135m"),
    (".venv/bin/grid allocator model list", "Model profiles (1)"),
    (".venv/bin/grid allocator mode automatic", "-> automatic"),
    (".venv/bin/grid allocator node start", "The local controller wrote a credential"),
    (".venv/bin/grid allocator node status", "Node agent: running"),
    (".venv/bin/grid down", "Stopped the controller."),
    (".venv/bin/grid test start --machines 2", "smollm2-135m is READY on"),
    (".venv/bin/grid test status", "Controller http://127.0.0.1:22100: running"),
    ("curl http://127.0.0.1:22100/v1/models", '"smollm2-135m"'),
    ("curl http://127.0.0.1:22100/v1/chat/completions", '"choices"'),
    (".venv/bin/grid test stop", "no process is left"),
    (".venv/bin/grid capacity models/fleets/office.json --drill", "drill: if this host failed"),
    (".venv/bin/grid capacity models/fleets/fleet-64.json", '"added"'),
    (".venv/bin/grid capacity", "OPTIMAL"),
    (".venv/bin/grid test scenario --machines 4", "safety violations 0"),
    (".venv/bin/grid lab oracle models/oracle/example.json", "OPTIMAL"),
]


def readme_commands(text: str) -> list[str]:
    """Every command line of the ```sh blocks, continuation lines joined, comments dropped."""
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
    return commands


def _skip_reason(command: str) -> str | None:
    return next((why for prefix, why in SKIPPED.items() if command.startswith(prefix)), None)


def _expected(command: str) -> str | None:
    return next((text for prefix, text in EXPECT if command.startswith(prefix)), None)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_every_readme_command_is_run_or_skipped_with_a_reason() -> None:
    commands = readme_commands(README.read_text())
    assert len(commands) > 25
    for command in commands:
        assert _skip_reason(command) or _expected(command), f"README command not covered: {command}"


def test_readme_commands_as_written(tmp_path: Path) -> None:
    busy = [p for p in (22100, 22101) if not _port_free(p)]
    if busy:
        pytest.skip(f"the README's ports {busy} are in use on this machine")
    if shutil.which("curl") is None:
        pytest.skip("the README's chat examples use curl, which this machine lacks")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    env.update(
        HOME=str(home),
        GRID_STATE_DIR=str(tmp_path / "allocator"),
        GRID_NODE_DIR=str(tmp_path / "node"),
        GRID_TEST_DIR=str(tmp_path / "test"),
        COLUMNS="120",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    transcript: list[str] = []
    try:
        for command in readme_commands(README.read_text()):
            if _skip_reason(command):
                transcript.append(f"$ {command}\n(skipped: {_skip_reason(command)})")
                continue
            done = subprocess.run(
                shlex.split(command),
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
            )
            output = done.stdout + done.stderr
            transcript.append(f"$ {command}\n{output.strip()[:1500]}")
            assert done.returncode == 0, f"{command} exited {done.returncode}:\n{output[-3000:]}"
            expected = _expected(command)
            assert expected is not None and expected in output, f"{command}:\n{output[-3000:]}"
            assert "Traceback" not in output, command
    finally:
        (tmp_path / "transcript.txt").write_text("\n\n".join(transcript) + "\n")
        # Whatever a failed step left running is stopped the documented way.
        for cleanup in (["test", "stop"], ["down"]):
            subprocess.run(
                [str(REPO / ".venv" / "bin" / "grid"), *cleanup],
                cwd=REPO,
                env=env,
                capture_output=True,
                timeout=180,
            )

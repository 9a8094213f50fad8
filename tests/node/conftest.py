from tests.node.engine_fixtures import llama_server, make_supervisor, smollm2
from tests.node.processes import janitor

__all__ = ["janitor", "llama_server", "make_supervisor", "smollm2"]

"""The credentials a controller cluster shares, kept under `P/cluster/secrets` (create-only).

Controllers on one store are one cluster: a node credential minted by one verifies on all, and
any of them signs replies the node trusts. The first controller to start stores its operator
token and node-signing key; every later one adopts them (grid/api/ha_setup.py).
"""

from __future__ import annotations

import json

from grid.fleet import GridError
from grid.runtime.controller.etcd.client import EtcdClient, cmp_absent, op_get, op_put


def cluster_secrets(client: EtcdClient, prefix: str, proposal: tuple[str, str]) -> tuple[str, str]:
    """The cluster's (operator token, node-signing key): `proposal` if this is the first
    controller, else the ones the first one stored."""
    key = f"{prefix}/cluster/secrets"
    value = json.dumps({"operator_token": proposal[0], "node_signing_key": proposal[1]})
    result = client.txn([cmp_absent(key)], [op_put(key, value)], [op_get(key)])
    if result.succeeded:
        return proposal
    try:
        stored = json.loads(result.ranges()[0][0].value)
        return str(stored["operator_token"]), str(stored["node_signing_key"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise GridError(
            "cluster_secrets_unreadable",
            f"{key} in etcd does not hold the cluster's credentials",
            fix=f"remove the key (etcdctl del {key}) and start the first controller again",
            next_command="grid up --help",
        ) from None

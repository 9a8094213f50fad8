"""Controller state and leadership on etcd (`grid up --store etcd://...`).

`client` speaks etcd's v3 JSON gateway; `lease` is the mutation lease (an etcd lease and a
CAS term counter); `store` the fenced, chunked state document; `mirror` the live view a
standby follows; `ha` the controller and service that lead or stand by.
"""

from grid.runtime.controller.etcd.client import EtcdClient, EtcdTarget, parse_store_url
from grid.runtime.controller.etcd.cluster import cluster_secrets
from grid.runtime.controller.etcd.ha import HAController, HAService, not_leader
from grid.runtime.controller.etcd.lease import EtcdLease, Fence, LeaderView, next_term
from grid.runtime.controller.etcd.mirror import Mirror
from grid.runtime.controller.etcd.store import EtcdStore, split_document

__all__ = [
    "EtcdClient",
    "EtcdLease",
    "EtcdStore",
    "EtcdTarget",
    "Fence",
    "HAController",
    "HAService",
    "LeaderView",
    "Mirror",
    "cluster_secrets",
    "next_term",
    "not_leader",
    "parse_store_url",
    "split_document",
]

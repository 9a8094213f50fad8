"""Live membership: which node records belong to which physical host, and each host's snapshot.

Membership is deliberately not durable: after a restart every host must re-register before the
controller trusts its view (see the membership grace in `core.py`). A node record is bound to the
host that first registered it with a valid credential, so a credential for one host cannot squat
another host's record, and a heartbeat is accepted only from the bound host.

What a host reports that would steer the rest of the fleet is judged here with the rules of
`trust.py`: its routes (only those the `RouteJudge` accepts are kept, and only they prove a READY
row), and its fence (a term counts toward the foreign floor only with a valid proof).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grid.fleet import DEFAULT_ENGINE_ADDRESS, GridError, Host, HostState
from grid.runtime.controller.trust import FenceReport, RouteJudge, foreign_floor
from grid.runtime.controller.wire import (
    NodeUpdate,
    WireAllocator,
    WireLoad,
    WireResources,
    WireRoute,
    build_host,
    safety_signature,
)

MAX_NODE_IDS_PER_HOST = 16
AGENT_SUFFIX = ".allocator"  # the node agent's default record id is "<host_id>.allocator"


@dataclass
class HostEntry:
    host_id: str
    host: Host
    resources: WireResources
    allocator: WireAllocator | None
    received_at: float
    registered_at: float
    node_ids: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    load: WireLoad | None = None
    role: str | None = None
    # The proxy's view: live child routes and the private engine key (memory only, never output).
    routes: list[WireRoute] = field(default_factory=list)
    # When an envelope last carried `routes`: each route's own lease starts there.
    routes_received_at: float = 0.0
    engine_key: str | None = field(default=None, repr=False)
    # The node's authority fence as it reports it: the highest term it accepted, and from whom.
    fence_term: int = 0
    fence_controller: str = ""
    fence_proven: bool = False  # the report came with a valid proof of that term (trust.py)
    # Routes the judge refused in the last envelope: model id -> reason code (trust.ROUTE_TEXT).
    refused_routes: dict[str, str] = field(default_factory=dict)
    # Where the router dials this host's routes (its advertised address; older nodes: loopback).
    address: str = DEFAULT_ENGINE_ADDRESS
    # The host and problems as its last update reported them, before the reachability overlay.
    reported: tuple[Host, list[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.reported = (self.host, list(self.problems))


@dataclass(frozen=True)
class ApplyResult:
    host_id: str
    safety_changed: bool
    refused_routes: dict[str, str] = field(default_factory=dict)  # model id -> reason code


class Registry:
    def __init__(self) -> None:
        self.hosts: dict[str, HostEntry] = {}
        self.node_to_host: dict[str, str] = {}
        # Set by the API before each update (grid.api.reachability): a host whose advertised
        # engine address does not answer is unhealthy; these detailed reasons are shown to
        # operators only.
        self.unreachable: dict[str, list[str]] = {}

    def apply(
        self,
        node_id: str,
        auth_host: str,
        update: NodeUpdate,
        now: float,
        judge: RouteJudge | None = None,
    ) -> ApplyResult:
        """Fold one registration or heartbeat received at `now` from `auth_host`'s credential.

        `judge` decides which reported routes are kept (None: none is, nothing vouches for
        them) and checks the fence's proof."""
        host_id = auth_host
        entry, resources = self._admit(node_id, auth_host, update)
        allocator = update.allocator or (entry.allocator if entry is not None else None)
        engine_key = entry.engine_key if entry is not None else None
        refused: dict[str, str] = dict(entry.refused_routes) if entry is not None else {}
        if update.allocator is not None:
            engine_key = update.allocator.engine_key
            kept, refused = _judged_routes(host_id, update.allocator.routes, judge)
            allocator = update.allocator.model_copy(update={"engine_key": None, "routes": kept})
        role = update.role or (entry.role if entry is not None else None)
        # An older Grid node without the allocator envelope is inventory only.
        manual = role not in (None, "allocator") and allocator is None
        host, problems = build_host(host_id, resources, allocator, now=now, manual=manual)
        if allocator is not None:  # what the node itself reports wrong (e.g. unwritable state)
            problems += [f"node: {p[:300]}" for p in allocator.problems]
        before = safety_signature(entry.host) if entry is not None else None
        if entry is None:
            entry = HostEntry(
                host_id=host_id,
                host=host,
                resources=resources,
                allocator=allocator,
                received_at=now,
                registered_at=now,
            )
            self.hosts[host_id] = entry
        entry.reported = (host, problems)
        self._overlay(entry)
        _store_view(entry, resources, allocator, engine_key)
        if update.allocator is not None:
            _store_fence(entry, update.allocator, judge, refused, now)
        entry.received_at = now
        entry.load = update.load or entry.load
        entry.role = role
        entry.node_ids.add(node_id)
        self.node_to_host[node_id] = host_id
        return ApplyResult(
            host_id=host_id,
            safety_changed=before != safety_signature(entry.host),
            refused_routes=refused if update.allocator is not None else {},
        )

    def _admit(
        self, node_id: str, auth_host: str, update: NodeUpdate
    ) -> tuple[HostEntry | None, WireResources]:
        """The host's entry (None: first registration) and the resources to fold, or the
        refusal: `wrong_host`, `not_registered` or `too_many_node_records`."""
        if update.host_id is not None and update.host_id != auth_host:
            raise GridError(
                "wrong_host",
                "the node credential is not valid for the host_id in this registration",
                fix="use the credential written for this host (grid allocator token write)",
                next_command="grid allocator token write FILE --host-id ID",
            )
        self._claim(node_id, auth_host)
        entry = self.hosts.get(auth_host)
        resources = update.resources or (entry.resources if entry is not None else None)
        if resources is None:
            raise GridError(
                "not_registered",
                "the host is not registered with this controller",
                fix="send a registration with host_id and resources first",
            )
        if (
            entry is not None
            and node_id not in entry.node_ids
            and len(entry.node_ids) >= MAX_NODE_IDS_PER_HOST
        ):
            raise GridError(
                "too_many_node_records",
                f"the host already has {MAX_NODE_IDS_PER_HOST} node records",
                fix="reuse one stable node id per engine record",
            )
        return entry, resources

    def _claim(self, node_id: str, auth_host: str) -> None:
        """Bind `node_id` to `auth_host` or refuse it (`wrong_host`).

        A record named in a host's own namespace (`<host_id>` or `<host_id>.<role>`, the agent's
        default) belongs to that host whatever registered it first, so a squatter can never lock
        the real host out (membership is not durable: after a restart the first caller would
        otherwise win); another host's credential may not claim such a name. Any other name is
        bound to the first host that registers it.
        """
        owner = _namespace_owner(node_id, auth_host, self.hosts)
        if owner is not None and owner != auth_host:
            raise _wrong_host()
        bound = self.node_to_host.get(node_id)
        if bound is None or bound == auth_host:
            return
        if owner != auth_host:
            raise _wrong_host()
        squatter = self.hosts.get(bound)
        if squatter is not None:
            squatter.node_ids.discard(node_id)
        del self.node_to_host[node_id]

    def _overlay(self, entry: HostEntry) -> None:
        """The host as reported, made unhealthy while its advertised routes do not answer
        (never routed to, never given new work: docs/addressing.md). Which ports fail is an
        operator's detail (`unreachable`, shown with the operator capability); the public line
        says only how many, so status is no port scanner."""
        host, problems = entry.reported
        unreachable = self.unreachable.get(entry.host_id, [])
        if unreachable:
            problems = [
                *problems,
                f"address_unreachable: {len(unreachable)} advertised engine route(s) of this "
                "host do not answer the controller; operators see which in "
                "`grid allocator status --json`",
            ]
            host = host.model_copy(update={"state": HostState.UNHEALTHY})
        entry.host, entry.problems = host, list(problems)

    def set_unreachable(self, host_id: str, problems: list[str]) -> bool:
        """What the background probes found for a host, applied at once; True when that
        changed what destructive safety reads (the caller bumps the safety revision)."""
        if problems == self.unreachable.get(host_id, []):
            return False
        if problems:
            self.unreachable[host_id] = list(problems)
        else:
            self.unreachable.pop(host_id, None)
        entry = self.hosts.get(host_id)
        if entry is None:
            return False
        before = safety_signature(entry.host)
        self._overlay(entry)
        return before != safety_signature(entry.host)

    def fences(self) -> list[FenceReport]:
        return [
            FenceReport(h, e.fence_term, e.fence_controller, e.fence_proven)
            for h, e in sorted(self.hosts.items())
        ]

    def foreign_term(self, controller_id: str) -> tuple[int, str]:
        """The highest *proven* term a host reports accepting from another controller, and that
        host (0 and "" when none): a controller that lost its state must take a higher term.
        An unproven report never counts (trust.py)."""
        return foreign_floor(self.fences(), controller_id)

    def forget_routes(self, host_id: str) -> bool:
        """Drop a host's routes and engine key at once (its credential was revoked): nothing is
        routed to it until a valid credential reports them again."""
        entry = self.hosts.get(host_id)
        if entry is None or not entry.routes:
            return False
        entry.routes = []
        entry.engine_key = None
        entry.host = entry.host.model_copy(update={"routes": []})
        return True

    def snapshot_hosts(self) -> list[Host]:
        """The hosts, shared rather than copied: `apply` replaces an entry's `Host` with a new
        one on every update and nothing mutates one in place, so a snapshot taken earlier keeps
        the facts it was taken with (a deep copy of every host cost ~0.13 s a tick at 1,000)."""
        return [self.hosts[h].host for h in sorted(self.hosts)]


def _judged_routes(
    host_id: str, routes: list[WireRoute], judge: RouteJudge | None
) -> tuple[list[WireRoute], dict[str, str]]:
    """The routes the judge accepts, and the refused ones' reason codes."""
    kept: list[WireRoute] = []
    refused: dict[str, str] = {}
    for route in routes:
        reason = (
            "route_not_commanded"
            if judge is None
            else judge.verdict(host_id, route.model_id, route.grant)
        )
        if reason:
            refused[route.model_id] = reason
        else:
            kept.append(route)
    return kept, refused


def _in_namespace(node_id: str, host_id: str) -> bool:
    return node_id == host_id or node_id.startswith(host_id + ".")


def _namespace_owner(node_id: str, auth_host: str, hosts: dict[str, HostEntry]) -> str | None:
    """The host whose namespace names `node_id`: the credential's own host first, else the
    longest registered host id that prefixes it, else the host part of `<host>.allocator`."""
    if _in_namespace(node_id, auth_host):
        return auth_host
    named = [h for h in hosts if _in_namespace(node_id, h)]
    if named:
        return max(named, key=len)
    if node_id.endswith(AGENT_SUFFIX) and len(node_id) > len(AGENT_SUFFIX):
        return node_id[: -len(AGENT_SUFFIX)]
    return None


def _wrong_host() -> GridError:
    return GridError(
        "wrong_host",
        "this node record belongs to another host",
        fix="register under a node id of your own host (by default <host_id>.allocator)",
    )


def _store_view(
    entry: HostEntry,
    resources: WireResources,
    allocator: WireAllocator | None,
    engine_key: str | None,
) -> None:
    """The proxy's view of the host: its resources, allocator envelope, routes, dial address
    and private engine key (memory only)."""
    entry.resources = resources
    entry.allocator = allocator
    entry.routes = list(allocator.routes) if allocator is not None else []
    advertised = allocator.advertise_address if allocator is not None else None
    entry.address = advertised or DEFAULT_ENGINE_ADDRESS
    entry.engine_key = engine_key


def _store_fence(
    entry: HostEntry,
    reported: WireAllocator,
    judge: RouteJudge | None,
    refused: dict[str, str],
    now: float,
) -> None:
    """What a fresh allocator envelope says beyond its routes: when they were received, the
    node's fence (proven only with the judge's attestor) and the routes the judge refused."""
    entry.routes_received_at = now
    entry.fence_term = reported.highest_term
    entry.fence_controller = reported.controller_id
    entry.fence_proven = judge is not None and judge.attestor.proves_term(
        reported.highest_term, reported.controller_id, reported.term_proof
    )
    entry.refused_routes = refused

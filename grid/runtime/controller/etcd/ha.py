"""Several controllers on one etcd store: one leads, the others stand by.

`HAController` is the controller that acts only while its etcd lease is valid: a standby's
tick does nothing, a command poll returns nothing, and an acknowledgement it cannot make
durable is answered with an error (`not_leader`, `state_write_failed`), never as applied, so
the node keeps the receipt and sends it again to the leader.

`HAService` owns the loop (every `step_s`):
- one read of the leader key, the term and the state manifest's revision;
- the leader renews its lease when due, ticks (periodically and after inputs, as the plain
  service does) and publishes its live view (`mirror.py`); a failed renewal or a fenced write
  makes it a standby;
- a standby takes over once no leader key exists (the previous holder's etcd lease expired),
  through `Controller.ensure_lease` under `EtcdLease.campaigning()` (the same term floor as
  the file lease); a new leader reloads the state unless etcd still holds exactly what it
  wrote itself; otherwise the standby follows the state (rebuilt at most every
  `refresh_s`) and the live view;
- when etcd cannot be reached or has no quorum, the controller drops to recommend mode in
  memory (it is restored once etcd answers and this controller leads again) with the warning
  `store_unavailable`; routing goes on with the last known routes.
The controller object is rebuilt from the store on a takeover and on a standby's refresh; the
membership it learned (its registry) is carried over.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from grid.fleet import GridError, Mode
from grid.runtime.controller.core import Controller
from grid.runtime.controller.etcd.client import EtcdClient, op_put
from grid.runtime.controller.etcd.lease import EtcdLease
from grid.runtime.controller.etcd.mirror import Mirror
from grid.runtime.controller.etcd.store import EtcdStore
from grid.runtime.controller.registry import Registry
from grid.runtime.controller.reports import NodeReply, TickReport
from grid.runtime.controller.service import DEBOUNCE_S, ControllerService
from grid.runtime.controller.wire import NodeUpdate

log = logging.getLogger("grid.controller")
STEP_S = 0.1
REFRESH_S = 1.0
PUBLISH_S = 1.0
STORE_WARNING = "store_unavailable"


def not_leader(leader_url: str | None) -> GridError:
    where = f"the leader is at {leader_url}" if leader_url else "no leader is elected yet"
    return GridError(
        "not_leader",
        f"this controller is a standby and does not act; {where}",
        fix=f"send it to the leader ({leader_url})" if leader_url else "retry in a few seconds",
        next_command="grid allocator status",
        details={"http_status": 503, "leader_url": leader_url},
    )


class HAController(Controller):
    def __init__(self, store: EtcdStore, *, lease: EtcdLease, **kwargs: Any) -> None:
        self.unsaved_acks: set[str] = set()
        self.etcd_lease = lease
        super().__init__(store, lease=lease, **kwargs)

    def leads(self, now: float) -> bool:
        return self.etcd_lease.valid(now)

    def save(self, now: float) -> None:
        super().save(now)
        self.unsaved_acks.clear()  # every receipt applied so far is in etcd now

    def tick(self, now: float) -> TickReport:
        if not self.leads(now):
            return TickReport(ok=False, at=now, revision=self.dirty_revision, error="standby")
        return super().tick(now)

    def ensure_success(self, revision: int, clock: Callable[[], float]) -> bool:
        if not self.leads(clock()):
            return False
        return super().ensure_success(revision, clock)

    def node_update(
        self, node_id: str, auth_host: str, update: NodeUpdate, now: float
    ) -> NodeReply:
        acks = {a.action_id for a in update.acknowledgements}
        if acks and not self.leads(now):
            # Keep the routes fresh, and leave the receipts with the node for the leader.
            super().node_update(
                node_id, auth_host, update.model_copy(update={"acknowledgements": []}), now
            )
            view = self.etcd_lease.view
            raise not_leader(view.url if view.controller_id != self.controller_id else None)
        if acks & self.unsaved_acks:
            self.save(now)  # a receipt answered before must be durable before it is again
        try:
            return super().node_update(node_id, auth_host, update, now)
        except GridError:
            self.unsaved_acks |= acks
            raise

    def _save_quietly(self, now: float, what: str) -> None:
        self.save(now)  # a receipt that is not durable is not answered (see node_update)


def carry_registry(source: Registry, target: Registry) -> None:
    target.hosts.update(source.hosts)
    target.node_to_host.update(source.node_to_host)
    target.unreachable.update(source.unreachable)


class HAService(ControllerService):
    def __init__(
        self,
        build: Callable[[float], HAController],
        *,
        lease: EtcdLease,
        store: EtcdStore,
        client: EtcdClient,
        clock: Callable[[], float] = time.time,
        step_s: float = STEP_S,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self.build = build
        self.lease = lease
        self.store = store
        self.client = client
        self.step_s = step_s
        self.refresh_s = refresh_s
        self.mirror = Mirror(client, lease.prefix)
        self._swap = threading.Lock()
        self._loaded_revision = 0
        self._last_refresh = 0.0
        self._last_publish = 0.0
        self._last_tick = 0.0
        self._resume_automatic = False
        self._store_ok_at = 0.0
        self._presence = 0
        super().__init__(build(clock()), clock=clock)
        self._loaded_revision = store.manifest_revision

    @property
    def ha(self) -> HAController:
        ctl = self.controller
        assert isinstance(ctl, HAController)
        return ctl

    # ------------------------------------------------------------------ the face
    def leads(self) -> bool:
        return self.ha.leads(self.clock())

    def leader_confirmed(self) -> bool:
        """Whether the last read of etcd is recent enough to trust its leader key."""
        return self.clock() - self._store_ok_at < max(2.0, 4 * self.step_s)

    def authority(self) -> dict[str, object]:
        return self.lease.authority(self.clock(), self.ha.max_term)

    def controller_urls(self) -> list[str]:
        """The advertised URLs of the controllers present in etcd (this one first)."""
        urls = [self.lease.url]
        try:
            for kv in self.client.get_prefix(f"{self.lease.prefix}/controllers/"):
                url = kv.value.decode("utf-8", "replace")
                if url and url not in urls:
                    urls.append(url)
        except GridError:
            pass
        return urls

    def ensure_tick(self, revision: int) -> bool:
        return self.ha.ensure_success(revision, self.clock)

    def stop(self) -> None:
        super().stop()  # releases the lease: a standby takes over at once
        if self._presence:
            with contextlib.suppress(GridError):
                self.client.revoke(self._presence)
        self.client.close()

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        while not self._stop.is_set():
            woken = self._wake.wait(timeout=self.step_s)
            if self._stop.is_set():
                return
            if woken:
                time.sleep(DEBOUNCE_S)
                self._wake.clear()
            try:
                self.step(self.clock(), woken=woken)
            except Exception:  # the loop must survive anything one pass does
                log.exception("controller HA step crashed")

    def step(self, now: float, *, woken: bool = False) -> None:
        ctl = self.ha
        try:
            (manifest,) = self.lease.observe_kv(self.store.manifest_key)
            self._store_ok_at = now
            self._store_back(ctl)
            self._keep_presence()
        except GridError as err:
            self._store_lost(ctl, err)
            return
        manifest_revision = manifest.mod_revision if manifest is not None else 0
        if ctl.leads(now):
            if not ctl.ensure_lease(now) and not ctl.leads(self.clock()):
                log.warning("controller %s lost the lease", ctl.controller_id)
                self._refresh(now, force=True)
                return
            if woken or now - self._last_tick >= ctl.config.periodic_interval_s:
                self._last_tick = now
                report = ctl.tick(now)
                if not report.ok:
                    log.warning("controller tick failed: %s", report.error)
            self._publish(ctl, now)
            return
        if not self.lease.view.controller_id:
            self._campaign(ctl, now, manifest_revision)
            return
        due = now - self._last_refresh >= self.refresh_s
        if manifest_revision != self._loaded_revision and due:
            self._refresh(now)
        if now - self._last_publish >= PUBLISH_S:
            self._last_publish = now
            self._follow()

    def _campaign(self, ctl: HAController, now: float, manifest_revision: int) -> None:
        with self.lease.campaigning():
            won = ctl.ensure_lease(now)
        if not won:
            return
        log.info("controller %s leads with term %s", ctl.controller_id, ctl.max_term)
        if manifest_revision == 0 or manifest_revision != self.store.written_revision:
            ctl = self._rebuild(now)  # etcd holds another leader's state: start from it
        ctl.ensure_lease(now)
        if self._resume_automatic:
            ctl.mode = Mode.AUTOMATIC
            self._resume_automatic = False
        try:
            ctl.save(now)  # the new term is durable before anything acts on it
        except GridError as err:
            ctl.warn(err.code, err.message)
        self.mirror.forget()
        self._last_tick = 0.0
        self.notify()

    def _refresh(self, now: float, *, force: bool = False) -> None:
        if force:
            self.mirror.reset_follow()
        self._rebuild(now)
        self._follow()

    def _follow(self) -> None:
        try:
            self.mirror.follow(self.ha)
        except GridError as err:  # etcd is unavailable: keep the last known view
            log.warning("live view not followed: %s", err.message)

    def _rebuild(self, now: float) -> HAController:
        old = self.ha
        fresh = self.build(now)
        if self.store.load_failed:  # etcd did not answer: keep what this controller knows
            fresh.close()
            return old
        self._resume_automatic = False  # the mode is etcd's now, as the leader last wrote it
        carry_registry(old.registry, fresh.registry)
        fresh.measured = old.measured
        fresh.plan_ready = self.notify
        fresh.state.last = old.state.last if not fresh.leads(now) else fresh.state.last
        fresh.publish_views()  # the carried registry and plan (views.py)
        with self._swap:
            self.controller = fresh
        old.close()
        self._loaded_revision = self.store.manifest_revision
        self._last_refresh = now
        return fresh

    def _publish(self, ctl: HAController, now: float) -> None:
        if now - self._last_publish < PUBLISH_S:
            return
        fence = self.lease.fence(now)
        if fence is None:
            return
        self._last_publish = now
        try:
            self.mirror.publish(ctl, self.store.fence_compare(fence), now)
        except GridError as err:
            log.warning("live view not published: %s", err.message)

    def _keep_presence(self) -> None:
        """`P/controllers/<id>` = this controller's URL, on its own etcd lease (the list that
        enrollment hands out)."""
        if self._presence and self.client.keepalive(self._presence) > 0:
            return
        self._presence, _ttl = self.client.grant(max(2, int(self.lease.ttl_s)))
        key = f"{self.lease.prefix}/controllers/{self.lease.controller_id}"
        self.client.txn([], [op_put(key, self.lease.url, self._presence)])

    def _store_lost(self, ctl: HAController, err: GridError) -> None:
        message = (
            f"etcd cannot be reached or has no quorum ({err.message}): mutations stop and the "
            "controller runs in recommend mode; routing goes on with the last known routes"
        )
        ctl.warn(STORE_WARNING, message)
        if ctl.mode is Mode.AUTOMATIC:
            self._resume_automatic = True
            ctl.mode = Mode.RECOMMEND
        if ctl.leads(self.clock()):
            ctl.ensure_lease(self.clock())  # a member with quorum may still renew it

    def _store_back(self, ctl: HAController) -> None:
        if ctl.state.warnings.pop(STORE_WARNING, None) is None:
            return
        if self._resume_automatic and ctl.leads(self.clock()):
            ctl.mode = Mode.AUTOMATIC
            self._resume_automatic = False

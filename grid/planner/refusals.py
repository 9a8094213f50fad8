"""Why each refused (model, host) pair is refused, stored per host shape (pure).

`problem.build_problem` refuses most pairs for reasons that do not depend on the host's ID:
every host of one *build shape* (problem.py: same runtimes, backends, tiers, tags, actuator,
cached weights, slot cap and admission, no residencies) refuses the same models for the same
reasons. A 10,000-host fleet has over a million refused pairs but a few dozen shapes, so the
table keeps one `{model_id: reasons}` dict per shape and one per individual host, shared by
reference, and answers the `Mapping[(model_id, host_id), reasons]` that explanations read.
Iteration is host by host (host-ID order), models in the problem's model order, exactly the
order in which the per-pair build inserted them. The reason lists are shared: never mutate.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

Key = tuple[str, str]


class RefusalTable(Mapping[Key, list[str]]):
    def __init__(self) -> None:
        self._by_host: dict[str, dict[str, list[str]]] = {}  # host order, model order inside
        self._size = 0

    def set_host(self, host_id: str, refused: dict[str, list[str]]) -> None:
        """The host's refused models (a dict that may be shared with other hosts)."""
        self._by_host[host_id] = refused
        self._size += len(refused)

    def __getitem__(self, key: Key) -> list[str]:
        found = self._by_host.get(key[1])
        if found is None:
            raise KeyError(key)
        return found[key[0]]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        found = self._by_host.get(key[1])
        return found is not None and key[0] in found

    def __iter__(self) -> Iterator[Key]:
        for host_id, refused in self._by_host.items():
            for model_id in refused:
                yield (model_id, host_id)

    def __len__(self) -> int:
        return self._size

    def of_host(self, host_id: str) -> Mapping[str, list[str]]:
        return self._by_host.get(host_id, {})

    def of_model(self, model_id: str) -> list[tuple[str, list[str]]]:
        """(host, reasons) for every host that refuses the model, by host ID."""
        return sorted((h, r[model_id]) for h, r in self._by_host.items() if model_id in r)

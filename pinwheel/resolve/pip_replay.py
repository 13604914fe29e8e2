"""The plain-pip replay of one wheel set (`Resolver.as_pip_would` runs one per set, in order): pip's
only-if-needed strategy over what the earlier sets installed."""
from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ..plan import Clash, Installed, Plan, Step, Unjudged

if TYPE_CHECKING:
    from .resolver import Resolver


class StepReplay:
    """One wheel set's `pip install`, only-if-needed, over what the earlier sets installed: what it chooses
    (`chosen`) and every requirement each package was asked for with (`constraints`). Clashes and failed
    lookups go to the lists the whole replay shares."""

    def __init__(self, resolver: "Resolver", plan: Plan, step: Step, installed: dict[str, Installed],
                 clashes: list[Clash], unjudged: list[Unjudged]):
        self.r, self.plan, self.step, self.installed = resolver, plan, step, installed
        self.clashes, self.unjudged = clashes, unjudged
        self.env = plan.target.marker_environment()
        explicit = resolver.step_packages(plan, step)
        self.pins = {p.name: p.version for p, _, _ in explicit if p.version}
        self.origin = {p.name: (source, p.why) for p, source, _ in explicit}
        self.chosen: dict[str, Installed] = {}
        self.constraints: dict[str, list[tuple[Requirement, str]]] = {}
        self.clash_at: dict[str, int] = {}  # package -> its entry in clashes, for this step
        self.unreadable: set[str] = set()
        self.queue: list[tuple[Requirement, str]] = []
        for p, source, path in explicit:
            if p.no_deps or source == "local":
                self.chosen[p.name] = Installed(p.name, p.version or "", step.name, source, True, (), p.why)
            else:
                self.queue.append((Requirement(p.requirement), "the manifest"))

    def run(self) -> None:
        while self.queue:
            req, via = self.queue.pop(0)
            name = canonicalize_name(req.name)
            chosen = self.chosen.get(name)
            if chosen and chosen.no_deps and chosen.step == self.step.name:
                continue  # installed with --no-deps in this very step: pip would not touch it
            self.constraints.setdefault(name, []).append((req, via))
            if name in self.unreadable:
                continue
            if name in self.clash_at:  # one more requirement takes part in a known clash
                self.clashes[self.clash_at[name]] = self._clash(name)
                continue
            self._install(req, name)

    def _install(self, req: Requirement, name: str) -> None:
        """What pip does with one more requirement of `name`: keep what is there, or choose a version and
        queue that version's own requirements."""
        wanted = self.constraints[name]
        spec = SpecifierSet(",".join(str(r.specifier) for r, _ in wanted if str(r.specifier)))
        current = self.chosen.get(name) or self.installed.get(name)
        extras = tuple(sorted(set(req.extras) | set(current.extras if current else ())))
        if current and spec.contains(current.version, prereleases=True):
            if set(req.extras) <= set(current.extras):
                return
            version = current.version
        else:
            version = self._pick(name, spec)
            if version is None:
                return
        source, why = self.origin.get(name, ("index", None))
        self.chosen[name] = Installed(name, version, self.step.name, source, False, extras, why)
        meta = self.r.meta(self.plan, name, version)
        if meta is None:
            self.unjudged.append(Unjudged(name, f"requirements of {name} {version} unreadable, so what plain pip "
                                                f"would install with it is unknown: {self.r.meta_error(name, version)}"))
            return
        for a in self.r.classify(meta, self.env, extras):
            if a.active:
                self.queue.append((a.requirement, f"{name} {version}"))

    def _pick(self, name: str, spec: SpecifierSet) -> str | None:
        """The version pip would choose, or None where it would not install one (unreadable, or a clash with
        no pin of the manifest's to judge the rest against)."""
        try:
            version = self.r.pick(self.plan, name, spec, self.pins)
        except Exception as exc:  # unreadable: judged as unchecked, never as satisfied
            self.unjudged.append(Unjudged(name, f"cannot list releases of {name}: {exc}"))
            self.unreadable.add(name)
            return None
        if version is None:
            # pip would stop here. Judge the rest against the manifest's own pin, if it has one.
            self.clash_at[name] = len(self.clashes)
            self.clashes.append(self._clash(name))
            if name not in self.pins or name in self.chosen:
                return None
            version = self.pins[name]
        return version

    def _clash(self, name: str) -> Clash:
        return self.r.clash(self.plan, self.step.name, name, self.constraints[name], self.pins,
                            self.installed.get(name))

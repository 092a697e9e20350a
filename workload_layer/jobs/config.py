"""``workload: {kind: jobs}``: the keys of several jobs sharing one topology, validated.

Each job names its own workload (any kind that yields execution graphs, or runs a request-level serving loop),
validated by that kind's ``Config``
model from the workload registry, so a problem inside it is reported at its full key
(``workload.jobs[1].workload.model.hidden``). What needs the topology (an NPU outside it, more NPUs asked than it
has) is checked when the jobs are placed (:mod:`stratasim.workload_layer.jobs.placement`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NoReturn

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializationInfo,
    SerializeAsAny,
    ValidationError,
    WithJsonSchema,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from stratasim.kernel import registry
from stratasim.kernel.errors import BackendError
from stratasim.kernel.npu_ids import NpuIds
from stratasim.kernel.schema import Section, TimePs

__all__ = ["JOBS_KIND", "JobConfig", "JobsConfig", "job_kinds"]

JOBS_KIND = "jobs"
"""The kind this package registers; a job may not be one (jobs do not nest)."""

_WORKLOAD_SCHEMA = {
    "type": "object",
    "required": ["kind"],
    "properties": {
        "kind": {"type": "string", "description": "The job's workload kind; the other keys are that kind's."}
    },
}


def job_kinds() -> list[str]:
    """The installed workload kinds a job may run: those yielding execution graphs (a ``graphs`` method) or running
    a request-level loop (a ``serve`` method, as ``serving``), not ``jobs`` itself."""
    kinds = []
    for kind in registry.available("workload"):
        try:
            factory = registry.load("workload", kind)
        except BackendError:
            continue
        if kind != JOBS_KIND and _runs_as_job(factory):
            kinds.append(kind)
    return kinds


def _runs_as_job(factory: object) -> bool:
    """Whether a workload class yields execution graphs or serves requests at the request level."""
    return callable(getattr(factory, "graphs", None)) or callable(getattr(factory, "serve", None))


def _inner_workload(value: object) -> object:
    """A job's ``workload`` mapping validated by its kind's ``Config`` (errors keep their keys under it)."""
    if isinstance(value, BaseModel):
        return value
    if not isinstance(value, Mapping):
        raise ValueError("expected a mapping with 'kind' and that kind's keys")
    kind = value.get("kind")
    if kind not in registry.available("workload"):
        said = "required" if kind is None else f"unknown workload kind {kind!r}"
        _refuse_kind(kind, f"{said}; a job runs one of: {', '.join(job_kinds())}")
    try:
        factory = registry.load("workload", kind)
    except BackendError as exc:
        _refuse_kind(kind, str(exc))
    if kind == JOBS_KIND or not _runs_as_job(factory):
        why = "jobs do not nest" if kind == JOBS_KIND else "it neither yields execution graphs nor serves requests"
        _refuse_kind(kind, f"a {kind!r} workload cannot be a job ({why}); a job runs one of: {', '.join(job_kinds())}")
    model: type[BaseModel] = getattr(factory, "Config")  # noqa: B009 (a factory is untyped)
    return model.model_validate({key: item for key, item in value.items() if key != "kind"})


def _refuse_kind(kind: object, message: str) -> NoReturn:
    """Refuse a job's workload ``kind``, the problem named at ``workload.kind`` under the job."""
    raise ValidationError.from_exception_data("JobConfig", [_problem(("kind",), message, kind)])


def _problem(loc: tuple[int | str, ...], message: str, value: object) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError("value_error", message), loc=loc, input=value)


class JobConfig(Section):
    """One job: a workload of its own on ``npus`` NPUs of the topology, starting at ``start``."""

    name: str = Field(pattern=r"\S")
    """The job's name, as the report's ``jobs`` list gives it (unique in the study)."""
    npus: int = Field(ge=1)
    """NPUs the job runs on; its workload is built for this many (a TP x PP x DP plan must multiply to it, a serving
    job's pools' replicas x TP x PP must add up to it)."""
    start: TimePs = 0
    """When the job starts (e.g. 5ms): its NPUs start their graphs, or a serving job its request-level loop, then;
    until then they idle."""
    place: NpuIds | None = None
    """The job's NPUs, its rank i on the i-th, with ``placement: explicit`` only: ids and ranges, in a list or as
    text ('256-511', '0-3, 8-11')."""
    shared: bool = True
    """A serving job only: replay its request-level run's iterations in the engine, its traffic sharing the network
    with the other jobs and its batching decisions frozen (true, for pools without swap preemption), or price its
    traffic on the network alone, apart from the other jobs' (false: faster; always so outside that scope)."""
    workload: Annotated[SerializeAsAny[BaseModel], BeforeValidator(_inner_workload), WithJsonSchema(_WORKLOAD_SCHEMA)]
    """The job's workload: a ``kind`` that yields execution graphs (transformer, collective, chakra...) or serves
    requests (serving), and its keys, as a study's ``workload`` section."""
    _kind: str = PrivateAttr(default="")

    @model_validator(mode="wrap")
    @classmethod
    def _keep_kind(cls, data: Any, handler: ModelWrapValidatorHandler[JobConfig]) -> JobConfig:
        job = handler(data)
        if isinstance(data, Mapping) and isinstance(data.get("workload"), Mapping):  # else a validated job, kept
            job._kind = str(data["workload"]["kind"])
            if "shared" in job.model_fields_set and job._kind != "serving":
                raise ValueError(f"shared: applies to a serving job (kind serving), not a {job._kind} job")
        return job

    @model_validator(mode="after")
    def _place_fits(self) -> JobConfig:
        if self.place is None:
            return self
        if len(self.place) != self.npus:
            raise ValueError(f"place: names {len(self.place)} NPUs but the job has npus: {self.npus}")
        seen: set[int] = set()
        for npu in self.place:
            if npu in seen:
                raise ValueError(f"place: names NPU {npu} twice")
            seen.add(npu)
        return self

    @property
    def kind(self) -> str:
        """The kind of the job's workload."""
        return self._kind

    @field_serializer("workload")
    def _with_kind(self, workload: BaseModel, info: SerializationInfo) -> dict[str, Any]:
        """The workload as written: its kind, then its keys (so a dumped study validates back to itself)."""
        keys = workload.model_dump(
            mode=info.mode,
            by_alias=bool(info.by_alias),
            exclude_unset=info.exclude_unset,
            exclude_defaults=info.exclude_defaults,
            exclude_none=info.exclude_none,
        )
        return {"kind": self._kind, **keys}


class JobsConfig(Section):
    """``workload:`` keys of ``kind: jobs``: several jobs sharing the topology, placed by ``placement``."""

    placement: Literal["packed", "spread", "random", "explicit"] = "packed"
    """How jobs take NPUs: packed (the next contiguous ids), spread (interleaved across the whole topology),
    random (a seeded shuffle), explicit (each job's ``place``)."""
    seed: int = Field(default=0, ge=0)
    """The seed of ``placement: random``."""
    jobs: tuple[JobConfig, ...]
    """The jobs, each with its name, npus, start, workload (and place, when explicit)."""

    @field_validator("jobs")
    @classmethod
    def _some(cls, jobs: tuple[JobConfig, ...]) -> tuple[JobConfig, ...]:
        if not jobs:
            raise ValueError("expected at least one job (a list of mappings with name, npus and workload)")
        return jobs

    @model_validator(mode="after")
    def _consistent(self) -> JobsConfig:
        """Unique names; ``place`` given exactly when the placement is explicit; explicit places disjoint."""
        problems: list[InitErrorDetails] = []
        named: dict[str, int] = {}
        owner: dict[int, int] = {}
        explicit = self.placement == "explicit"
        for index, job in enumerate(self.jobs):
            if job.name in named:
                said = f"job {job.name!r} is also the name of jobs[{named[job.name]}]; names must be unique"
                problems.append(_problem(("jobs", index, "name"), said, job.name))
            named.setdefault(job.name, index)
            if job.place is not None and not explicit:
                said = f"given, but placement is {self.placement!r}: place needs placement: explicit"
                problems.append(_problem(("jobs", index, "place"), said, None))
            elif job.place is None and explicit:
                problems.append(_problem(("jobs", index, "place"), "required with placement: explicit", None))
            for npu in job.place or ():
                other = owner.setdefault(npu, index)
                if other != index:
                    said = f"both job {self.jobs[other].name!r} and job {job.name!r} are placed on NPU {npu}"
                    problems.append(_problem(("jobs", index, "place"), said, npu))
                    break
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self

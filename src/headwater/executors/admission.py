"""`ResourcePool`: the admission of tasks to this machine by slots, CPU, memory and GPUs."""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.errors import ResourceError
from headwater.machine import detect_gpus, machine_cpus, machine_memory
from headwater.task import Launch


@dataclass
class ResourcePool:
    """Admit tasks while slots, CPU, memory and GPUs last.

    `slots` bounds concurrent tasks (`--max-parallel`). A task that requests CPU or memory also
    takes that much from the machine's total, so declared demand never exceeds the machine; a
    request larger than the whole machine is clamped to it (the task then runs alone) so that
    pipelines sized for a cluster still run on a laptop. GPUs are handed out by index and the
    task sees only its own through CUDA_VISIBLE_DEVICES.

    Accelerators follow the same rule: a task that asks for more than the machine has runs
    with what there is (none at all on a machine without GPUs, as kfp.local runs it), after
    one warning. With `strict` (`--strict-resources`) any request larger than the machine,
    CPU, memory or accelerators, fails the task before it starts instead.
    """

    slots: int
    cpu: float
    memory: float
    gpus: list[str] = field(default_factory=list)
    strict: bool = False
    _used_slots: int = 0
    _used_cpu: float = 0.0
    _used_memory: float = 0.0
    _held: dict[int, tuple[float, float, list[str]]] = field(default_factory=dict)
    _warned: set[str] = field(default_factory=set)

    def check(self, launch: Launch) -> str | None:
        """Whether the task can run here, before it is queued.

        Returns:
            A one-line warning the first time a task will run with fewer accelerators than it
            asked for (None otherwise, and for its later attempts).

        Raises:
            ResourceError: With `strict`, the task asks for more than this machine has.
        """
        req = launch.resources
        have = len(self.gpus)
        kind = req.accelerator_type or "GPU"
        if self.strict:
            over: dict[str, str] = {}  # the setter that asked -> what it asked for
            if req.accelerators > have:
                over["set_accelerator_limit"] = (
                    f"{req.accelerators} accelerator(s) of type {kind!r} (it has {have})"
                )
            if req.cpu > self.cpu:
                over["set_cpu_limit"] = f"{req.cpu:g} CPUs (it has {self.cpu:g})"
            if self.memory and req.memory > self.memory:
                over["set_memory_limit"] = (
                    f"{req.memory / 2**30:.1f} GiB of memory (it has {self.memory / 2**30:.1f})"
                )
            if over:
                raise ResourceError(
                    f"task {launch.name!r} requests more than this machine has: "
                    f"{', '.join(over.values())}: run it on a larger machine, lower "
                    f"{' and '.join(over)}, or run without --strict-resources"
                )
            return None
        if req.accelerators <= have or launch.name in self._warned:
            return None
        self._warned.add(launch.name)
        instead = f"running it with those {have}" if have else "running it without"
        return (
            f"task {launch.name!r} requests {req.accelerators} accelerator(s) of type {kind!r} "
            f"but this machine has {have or 'none'}: {instead} (--strict-resources refuses it)"
        )

    def try_acquire(self, launch: Launch) -> bool:
        """Take resources for `launch` if they are free now; return whether it may start."""
        req = launch.resources
        cpu = min(req.cpu, self.cpu)
        memory = min(req.memory, self.memory) if self.memory else 0.0
        if self._used_slots >= self.slots and self._used_slots > 0:
            return False
        if cpu and self._used_cpu + cpu > self.cpu + 1e-9:
            return False
        if memory and self._used_memory + memory > self.memory:
            return False
        # More than the machine has was accepted by `check` (or refused there, when strict).
        want = min(req.accelerators, len(self.gpus))
        free = [g for g in self.gpus if all(g not in h[2] for h in self._held.values())]
        if want > len(free):
            return False
        gpus = free[:want]
        self._used_slots += 1
        self._used_cpu += cpu
        self._used_memory += memory
        self._held[launch.task_id] = (cpu, memory, gpus)
        return True

    def device_env(self, task_id: int) -> dict[str, str]:
        """The environment that shows an admitted task its GPUs, and only those (else {})."""
        held = self._held.get(task_id)
        if held is None or not held[2]:
            return {}
        return {"CUDA_VISIBLE_DEVICES": ",".join(held[2])}

    def release(self, task_id: int) -> None:
        """Give back what `task_id` held."""
        held = self._held.pop(task_id, None)
        if held is None:
            return
        self._used_slots -= 1
        self._used_cpu -= held[0]
        self._used_memory -= held[1]


def default_parallelism(cpus: int) -> int:
    """Most tasks at once when `--max-parallel` is not given: twice the CPUs.

    A task that declares no CPU request is admitted by slot alone, and a task's life includes
    process start, file I/O and exit, so two per core keeps both cores busy (measured: a 50-way
    fan-out of trivial tasks runs 20% faster than with one per core). Tasks that declare CPU
    are also bounded by the machine's CPU count (see `ResourcePool`).
    """
    return max(2, 2 * cpus)


def machine_pool(*, max_parallel: int | None, strict: bool) -> ResourcePool:
    """The pool that admits tasks to this machine: its CPUs, memory and GPUs."""
    cpus = machine_cpus()
    return ResourcePool(
        slots=max_parallel or default_parallelism(cpus),
        cpu=float(cpus),
        memory=machine_memory(),
        gpus=detect_gpus(),
        strict=strict,
    )

"""Every exception Headwater raises, under one root so callers can catch them all.

The tree::

    HeadwaterError                      root; catch this to catch everything of ours
    ├── UserError                       the user can fix it; the CLI prints one line, exit 2
    │   ├── PipelineLoadError           file missing, no/several pipelines, bad YAML/JSON
    │   ├── PipelineSpecError           not a PipelineSpec, malformed IR, bad placeholder
    │   ├── UnsupportedFeatureError     valid IR we do not run (resolver, Vertex custom job)
    │   ├── ConditionError              a trigger condition that is not valid CEL
    │   ├── ParameterError              unknown, missing or mistyped pipeline parameter
    │   ├── MissingPackagesError        packages_to_install absent from this environment
    │   ├── ResourceError               a task asks for more than this machine can give
    │   ├── OutputError                 a task exited 0 without the outputs it declared
    │   ├── StorageError                a store URL that is malformed, unreachable or missing
    │   ├── RunClaimedError             resuming a run another engine is running (names pid@host)
    │   ├── PlatformError               a kfp-kubernetes setting we cannot honour (missing secret)
    │   ├── ContainerError              no container runtime, or an image it cannot find or pull
    │   ├── SandboxError                a task's sandbox cannot be made here, or a task asks for
    │   │                               what its sandbox does not show (another namespace's file)
    │   ├── NotFoundError               an unknown run, artifact or execution id
    │   ├── ConflictError               a name taken, or a record in a state that forbids the change
    │   ├── PermissionDeniedError       a team server's principal may not do this (HTTP 403)
    │   ├── ConfigError                 a HEADWATER_* environment variable with a bad value
    │   └── InvalidArgumentError        an option out of range or not one of its choices
    │                                   (also ValueError)
    └── HeadwaterSystemError        our fault or the machine's; may be retryable
        ├── MissingDependencyError      an optional extra is not installed (also ImportError)
        └── EngineError                 the engine reached a state it cannot go on from (a bug)

The model server adds its protocol errors (`headwater.serving.errors`), each carrying the HTTP
status it is answered with::

    HeadwaterError
    └── ProtocolError                   answered as {"error": message} with its status
        ├── InvalidInputError           400; also a UserError
        ├── UnauthorizedError           401; also a UserError
        ├── ModelNotFoundError          404; also a NotFoundError
        ├── PayloadTooLargeError        413; also a UserError
        ├── NotSupportedError           501 (a verb the model does not implement)
        └── ModelNotReadyError          503, retryable; also a HeadwaterSystemError

Warnings (`warnings.warn` categories; the run goes on)::

    HeadwaterWarning                    root of our warnings (a UserWarning)
    └── SpecVersionWarning              an IR schemaVersion newer than we know, same major
"""

from __future__ import annotations


class HeadwaterError(Exception):
    """Root of every error Headwater raises."""


class UserError(HeadwaterError):
    """Something the user can fix: the message says what and how."""


class PipelineLoadError(UserError):
    """The pipeline file could not be found, read or chosen."""


class PipelineSpecError(UserError):
    """The document is not a valid KFP PipelineSpec."""


class UnsupportedFeatureError(UserError):
    """Valid KFP IR that Headwater does not run locally."""


class ConditionError(UserError):
    """A trigger condition that is not valid CEL or cannot be evaluated."""


class ParameterError(UserError):
    """A pipeline parameter that is unknown, missing or of the wrong type."""


class MissingPackagesError(UserError):
    """A component's packages_to_install are not importable here."""


class ResourceError(UserError):
    """A task requests resources this machine cannot provide."""


class OutputError(UserError):
    """A task exited 0 but did not produce what it declared (recorded as that task's error)."""


class HeadwaterSystemError(HeadwaterError):
    """A fault of Headwater or the machine, not of the user's input."""

    retryable: bool = False


class MissingDependencyError(HeadwaterSystemError, ImportError):
    """An optional extra is needed but not installed; the message names the extra."""


class EngineError(HeadwaterSystemError):
    """The engine reached a state it cannot go on from, such as a stalled run: a bug of ours."""


class ExecutorLostError(HeadwaterSystemError):
    """The executor's workers or scheduler went away mid-run: the run fails, resumable.

    `resume_flags` are what `headwater run --resume RUN_ID` needs to reach a new one.
    """

    def __init__(self, message: str, *, resume_flags: str = "") -> None:
        super().__init__(message)
        self.resume_flags = resume_flags


class StorageError(UserError):
    """An artifact or metadata store that cannot be used as configured (bad URL, no bucket)."""


class RunClaimedError(UserError):
    """A run to resume that another engine holds; the message names it as pid@host."""


class PlatformError(UserError):
    """A kfp-kubernetes setting that cannot be honoured here: a missing secret or volume, a
    bad name, or a mount the operating system refuses. The message names it and the fix."""


class ContainerError(UserError):
    """A task that must run in its image cannot: no container runtime is found, or the image
    cannot be found or pulled. The message names the image, the runtime and the fix."""


class SandboxError(UserError):
    """A task's sandbox cannot be made (bubblewrap missing, user namespaces off), or the task
    asks for something its sandbox may not show. The message names what and the fix."""


class NotFoundError(UserError):
    """A run, artifact or execution id that does not exist."""


class ConflictError(UserError):
    """A change the record's current state forbids: a name its namespace has already, a run
    that has ended (to terminate) or is still running (to delete). HTTP answers it 409."""


class PermissionDeniedError(UserError):
    """A principal of a team server (`headwater.access`) may not do this: the resource is in
    a namespace it does not hold, or its role does not allow the change. HTTP answers it 403."""


class ConfigError(UserError):
    """A `HEADWATER_*` environment variable whose value cannot be used; the message names the
    variable, the value and what is valid (`headwater.config` reads them all)."""


class InvalidArgumentError(UserError, ValueError):
    """An argument of a command or API call that is out of range, not one of its choices,
    or given twice; the message names the valid values."""


class HeadwaterWarning(UserWarning):
    """Root of the warnings Headwater emits; filter this to silence them all."""


class SpecVersionWarning(HeadwaterWarning):
    """The IR's schemaVersion is a newer minor version than Headwater knows; it runs anyway."""

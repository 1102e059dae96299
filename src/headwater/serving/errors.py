"""The model server's errors: each carries the HTTP status the protocols give it.

They join Headwater's tree (`headwater.errors`) under the branch a caller would expect, so
`except UserError` still catches a bad request::

    HeadwaterError
    └── ProtocolError                 500  answered as {"error": "..."}
        ├── InvalidInputError         400  malformed JSON, a wrong shape, datatype or
        │                                  name (also UserError)
        ├── UnauthorizedError         401  a missing or wrong bearer token (also UserError)
        ├── ForbiddenError            403  a Host that is not the server's name, or a change
        │                                  sent by another site's page (also UserError)
        ├── ModelNotFoundError        404  no such model, version or route (also
        │                                  NotFoundError)
        ├── PayloadTooLargeError      413  a body over the server's limit (also UserError)
        ├── UnsupportedMediaTypeError 415  an admin change not sent as JSON (also UserError)
        ├── NotSupportedError         501  a verb the model does not implement, such as
        │                                  `:explain` on a scikit-learn model
        └── ModelNotReadyError        503  the endpoint has no version loaded (retryable;
                                           also HeadwaterSystemError)

A `UserError` raised by a runtime (say, `InvalidArgumentError` for an explanation option) is
answered 400 too; anything else a model raises on its input is 400 "the model rejected the
input", and a fault of the server itself is 500, always with the same JSON body.
"""

from __future__ import annotations

from headwater.errors import HeadwaterError, HeadwaterSystemError, NotFoundError, UserError


class ProtocolError(HeadwaterError):
    """An error the server answers with `status` and the body `{"error": message}`."""

    status: int = 500


class InvalidInputError(ProtocolError, UserError):
    """The request is not what the protocol or the model takes."""

    status = 400


class UnauthorizedError(ProtocolError, UserError):
    """The request lacks the server's bearer token, or carries another."""

    status = 401


class ForbiddenError(ProtocolError, UserError):
    """A request a browser was made to send: a `Host` that is not one of the server's names
    (DNS rebinding), or a change from another origin (`headwater.security.BrowserGuard`)."""

    status = 403


class ModelNotFoundError(ProtocolError, NotFoundError):
    """No endpoint, version or route by that name; the message lists the ones there are."""

    status = 404


class PayloadTooLargeError(ProtocolError, UserError):
    """The body is larger than the server accepts (`--max-body-mb`)."""

    status = 413


class UnsupportedMediaTypeError(ProtocolError, UserError):
    """An admin change whose `Content-Type` is not JSON."""

    status = 415


class NotSupportedError(ProtocolError):
    """The model has no implementation of the verb asked for."""

    status = 501


class ModelNotReadyError(ProtocolError, HeadwaterSystemError):
    """The endpoint exists but has no version loaded; try again later."""

    status = 503
    retryable = True

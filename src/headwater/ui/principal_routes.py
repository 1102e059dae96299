"""`/api/v1/principals`: an admin manages a team server's tokens and proxy users over HTTP, as
`headwater server tokens|users` does on the store's machine (`headwater.api.principals`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from headwater.ui.access import note
from headwater.ui.app_state import metadata_of, principal_of

router = APIRouter(tags=["api"])


class PrincipalRequest(BaseModel):
    """A token (its secret is answered once) or a user a trusted proxy names."""

    kind: str = Field("token", description="token or user")
    name: str
    role: str = Field(..., description="viewer, editor or admin")
    namespaces: list[str] = Field(default_factory=list)


def _admin(request: Request, what: str) -> str:
    """The admin's name for the record; PermissionDeniedError (403) for anyone else."""
    who = principal_of(request)
    who.check_admin(what)
    return who.name or "anyone"


@router.get("/principals", summary="Tokens and users (admins only; never a secret)")
def list_principals(
    request: Request, kind: str | None = Query(None, description="token or user")
) -> dict[str, Any]:
    from headwater.api.principals import list_principals, principal_json

    _admin(request, "list tokens and users")
    found = list_principals(kind, metadata=metadata_of(request))
    return {"principals": [principal_json(p) for p in found]}


@router.post("/principals", summary="Add a token or a user (admins only)")
def add_principal(request: Request, body: PrincipalRequest) -> dict[str, Any]:
    """The principal; for a token, `token` is its secret, answered this once."""
    from headwater.api.principals import add_principal

    by = _admin(request, "add tokens and users")
    made = add_principal(
        body.kind,
        body.name,
        body.role,
        body.namespaces,
        created_by=by,
        metadata=metadata_of(request),
    )
    note(request, ",".join(made.record.namespaces), made.record.name)
    return made.to_json()


@router.delete("/principals/{kind}/{name}", summary="Revoke a token or remove a user (admins only)")
def remove_principal(request: Request, kind: str, name: str) -> dict[str, Any]:
    from headwater.api.principals import remove_principal

    _admin(request, "revoke tokens and remove users")
    note(request, None, name)
    remain = remove_principal(kind, name, metadata=metadata_of(request))
    return {"kind": kind, "name": name, "principals_remain": remain}

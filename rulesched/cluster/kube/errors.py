"""Our errors for what the Kubernetes API answers: the client's `ApiException`, wrapped once, by status.

Call sites catch `NotFoundError`, `GoneError`, `UnauthorizedError`, ... instead of testing `ApiException.status` by
hand; `api_errors()` wraps a block of client calls and re-raises any `ApiException` as the matching
`ApiError` (`raise ... from e`, so the client's exception stays attached). The message is the API's
Status `message` when the body carries one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes.client.exceptions import ApiException

from rulesched.cluster.kube.access import status_message


class ApiError(Exception):
    """The Kubernetes API refused a request; `status` is the HTTP status (0 when the client gave none)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BadRequestError(ApiError):
    """400: the request was malformed."""


class UnauthorizedError(ApiError):
    """401: the credentials were refused."""


class ForbiddenError(ApiError):
    """403: the credentials lack the permission (RBAC)."""


class NotFoundError(ApiError):
    """404: no such object, or the API group is not served (e.g. metrics-server not installed)."""


class ConflictError(ApiError):
    """409: a precondition failed or the object changed meanwhile."""


class GoneError(ApiError):
    """410: the resourceVersion asked for is too old; list again."""


class TooManyRequestsError(ApiError):
    """429: the API server is shedding load; retry later."""


class ServerError(ApiError):
    """5xx: the API server (or an aggregated API behind it) failed."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    429: TooManyRequestsError,
}


def api_error(error: ApiException) -> ApiError:
    """The ApiError matching the client's exception."""
    status = int(error.status or 0)
    kind = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return kind(status, status_message(error))


@contextmanager
def api_errors() -> Iterator[None]:
    """Re-raise any ApiException of the block as the matching ApiError."""
    try:
        yield
    except ApiException as error:
        raise api_error(error) from error

"""The client's ApiException wrapped as our own error types, by status, with the API's message."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from rulesched.cluster.kube.errors import (
    ApiError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    GoneError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    UnauthorizedError,
    api_errors,
)


def client_error(status: int, body: str = "") -> ApiException:
    error = ApiException(status=status, reason="Reason")
    error.body = body
    return error


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, BadRequestError),
        (401, UnauthorizedError),
        (403, ForbiddenError),
        (404, NotFoundError),
        (409, ConflictError),
        (410, GoneError),
        (429, TooManyRequestsError),
        (500, ServerError),
        (503, ServerError),
        (418, ApiError),
    ],
)
def test_each_status_becomes_its_error_type(status: int, kind: type[ApiError]) -> None:
    with pytest.raises(ApiError) as caught, api_errors():
        raise client_error(status)
    assert type(caught.value) is kind
    assert caught.value.status == status
    assert isinstance(caught.value.__cause__, ApiException)


def test_the_message_is_the_status_message_of_the_body() -> None:
    body = '{"kind":"Status","code":410,"message":"too old resource version: 1 (212)"}'
    with pytest.raises(GoneError, match=r"^too old resource version: 1 \(212\)$"), api_errors():
        raise client_error(410, body)


def test_other_errors_pass_through() -> None:
    with pytest.raises(ConnectionError), api_errors():
        raise ConnectionError("refused")

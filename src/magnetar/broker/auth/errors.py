"""Errors of the security layer.

Theory of operation: everything the authentication providers and the
authorization service refuse ends in one of two classes, both
:class:`~magnetar.broker.errors.BrokerError` subclasses, so the broker's single
translation point turns them into the wire ``ServerError`` (``AuthenticationError``
= 3, ``AuthorizationError`` = 4) and the HTTP status (401, 403) with the message
verbatim.  Messages name what was wrong ("token expired at ...", "bad signature")
but never echo a secret (a password, a whole token).
"""

from __future__ import annotations

from magnetar.broker.errors import BrokerError, Code


class AuthenticationError(BrokerError):
    """The credentials could not be verified (unknown user, bad signature, expired, garbage)."""

    server_error = Code.AuthenticationError
    http_status = 401


class AuthorizationError(BrokerError):
    """The role is known but not allowed to do this."""

    server_error = Code.AuthorizationError
    http_status = 403


class AuthConfigError(ValueError):
    """The security configuration is unusable (missing key file, unknown provider, bad key)."""

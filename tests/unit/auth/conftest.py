"""Fixtures for the security tests: a manual clock and signing keys (generated, never committed)."""

from __future__ import annotations

import secrets

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from magnetar.testing.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="session")
def secret_key() -> bytes:
    return secrets.token_bytes(32)


@pytest.fixture(scope="session")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())

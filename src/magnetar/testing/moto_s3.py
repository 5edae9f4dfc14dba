"""A real S3 API server for tests: ``moto`` in server mode as a child process.

Theory of operation: :class:`MotoS3Server` runs ``python -m moto.server`` on a
free loopback port (a child process, so its request handling never competes
with the test's event loop or the official client's threads), waits until it
answers HTTP, and creates a bucket.  Clients reach it at ``endpoint`` with
any credentials -- unless ``auth=True``: then moto checks signatures against
its own IAM, the first few calls (``BOOTSTRAP_CALLS``) create a user, an
access key with an allow-all S3 policy and the bucket, and only that key
(``access_key``/``secret_key``) works afterwards; a wrong one gets the 403 a
real S3 answers.  ``stop()`` kills the child (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

START_TIMEOUT_S = 30.0
BOOTSTRAP_CALLS = 4  # CreateUser, CreateAccessKey, PutUserPolicy, CreateBucket
_ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoS3Server:
    def __init__(self, bucket: str = "offload", *, auth: bool = False, log_path: Path | None = None) -> None:
        self.bucket = bucket
        self.auth = auth
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.region = "us-east-1"
        self.access_key = "testing"
        self.secret_key = "testing"
        self._log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MotoS3Server:
        env = dict(os.environ)
        if self.auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(BOOTSTRAP_CALLS)
        out = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        self._wait_up()
        self._bootstrap()
        return self

    def _wait_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"moto server did not listen on {self.port} within {START_TIMEOUT_S}s")

    def client(self, service: str = "s3", key: str | None = None, secret: str | None = None):  # noqa: ANN201
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=key or self.access_key,
            aws_secret_access_key=secret or self.secret_key,
        )

    def _bootstrap(self) -> None:
        if self.auth:
            iam = self.client("iam")
            iam.create_user(UserName="offloader")
            k = iam.create_access_key(UserName="offloader")["AccessKey"]
            iam.put_user_policy(UserName="offloader", PolicyName="all", PolicyDocument=json.dumps(_ALLOW_ALL))
            self.access_key, self.secret_key = k["AccessKeyId"], k["SecretAccessKey"]
        self.client().create_bucket(Bucket=self.bucket)

    def properties(self) -> dict[str, str]:
        """Broker keys that point the aws-s3 offloader here."""
        return {
            "managedLedgerOffloadDriver": "aws-s3",
            "s3ManagedLedgerOffloadBucket": self.bucket,
            "s3ManagedLedgerOffloadRegion": self.region,
            "s3ManagedLedgerOffloadServiceEndpoint": self.endpoint,
            "s3ManagedLedgerOffloadCredentialId": self.access_key,
            "s3ManagedLedgerOffloadCredentialSecret": self.secret_key,
        }

    def object_keys(self) -> list[str]:
        out: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> MotoS3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()

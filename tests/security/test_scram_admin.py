"""SCRAM users through DescribeUserScramCredentials and AlterUserScramCredentials: confluent-kafka's
admin client, Kafka's own kafka-configs, Kafka's validation errors; and, for kafkalite, that the
credentials outlive a restart and that no password is ever written down."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

from protocol.errors import ErrorCode
from tests import reference_kafka
from tests.broker_process import ROOT

from .conftest import wait_scram
from .raw import Raw, ScramClient

GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


def _scram_login(address: str, mechanism: str, user: str, password: str) -> tuple[int, str | None]:
    with Raw(address) as c:
        assert c.handshake(mechanism).error_code == ErrorCode.none
        client = ScramClient(mechanism, user, password)
        first = c.authenticate(client.first())
        if first.error_code:
            return first.error_code, first.error_message
        final = c.authenticate(client.final(first.auth_bytes))
        if final.error_code == ErrorCode.none:
            assert client.verify(final.auth_bytes)
            assert final.error_message == ""  # Kafka's default, not null
            return final.error_code, None
        return final.error_code, final.error_message


def test_admin_client_adds_describes_and_deletes(target):
    user = f"bob-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    up = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"bob-pw-1")
    admin.alter_user_scram_credentials([up])[user].result(30)
    wait_scram(target.bootstrap, user, [[2, 8192]])
    (desc,) = admin.describe_user_scram_credentials([user]).values()
    infos = desc.result(30).scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    assert _scram_login(target.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-512", user, "bob-pw-1") == (ErrorCode.none, None)
    assert _scram_login(target.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-256", user, "bob-pw-1") == (ErrorCode.sasl_authentication_failed, GENERIC.format("SCRAM-SHA-256"))
    # a new password replaces the old one
    up = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-pw-2")
    admin.alter_user_scram_credentials([up])[user].result(30)
    wait_scram(target.bootstrap, user, [[2, 4096]])
    assert _scram_login(target.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-512", user, "bob-pw-1")[0] == ErrorCode.sasl_authentication_failed
    assert _scram_login(target.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-512", user, "bob-pw-2") == (ErrorCode.none, None)
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)])[user].result(30)
    wait_scram(target.bootstrap, user, [])
    assert _scram_login(target.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-512", user, "bob-pw-2") == (ErrorCode.sasl_authentication_failed, GENERIC.format("SCRAM-SHA-512"))


def test_validation_errors(target):
    """Kafka's ScramControlManager checks and its order of results (deletions, upsertions, errors)."""
    u = f"v{uuid.uuid4().hex[:6]}-"
    salt, salted = b"s" * 16, b"p" * 64
    with Raw(target.bootstrap) as c:
        r = c.request(51, 0, {
            "deletions": [{"name": u + "gone", "mechanism": 1}],
            "upsertions": [
                {"name": u + "few", "mechanism": 1, "iterations": 100, "salt": salt, "salted_password": salted},
                {"name": u + "many", "mechanism": 2, "iterations": 20000, "salt": salt, "salted_password": salted},
                {"name": u + "mech", "mechanism": 7, "iterations": 4096, "salt": salt, "salted_password": salted},
                {"name": "", "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted},
                {"name": u + "twice", "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted},
                {"name": u + "twice", "mechanism": 2, "iterations": 4096, "salt": salt, "salted_password": salted},
                {"name": u + "ok", "mechanism": 2, "iterations": 4096, "salt": salt, "salted_password": salted},
            ],
        })
        got = [(x.user.removeprefix(u), x.error_code, x.error_message) for x in r.results]
        assert sorted(got, key=lambda x: x[0]) == sorted([
            ("gone", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
            ("few", ErrorCode.unacceptable_credential, "Too few iterations"),
            ("many", ErrorCode.unacceptable_credential, "Too many iterations"),
            ("mech", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
            ("twice", ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
            ("ok", ErrorCode.none, None),
        ], key=lambda x: x[0])
        assert got[0][0] == "ok"  # what succeeded comes first
        wait_scram(target.bootstrap, u + "ok", [[2, 4096]])
        r = c.request(50, 0, {"users": [{"name": u + "ok"}, {"name": u + "nobody"}, {"name": u + "nobody"}, {"name": u + "absent"}]})
        assert (r.error_code, r.error_message) == (ErrorCode.none, "")
        got = sorted((x.user.removeprefix(u), x.error_code, x.error_message, [(i.mechanism, i.iterations) for i in x.credential_infos]) for x in r.results)
        assert got == [
            ("absent", ErrorCode.resource_not_found, f"Attempt to describe a user credential that does not exist: {u}absent", []),
            ("nobody", ErrorCode.duplicate_resource, f"Cannot describe SCRAM credentials for the same user twice in a single request: {u}nobody", []),
            ("ok", ErrorCode.none, "", [(2, 4096)]),
        ]


def test_kafka_configs_adds_a_user(target, tmp_path):
    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    user = f"carol-{uuid.uuid4().hex[:6]}"
    # one mechanism per run: kafka-configs sends every mechanism of a user in one request, which Kafka
    # itself refuses (DUPLICATE_RESOURCE: one alteration per user and request)
    for config in ("SCRAM-SHA-512=[iterations=8192,password=carol-secret]", "SCRAM-SHA-256=[password=carol-secret]"):
        cmd = ["java", "-Xmx256m", "-cp", f"{reference_kafka.LIBS}/*", reference_kafka.config_command(), "--bootstrap-server", target.bootstrap,
               "--alter", "--add-config", config, "--entity-type", "users", "--entity-name", user]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    wait_scram(target.bootstrap, user, [[1, 4096], [2, 8192]])
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert _scram_login(target.listeners["SASL_PLAINTEXT"], mechanism, user, "carol-secret") == (ErrorCode.none, None)
    with Raw(target.bootstrap) as c:
        (res,) = c.request(50, 0, {"users": [{"name": user}]}).results
        assert sorted((i.mechanism, i.iterations) for i in res.credential_infos) == [(1, 4096), (2, 8192)]


def test_credentials_are_durable_and_hold_no_password(kafkalite_target):
    b = kafkalite_target.handle
    user = f"dave-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafkalite_target.bootstrap})
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-unique-pw")])[user].result(30)
    wait_scram(kafkalite_target.bootstrap, user, [[1, 4096]])  # kafkalite answers once it is durable: no wait here
    path = b.data_dir / "scram-credentials.json"
    text = path.read_text()
    assert user in text and "dave-unique-pw" not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert set(json.loads(text)["users"][user]["SCRAM-SHA-256"]) == {"salt", "stored_key", "server_key", "iterations"}
    assert not list(b.data_dir.glob("scram-credentials.json.tmp"))
    b.restart()
    assert _scram_login(kafkalite_target.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-256", user, "dave-unique-pw") == (ErrorCode.none, None)
    assert _scram_login(kafkalite_target.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-512", "alice", "alice-secret-9f3") == (ErrorCode.none, None)


def test_a_broken_credentials_file_stops_the_start(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "scram-credentials.json").write_text('{"version": 1, "users": {"x": ')
    proc = subprocess.run([sys.executable, "-m", "broker", "serve", "--data-dir", str(data), "--port", "0", "--log-level", "warning"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "cannot read SCRAM credentials" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""

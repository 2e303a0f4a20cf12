"""``seglog users add|delete|list`` as a user runs it, on a log dir and through a running broker."""

from __future__ import annotations

import pytest

from broker_core.security.credential_file import STORE_FILE, FileCredentialStore

from sasl_kit import authenticator, log_in
from tests.broker_core.cli_kit import run
from tests.broker_core.server.server_kit import start_broker


def _ok(*args: str, stdin: str = "") -> str:
    code, out, err = run("users", *args, stdin=stdin)
    assert code == 0, err
    return out


def _authenticates(store, mechanism: str, user: str, password: str) -> bool:
    try:
        return log_in(authenticator(store), mechanism, user, password)["error_code"] == 0
    except Exception:
        return False


def test_users_added_on_a_log_dir_are_listed_with_their_mechanism_and_iterations(tmp_path):
    logs = str(tmp_path / "logs")
    assert _ok("add", "--log-dir", logs, "--user", "alice", "--password", "alice-secret") == (
        "Completed updating config for user alice (SCRAM-SHA-512, 4096 iterations).\n")
    _ok("add", "--log-dir", logs, "--user", "bob", "--password", "bob-secret", "--mechanism", "SCRAM-SHA-256",
        "--iterations", "8192")
    assert _ok("list", "--log-dir", logs).splitlines() == [
        "USER  MECHANISM     ITERATIONS", "alice SCRAM-SHA-512 4096", "bob   SCRAM-SHA-256 8192"]
    assert _ok("list", "--log-dir", logs, "--user", "bob").splitlines()[1:] == ["bob  SCRAM-SHA-256 8192"]


def test_a_user_added_on_a_log_dir_authenticates_with_scram_and_plain_and_no_password_is_stored(tmp_path):
    logs = tmp_path / "logs"
    _ok("add", "--log-dir", str(logs), "--user", "alice", "--password", "pencil-4711")
    assert "pencil-4711" not in (logs / STORE_FILE).read_text()
    store = FileCredentialStore([str(logs)])
    assert _authenticates(store, "SCRAM-SHA-512", "alice", "pencil-4711")
    assert _authenticates(store, "PLAIN", "alice", "pencil-4711")
    assert not _authenticates(store, "SCRAM-SHA-256", "alice", "pencil-4711")  # no SHA-256 credential
    assert not _authenticates(store, "PLAIN", "alice", "pencil-4712")


def test_the_password_is_read_from_standard_input_without_password(tmp_path):
    logs = str(tmp_path / "logs")
    _ok("add", "--log-dir", logs, "--user", "carol", stdin="carol-secret\n")
    assert _authenticates(FileCredentialStore([logs]), "PLAIN", "carol", "carol-secret")


def test_an_empty_password_is_refused(tmp_path):
    code, _, err = run("users", "add", "--log-dir", str(tmp_path), "--user", "carol", stdin="\n")
    assert code == 2 and "the password is empty" in err


@pytest.mark.parametrize("iterations,message", [("4000", "Too few iterations"), ("20000", "Too many iterations")])
def test_iterations_outside_kafkas_bounds_are_refused_as_an_unacceptable_credential(tmp_path, iterations, message):
    code, _, err = run("users", "add", "--log-dir", str(tmp_path), "--user", "dave", "--password", "pw",
                       "--iterations", iterations)
    assert code == 1
    assert err == f"seglog users: UNACCEPTABLE_CREDENTIAL: user 'dave': {message}\n"


def test_plain_is_no_mechanism_to_add_a_user_with(tmp_path):
    code, _, err = run("users", "add", "--log-dir", str(tmp_path), "--user", "a", "--password", "pw",
                       "--mechanism", "PLAIN")
    assert code == 2 and "PLAIN users are the SCRAM users" in err


def test_deleting_a_user_removes_every_credential_and_an_unknown_user_is_resource_not_found(tmp_path):
    logs = str(tmp_path / "logs")
    _ok("add", "--log-dir", logs, "--user", "alice", "--password", "a")
    _ok("add", "--log-dir", logs, "--user", "alice", "--password", "a", "--mechanism", "SCRAM-SHA-256")
    assert _ok("delete", "--log-dir", logs, "--user", "alice") == (
        "Completed updating config for user alice (deleted SCRAM-SHA-256, SCRAM-SHA-512).\n")
    assert _ok("list", "--log-dir", logs).splitlines() == ["USER MECHANISM ITERATIONS"]
    code, _, err = run("users", "delete", "--log-dir", logs, "--user", "alice")
    assert code == 1 and err.startswith("seglog users: RESOURCE_NOT_FOUND: user 'alice'")


def test_deleting_one_mechanism_keeps_the_other(tmp_path):
    logs = str(tmp_path / "logs")
    _ok("add", "--log-dir", logs, "--user", "alice", "--password", "a")
    _ok("add", "--log-dir", logs, "--user", "alice", "--password", "a", "--mechanism", "SCRAM-SHA-256")
    _ok("delete", "--log-dir", logs, "--user", "alice", "--mechanism", "SCRAM-SHA-512")
    assert _ok("list", "--log-dir", logs).splitlines()[1:] == ["alice SCRAM-SHA-256 4096"]
    code, _, err = run("users", "delete", "--log-dir", logs, "--user", "alice", "--mechanism", "SCRAM-SHA-512")
    assert code == 1 and "RESOURCE_NOT_FOUND: user 'alice': Attempt to delete a user credential that does not " \
                         "exist" in err


def test_the_log_dir_of_a_running_broker_is_refused_and_bootstrap_changes_its_users(tmp_path):
    logs = tmp_path / "logs"
    server = start_broker(logs)
    try:
        code, _, err = run("users", "add", "--log-dir", str(logs), "--user", "alice", "--password", "a")
        assert code == 1 and "is in use" in err and "--bootstrap" in err
        bootstrap = server.bootstrap_servers
        _ok("add", "--bootstrap", bootstrap, "--user", "alice", "--password", "alice-secret")
        _ok("add", "--bootstrap", bootstrap, "--user", "bob", "--password", "bob-secret", "--mechanism",
            "SCRAM-SHA-256", "--iterations", "16384")
        assert _ok("list", "--bootstrap", bootstrap).splitlines()[1:] == [
            "alice SCRAM-SHA-512 4096", "bob   SCRAM-SHA-256 16384"]
        assert _authenticates(server.credential_store, "SCRAM-SHA-256", "bob", "bob-secret")
        _ok("delete", "--bootstrap", bootstrap, "--user", "bob")
        assert not _authenticates(server.credential_store, "PLAIN", "bob", "bob-secret")
        code, _, err = run("users", "add", "--bootstrap", bootstrap, "--user", "eve", "--password", "x",
                           "--iterations", "1")
        assert code == 1 and err == "seglog users: UNACCEPTABLE_CREDENTIAL: user 'eve': Too few iterations\n"
    finally:
        server.shutdown(timeout_ms=10_000)
    assert _ok("list", "--log-dir", str(logs)).splitlines()[1:] == ["alice SCRAM-SHA-512 4096"]

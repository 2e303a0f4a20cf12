"""The credential stores: the log dirs' file and etcd's /config/users, as Kafka keeps credentials."""

from __future__ import annotations

import json
import os
import stat

import pytest

from broker_core.controller import zk_data
from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
from broker_core.controller.etcd_connect import parse_etcd_connect
from broker_core.controller.in_memory_metadata_store import InMemoryMetadataStore
from broker_core.controller.metadata_store import Put
from broker_core.security.credential_etcd import EtcdCredentialStore
from broker_core.security.credential_file import STORE_FILE, FileCredentialStore, read_credentials
from broker_core.security.credential_store import open_credential_store, verify_password
from broker_core.security.scram import ScramCredential, ScramMechanism

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def _credential(mechanism=SHA512, password="alice-secret", iterations=4096) -> ScramCredential:
    return ScramCredential.from_password(mechanism, password, iterations=iterations)


@pytest.fixture(params=["log-dir", "etcd-in-memory", "etcd"])
def stores(request, tmp_path):
    """Two handles on one durable store (two brokers, or a broker restarted), by kind."""
    if request.param == "log-dir":
        dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
        for d in dirs:
            os.makedirs(d)
        yield lambda: FileCredentialStore(dirs)
        return
    if request.param == "etcd-in-memory":
        metadata = InMemoryMetadataStore()
        yield lambda: EtcdCredentialStore(metadata)
        return
    connect = request.getfixturevalue("etcd_server").connect("/seglog")
    handles = []

    def open_store():
        handles.append(EtcdMetadataStore(parse_etcd_connect(connect)))
        return EtcdCredentialStore(handles[-1])
    yield open_store
    for handle in handles:
        handle.close()


def test_credentials_written_by_one_handle_are_read_by_the_next(stores):
    first = stores()
    alice = _credential()
    first.alter((), [("alice", SHA512, alice), ("bob", SHA256, _credential(SHA256, "bob-secret"))])
    second = stores()
    assert second.users() == ["alice", "bob"]
    assert second.credential("alice", SHA512) == alice and second.credential("alice", SHA256) is None
    assert verify_password(second, "bob", "bob-secret") and not verify_password(second, "bob", "alice-secret")


def test_deleting_a_users_last_credential_removes_the_user(stores):
    store = stores()
    store.alter((), [("alice", SHA512, _credential()), ("alice", SHA256, _credential(SHA256))])
    store.alter([("alice", SHA512)], ())
    assert stores().credentials("alice").keys() == {SHA256}
    store.alter([("alice", SHA256), ("nobody", SHA256)], ())
    assert stores().users() == [] and stores().credentials("alice") == {}


def test_an_upsertion_replaces_the_users_credential_for_that_mechanism(stores):
    store = stores()
    store.alter((), [("alice", SHA512, _credential(password="old"))])
    store.alter((), [("alice", SHA512, _credential(password="new", iterations=8192))])
    reread = stores()
    assert reread.credential("alice", SHA512).iterations == 8192
    assert verify_password(reread, "alice", "new") and not verify_password(reread, "alice", "old")


def test_the_log_dir_file_holds_kafkas_credential_strings_and_no_password(tmp_path):
    FileCredentialStore([str(tmp_path)]).alter((), [("alice", SHA512, _credential(password="pencil-1234"))])
    path = tmp_path / STORE_FILE
    text = path.read_text()
    assert "pencil-1234" not in text
    entry = json.loads(text)["users"]["alice"]["SCRAM-SHA-512"]
    assert entry.startswith("salt=") and ",stored_key=" in entry and entry.endswith(",iterations=4096")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_newest_copy_wins_when_log_dirs_disagree(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    store = FileCredentialStore([str(a), str(b)])
    store.alter((), [("alice", SHA512, _credential())])
    stale = (a / STORE_FILE).read_text()
    store.alter((), [("bob", SHA512, _credential())])
    (a / STORE_FILE).write_text(stale)  # one dir reverted to an older copy
    assert FileCredentialStore([str(a), str(b)]).users() == ["alice", "bob"]


def test_an_unreadable_credential_file_names_the_file_and_the_user(tmp_path):
    (tmp_path / STORE_FILE).write_text(json.dumps(
        {"format": 1, "version": 1, "users": {"alice": {"SCRAM-SHA-512": "salt=AAAA,iterations=4096"}}}))
    with pytest.raises(ValueError, match=f"{STORE_FILE}: user 'alice', SCRAM-SHA-512: SCRAM credential"):
        read_credentials([str(tmp_path)])
    (tmp_path / STORE_FILE).write_text("{")
    with pytest.raises(ValueError, match=f"{STORE_FILE}: unreadable SCRAM credentials"):
        read_credentials([str(tmp_path)])


def test_etcd_keeps_credentials_under_kafkas_config_users_path():
    metadata = InMemoryMetadataStore()
    EtcdCredentialStore(metadata).alter((), [("team/alice", SHA256, _credential(SHA256))])
    found = metadata.get("/config/users/team%2Falice")
    doc = json.loads(found.value)
    assert doc["version"] == 1 and doc["config"]["SCRAM-SHA-256"].startswith("salt=")


def test_etcd_leaves_a_users_other_config_entries_alone():
    metadata = InMemoryMetadataStore()
    metadata.commit([], [Put(zk_data.user_config_path("alice"),
                             zk_data.encode_user_config({"producer_byte_rate": "1024"}))])
    store = EtcdCredentialStore(metadata)
    assert store.users() == []
    store.alter((), [("alice", SHA512, _credential())])
    store.alter([("alice", SHA512)], ())
    assert zk_data.decode_user_config("alice", metadata.get(zk_data.user_config_path("alice")).value) == {
        "producer_byte_rate": "1024"}


def test_the_broker_uses_etcd_in_cluster_mode_and_its_log_dirs_otherwise(tmp_path):
    assert isinstance(open_credential_store([str(tmp_path)], InMemoryMetadataStore()), EtcdCredentialStore)
    assert isinstance(open_credential_store([str(tmp_path)]), FileCredentialStore)

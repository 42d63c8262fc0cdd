"""ACL 1.0 signatures (rmq.protocol.acl) against the C++ client's captured frames, and the ACL
admin headers and bodies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmq.protocol import RemotingCommand, acl


def client_frames(flow_dir: Path) -> list[RemotingCommand]:
    out = []
    for line in (flow_dir / "index.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["dir"] == "c2s":
            frame = (flow_dir / entry["file"]).read_bytes()
            out.append(RemotingCommand.decode(frame[4:]))
    return out


def test_the_worked_example() -> None:
    ext = {"AccessKey": "ak", "OnsChannel": "LOCAL", "topic": "TopicTest", "Signature": "ignored"}
    assert acl.signing_content(ext) == b"akLOCALTopicTest"
    assert acl.calc_signature(b"akLOCALTopicTest", "sk") == "OCU644qNRJlkKdlLRTplGLIsCwI="


def test_cpp_credentials_flow_signatures_are_recomputed(vectors_dir: Path) -> None:
    frames = client_frames(vectors_dir / "f_acl_credentials")
    assert [f.code for f in frames] == [105, 10, 34, 35]
    for command in frames:
        ext = command.ext_fields
        assert (ext["AccessKey"], ext["OnsChannel"]) == ("ak", "LOCAL")
        content = acl.verify_content(ext, command.body)
        assert acl.calc_signature(content, "sk") == ext["Signature"], command
        assert acl.signature_matches(content, "sk", ext["Signature"])
        assert not acl.signature_matches(content, "sK", ext["Signature"])
        assert not acl.signature_matches(content, "sk", None)
    # the send signs numbers the client sent as JSON numbers by their decimal text, and the body
    send = frames[1]
    assert send.ext_fields["defaultTopicQueueNums"] == "4" and send.body
    resigned = dict(send.ext_fields)
    assert acl.sign(resigned, send.body, "ak", "sk") == send.ext_fields["Signature"]
    assert resigned == send.ext_fields


def test_every_captured_client_frame_is_signed_the_same_way(vectors_dir: Path) -> None:
    """Without credentials the C++ client signs with an empty key; with them (flow f) with "sk"."""
    checked = 0
    for flow in sorted(p for p in vectors_dir.iterdir() if (p / "index.jsonl").is_file()):
        secret = "sk" if flow.name == "f_acl_credentials" else ""
        for command in client_frames(flow):
            ext = command.ext_fields
            assert acl.calc_signature(acl.verify_content(ext, command.body), secret) == ext["Signature"], (
                flow,
                command,
            )
            checked += 1
    assert checked >= 200


def test_sign_orders_keys_as_java_and_excludes_what_the_broker_excludes() -> None:
    ext = {"topic": "T", "B": "2", "a": "1", "A": "0"}
    signature = acl.sign(ext, b"\x00body", "AK", "secret-key")
    assert ext["AccessKey"] == "AK" and ext["Signature"] == signature
    # uppercase before lowercase, values only, then the raw body
    # (keys A, AccessKey, B, a, topic; Signature left out)
    assert acl.signing_content(ext, b"\x00body") == b"0AK21T\x00body"
    assert acl.calc_signature(b"0AK21T\x00body", "secret-key") == signature
    # the broker also leaves out _UNIQUE_KEY_QUERY, which is added after signing
    ext[acl.UNIQUE_KEY_QUERY] = "true"
    assert acl.signature_matches(acl.verify_content(ext, b"\x00body"), "secret-key", signature)
    assert not acl.signature_matches(acl.verify_content(ext, b"\x00bodY"), "secret-key", signature)
    # signing again replaces the signature; a SecurityToken is signed too
    again = acl.sign(ext, b"\x00body", "AK", "secret-key", security_token="tok")
    assert ext["SecurityToken"] == "tok" and again != signature


def test_signing_the_request_code() -> None:
    ext = {"topic": "T"}
    signature = acl.sign(ext, None, "AK", "secret-key", code=202)
    assert ext[acl.REQUEST_CODE] == "202"
    assert acl.signature_matches(acl.verify_content(ext, None), "secret-key", signature)  # covered
    assert acl.signed_code_error(ext, 202) is None
    assert acl.signed_code_error(ext, 215) == "the signed request code 202 is not the request's code 215"
    assert acl.signed_code_error({"topic": "T"}, 202) == "the request code is not signed: no RequestCode field"
    ext[acl.REQUEST_CODE] = "215"
    assert not acl.signature_matches(acl.verify_content(ext, None), "secret-key", signature)


def test_non_ascii_keys_sort_by_utf16_units() -> None:
    # Java's String order puts U+FF21 (a BMP letter) after U+10000, which is a surrogate pair
    ext = {"\uff21": "x", "\U00010000": "y"}
    assert acl.signing_content(ext) == b"yx"


def test_acl_headers_round_trip() -> None:
    config = acl.PlainAccessConfig(
        access_key="RocketMQ",
        secret_key="12345678",
        white_remote_address="192.168.0.*",
        admin=True,
        default_topic_perm="DENY",
        topic_perms=["topicA=PUB", "topicB=SUB"],
    )
    ext = config.to_header().to_ext()
    assert ext == {
        "accessKey": "RocketMQ",
        "secretKey": "12345678",
        "whiteRemoteAddress": "192.168.0.*",
        "admin": "true",
        "defaultTopicPerm": "DENY",
        "topicPerms": "topicA=PUB,topicB=SUB",
    }
    back = acl.PlainAccessConfig.from_header(acl.CreateAccessConfigRequestHeader.from_ext(ext))
    assert back == config
    white = acl.UpdateGlobalWhiteAddrsConfigRequestHeader("10.10.103.*,192.168.0.*", None)
    assert white.to_ext() == {"globalWhiteAddrs": "10.10.103.*,192.168.0.*"}
    assert acl.split_list("a, b,,c") == ["a", "b", "c"] and acl.split_list(None) is None


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ({"secretKey": "x"}, "no accessKey"),
        ({"accessKey": "a", "topicPerms": "t=SUB"}, "topicPerms must be a list"),
        ([1], "must be a mapping"),
    ],
)
def test_plain_access_config_rejects_malformed_accounts(raw: object, error: str) -> None:
    with pytest.raises(Exception, match=error):
        acl.PlainAccessConfig.from_json(raw)  # type: ignore[arg-type]


def test_yaml_numbers_are_read_as_text() -> None:
    config = acl.PlainAccessConfig.from_json({"accessKey": "RocketMQ", "secretKey": 12345678, "admin": "true"})
    assert config.secret_key == "12345678" and config.admin is True
    body = acl.AclConfigBody(["10.*.*.*"], [config])
    assert acl.AclConfigBody.from_json(json.loads(json.dumps(body.to_json()))) == body

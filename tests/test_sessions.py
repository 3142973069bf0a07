"""Streamable HTTP session ids: v1.<payload>.<mac>, signed with the machine key."""

import base64
import os
import stat
import string

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import reticle

KEY = bytes(range(32))
B64URL = string.ascii_letters + string.digits + "-_"
FUZZ = settings(max_examples=300, database=None, deadline=None)


@pytest.fixture(scope="module")
def signer():
    return reticle._SessionSigner(KEY)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def test_mint_then_verify(signer):
    sid = signer.mint()
    assert signer.verify(sid)
    assert reticle._SessionSigner(KEY).verify(sid)  # stateless: any signer with the key


def test_shape(signer):
    sid = signer.mint(now=1_700_000_000)
    version, payload, mac = sid.split(".")
    assert version == "v1"
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    assert len(raw) == 24
    assert int.from_bytes(raw[16:], "big") == 1_700_000_000
    assert len(base64.urlsafe_b64decode(mac + "=" * (-len(mac) % 4))) == 32


def test_ids_are_unique(signer):
    ids = {signer.mint() for _ in range(500)}
    assert len(ids) == 500


def test_visible_ascii_only(signer):
    for _ in range(200):
        sid = signer.mint()
        assert all(33 <= ord(c) <= 126 for c in sid)
        assert set(sid) <= set(B64URL + ".")
        assert len(sid) <= 128


@pytest.mark.parametrize("part", [0, 1, 2])
def test_tampering_any_character_of_any_part_fails(signer, part):
    sid = signer.mint()
    parts = sid.split(".")
    for i, c in enumerate(parts[part]):
        for replacement in ("A", "z", "-"):
            if replacement == c:
                continue
            changed = list(parts)
            changed[part] = parts[part][:i] + replacement + parts[part][i + 1:]
            assert not signer.verify(".".join(changed)), (part, i, replacement)


def test_swapping_payloads_between_ids_fails(signer):
    a = signer.mint().split(".")
    b = signer.mint().split(".")
    assert not signer.verify(".".join([a[0], a[1], b[2]]))
    assert not signer.verify(".".join([a[0], b[1], a[2]]))


@pytest.mark.parametrize("mangle", [
    lambda s: s + ".",
    lambda s: s + "=",
    lambda s: s.replace(".", "..", 1),
    lambda s: s.upper(),
    lambda s: s[:-1],
    lambda s: "." + s,
    lambda s: s.replace("v1.", "V1.", 1),
    lambda s: s.replace("v1.", "v2.", 1),
    lambda s: s.replace("v1.", "", 1),
    lambda s: s + " ",
    lambda s: " " + s,
    lambda s: s + "\n",
], ids=["dot", "pad", "empty-part", "upper", "short", "leading-dot", "V1", "v2", "no-version",
        "trailing-space", "leading-space", "newline"])
def test_malformed_ids_fail(signer, mangle):
    assert not signer.verify(mangle(signer.mint()))


def test_foreign_key_fails(signer):
    other = reticle._SessionSigner(os.urandom(32))
    assert not signer.verify(other.mint())
    assert not other.verify(signer.mint())


def test_non_canonical_base64_fails(signer):
    sid = signer.mint()
    version, payload, mac = sid.split(".")
    raw_mac = base64.urlsafe_b64decode(mac + "=")
    # 32 bytes take 43 characters with two spare bits in the last one: setting
    # them decodes to the same bytes, but it is not the id this machine minted.
    last = B64URL.index(mac[-1])
    for spare in (1, 2, 3):
        alias = mac[:-1] + B64URL[last | spare] if last | spare != last else None
        if alias and alias != mac:
            assert base64.urlsafe_b64decode(alias + "=") == raw_mac
            assert not signer.verify(".".join([version, payload, alias]))
    # the standard alphabet, padding and ignored characters decode to the same bytes too
    std = sid.replace("-", "+").replace("_", "/")
    if std != sid:
        assert not signer.verify(std)
    assert not signer.verify(".".join([version, payload, mac + "="]))
    assert not signer.verify(".".join([version, payload[:10] + "!" + payload[10:], mac]))
    assert not signer.verify(".".join([version, payload[:10] + "\n" + payload[10:], mac]))


def test_wrong_lengths_fail(signer):
    version, payload, mac = signer.mint().split(".")
    assert not signer.verify(".".join([version, payload[:-4], mac]))
    assert not signer.verify(".".join([version, payload + "AAAA", mac]))
    assert not signer.verify(".".join([version, payload, mac[:-4]]))
    # a well-formed id of the right MAC over a longer payload is still refused
    longer = b64url(os.urandom(30))
    assert not signer.verify(".".join([version, longer, mac]))


@pytest.mark.parametrize("value", [None, "", ".", "..", "v1..", "v1.a.b", "x" * 10_000, "v1." + "A" * 300,
                                   "v1.é.ü", "v1.\x00.\x00"])
def test_garbage_never_raises(signer, value):
    assert signer.verify(value) is False


def test_max_age_expiry():
    signer = reticle._SessionSigner(KEY, max_age_s=60)
    sid = signer.mint(now=10_000)
    assert signer.verify(sid, now=10_000)
    assert signer.verify(sid, now=10_060)
    assert not signer.verify(sid, now=10_061)
    assert reticle._SessionSigner(KEY).verify(sid, now=10_000_000)  # no max age: no expiry


def test_short_key_refused():
    with pytest.raises(ValueError, match="at least 32 bytes"):
        reticle._SessionSigner(b"x" * 31)


def test_machine_key_file(tmp_path):
    state = tmp_path / "state"
    key = reticle._StateDir(str(state)).machine_key()
    assert len(key) == 32
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state / "machine.key").st_mode) == 0o600
    assert reticle._StateDir(str(state)).machine_key() == key


def test_ids_survive_a_restart(tmp_path):
    first = reticle.Hub(state_dir=str(tmp_path / "state"))
    sid = first.signer.mint()
    second = reticle.Hub(state_dir=str(tmp_path / "state"))
    assert second.signer.verify(sid)
    other_machine = reticle.Hub(state_dir=str(tmp_path / "elsewhere"))
    assert not other_machine.signer.verify(sid)


@FUZZ
@given(st.text(max_size=300))
def test_fuzz_random_text_never_verifies(value):
    assert reticle._SessionSigner(KEY).verify(value) is False


@FUZZ
@given(st.text(alphabet=B64URL, min_size=32, max_size=32), st.text(alphabet=B64URL, min_size=43, max_size=43))
def test_fuzz_well_formed_random_ids_never_verify(payload, mac):
    assert reticle._SessionSigner(KEY).verify("v1.%s.%s" % (payload, mac)) is False


@FUZZ
@given(st.integers(min_value=0, max_value=2 ** 40), st.integers(min_value=0, max_value=2 ** 40))
def test_fuzz_every_minted_id_verifies_without_max_age(issued, now):
    signer = reticle._SessionSigner(KEY)
    assert signer.verify(signer.mint(now=issued), now=now)


def test_an_id_from_a_clock_a_day_ahead_fails():
    signer = reticle._SessionSigner(KEY, max_age_s=60)
    assert signer.verify(signer.mint(now=10_000 + 3600), now=10_000)  # some skew is allowed
    assert not signer.verify(signer.mint(now=10_000 + 2 * 86400), now=10_000)


def test_the_daemon_gives_ids_30_days(tmp_path):
    hub = reticle.Hub(state_dir=str(tmp_path / "state"))
    assert hub.signer.max_age_s == reticle.SESSION_MAX_AGE_S == 30 * 86400
    assert not hub.signer.verify(hub.signer.mint(now=0))  # signed correctly, in 1970

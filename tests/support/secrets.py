"""Hypothesis strategies of secrets and personal data (each redaction rule's shapes), and
text placed around them."""

import base64
import string

from hypothesis import strategies as st

from cas.format import redaction
from cas.format.redaction import luhn


def _digits(n: int) -> st.SearchStrategy[str]:
    return st.text("0123456789", min_size=n, max_size=n)


def luhn_complete(body: str) -> str:
    """`body` with the check digit that makes it Luhn-valid."""
    return next(body + d for d in "0123456789" if luhn(body + d))


def iban_of(country: str, bban: str) -> str:
    digits = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def _groups(text: str, size: int = 4, sep: str = " ") -> str:
    return sep.join(text[i:i + size] for i in range(0, len(text), size))


@st.composite
def cards(draw) -> str:
    length = draw(st.integers(13, 19))
    number = luhn_complete(draw(st.sampled_from("23456")) + draw(_digits(length - 2)))
    if length == 16 and draw(st.booleans()):
        return _groups(number, 4, draw(st.sampled_from(" -")))
    return number


@st.composite
def ibans(draw) -> str:
    country = draw(st.sampled_from(sorted(redaction.IBAN_LENGTHS)))
    bban = draw(st.text(string.digits + string.ascii_uppercase,
                        min_size=redaction.IBAN_LENGTHS[country] - 4,
                        max_size=redaction.IBAN_LENGTHS[country] - 4))
    iban = iban_of(country, bban)
    return _groups(iban) if draw(st.booleans()) else iban


@st.composite
def phones(draw) -> str:
    def d(n: int) -> str:
        return draw(_digits(n))

    shape = draw(st.integers(0, 5))
    if shape == 0:
        return f"+{draw(st.integers(1, 99))} {d(3)} {d(3)} {d(4)}"
    if shape == 1:
        return f"+1 ({d(3)}) {d(3)}-{d(4)}"
    if shape == 2:
        return f"+{d(2)}{d(9)}"
    if shape == 3:
        sep = draw(st.sampled_from("-. "))
        return f"({d(3)}) {d(3)}-{d(4)}" if sep == " " else f"{d(3)}{sep}{d(3)}{sep}{d(4)}"
    if shape == 4:
        return f"0{d(2)} {d(4)} {d(4)}"
    return "0" + d(1) + "".join(" " + d(2) for _ in range(4))


emails = st.builds(lambda local, domain, tld: f"{local}@{domain}.{tld}",
                   st.from_regex(r"[a-z0-9][a-z0-9._+-]{0,15}[a-z0-9]", fullmatch=True),
                   st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True),
                   st.sampled_from(["com", "org", "co", "io", "example", "de"]))
_B64URL = string.ascii_letters + string.digits + "-_"
_TOKEN = string.ascii_letters + string.digits + "-._~+/"


def _b64url(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    return st.text(_B64URL, min_size=min_size, max_size=max_size)


bearers = st.builds(lambda t, n: f"Bearer {t}{n}", st.text(_TOKEN, min_size=16, max_size=40),
                    _digits(4))
jwts = st.builds(lambda h, p, s: f"eyJ{h}.eyJ{p}.{s}", _b64url(8, 40), _b64url(8, 80),
                 _b64url(0, 43))
api_keys = st.one_of(
    st.builds(lambda p, b: p + b, st.sampled_from(["sk-", "sk-proj-", "sk-ant-api03-"]),
              st.text(string.ascii_letters + string.digits, min_size=20, max_size=48)),
    st.builds(lambda p, b: p + b, st.sampled_from(["ghp_", "gho_", "ghs_"]),
              st.text(string.ascii_letters + string.digits, min_size=36, max_size=36)),
    st.builds(lambda b: "github_pat_" + b, st.text(_B64URL.replace("-", ""), min_size=22,
                                                   max_size=82)),
    st.builds(lambda p, b: p + b, st.sampled_from(["xoxb-", "xoxp-", "xoxa-"]),
              st.text(string.ascii_letters + string.digits + "-", min_size=10, max_size=40)),
    st.builds(lambda b: "AIza" + b, st.text(_B64URL, min_size=35, max_size=35)),
    st.builds(lambda b: "glpat-" + b, st.text(_B64URL, min_size=20, max_size=20)),
)
aws_keys = st.builds(lambda p, b: p + b, st.sampled_from(["AKIA", "ASIA"]),
                     st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16))
private_keys = st.builds(
    lambda kind, body: (f"-----BEGIN {kind}PRIVATE KEY-----\n" + _groups(body, 64, "\n") +
                        f"\n-----END {kind}PRIVATE KEY-----"),
    st.sampled_from(["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]),
    st.binary(min_size=16, max_size=120).map(lambda b: base64.b64encode(b).decode()))

SECRETS = {"email": emails, "phone": phones(), "card": cards(), "iban": ibans(),
           "bearer": bearers, "jwt": jwts, "api_key": api_keys,
           "aws_access_key": aws_keys, "private_key": private_keys}
secrets = st.sampled_from(sorted(SECRETS)).flatmap(
    lambda kind: st.tuples(st.just(kind), SECRETS[kind]))


def sensitive_part(kind: str, secret: str) -> str:
    """What must not survive: a bearer token's scheme word may."""
    return secret.split(" ", 1)[1] if kind == "bearer" else secret


# Text around a secret: anything, kept apart from it by a space (a secret glued to a longer
# word or number is another token, e.g. a card number inside a longer digit run).
around = st.text(max_size=20)


def placed(prefix: str, secret: str, suffix: str) -> str:
    return f"{prefix} {secret} {suffix}"

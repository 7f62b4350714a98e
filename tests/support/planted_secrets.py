"""Made-up secrets in the shapes the redactor must catch, each with a text that carries it the way it
arrives in the wild (an env line, a header, a URL, a flag). Shared by the redaction table and the leak test."""

from __future__ import annotations

from typing import NamedTuple


class Planted(NamedTuple):
    kind: str
    carrier: str  # how the secret arrives
    secret: str  # what must never come out


SLACK_BOT = "xoxb-" + "2048596371-4096813725-Zr8TqLm2Vx6NcYb1HkWp4dJe"
SLACK_USER = "xoxp-" + "3145926535-8979323846-2643383279-aB3dE5fG7hI9"
SLACK_HOOK_PATH = "T04EYASHK/B06HOOKXY/q8W2e4R6t8Y0u2I4o6P8a0S2"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJleWFzLWxlYWstdGVzdCIsImFkbWluIjp0cnVlfQ"
    ".Qm9ndXNTaWduYXR1cmVGb3JFeWFzTGVha1Rlc3Q"
)
URL_PASSWORD = "Pw/with@slash9"  # a password holding '/' and '@'
URL_TOKEN = "tokInUrl7Hq2Zp9Lx4"
COOKIE = "sessCookie5Rv8Kd3Mw1"
SET_COOKIE = "setCookie2Yb6Nf9Qs4"
CREDENTIALS = "credVal3Jt7Pw2Xe8"
PASSPHRASE = "passphraseVal6Dk1Rm9"
AUTH = "authVal8Gh3Lq5Zs2"
API_KEY_FLAG = "flagKey4Vn7Bc2Wx9"
DB_PASS = "dbPass1Ty5Ui8Op3"
AZURE_KEY = "azKey7Hn2Qw9Er4Ty6"  # a name ending in _KEY, not API_KEY
AMZ_SIGNATURE = "5d41402abc4b2a76b9719d911017c592ae0ff1e3"  # a presigned URL's signature
QUERY_KEY = "AIzaQk3Vb8Nm1Lp6Xs0"  # ?key= in a base_url
UNIT_ENV = "licCode9Wz4Rx7Tv2"  # a unit's Environment= value whose name says nothing
NOTIFY_TOKEN = "ntfyTok5Gh8Jk3Lm6"  # a token inside notify_command
SHAPED_ENV = "hf_" + "Lm3Qx8Rt2Vb6Nw1Kz9Pc4Hd7Jf5Gs0Yu"  # an HF token as the value of a harmless-looking name
CURL_PASSWORD = "pa55wordCu7Rl3"  # curl -u user:password
MYSQL_PASSWORD = "myPw4Sq8Lz2"  # mysql -pPASSWORD
MIDDLE_SECRET = "midSec6Th1Ng9"  # a name with SECRET in the middle

PLANTED = [
    Planted("slack-bot", f"SLACK_BOT={SLACK_BOT}", SLACK_BOT),
    Planted("slack-user", f"the user token is {SLACK_USER}", SLACK_USER),
    Planted("slack-webhook", f"post to https://hooks.slack.com/services/{SLACK_HOOK_PATH}", SLACK_HOOK_PATH),
    Planted("jwt", f"ID {JWT}", JWT),
    Planted("url-password", f"postgres://eyas:{URL_PASSWORD}@db.internal:5432/prod", URL_PASSWORD),
    Planted("url-token", f"git clone https://{URL_TOKEN}@git.example.com/drafters.git", URL_TOKEN),
    Planted("cookie", f"Cookie: session={COOKIE}; theme=dark", COOKIE),
    Planted("set-cookie", f"Set-Cookie: id={SET_COOKIE}; HttpOnly", SET_COOKIE),
    Planted("credentials-name", f"DB_CREDENTIALS_JSON={CREDENTIALS}", CREDENTIALS),
    Planted("passphrase-name", f"GPG_PASSPHRASE={PASSPHRASE}", PASSPHRASE),
    Planted("auth-name", f"BASIC_AUTH={AUTH}", AUTH),
    Planted("api-key-flag", f"vllm serve m --api-key {API_KEY_FLAG} --port 8000", API_KEY_FLAG),
    Planted("pass-name", f"DB_PASS={DB_PASS}", DB_PASS),
    Planted("key-name", f"AZURE_OPENAI_KEY={AZURE_KEY}", AZURE_KEY),
    Planted(
        "presigned-url",
        f"https://b.s3.amazonaws.com/m.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={AMZ_SIGNATURE}",
        AMZ_SIGNATURE,
    ),
    Planted("url-query-key", f"base_url = http://10.0.0.5:8000/v1?key={QUERY_KEY}", QUERY_KEY),
    Planted("unit-environment", f"Environment=NCCL_DEBUG=INFO LICENSE_SERVER_CODE={UNIT_ENV}", UNIT_ENV),
    Planted("notify-command", f"curl -fsS -d done 'https://ntfy.example.com/eyas?auth={NOTIFY_TOKEN}'", NOTIFY_TOKEN),
    Planted("curl-user", f"curl -u eyas:{CURL_PASSWORD} https://ntfy.example.com/eyas", CURL_PASSWORD),
    Planted("mysql-password", f"mysqldump -h db -u eyas -p{MYSQL_PASSWORD} runs", MYSQL_PASSWORD),
    Planted("secret-mid-name", f"MY_SECRET_THING={MIDDLE_SECRET}", MIDDLE_SECRET),
]

"""Secrets stay out of everything stored or printed: URL userinfo (``--api-base http://user:pass@host``) and the
encoded forms of every key (base64, URL-encoding) that a server may echo. Checked against a real HTTP server on
127.0.0.1 by decoding whatever was written, not by re-running the scrubber's own encodings."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import uuid
from pathlib import Path
from urllib.parse import unquote, unquote_plus

import pytest

from groundstate.cli import build_parser, main
from groundstate.cli.options import run_settings
from groundstate.errors import scrub_secrets, strip_userinfo
from groundstate.lm.cache import lm_identity
from groundstate.lm.config import LMConfig
from groundstate.lm.specs import describe_lm, get_lm
from groundstate.testing import scripted_lm

KEY = "canary+Key/7f3e=91xyz-Q"  # characters that URL-encoding and both base64 alphabets all change
USER, PASSWORD = "gsuser", "pwCanary-8d41c9"


@pytest.fixture(autouse=True)
def canary_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def with_password(url: str, password: str = PASSWORD) -> str:
    return url.replace("http://", f"http://{USER}:{password}@")


def decodings(text: str, depth: int = 2) -> list[str]:
    """``text``, URL-decoded, and every base64-looking token in it decoded (both alphabets), ``depth`` times."""
    found = [text, unquote(text), unquote_plus(text)]
    if depth == 0:
        return found
    for source in list(found):
        for token in re.findall(r"[A-Za-z0-9+/_-]{8,}=*", source):
            body = token.rstrip("=")
            for alphabet in (None, b"-_"):
                for start in range(4):  # a token cut out of a longer encoding may start off its group boundary
                    piece = body[start:]
                    try:
                        raw = base64.b64decode(piece + "=" * (-len(piece) % 4), altchars=alphabet)
                    except (binascii.Error, ValueError):
                        continue
                    found += decodings(raw.decode("utf-8", "ignore"), depth - 1)
    return found


def leaks(text: str, *secrets: str) -> list[str]:
    """The secrets ``text`` still gives away, raw or encoded (URL-encoding, base64 once or twice)."""
    every = decodings(text)
    return [s for s in secrets if any(s in t for t in every)]


def qa_file(path: Path, n: int = 2) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"question {i}?", "answer": "alpha"}) + "\n"
                            for i in range(n)))
    return path


def written(*dirs: Path) -> list[str]:
    return [p.read_text(errors="replace") for d in dirs if d.exists() for p in d.rglob("*") if p.is_file()]


def test_the_leak_check_finds_every_encoding_it_is_meant_to():
    header = f"Bearer {KEY}"
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    for text in (KEY, base64.b64encode(header.encode()).decode(), base64.urlsafe_b64encode(KEY.encode()).decode(),
                 re.sub("=", "", base64.b64encode(("x" + KEY).encode()).decode()), header.replace("+", "%2B")):
        assert leaks(text, KEY) == [KEY]
    assert leaks(base64.b64encode(f"Basic {basic}".encode()).decode(), PASSWORD) == [PASSWORD]
    assert leaks("connection refused", KEY) == []


def test_scrub_removes_raw_url_encoded_and_base64_forms(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_PASSWORD", "db-Pass/word+42")
    texts = [f"echo {base64.b64encode(f'Bearer {KEY}'.encode()).decode()} end",
             f"echo {base64.urlsafe_b64encode(KEY.encode()).decode().rstrip('=')} end",
             "echo " + base64.b64encode(json.dumps({"key": KEY}).encode()).decode() + " end",
             "echo " + KEY.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D") + " end",
             "echo " + KEY.replace("+", "%2b").replace("/", "%2f").replace("=", "%3d") + " end",
             f"Authorization: Basic {base64.b64encode(f'{USER}:{KEY}'.encode()).decode()}",
             f"db said {base64.b64encode(b'postgres:db-Pass/word+42').decode()}"]
    for text in texts:
        clean = scrub_secrets(text)
        assert leaks(clean, KEY, "db-Pass/word+42") == [], (text, clean)
        assert "[redacted]" in clean
    unrelated = f"reply {base64.b64encode(b'an ordinary reply from the model').decode()} and 50%2B more"
    assert scrub_secrets(unrelated) == unrelated


def test_url_userinfo_is_stripped_wherever_a_url_is_described(monkeypatch):
    url = with_password("http://127.0.0.1:8000/v1")
    assert strip_userinfo(url) == "http://127.0.0.1:8000/v1"
    assert strip_userinfo("see http://a:b@c@host/x?u=me@there and mailto me@home") == \
        "see http://host/x?u=me@there and mailto me@home"
    assert strip_userinfo(None) is None
    lm = get_lm("openai/m", api_base=url)
    assert lm.kwargs["api_base"] == url  # the call itself keeps the credentials
    assert describe_lm(lm)["api_base"] == "http://127.0.0.1:8000/v1"
    state = lm.dump_state()  # what a predictor's saved state (and the run's program_state hash) holds
    assert state["api_base"] == "http://127.0.0.1:8000/v1" and PASSWORD not in json.dumps(state, default=str)
    other = get_lm("openai/m", api_base=with_password("http://127.0.0.1:8000/v1", "anotherPassword9"))
    assert lm_identity(lm) == lm_identity(other)  # the password changes who may ask, not the answers
    assert lm_identity(lm) != lm_identity(get_lm("openai/m", api_base="http://127.0.0.1:8001/v1"))
    config = LMConfig(default={"model": "openai/m", "api_base": url},
                      roles={"agent.1": {"model": "openai/n", "api_base": url}})
    assert PASSWORD not in json.dumps(config.describe())
    assert config.worker_spec()["roles"]["agent.1"]["api_base"] == url  # Ray workers must reach the server
    args = build_parser().parse_args(["run", "qa", "--backend", "ray", "--lm", "openai/m", "--api-base", url])
    assert run_settings(args).lm_spec["default"]["api_base"] == url


@pytest.mark.timeout(90)
def test_api_base_password_is_sent_but_never_stored_or_printed(tmp_path, servers, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    server = servers()
    model, runs = f"openai/secret-{uuid.uuid4().hex[:8]}", tmp_path / "runs"
    data = qa_file(tmp_path / "qa.jsonl")

    def run(password: str) -> int:
        return main(["-vv", "run", "qa", "--data", str(data), "--runs-dir", str(runs), "--lm", model,
                     "--api-base", with_password(server.url, password), "--threads", "1", "--no-progress"])

    assert run(PASSWORD) == 0
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert [r["authorization"] for r in server.requests] == [basic] * 2  # the URL's credentials reached the server
    (run_dir,) = runs.iterdir()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert [r["error"] for r in rows] == [None, None]
    assert json.loads((run_dir / "config.json").read_text())["lm"]["api_base"] == server.url
    assert run("aDifferentPassword7") == 0  # another user's password: the same run id, found finished
    assert len(list(runs.iterdir())) == 1 and len(server.requests) == 2
    captured = capsys.readouterr()
    for text in [captured.out, captured.err, caplog.text, *written(runs)]:
        assert leaks(text, PASSWORD, "aDifferentPassword7") == []


@pytest.mark.timeout(90)
def test_encoded_echoes_of_the_key_never_reach_results_logs_or_terminal(tmp_path, servers, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    server = servers("401-encoded")
    runs = tmp_path / "runs"
    config = tmp_path / "lm.toml"
    config.write_text(f'[default]\nmodel = "openai/echo-{uuid.uuid4().hex[:8]}"\napi_base = "{server.url}"\n'
                      "num_retries = 0\n")
    code = main(["-vv", "run", "qa", "--data", str(qa_file(tmp_path / "qa.jsonl")), "--runs-dir", str(runs),
                 "--lm-config", str(config), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1 and "record q0 failed" in caplog.text  # every record failed: exit 1 (issue 22 item 6)
    assert all(r["authorization"] == f"Bearer {KEY}" for r in server.requests)
    rows = [json.loads(line) for line in next(runs.iterdir()).joinpath("results.jsonl").read_text().splitlines()]
    assert all("invalid credentials: header (base64)" in r["error"] for r in rows)  # the echo came back, scrubbed
    for text in [captured.out, captured.err, caplog.text, *written(runs)]:
        assert leaks(text, KEY) == []


@pytest.mark.timeout(60)
def test_lm_check_names_the_server_without_its_password(servers, capsys):
    server = servers("401-encoded")
    code = main(["lm", "check", "--lm", "openai/m", "--api-base", with_password(server.url), "--lm-timeout", "5"])
    captured = capsys.readouterr()
    assert code == 2 and server.requests  # the server was reached with the URL's credentials, and refused them
    assert f"lm check failed for openai/m at {server.url}: the server refused the API key" in captured.err
    assert f'"api_base": "{server.url}"' in captured.out
    assert leaks(captured.out + captured.err, PASSWORD, f"{USER}:{PASSWORD}") == []


def test_saved_programs_and_their_evaluations_hold_no_url_password(tmp_path, monkeypatch, capsys):
    from groundstate.eval.benchmarks.offquery.loader import save_instances
    from groundstate.eval.benchmarks.offquery.synthetic import generate

    lm = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    save_instances(train, generate("healthcare", "main", 4, seed=0))
    save_instances(test, generate("healthcare", "main", 2, seed=1))
    config = tmp_path / "lm.toml"
    url = with_password("http://127.0.0.1:9/v1")
    config.write_text(f'[default]\nmodel = "openai/m"\napi_base = "{url}"\n\n'
                      f'[roles."resolve.*"]\nmodel = "openai/n"\napi_base = "{url}"\n')
    out, runs = tmp_path / "opt", tmp_path / "runs"
    assert main(["optimize", "reground", "--stage", "resolve", "--data", str(train), "--out", str(out),
                 "--max-demos", "1", "--lm-config", str(config), "--api-base", url]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["lms"]["roles"]["resolve.*"]["api_base"] == "http://127.0.0.1:9/v1"
    assert main(["evaluate", str(out), "--data", str(test), "--runs-dir", str(runs), "--lm-config", str(config),
                 "--api-base", url, "--no-progress"]) == 0
    captured = capsys.readouterr()
    for text in [captured.out, captured.err, *written(out, runs)]:
        assert leaks(text, PASSWORD) == []

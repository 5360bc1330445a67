"""Every fenced code block in README.md and docs/*.md is exercised, or marked illustrative
(docs/README.md, "Code blocks in these pages").

A block's info string starts with its language; a second word `illustrative` marks a block the
suite does not run, and `conf fragment` a part of a configuration. For each block:

- no info string: fails;
- `conf`: `relayd check-config -c FILE` exits 0 (certificate and key paths are replaced by a test
  certificate); `conf fragment`: the same after a minimal base (use-auth-secret,
  static-auth-secret, realm);
- `sh` / `console`: every command (backslash continuations joined, comments ignored):
  - `relayd check-config`, `relayd credentials`, `relayd --version` run for real; a `relayd
    [serve]` line's options go through `relayd check-config`, which refuses unknown keys;
  - other `relayd <subcommand>` and `relay-bench` lines may use only options their `--help` lists;
  - `curl` and `kill -HUP "$(cat PIDFILE)"` run against a relayd this module starts
    (`127.0.0.1:8080`, the bearer tokens and the pidfile are replaced by its own), curl must get 200;
  - `./scripts/NAME` (any repository path) must exist, be executable and know its options;
  - `kubectl apply -f FILE`: FILE exists in deploy/kubernetes/;
  - anything else fails: mark the block illustrative;
- `json` parses with json.loads, `yaml` with yaml.safe_load;
- any other language must be marked illustrative.

Also: relative links and mentions of docs pages resolve, and both README.md and docs/README.md
list every page of docs/.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import re
import shlex
import shutil
import subprocess
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, RelayServer, make_test_cert, running, server_kind

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own documentation")

DOCS = REPO_ROOT / "docs"
DOC_FILES = [REPO_ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
RUN_TIMEOUT = 20.0
CHECKED_LANGUAGES = {"conf", "sh", "console", "json", "yaml"}
MODIFIERS = {"illustrative", "fragment"}
# The minimal configuration a `conf fragment` is appended to.
BASE_CONFIG = "use-auth-secret\nstatic-auth-secret=docs-test-secret-4f1d9a\nrealm=example.org\n"
# What the docs' examples call the API; replaced by the test relayd's API address.
DOC_API_ADDRESS = "127.0.0.1:8080"
CERT_KEYS = {"cert": "cert.pem", "api-cert": "cert.pem", "pkey": "pkey.pem", "api-pkey": "pkey.pem"}
ADMIN_PATHS = ("/api/v1/allocations", "/api/v1/users", "/api/v1/blocks")
# check-config output that means a documented block does something it should not.
BAD_CHECK_CONFIG_OUTPUT = ("unknown key", "does not implement", "is not a readable file")


# --- extraction ------------------------------------------------------------------------------

FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # the opening fence's line, 1-based
    info: tuple[str, ...]
    text: str
    closed: bool = True

    @property
    def lang(self) -> str:
        return self.info[0] if self.info else ""

    @property
    def modifiers(self) -> tuple[str, ...]:
        return self.info[1:]

    @property
    def illustrative(self) -> bool:
        return "illustrative" in self.modifiers

    @property
    def where(self) -> str:
        try:
            name = self.path.relative_to(REPO_ROOT)
        except ValueError:
            name = self.path
        return f"{name}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where} {' '.join(self.info) or '(no info string)'}"


def extract_blocks(markdown: str, path: Path) -> list[Block]:
    """Every fenced block (``` or ~~~, indented inside list items too), with its body dedented
    by the fence's indentation."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m or (m["fence"][0] == "`" and "`" in m["info"]):
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"])
        closing = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            line = lines[j]
            strip = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[strip:])
            j += 1
        blocks.append(Block(path, i + 1, tuple(m["info"].split()), "\n".join(body) + "\n", closed=j < len(lines)))
        i = j + 1
    return blocks


def all_blocks() -> list[Block]:
    return [b for path in DOC_FILES for b in extract_blocks(path.read_text(), path)]


@dataclass(frozen=True)
class Command:
    line: int  # line in the markdown file
    text: str


def commands(block: Block) -> list[Command]:
    """Commands of an sh or console block: backslash continuations joined; comment and empty
    lines skipped; in a console block only `$ ` lines (and their continuations) are commands."""
    out: list[Command] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i]
        if block.lang == "console":
            if not line.startswith("$ "):
                i += 1
                continue
            line = line[2:]
        parts = [line]
        while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            parts[-1] = parts[-1].rstrip()[:-1]
            i += 1
            nxt = lines[i]
            parts.append(nxt[2:] if block.lang == "console" and nxt.startswith("> ") else nxt)
        i += 1
        text = " ".join(p.strip() for p in parts).strip()
        if text and not text.startswith("#"):
            out.append(Command(block.line + 1 + start, text))
    return out


# --- running things --------------------------------------------------------------------------


def relayd_binary() -> str:
    return RelayServer.default_binary("relayd")


def relay_bench_binary() -> Path:
    explicit = os.environ.get("RELAY_BENCH_BIN")
    return Path(explicit) if explicit else Path(relayd_binary()).parent / "relay-bench"


def run(argv: list[str], cwd: Path = REPO_ROOT, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@functools.lru_cache(maxsize=None)
def relayd_help(*path: str) -> str:
    result = run([relayd_binary(), *path, "--help"])
    assert result.returncode == 0, f"relayd {' '.join(path)} --help: {result.stderr}"
    return result.stdout + result.stderr


@functools.lru_cache(maxsize=None)
def relayd_subcommands(*path: str) -> tuple[str, ...]:
    """The names listed under SUBCOMMANDS in `relayd [path] --help`."""
    names, inside = [], False
    for line in relayd_help(*path).splitlines():
        if line.strip() == "SUBCOMMANDS:":
            inside = True
        elif inside and line.startswith("  ") and not line.startswith("   ") and line.strip():
            names.append(line.split()[0])
        elif inside and line.strip() and not line.startswith(" "):
            inside = False
    return tuple(names)


@functools.lru_cache(maxsize=None)
def relay_bench_help() -> str:
    binary = relay_bench_binary()
    if binary.is_file():
        result = run([str(binary), "--help"])
        return result.stdout + result.stderr
    # Not built: the options as its sources spell them.
    return "\n".join(p.read_text() for p in (REPO_ROOT / "Sources" / "relay-bench").rglob("*.swift"))


def mentions(text: str, option: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(option) + r"(?![\w-])", text) is not None


def options(tokens: list[str]) -> list[str]:
    """Option names used (`--name` of `--name=value`, `-c`), usage brackets stripped."""
    found = []
    for token in tokens:
        token = token.strip("[]")
        if re.match(r"^--?[A-Za-z]", token):
            found.append(token.split("=", 1)[0])
    return found


def unknown_options(tokens: list[str], help_text: str) -> list[str]:
    return [o for o in options(tokens) if not mentions(help_text, o)]


@dataclass
class Context:
    """What checks share: a scratch directory, a test certificate, and (for curl and kill lines)
    a live relayd, started on first use by `live`."""

    tmp: Path
    live: object = None  # a callable returning LiveRelay, or None: no live checks possible
    _cert: tuple[Path, Path] | None = field(default=None, repr=False)
    _count: int = 0

    def scratch(self, name: str) -> Path:
        self._count += 1
        path = self.tmp / f"{self._count:03d}-{name}"
        path.mkdir(parents=True)
        return path

    def cert(self) -> tuple[Path, Path]:
        if self._cert is None:
            self._cert = make_test_cert(self.tmp / "tls", "turn.example.org")
        return self._cert


def with_test_certificates(conf: str, ctx: Context) -> str:
    """Certificate and key paths the example names (/etc/letsencrypt/...) become a test pair."""
    def repl(m: re.Match) -> str:
        cert, pkey = ctx.cert()
        path = cert if CERT_KEYS[m["key"]] == "cert.pem" else pkey
        return f"{m['lead']}{m['key']}{m['eq']}{path}"
    pattern = r"^(?P<lead>[ \t]*)(?P<key>" + "|".join(map(re.escape, CERT_KEYS)) + r")(?P<eq>[ \t]*=[ \t]*)\S+"
    return re.sub(pattern, repl, conf, flags=re.M)


def check_config_problems(result: subprocess.CompletedProcess, what: str) -> list[str]:
    output = result.stdout + result.stderr
    problems = []
    if result.returncode != 0:
        return [f"{what}: relayd check-config exited {result.returncode}: {output.strip()[-600:]}"]
    for line in output.splitlines():
        if any(bad in line for bad in BAD_CHECK_CONFIG_OUTPUT):
            problems.append(f"{what}: {line.strip()}")
    return problems


# --- block checks ----------------------------------------------------------------------------


def check_block(block: Block, ctx: Context) -> list[str]:
    """Problems with one block (empty when it passes)."""
    if not block.closed:
        return [f"{block.where}: fence never closed"]
    if not block.lang:
        return [f"{block.where}: code block without an info string (give its language; "
                "add `illustrative` if the suite cannot run it)"]
    odd = [m for m in block.modifiers if m not in MODIFIERS]
    if odd:
        return [f"{block.where}: unknown word(s) {odd} in the info string (known: {sorted(MODIFIERS)})"]
    if "fragment" in block.modifiers and block.lang != "conf":
        return [f"{block.where}: `fragment` is for conf blocks"]
    if block.illustrative:
        return []
    if block.lang not in CHECKED_LANGUAGES:
        return [f"{block.where}: ```{block.lang} is not checked by the suite: mark it "
                f"```{block.lang} illustrative or add a check to test_docs.py"]
    if block.lang == "conf":
        return check_conf(block, ctx)
    if block.lang == "json":
        try:
            json.loads(block.text)
        except ValueError as e:
            hint = " (`…` elisions only in illustrative blocks)" if "…" in block.text else ""
            return [f"{block.where}: json does not parse: {e}{hint}"]
        return []
    if block.lang == "yaml":
        try:
            yaml.safe_load(block.text)
        except yaml.YAMLError as e:
            return [f"{block.where}: yaml does not parse: {e}"]
        return []
    cmds = commands(block)
    if not cmds:
        return [f"{block.where}: {block.lang} block without a command"]
    problems = []
    for cmd in cmds:
        problems += [f"{block.path.name}:{cmd.line}: {p}" for p in check_command(cmd.text, ctx)]
    return problems


def check_conf(block: Block, ctx: Context) -> list[str]:
    text = with_test_certificates(block.text, ctx)
    if "fragment" in block.modifiers:
        text = BASE_CONFIG + text
    path = ctx.scratch("conf") / "relayd.conf"
    path.write_text(text)
    return check_config_problems(run([relayd_binary(), "check-config", "-c", str(path)]), block.where)


def check_command(cmd: str, ctx: Context) -> list[str]:
    try:
        tokens = shlex.split(cmd, comments=True)
    except ValueError as e:
        return [f"`{cmd}`: does not parse as a shell command: {e}"]
    env = {}
    while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
        name, value = tokens.pop(0).split("=", 1)
        env[name] = value
    if not tokens:
        return [f"`{cmd}`: no command"]
    if any(t in ("|", "||", "&&", ";", ">", "<") for t in tokens):
        return [f"`{cmd}`: pipes, lists and redirections are not checked; split the line or mark "
                "the block illustrative"]
    program = tokens[0]
    if program == "relayd":
        return check_relayd(tokens[1:], ctx)
    if program == "relay-bench":
        return [f"`{cmd}`: relay-bench --help does not list {o}"
                for o in unknown_options(tokens[1:], relay_bench_help())]
    if program == "curl":
        return check_curl(cmd, tokens, ctx)
    if program == "kill":
        return check_kill(cmd, tokens, ctx)
    if program == "kubectl":
        return check_kubectl(cmd, tokens)
    if "/" in program:
        return check_script(cmd, program, tokens[1:], env)
    return [f"`{cmd}`: no check for `{program}` lines; mark the block illustrative or add one to test_docs.py"]


def check_script(cmd: str, program: str, args: list[str], env: dict[str, str]) -> list[str]:
    path = REPO_ROOT / program.removeprefix("./")
    if not path.is_file():
        return [f"`{cmd}`: {program} does not exist in the repository"]
    if not os.access(path, os.X_OK):
        return [f"`{cmd}`: {program} is not executable"]
    text = path.read_text(errors="replace")
    problems = [f"`{cmd}`: {program} does not handle {o}" for o in unknown_options(args, text)]
    problems += [f"`{cmd}`: {program} does not read {name}" for name in env if not mentions(text, name)]
    return problems


def check_kubectl(cmd: str, tokens: list[str]) -> list[str]:
    if tokens[1:2] != ["apply"]:
        return [f"`{cmd}`: only `kubectl apply -f` lines are checked"]
    files = [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t == "-f"]
    if not files:
        return [f"`{cmd}`: no -f FILE"]
    kube = REPO_ROOT / "deploy" / "kubernetes"
    return [f"`{cmd}`: deploy/kubernetes/{f} does not exist" for f in files if not (kube / f).is_file()]


def config_argument(args: list[str]) -> tuple[int, str] | None:
    """Index of the value of -c / --config and the value."""
    for i, token in enumerate(args):
        if token in ("-c", "--config") and i + 1 < len(args):
            return i + 1, args[i + 1]
        if token.startswith("--config="):
            return i, token
    return None


def check_relayd(args: list[str], ctx: Context) -> list[str]:
    shown = "relayd " + " ".join(args)
    subcommands = relayd_subcommands()
    if args in (["--version"], ["--help"], ["-h"]):
        result = run([relayd_binary(), *args])
        return [] if result.returncode == 0 else [f"`{shown}`: exited {result.returncode}"]
    if args and args[0] in subcommands and args[0] != "serve":
        path = [args[0]]
        rest = args[1:]
        if rest and rest[0] in relayd_subcommands(*path):
            path.append(rest.pop(0))
    else:
        path = ["serve"]
        rest = args[1:] if args[:1] == ["serve"] else args
    if path != ["serve"] and relayd_subcommands(*path):
        return [f"`{shown}`: names no subcommand of relayd {path[0]} ({', '.join(relayd_subcommands(*path))})"]
    if path in (["serve"], ["check-config"]):
        return check_relayd_config_line(shown, path, rest, ctx)
    problems = [f"`{shown}`: relayd {' '.join(path)} --help does not list {o}"
                for o in unknown_options(rest, relayd_help(*path))]
    if problems or path != ["credentials"]:
        return problems
    # relayd credentials runs offline: run it, in a directory with conf/ and the secret file.
    work = ctx.scratch("credentials")
    (work / "conf").symlink_to(REPO_ROOT / "conf")
    if "--secret-file" in rest:
        secret = work / rest[rest.index("--secret-file") + 1]
        if not secret.exists():
            secret.write_text("docs-test-secret-4f1d9a\n")
    result = run([relayd_binary(), *path, *rest], cwd=work)
    if result.returncode != 0:
        return [f"`{shown}`: exited {result.returncode}: {result.stderr.strip()[-400:]}"]
    try:
        json.loads(result.stdout)
    except ValueError:
        return [f"`{shown}`: did not print JSON: {result.stdout[:200]!r}"]
    return []


def check_relayd_config_line(shown: str, path: list[str], rest: list[str], ctx: Context) -> list[str]:
    """`relayd check-config ...` runs as written; `relayd [serve] ...` goes through check-config
    with the same options (it refuses unknown keys), so the options a doc gives the daemon are
    real. A config file that is not in the repository (/etc/relayd/relayd.conf) is replaced by
    the minimal base configuration."""
    if "--self-test" in rest:
        if not mentions(relayd_help(*path), "--self-test"):
            return [f"`{shown}`: relayd {path[0]} --help does not list --self-test"]
        rest = [t for t in rest if t != "--self-test"]
    rest = list(rest)
    found = config_argument(rest)
    if found is not None:
        index, value = found
        value = value.removeprefix("--config=")
        if not (REPO_ROOT / value).is_file():
            base = ctx.scratch("base") / "relayd.conf"
            base.write_text(BASE_CONFIG)
            rest[index] = str(base) if not rest[index].startswith("--config=") else f"--config={base}"
    return check_config_problems(run([relayd_binary(), "check-config", *rest]), f"`{shown}`")


# --- live checks: a relayd started by this module --------------------------------------------


@dataclass
class LiveRelay:
    server: RelayServer
    pidfile: Path


def bearer_tokens(blocks: list[Block]) -> dict[str, bool]:
    """Bearer tokens the docs' curl lines use, and whether one is used on an admin path."""
    tokens: dict[str, bool] = {}
    for block in blocks:
        if block.lang not in ("sh", "console") or block.illustrative:
            continue
        for cmd in commands(block):
            if not cmd.text.startswith("curl"):
                continue
            for token in re.findall(r"Bearer ([A-Za-z0-9._~+/=-]+)", cmd.text):
                tokens[token] = tokens.get(token, False) or any(p in cmd.text for p in ADMIN_PATHS)
    return tokens


def check_curl(cmd: str, tokens: list[str], ctx: Context) -> list[str]:
    if ctx.live is None:
        return [f"`{cmd}`: curl lines need a live relayd (not available here)"]
    live: LiveRelay = ctx.live()
    address = f"{live.server.host}:{live.server.api_port}"
    argv = [t.replace(DOC_API_ADDRESS, address) for t in tokens]
    if not any(address in t for t in argv):
        return [f"`{cmd}`: curl lines must call the API at {DOC_API_ADDRESS} (the test's relayd stands in for it)"]
    if shutil.which("curl"):
        body_path = ctx.scratch("curl") / "body"
        result = run(argv + ["-sS", "--max-time", "5", "-o", str(body_path), "-w", "%{http_code}"], timeout=10)
        if result.returncode != 0:
            return [f"`{cmd}`: curl exited {result.returncode}: {result.stderr.strip()}"]
        status = result.stdout.strip()
        body = body_path.read_text(errors="replace") if body_path.exists() else ""
    else:
        try:
            status, body = curl_without_curl(argv[1:])
        except ValueError as e:
            return [f"`{cmd}`: {e}"]
    if status != "200":
        return [f"`{cmd}`: HTTP {status}, not 200: {body[:300]}"]
    if "/api/" in cmd:
        try:
            json.loads(body)
        except ValueError:
            return [f"`{cmd}`: the answer is not JSON: {body[:200]!r}"]
    return []


def curl_without_curl(args: list[str]) -> tuple[str, str]:
    """The request a curl line makes, sent with http.client, for machines without curl: the
    options the docs use (-s, -X, -H, -d) and one http:// URL. Returns status and body."""
    method, headers, data, url = None, {}, None, None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-s", "-sS", "--silent"):
            pass
        elif a in ("-X", "--request", "-H", "--header", "-d", "--data") and i + 1 < len(args):
            i += 1
            if a in ("-X", "--request"):
                method = args[i]
            elif a in ("-H", "--header"):
                name, _, value = args[i].partition(":")
                headers[name.strip()] = value.strip()
            else:
                data = args[i].encode()
        elif not a.startswith("-") and url is None:
            url = a
        else:
            raise ValueError(f"curl is not installed, and {a!r} is not an option this test can stand in for")
        i += 1
    parsed = urllib.parse.urlsplit(url or "")
    if parsed.scheme != "http":
        raise ValueError(f"curl is not installed, and {url!r} is not an http:// URL")
    if data is not None:
        headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=5)
    try:
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        conn.request(method or ("POST" if data is not None else "GET"), path, body=data, headers=headers)
        resp = conn.getresponse()
        return str(resp.status), resp.read().decode(errors="replace")
    finally:
        conn.close()


def check_kill(cmd: str, tokens: list[str], ctx: Context) -> list[str]:
    m = re.fullmatch(r"\$\(cat (?P<pidfile>\S+)\)", tokens[2]) if len(tokens) == 3 else None
    if tokens[:2] != ["kill", "-HUP"] or m is None:
        return [f"`{cmd}`: only `kill -HUP \"$(cat PIDFILE)\"` lines are checked"]
    if ctx.live is None:
        return [f"`{cmd}`: kill lines need a live relayd (not available here)"]
    live: LiveRelay = ctx.live()
    before = live.server.log_text().count("event=reloaded")
    result = run(["sh", "-c", f'kill -HUP "$(cat {shlex.quote(str(live.pidfile))})"'], timeout=10)
    if result.returncode != 0:
        return [f"`{cmd}`: exited {result.returncode}: {result.stderr.strip()}"]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if live.server.log_text().count("event=reloaded") > before:
            return [] if live.server.is_running() else [f"`{cmd}`: relayd exited"]
        time.sleep(0.05)
    return [f"`{cmd}`: relayd logged no reload within 5 s:\n{live.server.log_tail(10)}"]


# --- tests -----------------------------------------------------------------------------------

BLOCKS = all_blocks()


@pytest.fixture(scope="module")
def live_relay(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("docs-relayd")
    pidfile = workdir / "relayd.pid"
    keys = [f"--api-key=doc{i}:{token}{':admin' if admin else ''}"
            for i, (token, admin) in enumerate(sorted(bearer_tokens(BLOCKS).items()))]
    # With TLS, so the certificate-renewal hook's SIGHUP reloads a certificate.
    server = RelayServer("relayd", workdir, extra_args=[f"--pidfile={pidfile}", *keys], streams=True)
    with running(server):
        deadline = time.monotonic() + 5
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pidfile.exists(), f"relayd wrote no pidfile at {pidfile}"
        yield LiveRelay(server, pidfile)


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    return Context(tmp_path_factory.mktemp("docs"))


def test_the_docs_have_code_blocks():
    assert len(BLOCKS) > 20, [str(b) for b in BLOCKS]


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_block(block, context, request):
    # curl and kill lines start the module's relayd on first use.
    context.live = lambda: request.getfixturevalue("live_relay")
    problems = check_block(block, context)
    assert not problems, "\n".join(problems)


def test_the_checker_reports_what_is_wrong(tmp_path):
    """The checks can fail: a fake page with an unmarked sh block using options relayd does not
    have, a block without an info string, an unchecked language, elided json and a conf fragment
    with an unknown key is reported block by block; the same lines marked illustrative pass."""
    fake = """# Fake

```sh
relayd sessions --json
relayd sessions --no-such-flag
relayd check-config -c conf/relayd.conf --no-such-option=1
```

```
no info string
```

```js
console.log("unchecked")
```

```json
{"iceServers": […]}
```

```conf fragment
no-such-key=1
```

- in a list:

  ```sh illustrative
  relayd sessions --no-such-flag
  ```

```sh
./scripts/no-such-script.sh
frobnicate --now
```
"""
    blocks = extract_blocks(fake, tmp_path / "fake.md")
    assert [(b.line, b.info) for b in blocks] == [
        (3, ("sh",)), (9, ()), (13, ("js",)), (17, ("json",)), (21, ("conf", "fragment")),
        (27, ("sh", "illustrative")), (31, ("sh",)),
    ]
    assert blocks[5].text == "relayd sessions --no-such-flag\n"
    ctx = Context(tmp_path)
    sh, bare, js, elided, conf, marked, other = (check_block(b, ctx) for b in blocks)
    assert len(sh) == 2, sh
    assert "fake.md:5:" in sh[0] and "--no-such-flag" in sh[0], sh
    assert "fake.md:6:" in sh[1] and "no-such-option" in sh[1], sh
    assert bare and "without an info string" in bare[0]
    assert js and "illustrative" in js[0]
    assert elided and "does not parse" in elided[0]
    assert conf and "no-such-key" in conf[0]
    assert marked == []
    assert len(other) == 2 and "does not exist" in other[0] and "frobnicate" in other[1], other
    assert extract_blocks("```sh\nrelayd --version\n", tmp_path / "open.md")[0].closed is False


def test_continuations_and_comments_make_one_command():
    block = Block(Path("x.md"), 10, ("sh",), "# a comment\nrelayd -c conf/relayd.conf \\\n  --realm=x   # why\n\n")
    assert commands(block) == [Command(12, "relayd -c conf/relayd.conf --realm=x   # why")]
    console = Block(Path("x.md"), 1, ("console",), "$ relayd --version \\\n> \nrelayd 0.1.0\n")
    assert [c.text for c in commands(console)] == ["relayd --version"]


# --- links and indexes -----------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")
DOCS_MENTION = re.compile(r"(?<![\w/.-])docs/(?P<name>[\w.-]+\.(?:md|yaml))")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file."""
    found = set()
    in_fence = False
    for line in path.read_text().splitlines():
        if FENCE_OPEN.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            found.add(slug)
    return found


def without_code(text: str) -> str:
    """The text outside fenced blocks (links in code are not links)."""
    out, in_fence = [], False
    for line in text.splitlines():
        if FENCE_OPEN.match(line):
            in_fence = not in_fence
        elif not in_fence:
            out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_links_resolve(path):
    problems = []
    text = without_code(path.read_text())
    for m in LINK.finditer(text):
        target = m["target"]
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {dest.name}")
    for m in DOCS_MENTION.finditer(text):
        if not (DOCS / m["name"]).exists():
            problems.append(f"docs/{m['name']}: no such page")
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


# A pointer to a section of the top-level README: the word README, then a quoted section name.
# Those sections now live in docs/ (docs/README.md's own sections are fine).
README_SECTION = re.compile(r"(?<!docs/)\bREADME(?:\.md)?,? \\?\"[A-Z]")


def source_files():
    for top in ("Sources", "Tests", "deploy", "conf", "scripts", "docs"):
        for path in (REPO_ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in (".swift", ".c", ".h", ".py", ".sh", ".yml", ".yaml",
                                                  ".json", ".conf", ".service", ".md"):
                yield path


def test_docs_mentions_in_code_comments_resolve():
    """Comments in the sources, tests and deployment files point at docs pages that exist, not at
    README sections."""
    problems = []
    for path in source_files():
        text = path.read_text(errors="replace")
        for m in DOCS_MENTION.finditer(text):
            if not (DOCS / m["name"]).exists():
                problems.append(f"{path.relative_to(REPO_ROOT)}: docs/{m['name']} does not exist")
        for m in README_SECTION.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{path.relative_to(REPO_ROOT)}:{line}: points at a README section; name the docs page")
    assert not problems, "\n".join(problems)


def doc_pages() -> set[str]:
    return {p.name for p in DOCS.iterdir() if p.suffix in (".md", ".yaml") and p.name != "README.md"}


def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text()
    listed = set(re.findall(r"^- \[[^\]]+\]\(([\w.-]+)\) — ", index, re.M))
    assert listed == doc_pages(), (sorted(doc_pages() - listed), sorted(listed - doc_pages()))


def test_readme_documentation_lists_every_page():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^- \[[^\]]+\]\(docs/([\w.-]+)\) — ", section, re.M))
    assert listed == doc_pages(), (sorted(doc_pages() - listed), sorted(listed - doc_pages()))


def test_readme_shows_the_test_command_ci_runs():
    """.ci/run runs the README's test command; the README's setup section must show it."""
    ci = [line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    readme_commands = {c.text for b in extract_blocks((REPO_ROOT / "README.md").read_text(), REPO_ROOT / "README.md")
                       if b.lang == "sh" for c in commands(b)}
    assert ci and all(line.strip() in readme_commands for line in ci), (ci, readme_commands)

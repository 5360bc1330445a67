#!/usr/bin/env bash
# coturn's user database at scale (docs/userdb.md, docs/benchmark.md): one SQLite file in
# coturn's schema with USERS long-term users (default 1,000,000), bulk-loaded with SQL, each
# bench<i> with password "pw" under realm bench.local (hmackey = MD5("bench<i>:bench.local:pw"),
# as turnadmin writes it). relayd (release build, defaults, lt-cred-mech) and coturn each serve
# from that same file, in the same run; relay-bench makes ALLOCS allocations as long-term users
# spread over the file (a 401, then the authenticated Allocate, each released), REPS times.
# Prints each server's setup rate (authentications per second) and the ratio, relayd's resident
# memory with the file and without it (the same server, no userdb), how long relayd took to
# read the file, and how long a user added to the file while relayd serves it takes to
# authenticate.
#
#   scripts/bench-userdb.sh [--reps N] [--skip-build] [--users N] [--allocations N]
#
# Loopback only; every server is stopped by PID. Uses the release binaries of scripts/bench.sh
# (.build-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
USERS=1000000
ALLOCS=5000
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --users) USERS="$2"; shift ;;
        --allocations) ALLOCS="$2"; shift ;;
        *) args+=("$1") ;;
    esac
    shift
done
. scripts/bench-lib.sh
bench_options 3 '2,16p' "${args[@]+"${args[@]}"}"
bench_build
bench_workdir userdb
bench_port_range
REALM=bench.local
DB="$WORK/turndb"

python3 - "$DB" "$USERS" "$REALM" <<'PY'
import hashlib, sqlite3, sys, time
path, users, realm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
started = time.monotonic()
db = sqlite3.connect(path)
db.executescript(open("/usr/share/coturn/schema.sql").read())
db.executemany("INSERT INTO turnusers_lt (realm, name, hmackey) VALUES (?, ?, ?)",
               ((realm, f"bench{i}", hashlib.md5(f"bench{i}:{realm}:pw".encode()).hexdigest()) for i in range(users)))
db.commit()
db.close()
print(f"loaded {users} users into {path} in {time.monotonic() - started:.1f} s", file=sys.stderr)
PY

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# start KIND PORT [USERDB]: one server; prints its pid.
start() {
    local kind=$1 port=$2 userdb=${3:-}
    local common=(--listening-ip=127.0.0.1 "--listening-port=$port" --relay-ip=127.0.0.1
        "--min-port=$MIN_PORT" "--max-port=$MAX_PORT" "--realm=$REALM" --lt-cred-mech --allow-loopback-peers
        --no-tcp --no-tls --no-dtls)
    if [ "$kind" = relayd ]; then
        local api
        api=$(free_port)
        : > "$WORK/relayd.conf"
        "$BIN/relayd" -c "$WORK/relayd.conf" "${common[@]}" ${userdb:+"--userdb=$userdb"} \
            --api-listening-ip=127.0.0.1 "--api-listening-port=$api" --drain-timeout=0 --log-level=notice \
            "--log-file=$WORK/relayd-$port.log" >>"$WORK/relayd.out" 2>&1 &
    else
        turnserver -n "${common[@]}" --no-cli --no-rfc5780 "--userdb=$userdb" \
            "--log-file=$WORK/coturn.log" --simple-log --no-stdout-log >>"$WORK/coturn.out" 2>&1 &
    fi
    echo $!
}

wait_listening() { for _ in $(seq 600); do ss -Huln "sport = :$1" | grep -q . && return 0; sleep 0.05; done; return 1; }

# setup KIND PORT: one relay-bench setup run against the server on PORT; prints allocs/s.
setup() {
    "$BIN/relay-bench" --server "127.0.0.1:$2" --long-term-password pw --realm "$REALM" --label "$1" \
        --setup-only --allocations "$ALLOCS" --window 64 2>>"$WORK/relay-bench.err" |
        grep '^{' | python3 -c 'import json, sys; r = json.loads(sys.stdin.read()); print(r["setup_rate"], r["setup_ok"], r["setup_failed"])'
}

# relayd without the database: its resident memory is the baseline.
port=$(free_port)
pid=$(start relayd "$port")
PIDS+=("$pid")
wait_listening "$port"
sleep 1
BASE_RSS=$(rss_kib "$pid")
stop_all

# relayd with the database: how long the first read takes, what it holds.
port=$(free_port)
t0=$(date +%s.%N)
pid=$(start relayd "$port" "$DB")
PIDS+=("$pid")
wait_listening "$port"
t1=$(date +%s.%N)
sleep 1
DB_RSS=$(rss_kib "$pid")
RELAYD_PORT=$port
cport=$(free_port)
cpid=$(start coturn "$cport" "$DB")
PIDS+=("$cpid")
wait_listening "$cport"
sleep 1

for rep in $(seq "$REPS"); do
    echo "relayd $(setup relayd "$RELAYD_PORT")"
    echo "coturn $(setup coturn "$cport")"
done | tee "$WORK/results"
RELAYD_AFTER=$(rss_kib "$pid")

# A user added to the file while relayd serves it: seconds until its Allocate succeeds (the
# watcher's check, a whole read of the file, the main thread's turn).
LIVE=$(python3 - "$DB" "$REALM" "$RELAYD_PORT" <<'PY'
import hashlib, socket, sqlite3, struct, sys, time, os, hmac
path, realm, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
name, password = "late-user", "pw"
def message(method, attrs, key=None):
    body = b"".join(struct.pack("!HH", t, len(v)) + v + b"\0" * (-len(v) % 4) for t, v in attrs)
    tid = os.urandom(12)
    if key is None:
        return struct.pack("!HHI", method, len(body), 0x2112A442) + tid + body
    header = struct.pack("!HHI", method, len(body) + 24, 0x2112A442) + tid
    mac = hmac.new(key, header + body, hashlib.sha1).digest()
    return header + body + struct.pack("!HH", 0x0008, 20) + mac
def attrs(data):
    out, i = {}, 20
    while i + 4 <= len(data):
        t, l = struct.unpack("!HH", data[i:i + 4])
        out[t] = data[i + 4:i + 4 + l]
        i += 4 + l + (-l % 4)
    return out
def allocates():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    try:
        transport = [(0x0019, struct.pack("!B3x", 17))]
        s.sendto(message(0x0003, transport), ("127.0.0.1", port))
        a = attrs(s.recv(2048))
        nonce = a[0x0015]
        key = hashlib.md5(f"{name}:{realm}:{password}".encode()).digest()
        s.sendto(message(0x0003, transport + [(0x0006, name.encode()), (0x0014, realm.encode()), (0x0015, nonce)], key),
                 ("127.0.0.1", port))
        reply = s.recv(2048)
        ok = struct.unpack("!H", reply[:2])[0] == 0x0103
        if ok:
            lifetime = [(0x000D, struct.pack("!I", 0))]
            s.sendto(message(0x0004, lifetime + [(0x0006, name.encode()), (0x0014, realm.encode()), (0x0015, nonce)], key),
                     ("127.0.0.1", port))
        return ok
    except OSError:
        return False
    finally:
        s.close()
db = sqlite3.connect(path)
db.execute("INSERT INTO turnusers_lt VALUES (?, ?, ?)", (realm, name, hashlib.md5(f"{name}:{realm}:{password}".encode()).hexdigest()))
db.commit()
start = time.monotonic()
while not allocates() and time.monotonic() - start < 60:
    time.sleep(0.1)
print(f"{time.monotonic() - start:.1f}")
PY
)
echo "a user added to the file authenticates after $LIVE s"

stop_all

python3 - "$WORK/results" "$USERS" "$BASE_RSS" "$DB_RSS" "$RELAYD_AFTER" "$t0" "$t1" <<'PY'
import statistics, sys
path, users, base, loaded, after, t0, t1 = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:6]), *map(float, sys.argv[6:8])
rows = [line.split() for line in open(path) if line.strip()]
rate = {k: statistics.median(float(r[1]) for r in rows if r[0] == k) for k in ("relayd", "coturn")}
failed = {k: sum(int(r[3]) for r in rows if r[0] == k) for k in ("relayd", "coturn")}
print(f"users in the database: {users:,}")
print(f"relayd start to serving, the first read included: {t1 - t0:.1f} s")
print(f"relayd resident memory: {base / 1024:.0f} MiB without the database, {loaded / 1024:.0f} MiB with it "
      f"({(loaded - base) * 1024 / users:.0f} bytes a user), {after / 1024:.0f} MiB after the runs")
print(f"setup rate, long-term users from the database (median of {len(rows) // 2}): relayd {rate['relayd']:.0f}/s, "
      f"coturn {rate['coturn']:.0f}/s, ratio {rate['relayd'] / rate['coturn']:.2f} (failed: relayd {failed['relayd']}, coturn {failed['coturn']})")
PY

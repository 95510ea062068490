#!/usr/bin/env python3
"""Redis CPU per execution for admission's scripts, replayed alone against a Redis server.

Each execution is admitted, leaves the backlog and is released. The script sends them as
admission does: admissions and releases as `redis_scripts::OPS` calls of BATCH steps each,
starts as one `ZREM` per BATCH, pipelined about ten calls deep, and reads the server's CPU from /proc before and after. With --rev REV it also
replays the one-script-per-step scripts of an earlier revision (ADMIT, a ZREM, RELEASE).
It needs the redis module (`pip install redis`) and Redis on this machine (REDIS_URL).

    python3 scripts/redis-admission-cost.py --rev 88e5be7 --batch 1,8,32
"""
import argparse
import os
import re
import subprocess
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = "coordinator/src/admission/redis_scripts.rs"
# principal, project, org, backlog, bytes
BOUNDS = [100, 1_000, 1_000, 1_000, 10**12]


def consts(text):
    return dict(re.findall(r'const (\w+): &str = r#"(.*?)"#;', text, re.S))


def server_cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def keys(base, i):
    return [f"{base}:principal:p:u{i % 32}", f"{base}:project:p", f"{base}:org:o", f"{base}:backlog:p",
            f"{base}:retained-due:p", f"{base}:retained-total:p", f"{base}:retained-open:p",
            f"{base}:e:ex{i}", f"{base}:retained-hour:p"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rev", help="also replay the per-step scripts of this git revision")
    ap.add_argument("--batch", default="1,8,32", help="executions per call, comma-separated")
    ap.add_argument("-n", type=int, default=5_000, help="executions per variant")
    args = ap.parse_args()
    r = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"))
    pid = int(subprocess.check_output(["pidof", "redis-server"]).split()[0])
    run_id = r.info("server")["run_id"]
    now = int(time.time() * 1000)

    def shard(tag):
        base = f"baton_cost_{tag}_{time.time_ns()}:adm:{{s1}}"
        r.set(f"{base}:epoch", 1)
        r.set(f"{base}:epoch-run", run_id)
        return base

    def measure(name, send):
        before = server_cpu(pid)
        send()
        print(f"{name}: {1e6 * (server_cpu(pid) - before) / args.n:.0f} µs of Redis CPU per execution")

    current = consts(open(os.path.join(HERE, "..", SCRIPTS)).read())
    ops = r.register_script(current["PRELUDE"] + current["OPS"])

    def batched(size):
        base, pipe = shard(f"b{size}"), r.pipeline(transaction=False)
        head = [f"{base}:epoch", f"{base}:epoch-run", f"{base}:keys"]
        for first in range(0, args.n, size):
            batch = range(first, min(first + size, args.n))
            for kind in "ar":
                ks, argv = list(head), BOUNDS + [120_000]
                for i in batch:
                    ks += keys(base, i)
                    argv += [kind, f"ex{i}", now, now + 600_000, 200 if kind == "a" else 400, 600_000, 3_600_000]
                ops(keys=ks, args=argv, client=pipe)
                if kind == "a":
                    # Starts sent alone leave the backlog with one ZREM, no script.
                    pipe.zrem(keys(base, first)[3], *(f"ex{i}" for i in batch))
            if len(pipe) >= 30:
                pipe.execute()
        pipe.execute()

    if args.rev:
        old = consts(subprocess.check_output(["git", "-C", HERE, "show", f"{args.rev}:{SCRIPTS}"], text=True))
        admit = r.register_script(old["PRELUDE"] + old["ADMIT"])
        release = r.register_script(old["PRELUDE"] + old["RELEASE"])

        def per_step():
            base, pipe = shard("old"), r.pipeline(transaction=False)
            for i in range(args.n):
                k = keys(base, i)
                extra = [f"{base}:epoch", f"{base}:epoch-run", f"{base}:keys"]
                admit(keys=k + extra, args=[f"ex{i}", now, now + 600_000, 200] + BOUNDS + [600_000, 3_600_000],
                      client=pipe)
                pipe.zrem(k[3], f"ex{i}")
                release(keys=k, args=[f"ex{i}", "all", 120_000, 400, 3_600_000], client=pipe)
                if len(pipe) >= 30:
                    pipe.execute()
            pipe.execute()

        measure(f"{args.rev}, a script per step", per_step)
    for size in (int(s) for s in args.batch.split(",")):
        measure(f"OPS, {size} per call", lambda: batched(size))


if __name__ == "__main__":
    main()

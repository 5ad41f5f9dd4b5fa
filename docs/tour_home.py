#!/usr/bin/env python3
"""Writes the home docs/tour.md is measured on, in freecode's on-disk format (SPEC §3-§6):
2,000 sessions over 20 projects (8 messages and a rollout log each) plus one session of
200,000 messages, with a rollout log of its 50,000 turns.

    python3 docs/tour_home.py /tmp/tour-home      # then FREECODE_HOME=/tmp/tour-home freecode …
"""

import json
import os
import random
import sys
import uuid

WORDS = (
    "the settings component theme provider toggle dark light mode context hook state render "
    "props test fixture async await request response handler error retry timeout config file "
    "path module import export function return value string number array object key map filter "
    "reduce promise resolve reject build lint format commit branch invoice rounding drift"
).split()
T0 = 1_767_000_000_000  # 2025-12-29


def private_dir(path):
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)


def write(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def text(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def ulid(rng):
    return "".join(rng.choice("0123456789ABCDEFGHJKMNPQRSTVWXYZ") for _ in range(20))


def session(home, rng, sid, project, title, n_messages, t0):
    key = project.strip("/").replace("/", "__")
    d = os.path.join(home, "sessions", key, sid)
    private_dir(os.path.join(home, "sessions", key))
    private_dir(d)
    lines, events, seq, t = [], [], 0, t0

    def event(kind, **fields):
        nonlocal seq
        seq += 1
        e = {"type": kind, "id": ulid(rng), "seq": seq, "aggregateID": sid, "timestamp": t}
        e.update(fields)
        events.append(json.dumps(e, separators=(",", ":")))

    turns = 0
    for i in range(n_messages):
        t += rng.randint(500, 4000)
        k = i % 4
        if k == 0:
            turn = f"turn-{turns}"
            turns += 1
            event("turn.started", turnId=turn)
            m = {"role": "user", "parts": [{"type": "text", "content": text(rng, 6, 30)}]}
        elif k == 1:
            event("model.request", turnId=turn, provider="openai", model="gpt-4o",
                  messageCount=i, toolCount=3, promptChars=200 * i + 500, streamed=True)
            event("model.first_token", turnId=turn, ttft_ms=700)
            event("model.response", turnId=turn, provider="openai", model="gpt-4o",
                  duration_ms=2100, ttft_ms=700, inputTokens=1500, outputTokens=120,
                  cacheReadTokens=900, toolCalls=["read_file"])
            m = {"role": "assistant", "parts": [{"type": "text", "content": text(rng, 16, 80)}],
                 "usage": {"inputTokens": 1500, "outputTokens": 120}}
        elif k == 2:
            path = f"src/{rng.choice(WORDS)}.ts"
            event("function.call", turnId=turn, tool="read_file", args={"path": path},
                  callId=f"c{i}")
            code = "\n".join(f"const {rng.choice(WORDS)}_{j} = {rng.choice(WORDS)}({j});"
                             for j in range(rng.randint(3, 12)))
            event("function.output", turnId=turn, tool="read_file", output=code[:200],
                  duration_ms=25, callId=f"c{i}")
            m = {"role": "assistant", "parts": [{"type": "tool", "tool": {
                "name": "read_file", "args": {"path": path}}, "result": code}]}
        else:
            m = {"role": "assistant", "parts": [{"type": "text", "content": text(rng, 8, 40)}]}
        m["id"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        m["timestamp"] = t
        lines.append(json.dumps(m, separators=(",", ":")))
    meta = {"id": sid, "title": title, "projectPath": project, "provider": "openai",
            "model": "gpt-4o", "status": "active", "createdAt": t0, "updatedAt": t,
            "lastTurnAt": t, "turnCount": turns}
    write(os.path.join(d, "messages.jsonl"), "\n".join(lines) + "\n")
    write(os.path.join(d, "meta.json"), json.dumps(meta, indent=2))
    r = os.path.join(home, "rollout", "sessions", sid)
    private_dir(r)
    write(os.path.join(r, "events.jsonl"), "\n".join(events) + "\n")


def main():
    home = sys.argv[1]
    rng = random.Random(11)
    for p in [home, os.path.join(home, "sessions"), os.path.join(home, "rollout"),
              os.path.join(home, "rollout", "sessions")]:
        private_dir(p)
    for i in range(2000):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        project = f"/home/dev/src/project_{i % 20:02d}"
        session(home, rng, sid, project, f"Session {i}: {text(rng, 3, 7)}", 8,
                T0 + i * 3_600_000)
    session(home, rng, "0b16b16b-0000-4000-8000-000000200000", "/home/dev/src/big",
            "The 200,000-message session", 200_000, T0 + 2001 * 3_600_000)


if __name__ == "__main__":
    main()

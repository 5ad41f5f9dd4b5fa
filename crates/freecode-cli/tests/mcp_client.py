#!/usr/bin/env python3
"""A real MCP client for `freecode mcp`: the Python SDK (the `mcp` package) starts the server
over stdio, lists its tools and calls each one the way an agent would, and prints what it saw
as one JSON object on stdout. crates/freecode-cli/tests/it/mcp.rs builds the home, runs this and
asserts on that summary.

Usage: mcp_client.py FREECODE_BINARY PLAN_JSON
  PLAN_JSON names the sessions and words of the home the test built (see mcp.rs).
The server gets this process's environment (FREECODE_HOME among it).
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def run(binary, plan):
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    out = {"sizes": [], "structuredEqualsText": True}

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["serverName"] = init.serverInfo.name
            out["instructions"] = init.instructions or ""
            listed = await session.list_tools()
            out["tools"] = {
                t.name: {
                    "description": t.description or "",
                    "properties": sorted((t.inputSchema or {}).get("properties", {})),
                    "required": sorted((t.inputSchema or {}).get("required", [])),
                }
                for t in listed.tools
            }

            async def call(name, args):
                r = await session.call_tool(name, args)
                text = "".join(c.text for c in r.content if c.type == "text")
                out["sizes"].append({"tool": name, "bytes": len(text.encode())})
                if r.isError:
                    return {"isError": True, "text": text}
                data = json.loads(text)
                if r.structuredContent != data:
                    out["structuredEqualsText"] = False
                return data

            async def pages(name, args, key, limit):
                """Every item of a paged tool, following nextOffset; and the pages' shapes."""
                items, shapes, offset = [], [], 0
                for _ in range(1000):
                    page = await call(name, {**args, "offset": offset, "limit": limit})
                    if page.get("isError"):
                        return items, shapes, page
                    items.extend(page[key])
                    shapes.append(
                        {
                            "offset": page["offset"],
                            "count": page["count"],
                            "hasMore": page["hasMore"],
                            "nextOffset": page.get("nextOffset"),
                            "cutBySize": page["cutBySize"],
                            "notice": page["notice"],
                        }
                    )
                    if not page["hasMore"]:
                        break
                    offset = page["nextOffset"]
                return items, shapes, None

            # list_sessions: paged through, and filtered.
            sessions, shapes, err = await pages("list_sessions", {}, "sessions", 2)
            out["list"] = {
                "ids": [s["id"] for s in sessions],
                "agents": {s["id"]: s["agent"] for s in sessions},
                "importedFrom": {s["id"]: s.get("importedFrom") for s in sessions},
                "pages": shapes,
                "error": err,
            }
            first = await call("list_sessions", {"limit": 1})
            out["list"]["total"] = first["total"]
            for agent in ["codex", "freecode", "no-such-agent"]:
                page = await call("list_sessions", {"agent": agent, "limit": 100})
                out["list"]["agent:" + agent] = [s["id"] for s in page["sessions"]]
            out["list"]["badStatus"] = await call("list_sessions", {"status": "bogus"})
            out["list"]["badSince"] = await call("list_sessions", {"since": "next tuesday"})

            # search_sessions: a word of one session, the agent filter, paging.
            search = {}
            for word in plan["words"]:
                page = await call("search_sessions", {"query": word})
                search[word] = [
                    {
                        "sessionId": h["sessionId"],
                        "snippet": h["snippet"],
                        "matched": [h["snippet"][m["start"]:m["end"]] for m in h["matches"]],
                    }
                    for h in page["hits"]
                ]
            out["search"] = search
            for agent in ["codex", "freecode"]:
                page = await call(
                    "search_sessions", {"query": plan["sharedWord"], "agent": agent}
                )
                out["search"]["shared:" + agent] = sorted({h["sessionId"] for h in page["hits"]})
            hits, shapes, err = await pages(
                "search_sessions", {"query": plan["longWord"], "perMessage": True}, "hits", 7
            )
            out["search"]["paged"] = {
                "keys": [[h["sessionId"], h["messageId"]] for h in hits],
                "pages": len(shapes),
                "error": err,
            }

            # get_session: every message of the long session exactly once, the big one capped.
            messages, shapes, err = await pages(
                "get_session", {"sessionId": plan["long"]}, "messages", 7
            )
            out["long"] = {
                "indexes": [m["index"] for m in messages],
                "ids": [m["id"] for m in messages],
                "pages": shapes,
                "error": err,
                "truncated": [
                    {
                        "id": m["id"],
                        "contentBytes": [len((p.get("content") or "").encode()) for p in m["parts"]],
                        "partTruncated": [p["truncated"] for p in m["parts"]],
                        "partsOmitted": m["partsOmitted"],
                    }
                    for m in messages
                    if m["truncated"]
                ],
            }
            page = await call("get_session", {"sessionId": plan["long"], "limit": 1})
            out["long"]["session"] = page.get("session")
            # A prefix of an id is enough.
            page = await call("get_session", {"sessionId": plan["long"][:13], "limit": 1})
            out["long"]["byPrefix"] = page.get("session", {}).get("id")

            injected = await call("get_session", {"sessionId": plan["injection"]})
            out["injection"] = {
                "notice": injected.get("notice"),
                "texts": [
                    p.get("content")
                    for m in injected.get("messages", [])
                    for p in m["parts"]
                    if p.get("content")
                ],
            }
            native = await call("get_session", {"sessionId": plan["native"], "limit": 100})
            out["native"] = {
                "tools": [
                    p["tool"].get("name")
                    for m in native["messages"]
                    for p in m["parts"]
                    if p["type"] == "tool" and p.get("tool")
                ],
            }
            out["errors"] = {
                "unknown": await call("get_session", {"sessionId": plan["unknown"]}),
                "badId": await call("get_session", {"sessionId": "../../etc/passwd"}),
                "empty": await call("get_session", {"sessionId": ""}),
                "traceUnknown": await call("session_trace", {"sessionId": plan["unknown"]}),
                "traceNoLog": await call("session_trace", {"sessionId": plan["codex"]}),
                "statsUnknown": await call("session_stats", {"sessionId": plan["unknown"]}),
                "statsBoth": await call(
                    "session_stats", {"sessionId": plan["native"], "project": "/work"}
                ),
                "negativeLimit": await call("list_sessions", {"limit": -1}),
                "hugeOffset": await call("search_sessions", {"query": "marmot", "offset": 10**30}),
                "deepSearch": await call("search_sessions", {"query": "marmot", "offset": 20000}),
                "wrongType": await call("get_session", {"sessionId": 5}),
                "missingQuery": await call("search_sessions", {}),
            }
            # Odd but valid input answers normally.
            out["odd"] = {
                "hugeLimit": len((await call("list_sessions", {"limit": 10**6}))["sessions"]),
                "punctuation": len(
                    (await call("search_sessions", {"query": '"*()^: NEAR OR'}))["hits"]
                ),
                "pastTheEnd": await call(
                    "get_session", {"sessionId": plan["long"], "offset": 10**6}
                ),
            }

            # session_trace: the native run's spans, paged one at a time.
            trace = await call("session_trace", {"sessionId": plan["native"], "limit": 1})
            out["trace"] = {
                k: trace.get(k)
                for k in [
                    "sessionId",
                    "hung",
                    "inFlight",
                    "modelSpanCount",
                    "toolSpanCount",
                    "deniedSpanCount",
                    "hasMore",
                    "nextOffset",
                    "notice",
                    "wallMs",
                    "modelMs",
                    "toolMs",
                ]
            }
            out["trace"]["pageSpans"] = len(trace.get("modelSpans", [])) + len(
                trace.get("toolSpans", [])
            )
            tools, offset = [], 0
            while True:
                t = await call(
                    "session_trace", {"sessionId": plan["native"], "limit": 1, "offset": offset}
                )
                tools.extend(s["tool"] for s in t["toolSpans"])
                if not t["hasMore"]:
                    break
                offset = t["nextOffset"]
            out["trace"]["toolsPaged"] = tools
            denied = await call("session_trace", {"sessionId": plan["native"], "limit": 100})
            out["trace"]["denied"] = [d["tool"] for d in denied["deniedSpans"]]

            # session_stats: everything, one session.
            out["stats"] = {
                "all": await call("session_stats", {}),
                "native": await call("session_stats", {"sessionId": plan["native"]}),
            }
            # Whole pages, for the test to validate against docs/schemas.
            out["samples"] = {
                "mcp-sessions.json": await call("list_sessions", {"limit": 3}),
                "mcp-hits.json": await call("search_sessions", {"query": plan["sharedWord"]}),
                "mcp-session.json": await call(
                    "get_session", {"sessionId": plan["long"], "offset": 8, "limit": 14}
                ),
                "trace.json": await call("session_trace", {"sessionId": plan["native"]}),
                "stats.json": await call("session_stats", {}),
            }
    return out


def main():
    binary, plan_path = sys.argv[1], sys.argv[2]
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    summary = asyncio.run(run(binary, plan))
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

// Runs the original's own code (../shared/reference/original/src, unchanged) over a home, for
// the two-sided compatibility test (crates/freecode-cli/tests/it/original.rs, issue 12).
//
//   tsx harness.mts read            what the original's readers return for $HOME/.freecode
//   tsx harness.mts write           writes a home with the original's code, then reads it
//   tsx harness.mts import FILE     the original's two importers over a bundle file
//   tsx harness.mts continue ID P   the original's agent appending to session ID of project P
//
// Environment: REF (the original's src/), HOME (the home whose .freecode is used: the original's
// rollout modules take os.homedir()). Prints one JSON document on stdout. `JSON.stringify` keeps
// lone surrogates as `\udXXX` escapes, as the original writes them.
import fs from "node:fs";
import path from "node:path";

const REF = process.env.REF;
if (!REF) throw new Error("REF must name the original's src/ directory");
const HOME = process.env.HOME!;
const FC = path.join(HOME, ".freecode");

const { createSessionStore } = await import(`${REF}/session/store.ts`);
const { formatSessionDirName } = await import(`${REF}/store/path-formatter.ts`);
const { loadSessionEvents, listRecordedSessions } = await import(`${REF}/rollout/history.ts`);
const { replaySession } = await import(`${REF}/rollout/replay.ts`);
const { buildTrace } = await import(`${REF}/rollout/trace.ts`);
const { RolloutRecorder } = await import(`${REF}/rollout/recorder.ts`);

/** Everything the original's agent reads of a home, the way it reads it: by project path. */
async function readHome() {
  const store = await createSessionStore(FC);
  const listed = await store.list();
  const deleted = await store.list({ status: "deleted" });
  const sessions: Record<string, unknown> = {};
  for (const meta of [...listed, ...deleted]) {
    sessions[meta.id] = {
      dirName: formatSessionDirName(meta.projectPath),
      meta: await store.getMeta(meta.id, meta.projectPath),
      messages: await store.getMessages(meta.id, meta.projectPath),
      byProject: (await store.list({ projectPath: meta.projectPath })).map((m: { id: string }) => m.id),
    };
  }
  const rollout: Record<string, unknown> = {};
  for (const id of listRecordedSessions()) {
    const loaded = loadSessionEvents(id);
    if (!loaded) continue;
    const replay = replaySession(id);
    const trace = buildTrace(id, loaded.events);
    // The recorder resumes its seq from the log (its line count).
    const rec = new RolloutRecorder(id);
    rollout[id] = {
      events: loaded.events,
      recorderSeq: (rec as unknown as { seq: number }).seq,
      replay: replay && {
        totalTurns: replay.totalTurns,
        totalCalls: replay.totalCalls,
        totalTokensBefore: replay.totalTokensBefore,
        totalTokensAfter: replay.totalTokensAfter,
        compactCount: replay.compactCount,
        errors: replay.errors.length,
      },
      trace: {
        modelSpans: trace.modelSpans.length,
        toolSpans: trace.toolSpans.length,
        inputTokens: trace.inputTokens,
        outputTokens: trace.outputTokens,
        cacheReadTokens: trace.cacheReadTokens,
        model_ms: trace.model_ms,
        tool_ms: trace.tool_ms,
        hung: trace.hung,
        inFlight: trace.inFlight,
      },
    };
  }
  return {
    listed: listed.map((m: { id: string }) => m.id),
    deleted: deleted.map((m: { id: string }) => m.id),
    sessions,
    interrupted: await store.getInterruptedSession(),
    rollout,
  };
}

/** A home written by the original's code: odd project paths, every part type, strings cut
 * inside an emoji (as its read tool cuts at 2,000 characters), an interrupt, a fork, a soft
 * delete, and rollout logs. */
async function writeHome() {
  const store = await createSessionStore(FC);
  const cut = "x".repeat(1999) + "😀".slice(0, 1); // ends in a lone high surrogate
  const paths = ["/home/dev/app", "/home/dev/my-app", "/home/dev/a_/b", "/home/dev/项目 x", "/tmp/C:x"];
  const ids: string[] = [];
  let t = 1_768_000_000_000;
  for (const [i, projectPath] of paths.entries()) {
    const id = await store.createSession({ title: `orig ${i} ${cut.slice(-3)}`, projectPath, provider: "anthropic", model: "claude-sonnet-4-5" });
    ids.push(id);
    const msgs = [
      { id: `u${i}`, role: "user", parts: [{ type: "text", content: `question ${i} ünïcödé` }], timestamp: (t += 1000) },
      { id: `a${i}`, role: "assistant", parts: [{ type: "text", content: "reading" }, { type: "tool", tool: { name: "read_file", args: { path: "src/a.ts" } }, result: cut }], timestamp: (t += 1000), usage: { inputTokens: 100 + i, outputTokens: 20, cacheReadInputTokens: 5, cacheCreationInputTokens: 1 } },
      { id: `c${i}`, role: "assistant", parts: [{ type: "code", language: "ts", content: "let a = 1;" }, { type: "image", url: "data:image/png;base64,AAAA", mimeType: "image/png" }], timestamp: (t += 1000) },
    ];
    for (const m of msgs) await store.appendMessage(id, m, projectPath);
    await store.updateMeta(id, { turnCount: 1, lastTurnAt: t }, projectPath);

    const rec = new RolloutRecorder(id);
    rec.recordTurnStarted("turn-0");
    rec.recordModelRequest("turn-0", { provider: "anthropic", model: "claude-sonnet-4-5", messageCount: 1, toolCount: 3, promptChars: 100, streamed: true });
    rec.recordModelFirstToken("turn-0", 300);
    rec.recordModelResponse("turn-0", { provider: "anthropic", model: "claude-sonnet-4-5", duration_ms: 900, ttft_ms: 300, inputTokens: 100 + i, outputTokens: 20, cacheReadTokens: 5, cacheWriteTokens: 1, toolCalls: ["read_file"], textChars: 7, thinkingChars: 0 });
    rec.recordFunctionCall("read_file", { path: "src/a.ts" }, "turn-0");
    rec.recordFunctionOutput("read_file", cut, 12, "turn-0");
  }
  // An interrupted session: the last message marked.
  await store.markInterrupted(ids[1], "c1", paths[1]);
  // A fork and a soft delete.
  ids.push(await store.fork(ids[0]));
  await store.deleteSession(ids[2], paths[2]);
  return readHome();
}

/** The original's importers over a bundle (SPEC §9.3 and §15): their own code is not in the
 * reference, so their steps are done with its store, reading exactly the fields they read. */
async function importBundle(file: string) {
  const data = JSON.parse(fs.readFileSync(file, "utf-8"));
  const store = await createSessionStore(FC);
  // SessionManager.import: `metadata` (a TypeError when absent), messages appended verbatim.
  const metadata = data.metadata;
  const managerId = await store.createSession({
    title: metadata.title + " (imported)",
    projectPath: metadata.projectPath,
    provider: metadata.provider,
    model: metadata.model,
  });
  for (const m of data.messages) await store.appendMessage(managerId, m, metadata.projectPath);
  await store.updateMeta(managerId, { status: "active" }, metadata.projectPath);
  // RemoteSessionSync.importFromFile → importSession: `manager.start(metadata.projectPath,
  // metadata.provider, metadata.title)`, then the messages and memories it reads.
  const remote = {
    projectPath: data.metadata.projectPath,
    provider: data.metadata.provider,
    title: data.metadata.title,
    messages: data.messages.length,
    memories: (data.memories ?? []).length,
  };
  return {
    managerId,
    remote,
    imported: {
      meta: await store.getMeta(managerId, metadata.projectPath),
      messages: await store.getMessages(managerId, metadata.projectPath),
    },
  };
}

/** The original's agent continuing a session of ours: an append and a meta update, by path. */
async function continueSession(id: string, projectPath: string) {
  const store = await createSessionStore(FC);
  const msg = { id: "from-the-original", role: "user", parts: [{ type: "text", content: "continued by the original" }], timestamp: Date.now() };
  await store.appendMessage(id, msg, projectPath);
  await store.updateMeta(id, { title: "continued by the original" }, projectPath);
  return { meta: await store.getMeta(id, projectPath), messages: await store.getMessages(id, projectPath) };
}

const [mode, arg, arg2] = process.argv.slice(2);
let out: unknown;
if (mode === "read") out = await readHome();
else if (mode === "write") out = await writeHome();
else if (mode === "import") out = await importBundle(arg);
else if (mode === "continue") out = await continueSession(arg, arg2);
else throw new Error(`unknown mode ${mode}`);
process.stdout.write(JSON.stringify(out));

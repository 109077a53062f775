// Drives `git agent exec` through the real @openai/codex-sdk, as an orchestrator would: the SDK's
// codexPathOverride is this build's git-agent binary, its baseUrl and apiKey the scripted model server's.
// Run by tests/exec.rs with Node 22; prints one JSON object with what the SDK returned.
//
// Usage: node driver.mjs SCENARIO
//   run-stream-resume  run() a turn, runStreamed() a second on the same thread (with an outputSchema),
//                      resumeThread(id).run() a third
//   fail               run() a turn that ends unfinished; prints the error the SDK threw
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const env = process.env;
const { Codex } = await import(pathToFileURL(join(env.GIT_AGENT_SDK_DIR, "dist/index.js")).href);

const codexOptions = {
  codexPathOverride: env.GIT_AGENT_BIN,
  baseUrl: env.GIT_AGENT_BASE_URL,
  apiKey: env.GIT_AGENT_API_KEY,
};
const threadOptions = {
  workingDirectory: env.GIT_AGENT_WORKDIR,
  skipGitRepoCheck: true,
  model: "test-model",
  sandboxMode: "workspace-write",
  approvalPolicy: "never",
};

async function runStreamResume() {
  const thread = new Codex(codexOptions).startThread(threadOptions);
  const first = await thread.run("make new.txt");
  const streamed = [];
  // With a turn's outputSchema, which the SDK passes as --output-schema FILE.
  const outputSchema = { type: "object", properties: { STREAM_SCHEMA_FIELD: { type: "string" } } };
  const { events } = await thread.runStreamed("STREAMED-PROMPT", { outputSchema });
  for await (const event of events) {
    streamed.push(event.type);
  }
  // A new SDK instance, as a later process of the orchestrator would have.
  const resumedThread = new Codex(codexOptions).resumeThread(thread.id, threadOptions);
  const resumed = await resumedThread.run("RESUMED-PROMPT");
  return {
    run: { threadId: thread.id, finalResponse: first.finalResponse, items: first.items, usage: first.usage },
    streamed,
    resumed: { threadId: resumedThread.id, finalResponse: resumed.finalResponse },
  };
}

async function fail() {
  const thread = new Codex(codexOptions).startThread(threadOptions);
  try {
    await thread.run("deploy");
    return { error: null };
  } catch (error) {
    return { error: String(error.message) };
  }
}

const scenarios = { "run-stream-resume": runStreamResume, fail };
const scenario = scenarios[process.argv[2]];
if (!scenario) {
  console.error(`unknown scenario: ${process.argv[2]}`);
  process.exit(2);
}
console.log(JSON.stringify(await scenario()));

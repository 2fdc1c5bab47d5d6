/**
 * Ready-made `[workers.*]` tables for `tron init --worker <name>`: one per kind of worker
 * a user is likely to have. Each is TOML text with comments, pasted into the generated
 * `.tron/config.toml`, so what the user reads there is exactly what runs.
 *
 * The roles need different powers: the builder edits files, runs commands and commits
 * in its own worktree; the reviewer (a detached checkout pinned to the attested sha) and
 * the architect (the repository root) only read. The command presets say so in the
 * flags of each CLI.
 */

export const PRESET_NAMES = ['openai', 'claude', 'codex', 'sim'] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

export interface WorkerPreset {
  /** One line for `tron init --help` and the init output. */
  describe: string;
  /** The `[workers.builder]`, `[workers.reviewer]` and `[workers.architect]` tables. */
  toml: string;
}

const PLACEHOLDERS = `# The prompt goes to the CLI on stdin. A CLI that only takes the prompt as an argument
# can use "{prompt}" (the prompt text) or "{prompt_file}" (a file holding it) inside an
# argv element instead, e.g. command = ["my-agent", "--task-file", "{prompt_file}"].`;

const openai = `# tron's built-in coding agent on the Chat Completions API: read, write, edit, list
# and run tools inside the worker's checkout. Works with any OpenAI-compatible server:
# point base_url at it and name the variable that holds its key.
# Codex-tuned models such as gpt-5.1-codex are served on the Responses API only: add
# api = "responses" to a table to use one there.
[workers.builder]
adapter = "openai"
model = "gpt-5.1"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"   # the variable holding the key; never write the key here
# max_steps = 40                 # model calls per turn before the turn fails
# request_timeout = "5m"         # one model call
# tool_timeout = "5m"            # longest a command the agent runs may take

[workers.reviewer]
adapter = "openai"
model = "gpt-5.1"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"

[workers.architect]
adapter = "openai"
model = "gpt-5.1"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"
`;

/** Proxies and certificates, read by both CLIs. */
const NETWORK_ENV = `"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy", "SSL_CERT_FILE"`;

/** What Claude Code reads for its endpoint, login and network; written once per role. */
const CLAUDE_ENV = `env = [
  "ANTHROPIC_*", "CLAUDE_CODE_*", "CLAUDE_CONFIG_DIR",   # key or token, gateway (ANTHROPIC_BASE_URL), model, Bedrock/Vertex switches
  "AWS_PROFILE", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK",
  "CLOUD_ML_REGION", "GOOGLE_APPLICATION_CREDENTIALS",
  ${NETWORK_ENV}, "NODE_EXTRA_CA_CERTS",
]`;

/** What Codex reads for its endpoint, login and network. */
const CODEX_ENV = `env = [
  "OPENAI_*", "CODEX_API_KEY", "CODEX_HOME", "CODEX_CA_CERTIFICATE",   # key, endpoint, where the login lives
  ${NETWORK_ENV},
]`;

const ENV_COMMENT = `# env: the variables passed on to the CLI when they are set in tron's environment (names,
# or patterns with *): its key or token, its endpoint (a gateway or a local server), its
# model and provider switches, proxies and certificates. Nothing else of tron's
# environment reaches a worker; unset variables stay unset.`;

const claude = `# Claude Code in print mode (claude -p): it reads the prompt from stdin and prints
# one JSON object (--output-format json) with its answer, its token usage and its cost,
# which tron reads (output = "claude-json"); its own error text shows when a turn fails.
# Log in once with \`claude\` (or \`claude setup-token\`), or set ANTHROPIC_API_KEY; to use a
# gateway or a local Anthropic-compatible server, export ANTHROPIC_BASE_URL.
${PLACEHOLDERS}
${ENV_COMMENT}

# The builder may edit files (acceptEdits) and run commands (Bash): it must run tests
# and commit on its branch. It works in its own worktree; tron checks trunk was not
# touched. Narrow Bash to what your project needs, e.g. "Bash(git:*)" "Bash(npm test:*)".
[workers.builder]
adapter = "command"
command = ["claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits", "--allowedTools", "Bash"]
output = "claude-json"
${CLAUDE_ENV}
writable = ["~/.claude", "~/.claude.json"]

# Reviewer and architect only read: read and search tools and read-only git commands are
# allowed; edits are disallowed, and in print mode anything not allowed is refused.
[workers.reviewer]
adapter = "command"
command = ["claude", "-p", "--output-format", "json", "--disallowedTools", "Edit", "Write", "NotebookEdit", "--allowedTools", "Read", "Grep", "Glob", "Bash(git diff:*)", "Bash(git log:*)", "Bash(git show:*)"]
output = "claude-json"
${CLAUDE_ENV}
writable = ["~/.claude", "~/.claude.json"]

[workers.architect]
adapter = "command"
command = ["claude", "-p", "--output-format", "json", "--disallowedTools", "Edit", "Write", "NotebookEdit", "--allowedTools", "Read", "Grep", "Glob", "Bash(git diff:*)", "Bash(git log:*)", "Bash(git show:*)"]
output = "claude-json"
${CLAUDE_ENV}
writable = ["~/.claude", "~/.claude.json"]
`;

const codex = `# OpenAI Codex CLI, non-interactive (codex exec): "-" makes it read the prompt from
# stdin; --json prints its events as JSON lines, from which tron reads the final
# message, the token usage and the CLI's own error text (output = "codex-jsonl").
# Log in once with \`codex login\`, or set OPENAI_API_KEY. Codex does not name its model
# in its output: add "-m", "<model>" to command for [prices] to price its tokens.
${PLACEHOLDERS}
${ENV_COMMENT}

# The builder must commit on its branch. Codex's workspace-write sandbox keeps .git
# read-only, and a tron worktree's git data lives in the main repository, outside the
# sandbox, so the builder runs unsandboxed (danger-full-access) in its own worktree;
# tron checks trunk was not touched. Run tron in a container or VM for a hard wall.
[workers.builder]
adapter = "command"
command = ["codex", "exec", "--json", "--sandbox", "danger-full-access", "-"]
output = "codex-jsonl"
${CODEX_ENV}
writable = ["~/.codex", "$CODEX_HOME"]

# Reviewer and architect only read: Codex's read-only sandbox.
[workers.reviewer]
adapter = "command"
command = ["codex", "exec", "--json", "--sandbox", "read-only", "-"]
output = "codex-jsonl"
${CODEX_ENV}
writable = ["~/.codex", "$CODEX_HOME"]

[workers.architect]
adapter = "command"
command = ["codex", "exec", "--json", "--sandbox", "read-only", "-"]
output = "codex-jsonl"
${CODEX_ENV}
writable = ["~/.codex", "$CODEX_HOME"]
`;

const sim = `# Scripted workers, for trying tron without a model. The script (.tron/sim.toml, which
# tron init writes) lists, per block and role, what each turn does: write files, commit,
# reply. A block without its own script plays the "*" block's: the builder writes and
# commits sim-work/<id>.md, so every block you add lands. Without any script a worker
# replies like an honest one but changes nothing, and no block gets past the truth gate.
# The format: docs/workers.md in the tron checkout.
[workers.builder]
adapter = "sim"
script = ".tron/sim.toml"   # relative to the repository; give every role the same one

[workers.reviewer]
adapter = "sim"
script = ".tron/sim.toml"

[workers.architect]
adapter = "sim"
script = ".tron/sim.toml"
`;

/** The worker tables `tron init` can write, by name. */
export const WORKER_PRESETS: Record<PresetName, WorkerPreset> = {
  openai: { describe: "tron's built-in agent on any OpenAI-compatible API (needs OPENAI_API_KEY)", toml: openai },
  claude: { describe: 'Claude Code CLI in print mode (needs `claude` on PATH)', toml: claude },
  codex: { describe: 'OpenAI Codex CLI, codex exec (needs `codex` on PATH)', toml: codex },
  sim: { describe: 'scripted workers, no model: for trying tron out', toml: sim },
};

/** Whether `name` is a preset, for argument checking. */
export function isPresetName(name: string): name is PresetName {
  return (PRESET_NAMES as readonly string[]).includes(name);
}

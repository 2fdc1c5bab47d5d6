/**
 * Every code tron can report, in one table: what went wrong and the general remedy.
 * The message at the use site names the file, key or process at fault; this table says
 * what the code means wherever it appears (console, event log, docs/ERRORS.md, which is
 * rendered from it). A code that is not a row here does not compile, and a test scans
 * the source so that no row goes unused and no code goes unlisted.
 */

/** Where a problem arises; docs/ERRORS.md has one section per area, in this order. */
export const PROBLEM_AREAS = {
  setup: 'Command line and setup',
  config: 'Settings: `.tron/config.toml`',
  workers: 'Workers',
  blocks: 'Blocks: `.tron/blocks/*.md`',
  git: 'Git and the repository',
  remote: 'The remote: `[remote]`',
  forge: 'The forge: `[forge]` and `[intake]`',
  log: 'Runs and the event log',
  answer: 'Operator answers: `tron answer`',
  serve: 'The API and dashboard: `tron serve`',
  replay: 'Replay: `tron replay`',
  prompts: "tron's prompts: `prompts/*.md`",
  spine: 'The workflow: `engine/workflow.toml` and the escalation table',
  sim: 'Evaluation templates: `evaluation/templates/*.toml`',
} as const;

export type ProblemArea = keyof typeof PROBLEM_AREAS;

/** What each kind means for the user; docs/ERRORS.md explains both. */
export const PROBLEM_KINDS = {
  input: 'a file, a flag or the state of your repository is at fault; the command stops before it acts (exit 2)',
  fault: 'git, the environment or tron itself failed; the command stops with exit 1',
  page: 'something outside tron (a remote) refused, and waiting will not change that; the run pages the operator with its words and ends with exit 3',
} as const;

export type ProblemKind = keyof typeof PROBLEM_KINDS;

export interface ProblemSpec {
  area: ProblemArea;
  kind: ProblemKind;
  /** What went wrong, in one sentence. */
  summary: string;
  /** The general remedy; the message at the use site names the exact place. */
  fix: string;
}

export const PROBLEMS = {
  TRON_USAGE: {
    area: 'setup',
    kind: 'input',
    summary: 'The command line is wrong: an unknown command or option, a malformed option, or a missing argument.',
    fix: 'Run `tron --help` or `tron <command> --help` and correct the command line.',
  },
  TRON_NOT_A_REPO: {
    area: 'setup',
    kind: 'input',
    summary: 'The directory tron was pointed at does not exist, or is not the top of a git work tree.',
    fix: 'Run tron at the top of the git repository, or pass `--repo` with that path (a missing folder is often a typo in it); `git init` makes a repository.',
  },
  TRON_STATE_UNWRITABLE: {
    area: 'setup',
    kind: 'input',
    summary:
      "tron cannot write its per-repository state folder (`$XDG_STATE_HOME/tron/`, or `~/.local/state/tron/`), where it keeps the key that signs the repository's logs and answers.",
    fix: 'Make that folder writable, or set `XDG_STATE_HOME` to a writable folder outside the repository (the same for `tron start` and `tron answer`).',
  },
  TRON_INIT_WORKER: {
    area: 'setup',
    kind: 'input',
    summary: '`tron init --worker` names no worker preset.',
    fix: 'Use one of the presets the message lists.',
  },
  TRON_INIT_EXISTS: {
    area: 'setup',
    kind: 'input',
    summary: '`tron init` found `.tron/config.toml` or `.tron/blocks/` already there, and changed nothing.',
    fix: 'Edit the existing files, or remove them and run `tron init` again.',
  },

  TRON_CONFIG_MISSING: {
    area: 'config',
    kind: 'input',
    summary: 'The repository has no `.tron/config.toml`.',
    fix: 'Run `tron init` to write one, then edit it.',
  },
  TRON_CONFIG_READ: {
    area: 'config',
    kind: 'input',
    summary: '`.tron/config.toml` exists but cannot be read.',
    fix: 'Make it a readable file.',
  },
  TRON_CONFIG_TOML: {
    area: 'config',
    kind: 'input',
    summary: '`.tron/config.toml` is not valid TOML.',
    fix: 'Fix the syntax at the line and column the message names.',
  },
  TRON_CONFIG_UNKNOWN_KEY: {
    area: 'config',
    kind: 'input',
    summary: '`.tron/config.toml` has a key tron does not know, often a misspelling.',
    fix: 'Fix its spelling or remove it; the message names the nearest legal key ("did you mean `max_parallel`?") and lists the keys allowed in that table.',
  },
  TRON_CONFIG_REQUIRED: {
    area: 'config',
    kind: 'input',
    summary: 'A required setting is missing from `.tron/config.toml`.',
    fix: 'Add it; the message says what it is for and how to write it.',
  },
  TRON_CONFIG_INVALID: {
    area: 'config',
    kind: 'input',
    summary: 'A setting in `.tron/config.toml` has the wrong type or a value that is not allowed.',
    fix: 'Write the kind of value the message asks for.',
  },
  TRON_TRUNK_RED: {
    area: 'git',
    kind: 'input',
    summary:
      "Before any block is touched, trunk was checked with the configured setup and test command in a checkout of tron's own, and they failed (or could not be found): every block's gate would fail on trunk's fault.",
    fix: 'Make the tests pass on trunk, or correct `test` (or `setup`) in `.tron/config.toml` — the message shows the command and its failing lines — then start again.',
  },
  TRON_CONFIG_CHANGED_IN_RUN: {
    area: 'config',
    kind: 'input',
    summary:
      '`.tron/config.toml` changed while the previous run was running (without a sandbox, a worker can write it), and has not been touched since.',
    fix: 'Check the change (`git diff .tron/config.toml`); undo it, or, if it is yours, `touch .tron/config.toml` and start again.',
  },
  TRON_GIT_CONFIG_CHANGED_IN_RUN: {
    area: 'config',
    kind: 'input',
    summary:
      "A git config file the engine's remote calls take credentials from (`~/.gitconfig`, what it includes: `credential.*`, `url.*.insteadOf`) changed while the previous run was running (without a sandbox, a worker can write it), and has not been touched since.",
    fix: 'Read the `credential.*` and `url.*` settings of the file it names (`git config --global --show-origin --list`); undo what you did not write, or, if the change is yours, `touch` the file and start again.',
  },
  TRON_CONFIG_DURATION: {
    area: 'config',
    kind: 'input',
    summary: 'A time setting in `.tron/config.toml` is not a duration.',
    fix: 'Write it like "90s", "20m", "1h" or "1h30m".',
  },
  TRON_SANDBOX_UNAVAILABLE: {
    area: 'config',
    kind: 'input',
    summary: '`[sandbox] mode = "bwrap"` requires the bubblewrap sandbox, and `bwrap` is missing or cannot create its namespaces here.',
    fix: 'Install bubblewrap (`apt-get install bubblewrap`) on a system that allows unprivileged user namespaces, or set `mode = "auto"` (run unsandboxed, said at start) or `"off"`.',
  },

  TRON_WORKER_KEY_UNSET: {
    area: 'workers',
    kind: 'input',
    summary: "The environment variable that should hold an openai worker's API key (its `api_key_env`) is not set.",
    fix: 'Export that variable with the key, or set `api_key_env` to the name of the variable that holds it.',
  },
  TRON_WORKER_NOT_FOUND: {
    area: 'workers',
    kind: 'input',
    summary: "A command worker's program is not on `PATH`.",
    fix: "Install the agent's program (Claude Code: `npm install -g @anthropic-ai/claude-code`; Codex: `npm install -g @openai/codex`), or put its full path first in `command`.",
  },
  TRON_WORKER_AUTH: {
    area: 'workers',
    kind: 'input',
    summary:
      "A CLI agent tron knows (Claude Code, Codex) cannot authenticate: no key variable reaches it, its own login file is missing and its settings name no key; or Codex's model provider reads its key from a variable (`env_key`) that is not set.",
    fix: "Log in with the CLI once (`claude` then /login, or `codex login`), or export its key variable and make sure the worker's `env` list passes it; for a Codex model provider, export the variable its `env_key` names and add it to the worker's `env` list.",
  },

  TRON_REGISTER_READ: {
    area: 'blocks',
    kind: 'input',
    summary: 'The folder `.tron/blocks/` cannot be read.',
    fix: 'Make it a readable folder.',
  },
  TRON_BLOCK_READ: {
    area: 'blocks',
    kind: 'input',
    summary: 'A block file cannot be read, or is not UTF-8 text.',
    fix: 'Make it a readable file saved as UTF-8 text.',
  },
  TRON_BLOCK_TOO_LARGE: {
    area: 'blocks',
    kind: 'input',
    summary: 'A block file is larger than 256KB; its brief would go into every prompt of the block.',
    fix: 'Shorten the brief; put the detail in files of the repository and name them in the brief.',
  },
  TRON_BLOCK_ID: {
    area: 'blocks',
    kind: 'input',
    summary: "A block file's name is not a valid block id.",
    fix: 'Rename the file to lower-case letters, digits and dashes (at most 63, starting with a letter or digit), e.g. `add-login.md`.',
  },
  TRON_BLOCK_FRONTMATTER: {
    area: 'blocks',
    kind: 'input',
    summary: 'A block file does not start with front matter between `+++` lines, or opens it and never closes it.',
    fix: 'Start the file with a line `+++`, the TOML settings (title, criteria, …), then another `+++` line before the brief.',
  },
  TRON_BLOCK_TOML: {
    area: 'blocks',
    kind: 'input',
    summary: "A block's front matter is not valid TOML.",
    fix: 'Fix the syntax at the line and column the message names (counted from the top of the file).',
  },
  TRON_BLOCK_UNKNOWN_KEY: {
    area: 'blocks',
    kind: 'input',
    summary: "A block's front matter has a key tron does not know, often a misspelling.",
    fix: 'Fix its spelling or remove it; the message lists the keys allowed.',
  },
  TRON_BLOCK_INVALID: {
    area: 'blocks',
    kind: 'input',
    summary:
      'A front-matter value has the wrong type, e.g. `depends_on` that is not a list of ids or `priority` that is not a whole number.',
    fix: 'Write the kind of value the message asks for.',
  },
  TRON_BLOCK_TITLE: {
    area: 'blocks',
    kind: 'input',
    summary: 'A block has no title, or a blank one.',
    fix: 'Add `title = "what this block does"` to its front matter.',
  },
  TRON_BLOCK_CRITERIA: {
    area: 'blocks',
    kind: 'input',
    summary: 'A block has no acceptance criteria, or a blank one.',
    fix: 'Add `criteria = ["…"]` with at least one criterion the builder must give evidence for.',
  },
  TRON_DEPENDS_UNKNOWN: {
    area: 'blocks',
    kind: 'input',
    summary: "A block's `depends_on` names a block that does not exist.",
    fix: 'Fix the id (the message names the nearest block id), or add the block it names.',
  },
  TRON_DEPENDS_SELF: {
    area: 'blocks',
    kind: 'input',
    summary: 'A block lists itself in its `depends_on`.',
    fix: "Remove the block's own id from its `depends_on`.",
  },
  TRON_CYCLE: {
    area: 'blocks',
    kind: 'input',
    summary: 'Blocks depend on each other in a cycle, so none of them can ever start.',
    fix: 'Remove one `depends_on` entry of the cycle the message shows.',
  },

  TRON_TRUNK_MISSING: {
    area: 'git',
    kind: 'input',
    summary: 'The trunk branch named in `.tron/config.toml` does not exist.',
    fix: 'Set `trunk` to an existing branch (see `git branch --list`), or create the branch.',
  },
  TRON_DIRTY_TRUNK_CHECKOUT: {
    area: 'git',
    kind: 'input',
    summary: 'The trunk branch is checked out with uncommitted changes, which landing a block would clobber.',
    fix: 'Commit or stash the changes (`git stash`), or switch that checkout to another branch, then start again.',
  },
  TRON_WORKTREE_EXISTS: {
    area: 'git',
    kind: 'input',
    summary: "A block's worktree folder or `tron/<id>` branch from an earlier run is still there.",
    fix: '`tron start` keeps such work as `orphan/<id>-<n>` by itself; to discard it by hand, remove the worktree and delete the branch as the message shows.',
  },
  TRON_GIT_UNAVAILABLE: {
    area: 'git',
    kind: 'fault',
    summary: 'git could not be run at all.',
    fix: 'Install git and make sure it is on the `PATH` tron runs with.',
  },
  TRON_GIT_FAILED: {
    area: 'git',
    kind: 'fault',
    summary: 'A git command tron ran failed.',
    fix: "The message names the command and quotes git's output; fix what git complains of (a lock file, a corrupt object, a full disk) and run again.",
  },
  TRON_STORE_DAMAGED: {
    area: 'git',
    kind: 'fault',
    summary:
      "The repository's object store is damaged: trunk, a `refs/tron/landed/*` ref, or what a landing would put on trunk names an object that is not there (removed without a sandbox, by a disk fault, or by a `git gc` gone wrong). tron stops before it builds or lands anything, and reports nothing as done.",
    fix: "The message names what is missing and the way back: `git fetch` from the remote when there is one (and point trunk back at the remote's commit if its own is gone), else restore `.git/objects` from a backup; `git fsck` shows what is still missing. Then run tron again.",
  },
  TRON_LAND_NOT_FAST_FORWARD: {
    area: 'git',
    kind: 'fault',
    summary: "Landing was refused: the block's head does not descend from the trunk it was built on, so trunk would not stay linear.",
    fix: 'A bug in tron: report it with the run directory; trunk was not changed.',
  },
  TRON_WORKTREE_OUTSIDE: {
    area: 'git',
    kind: 'fault',
    summary: 'tron refused to remove a folder outside `.tron/worktrees/`.',
    fix: 'A bug in tron: report it with the run directory; nothing was removed.',
  },
  TRON_ORPHAN_MISSING: {
    area: 'git',
    kind: 'fault',
    summary: 'The commit of unverified work that recovery should keep as `orphan/<id>-<n>` is not in the repository.',
    fix: 'Check whether history was rewritten or objects pruned since the run (`git fsck`); move the run directory aside to start afresh.',
  },

  TRON_REMOTE_UNKNOWN: {
    area: 'remote',
    kind: 'input',
    summary: '`[remote] name` names no remote of the repository that has a URL.',
    fix: 'Add the remote (`git remote add origin URL`) or name one that exists (`git remote -v` lists them).',
  },
  TRON_REMOTE_AUTH: {
    area: 'remote',
    kind: 'page',
    summary: 'The remote refused tron for lack of credentials: authentication failed or access was denied.',
    fix: "Make `git push` work from your own shell (credential helper, ssh agent, token), then answer the page; tron uses the user's credential helper, ssh agent and `url.*.insteadOf`, nothing else.",
  },
  TRON_REMOTE_REJECTED: {
    area: 'remote',
    kind: 'page',
    summary:
      "The remote declined the landing push: a protected branch, a pre-receive hook or another server rule; the page quotes the remote's words.",
    fix: 'Do what the remote asks (allow tron to push to trunk, or change the hook), then answer the page; the remote was not changed.',
  },
  TRON_REMOTE_UNREACHABLE: {
    area: 'remote',
    kind: 'page',
    summary: 'The remote stayed unreachable, or did not answer within `[remote] timeout`, through every retry.',
    fix: 'Check the network and the server, or raise `[remote] retries`/`timeout`, then answer the page; nothing was pushed that is not recorded.',
  },
  TRON_REMOTE_MISSING: {
    area: 'remote',
    kind: 'page',
    summary: 'The remote URL names no repository, or the server does not export it.',
    fix: 'Check `git remote get-url origin` (or the remote `[remote] name` names) and the server, then answer the page.',
  },

  TRON_FORGE_TOKEN_EXPOSED: {
    area: 'forge',
    kind: 'input',
    summary:
      "A `test_env` or worker `env` entry names the forge's token variable (`[forge] token_env`, or TRON_FORGE_TOKEN), its webhook secret's, or Linear's API key's (`[intake] token_env`).",
    fix: "Remove it from the list: the token serves tron's own API calls, and no worker or test run is ever given it.",
  },
  TRON_FORGE_TOKEN: {
    area: 'forge',
    kind: 'input',
    summary: '`[forge]` is set, but the variable `token_env` names (and TRON_FORGE_TOKEN) is unset or empty.',
    fix: 'Export a token with the scopes docs/forge.md lists, e.g. `export GITHUB_TOKEN=…`, in the shell that runs `tron start`.',
  },
  TRON_FORGE_AUTH: {
    area: 'forge',
    kind: 'input',
    summary:
      'The forge refused the token: bad credentials (401) or missing permission (403 that is not a rate limit); or Linear refused the API key (an authentication or forbidden error).',
    fix: 'Check the token and its scopes (docs/forge.md), then start again; the refused call changed nothing on the forge.',
  },
  TRON_FORGE_QUEUE: {
    area: 'forge',
    kind: 'page',
    summary:
      "The forge's merge queue moved trunk to a commit whose tree is not exactly the one tron tested (or not on the trunk it tested on); nothing was recorded as landed.",
    fix: 'See what else the queue merged in the same group, or set its merge method to merge or squash of one pull request at a time; then answer the parked block.',
  },
  TRON_FORGE_CHECKS: {
    area: 'forge',
    kind: 'page',
    summary: 'PR mode: a required check never reported on the sha tron would land, through every ask of `[forge] retries`; nothing landed.',
    fix: 'Make the check run on pull requests from `tron/*` branches (or correct `[forge] required_checks`), then answer the page.',
  },
  TRON_LINEAR_CONFIG: {
    area: 'forge',
    kind: 'input',
    summary:
      '`[intake]` with `source = "linear"` names no team, or not by its key; or a key only Linear\'s intake reads (`team`, `state`, `token_env`, `api_url`, …) is set without it.',
    fix: 'Give the team by the key its issue ids start with (`team = "ENG"` for ENG-12), or set `source = "linear"`; docs/forge.md#linear.',
  },
  TRON_LINEAR_TOKEN: {
    area: 'forge',
    kind: 'input',
    summary: '`[intake] source = "linear"` is set, but the variable `token_env` names (default LINEAR_API_KEY) is unset or empty.',
    fix: 'Create a personal API key in Linear (Settings → Security & access) and `export LINEAR_API_KEY=…` in the shell that runs `tron start`.',
  },
  TRON_LINEAR_TEAM: {
    area: 'forge',
    kind: 'input',
    summary:
      'Linear has no team with the key `[intake] team` names that the API key can see, or the team has no workflow state of type "completed" to move a landed issue to.',
    fix: "Check the key (Settings → Teams shows each team's) and that the API key's user is a member of the team; give the team a Done state.",
  },
  TRON_FORGE_UNREACHABLE: {
    area: 'forge',
    kind: 'fault',
    summary:
      "The forge's API (or Linear's) stayed unreachable or answered 5xx through every retry of `[forge] retries` (`[intake] retries`).",
    fix: 'Check the network and the forge (its status page), or raise `[forge] retries`/`timeout`, then start again.',
  },

  TRON_LOCKED: {
    area: 'log',
    kind: 'input',
    summary:
      'Another live tron process holds the lock: an engine runs on this repository (`.tron/engine.lock`: `tron start`, and `tron clean` refuses meanwhile) or is writing this run (`events.lock`).',
    fix: 'Wait for it to finish, or stop it; the message names its pid and command. A lock whose holder died is taken over by itself.',
  },
  TRON_NO_RUN: {
    area: 'log',
    kind: 'input',
    summary: '`tron report` or `tron replay` was given no run, and the repository has none under `.tron/runs/`.',
    fix: 'Run `tron start` first, pass `--repo` for the repository meant, or name a run directory.',
  },
  TRON_RUN_NOT_FOUND: {
    area: 'log',
    kind: 'input',
    summary: 'The RUN named is neither a run directory (one holding `events.jsonl`) nor a run id under `.tron/runs/`.',
    fix: 'Name a run directory, or one of the run ids the message lists (`ls .tron/runs`); pass `--repo` for another repository.',
  },
  TRON_DB_UNREACHABLE: {
    area: 'log',
    kind: 'fault',
    summary:
      'The database of `[cluster] database` (or `TRON_DATABASE_URL`, `--database`) cannot be reached: nothing answers at its host and port, or not in time.',
    fix: "Check that PostgreSQL runs and that the URL's host and port are right (`psql URL` tries the same); docs/cluster.md has the set-up.",
  },
  TRON_DB_REFUSED: {
    area: 'log',
    kind: 'input',
    summary:
      'The database server answered and refused the URL: its user or password (password authentication failed, no such role, no entry in pg_hba.conf), or its database (there is none of that name).',
    fix: 'Correct the user, password or database name in the URL (`[cluster] database`, `TRON_DATABASE_URL` or `--database`; `psql URL` tries the same), or create the database; docs/cluster.md has the set-up.',
  },
  TRON_DB_FULL: {
    area: 'log',
    kind: 'fault',
    summary:
      'The database refused one more connection: its `max_connections` is reached, or the CONNECTION LIMIT of the role in the URL. Each `tron agent` holds 3 connections plus one a slot; an engine up to 4, plus its slots when it runs jobs itself.',
    fix: 'Raise `max_connections` in postgresql.conf (and restart PostgreSQL) or the role\'s limit (`ALTER ROLE … CONNECTION LIMIT`), or run fewer agents or slots; docs/cluster.md, "Connections", has the sums.',
  },
  TRON_DB_SCHEMA_NEWER: {
    area: 'log',
    kind: 'input',
    summary: "The database's schema (`tron_schema`) was made by a newer tron than this one; this tron neither writes nor reads it.",
    fix: 'Upgrade tron on this host to the version the other hosts run; the schema is never migrated backwards.',
  },
  TRON_DB_SCHEMA_OLDER: {
    area: 'log',
    kind: 'input',
    summary:
      "The database's schema (`tron_schema`) is older than this tron, and the role in the URL may not migrate it: a reader's or an agent's role, on a host upgraded before any engine.",
    fix: 'Start an engine of this tron\'s version once (its role owns the database and migrates it), or run the command with the tron version the engine runs; docs/cluster.md, "Upgrading from two series".',
  },
  TRON_LEASE_HELD: {
    area: 'log',
    kind: 'input',
    summary: "Another engine holds this repository's lease in the database, and it has not lapsed: one engine leads a repository.",
    fix: 'Stop the other engine (the message names its host and pid), or start this one with `tron start --standby` to take over when it dies.',
  },
  TRON_TRUNK_DIVERGED: {
    area: 'remote',
    kind: 'input',
    summary:
      "This clone lacks landings the run's log records, and the remote's trunk, which holds them, does not descend from this clone's trunk: it has commits the remote lacks, or the remote's history was rewritten.",
    fix: "Push this clone's commits on trunk, or reset its trunk to the remote's, then start again: the landings are then taken from the remote, not built again.",
  },
  TRON_REPOSITORY_CONFLICT: {
    area: 'log',
    kind: 'input',
    summary:
      "The database knows this repository's remote under another name (`tron_repositories`), or this name as another remote's: two engines would lead one repository under two names, or two repositories under one.",
    fix: 'Set `[cluster] repository` in .tron/config.toml to the name the message gives (the one the other hosts use), or remove the setting so every clone derives the same name from the remote.',
  },
  TRON_REPOSITORY_RENAMED: {
    area: 'log',
    kind: 'input',
    summary:
      "The database holds runs under this clone's folder name (the name an older tron gave a repository) and none under the name derived from its remote: starting under the new name would lose them.",
    fix: 'Set `[cluster] repository = "<the folder name>"` in .tron/config.toml (the message names it) to go on with those runs; or, if they are another repository\'s, set it to the derived name the message gives.',
  },
  TRON_KEY_CONFLICT: {
    area: 'log',
    kind: 'input',
    summary:
      "This clone signs its logs with a key of its own, and the database's runs of the repository are signed with another (the repository's key in `tron_keys`): one engine could not check the other's lines.",
    fix: "Start the engine (or the standby) in a clone that has no run of its own yet: it takes the database's key. The message names this clone's key file and its runs.",
  },
  TRON_KEY_UNKNOWN: {
    area: 'log',
    kind: 'input',
    summary:
      "The database's runs of the repository were signed with a key this host does not hold, and the database holds none yet: an older tron wrote them, which kept its key on its own host.",
    fix: 'Start the engine once, with this version of tron, on the host whose clone wrote those runs: it puts its key in the database, and every other host takes it from there.',
  },
  TRON_LEASE_LOST: {
    area: 'log',
    kind: 'fault',
    summary:
      "The engine's lease lapsed or was taken over (a standby took over, the database was cut off): the database refused its appends, and it stopped.",
    fix: 'Nothing to repair: the engine holding the lease goes on, or the next `tron start` recovers the run. Keep the lease period longer than the pauses the host may have.',
  },
  TRON_DB_READ_LOST: {
    area: 'log',
    kind: 'fault',
    summary:
      'A command reading runs from the database (`status`, `logs`, `report`, `replay`, `view`, `serve`) lost its connection midway: the database restarted, the network dropped, or its backend was ended. It changed nothing.',
    fix: 'Run the command again once the database answers (`psql URL` tries the same connection).',
  },
  TRON_DB_LOST: {
    area: 'log',
    kind: 'fault',
    summary:
      "The engine's connection to the database broke mid-run (the database restarted, the network dropped): a line could not be committed, and the run stopped there.",
    fix: 'Once the database is back, `tron start` recovers the run from the lines committed before the break (the engine let its lease go as it stopped, so nothing waits for it to lapse).',
  },
  TRON_SERVE_READ_ONLY: {
    area: 'serve',
    kind: 'input',
    summary:
      '`tron serve --database` shows runs from the database, whose engine may lead from another host: it takes no operator answer (the engine reads answers from its own host).',
    fix: "Answer on the engine's host: `tron answer`, or `tron serve` there without `--database`.",
  },
  TRON_DB_NAME: {
    area: 'log',
    kind: 'input',
    summary:
      "A run's name in the database (`tron_events`) is not one tron writes: a run id that would be a path out of the run directory, or a repository name with a control character or over 255 characters. Nothing was written for it.",
    fix: "Something other than tron wrote the table: remove that run's rows as the database's owner, and check who holds the engine's role (docs/cluster.md).",
  },
  TRON_LOG_MISSING: {
    area: 'log',
    kind: 'input',
    summary: 'The run directory named has no `events.jsonl`.',
    fix: 'Check the path; runs live in `.tron/runs/<run-id>/`.',
  },
  TRON_LOG_CORRUPT: {
    area: 'log',
    kind: 'input',
    summary:
      'A line of an event log, other than the last, is not a valid event: not JSON, a field its schema does not allow, or a gap in `seq`.',
    fix: 'Something other than tron changed the file: restore it from a backup, or move the run directory aside to start afresh.',
  },
  TRON_RUN_DIR_GONE: {
    area: 'log',
    kind: 'fault',
    summary: "The run's directory (`.tron/runs/<run>/`) was removed while the engine ran; the run stopped, its running turns with it.",
    fix: 'Do not remove a run directory while tron runs. Start again: recovery resumes from git and the run before (what the removed log held is lost).',
  },
  TRON_ENGINE_FAILED: {
    area: 'log',
    kind: 'fault',
    summary:
      'The engine failed during a run — an effect it could not carry out (a file it could not write, a process it could not start), or a fault of tron itself — and ended the run with `run.failed`.',
    fix: 'The message names what failed: fix that (disk space, permissions) and start again; recovery resumes the run. If it names nothing of yours, report it with the run directory (`--debug` prints the stack trace).',
  },
  TRON_EVENT_INVALID: {
    area: 'log',
    kind: 'fault',
    summary: 'The engine built an event its own schema refuses; nothing was written.',
    fix: 'A bug in tron: report it with the message, which names the event type and the field.',
  },

  TRON_ANSWER_BLOCK: {
    area: 'answer',
    kind: 'input',
    summary: '`tron answer` names a block that is not in `.tron/blocks/`.',
    fix: 'Use one of the block ids the message lists.',
  },
  TRON_INBOX_FILE: {
    area: 'answer',
    kind: 'input',
    summary:
      'A `.json` file in `.tron/inbox/` has a name `tron answer` never writes (`<ms>-<block>.json`); the engine leaves it unread, unmoved and out of its log.',
    fix: "Remove the file (a worker or a tool may have put it there) and answer with `tron answer BLOCK '>>WORD …'`.",
  },
  TRON_ANSWER_NOT_PARKED: {
    area: 'answer',
    kind: 'input',
    summary: 'The block answered is not parked, and only a parked block takes an operator answer.',
    fix: 'See `tron status` for the phase of each block, and answer a parked one.',
  },
  TRON_ANSWER_ELSEWHERE: {
    area: 'answer',
    kind: 'input',
    summary:
      "The block is parked in a run whose engine leads from another host: answers go to that host's `.tron/inbox/`, which this one cannot reach.",
    fix: 'Run the same `tron answer` on the host the message names (or `tron serve` there); nothing was written here.',
  },
  TRON_SERVE_EXPOSED: {
    area: 'serve',
    kind: 'input',
    summary: '`tron serve --host` names an address other machines can reach, and no token was chosen for it.',
    fix: 'Bind 127.0.0.1 (the default), or set TRON_SERVE_TOKEN to a long random secret you hand out on purpose, and put TLS in front.',
  },
  TRON_SERVE_UNAUTHORIZED: {
    area: 'serve',
    kind: 'input',
    summary: 'An API request carried no valid `Authorization: Bearer TOKEN`; nothing was read or changed (HTTP 401).',
    fix: 'Send the token `tron serve` printed (the URL fragment after #token=), or the value of TRON_SERVE_TOKEN.',
  },
  TRON_WEBHOOK_SIGNATURE: {
    area: 'serve',
    kind: 'input',
    summary:
      'A POST to /webhooks/github carried no `X-Hub-Signature-256`, or one that the webhook secret does not make; nothing was woken (HTTP 401).',
    fix: "Give the webhook on GitHub the same secret as the variable [forge] webhook_secret_env names (TRON_WEBHOOK_SECRET) in `tron serve`'s environment, content type application/json.",
  },
  TRON_WEBHOOK_OFF: {
    area: 'serve',
    kind: 'input',
    summary: 'A POST to /webhooks/github reached a `tron serve` with no webhook secret set; nothing was woken (HTTP 404).',
    fix: 'Export the variable [forge] webhook_secret_env names (TRON_WEBHOOK_SECRET) with the secret the webhook on GitHub has, and start `tron serve` again.',
  },
  TRON_WEBHOOK_REFUSED: {
    area: 'serve',
    kind: 'input',
    summary:
      'A signed POST to /webhooks/github was larger than the cap (1 MiB; HTTP 413), did not arrive within the read timeout (5 s; 408), or came while too many were being read (503); nothing was woken.',
    fix: 'Nothing to do for a delivery GitHub sent: the next timer read finds the change. Subscribe the webhook only to the events docs/forge.md lists, whose payloads are far smaller.',
  },
  TRON_SERVE_QUERY: {
    area: 'serve',
    kind: 'input',
    summary:
      'A query parameter of an API request is malformed: `limit` or `days` is not a whole number in its range, or `before` is not a run id (HTTP 400); nothing was read.',
    fix: 'Send `limit` and `days` as whole numbers in the ranges the route takes (docs/openapi.json), and `before` as the `next` of the page before.',
  },
  TRON_SERVE_BLOCK: {
    area: 'serve',
    kind: 'input',
    summary:
      'An API request names a block the run it reads does not have: `GET /api/v1/blocks/{id}` a block not in the latest run, `GET /api/v1/blocks/{id}/history` one no run on disk has (HTTP 404); nothing was read.',
    fix: 'Use a block id from `GET /api/v1/state` (the latest run) or from a run of `GET /api/v1/runs`.',
  },
  TRON_SERVE_FAILED: {
    area: 'serve',
    kind: 'fault',
    summary: 'The server failed to answer a request (HTTP 500).',
    fix: 'A bug in tron, or a run directory that changed under it: report it with the message.',
  },
  TRON_ANSWER_INVALID: {
    area: 'answer',
    kind: 'input',
    summary: 'The answer is not a legal operator `>>` line.',
    fix: 'Send one operator word with its payload, e.g. `>>RETRY {"guidance":"…"}`; docs/GLOSSARY.md lists the words.',
  },

  TRON_REPLAY_SPINE: {
    area: 'replay',
    kind: 'input',
    summary: 'The run directory has no `workflow.toml`, the spine that drove the run.',
    fix: 'Restore the file the run wrote; replay cannot decide without it.',
  },
  TRON_REPLAY_MANIFEST: {
    area: 'replay',
    kind: 'input',
    summary: "The run directory's `manifest.json` is missing or is not JSON.",
    fix: 'Restore the file the run wrote.',
  },

  TRON_PROMPT_MISSING: {
    area: 'prompts',
    kind: 'fault',
    summary: "A prompt file in tron's `prompts/` folder cannot be read.",
    fix: 'Restore it from the tron checkout (`git checkout -- prompts/`).',
  },
  TRON_PROMPT_PLACEHOLDER: {
    area: 'prompts',
    kind: 'fault',
    summary:
      'A prompt and the engine disagree on its placeholders: one unknown or not supplied, `{gateway}` missing, or a `{#section}` not closed.',
    fix: 'Use only the placeholders the message lists for that file, or restore it from the tron checkout.',
  },

  TRON_SPINE_READ: {
    area: 'spine',
    kind: 'input',
    summary: 'The spine file cannot be read.',
    fix: 'Check the path given to `tron lint` and that the file is readable.',
  },
  TRON_SPINE_TOML: {
    area: 'spine',
    kind: 'input',
    summary: 'The spine is not valid TOML.',
    fix: 'Fix the syntax at the line and column the message names.',
  },
  TRON_SPINE_SCHEMA: {
    area: 'spine',
    kind: 'input',
    summary: 'The spine has an unknown, missing or mistyped key.',
    fix: 'Fix the key the message names; docs/WORKFLOW.md shows the shape of the spine.',
  },
  TRON_SPINE_DURATION: {
    area: 'spine',
    kind: 'input',
    summary: 'A time in the spine is not a duration.',
    fix: 'Write it like "90s", "20m", "1h" or "1h30m".',
  },
  TRON_SPINE_START_UNKNOWN: {
    area: 'spine',
    kind: 'input',
    summary: '`start` names a phase the spine does not define.',
    fix: 'Name one of the `[phases.*]` tables.',
  },
  TRON_SPINE_TARGET_UNKNOWN: {
    area: 'spine',
    kind: 'input',
    summary: 'A transition leads to a phase the spine does not define.',
    fix: 'Set its `to` to a defined phase, or add the phase.',
  },
  TRON_SPINE_TRIGGER_UNKNOWN: {
    area: 'spine',
    kind: 'input',
    summary: 'A transition fires on something that is neither a glossary word nor an engine signal.',
    fix: 'Use a word of `engine/gateway/glossary.ts` or one of the signals the message lists.',
  },
  TRON_SPINE_TRIGGER_PHASE: {
    area: 'spine',
    kind: 'input',
    summary: 'A transition fires on a word the glossary does not allow in that phase.',
    fix: "Change the transition, or widen the word's phases in `engine/gateway/glossary.ts`.",
  },
  TRON_SPINE_TRIGGER_UNLISTED: {
    area: 'spine',
    kind: 'input',
    summary: 'A transition fires on a word no role lists in that phase, so it can never fire.',
    fix: "Add the word to the phase's `words.<role>`, or remove the transition.",
  },
  TRON_SPINE_TRIGGER_DUPLICATE: {
    area: 'spine',
    kind: 'input',
    summary: 'Two transitions of one phase fire on the same word or signal.',
    fix: 'Remove one: an outcome must lead to one place.',
  },
  TRON_SPINE_UNREACHABLE: {
    area: 'spine',
    kind: 'input',
    summary: 'No transition or escalation outcome leads to a phase from `start`.',
    fix: 'Add a transition to it, or remove the phase.',
  },
  TRON_SPINE_PHASE_MISSING: {
    area: 'spine',
    kind: 'input',
    summary: 'The spine does not define a phase the engine acts on by name (build, review, merge, wrap, landed, parked, abandoned).',
    fix: 'Add the missing [phases.<name>] table; a spine may add phases, not drop these.',
  },
  TRON_SPINE_NO_TERMINAL: {
    area: 'spine',
    kind: 'input',
    summary: 'From a phase, no path of transitions reaches a terminal phase.',
    fix: 'Add a transition onward, or mark the phase where blocks end `terminal = true`.',
  },
  TRON_SPINE_WORD_UNKNOWN: {
    area: 'spine',
    kind: 'input',
    summary: 'A phase lists a word that is not in the glossary.',
    fix: 'Use a glossary word, or add the word to `engine/gateway/glossary.ts`.',
  },
  TRON_SPINE_WORD_ROLE: {
    area: 'spine',
    kind: 'input',
    summary: 'A phase lists a word under a role the glossary does not let send it.',
    fix: 'Move it to a role that may send it, or remove it.',
  },
  TRON_SPINE_WORD_PHASE: {
    area: 'spine',
    kind: 'input',
    summary: 'A phase lists a word the glossary does not allow in that phase.',
    fix: "Remove it there, or widen the word's phases in `engine/gateway/glossary.ts`.",
  },
  TRON_SPINE_TERMINAL_ACTIVE: {
    area: 'spine',
    kind: 'input',
    summary: 'A terminal phase has transitions, words, a gate, attempts or a time budget, none of which can ever apply.',
    fix: 'Remove them, or drop `terminal = true`.',
  },
  TRON_SPINE_BUDGET: {
    area: 'spine',
    kind: 'input',
    summary: 'A budget (attempts, a time, architect calls, a liveness setting) is zero, negative or not whole.',
    fix: 'Write the whole number or duration the message asks for.',
  },
  TRON_SPINE_ATTEMPTS_MISSING: {
    area: 'spine',
    kind: 'input',
    summary: 'A phase with a truth, review or merge gate has no attempt budget, so it could loop forever.',
    fix: 'Add `attempts = 3` (or another whole number) to the phase.',
  },
  TRON_SPINE_OUTCOME_UNKNOWN: {
    area: 'spine',
    kind: 'input',
    summary: 'An escalation outcome (OUTCOMES in `engine/spine/spine.ts`) sends blocks to a phase the spine does not define.',
    fix: 'Add that phase to the spine.',
  },
  TRON_SPINE_ESCALATION_EMPTY: {
    area: 'spine',
    kind: 'input',
    summary: 'A row of the escalation table has no handlers, so its trouble would be dropped.',
    fix: 'List handlers for it, ending with `operator`.',
  },
  TRON_SPINE_ESCALATION_HANDLER: {
    area: 'spine',
    kind: 'input',
    summary: 'A row of the escalation table names a handler that does not exist.',
    fix: 'Use one of the handlers the message lists.',
  },
  TRON_SPINE_ESCALATION_DUPLICATE: {
    area: 'spine',
    kind: 'input',
    summary: 'A row of the escalation table lists a handler twice.',
    fix: 'Remove the repeat: each handler is tried once.',
  },
  TRON_SPINE_ESCALATION_LAST: {
    area: 'spine',
    kind: 'input',
    summary: 'A row of the escalation table does not end with the operator, the one handler that always answers.',
    fix: 'End the row with `operator`.',
  },

  TRON_SIM_UNKNOWN: {
    area: 'sim',
    kind: 'input',
    summary: '`tron sim` names a template that does not exist.',
    fix: 'Use a name the message lists, or the path of a `.toml` file.',
  },
  TRON_SIM_TOML: {
    area: 'sim',
    kind: 'input',
    summary: 'An evaluation template is not valid TOML.',
    fix: 'Fix the syntax at the line and column the message names.',
  },
  TRON_SIM_TEMPLATE: {
    area: 'sim',
    kind: 'input',
    summary: 'An evaluation template has an unknown, missing or mistyped key.',
    fix: 'Fix the key the message names; `evaluation/template.ts` defines the format.',
  },
  TRON_SIM_BLOCK: {
    area: 'sim',
    kind: 'input',
    summary: 'An evaluation template names a block it does not define.',
    fix: 'Add `[blocks.<id>]` to the template, or fix the id.',
  },
  TRON_SIM_CRASH: {
    area: 'sim',
    kind: 'input',
    summary: 'A run of an evaluation template sets both `crash_after` and `crash_after_event`.',
    fix: 'Keep one of them.',
  },
  TRON_SIM_CONFIG: {
    area: 'sim',
    kind: 'input',
    summary: 'An evaluation template sets `config.workers`, but templates always run sim workers.',
    fix: 'Remove `config.workers`; write `architect = true` to add a sim architect.',
  },
} as const satisfies Record<`TRON_${string}`, ProblemSpec>;

/** Every code tron can report. */
export type ProblemCode = keyof typeof PROBLEMS;

/** Codes of mistakes the user can fix: the only ones a `Problem` (exit 2) may carry. */
export type InputCode = { [C in ProblemCode]: (typeof PROBLEMS)[C]['kind'] extends 'input' ? C : never }[ProblemCode];

/** Codes of failures of git, the environment or tron itself (exit 1). */
export type FaultCode = Exclude<ProblemCode, InputCode>;

/** The codes, in table order. */
export const PROBLEM_CODES = Object.keys(PROBLEMS) as ProblemCode[];

/** `CODE: text`, the form a coded line takes on the console and in a `run.finished` detail. */
export function coded(code: ProblemCode, text: string): string {
  return `${code}: ${text}`;
}

/** Whether `text` is a coded line already (`TRON_…: …`): said as it is, never wrapped in another code. */
export function isCoded(text: string): boolean {
  return /^TRON_[A-Z_]+: /.test(text);
}

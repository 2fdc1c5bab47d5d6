/**
 * What the engine costs a block on one host (part of `npm run bench`; alone: `npx tsx
 * evaluation/bench-cost.ts`): eight sequential blocks (max_parallel 1) of a `tron init
 * --worker sim` repository — workers in-process, bubblewrap on where it runs, a one-file
 * `node --test` suite as the test command — run by `tron start` as a child, and the same
 * eight blocks with a scripted `command` builder against a careful shell script that does
 * the least a block needs: a worktree, one builder turn, one test run, a compare-and-swap
 * of trunk. It prints, a block:
 *
 * - CPU seconds, user + system, of `tron start` and everything it started. Counted by a
 *   cgroup of its own (cgroup v2's `cpu.stat`): rusage of waited-for children misses
 *   whatever runs in a bubblewrap sandbox with its own PID namespace — every test run —
 *   since bwrap's inner init is not waited for with its rusage. Without a writable cgroup,
 *   `perf stat`'s task-clock (user and system together); without either, not measured.
 * - wall seconds, from spawning `tron start` to its exit;
 * - git processes: a second, untimed run under `strace -f -e trace=execve`, counting every
 *   process that executed a `git` (or `git-*`) binary — the engine's, git's own children,
 *   and the workers' (the sim builder's `git add` and `git commit`). TRON_BENCH_COST_ARGV=1
 *   also prints them by argv (shas and block ids folded), most frequent first; by
 *   subcommand always.
 * - CPU by whom: one more run sampled by `perf record` (task-clock, every process it
 *   started, in the sandbox's PID namespace too): tron start's own process, git, the test
 *   runs' node, bubblewrap, shells and the rest — where the remaining cost is.
 *
 * Goals (issue #41): ≤ 0.35 CPU-s a block, ≤ 12 git processes a block, and tron's wall a
 * block with the `command` builder within 1.6× of the careful script's. Each figure is
 * printed with the load average it ran under; the machine's other work inflates wall more
 * than CPU. dist/ is built first when it is stale: a run through tsx measures the
 * compiler too. TRON_BENCH_COST=0 skips it; TRON_BENCH_REPEATS=3 sets the repeats
 * (medians); TRON_BENCH_COST_AGAINST=<another built tron checkout> runs that engine beside
 * this one in every repeat; TRON_BENCH_KEEP=1 keeps the repositories.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execa } from 'execa';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'tron.js');
const BLOCKS = 8;
const IDS = Array.from({ length: BLOCKS }, (_, i) => `b${i + 1}`);
const TEST = 'node --test';

/** The environment of every process the bench starts: a minimal base and a git identity. */
const ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? '/tmp',
  LANG: process.env.LANG ?? 'C.UTF-8',
  GIT_AUTHOR_NAME: 'Tron Bench',
  GIT_AUTHOR_EMAIL: 'bench@example.invalid',
  GIT_COMMITTER_NAME: 'Tron Bench',
  GIT_COMMITTER_EMAIL: 'bench@example.invalid',
};

const git = (cwd: string, ...args: string[]) => execa('git', args, { cwd, env: ENV, extendEnv: false }).then((r) => r.stdout);

/** A builder for the `command` run and the careful script: one note file, committed, `>>DONE`; `>>CONFIRMED` when challenged. */
const BUILDER = `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"the note is committed"}}'; exit 0 ;;
esac
mkdir -p sim-work && echo "$TRON_BLOCK" > "sim-work/$TRON_BLOCK.md"
git add -A && git commit -qm "$TRON_BLOCK: the builder's work" >/dev/null
echo '>>DONE'
`;

/**
 * A repository made as a newcomer makes one: a one-file `node --test` suite, `tron init
 * --worker sim`, the example block replaced by eight of its own, one build slot, the test
 * command `node --test`; with `command`, a `command` builder and an approving reviewer.
 */
async function project(command = false): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-bench-cost-'));
  await git(dir, 'init', '-q', '-b', 'main');
  // In the repository, which a sandboxed worker sees (its private /tmp hides the bench's own folders).
  const builder = join(dir, 'tools', 'builder.sh');
  mkdirSync(join(dir, 'tools'));
  writeFileSync(builder, BUILDER);
  chmodSync(builder, 0o755);
  writeFileSync(join(dir, 'package.json'), '{ "name": "bench", "private": true, "scripts": { "test": "node --test" } }\n');
  mkdirSync(join(dir, 'test'));
  writeFileSync(
    join(dir, 'test', 'one.test.js'),
    "const { test } = require('node:test');\nconst assert = require('node:assert');\ntest('arithmetic', () => assert.strictEqual(6 * 7, 42));\n",
  );
  await execa('node', [BIN, 'init', '--worker', 'sim', '--repo', dir], { env: ENV, extendEnv: false });
  const configPath = join(dir, '.tron', 'config.toml');
  let config = readFileSync(configPath, 'utf8')
    .replace(/^max_parallel = \d+/m, 'max_parallel = 1')
    .replace(/^test = "npm test"/m, `test = ${JSON.stringify(TEST)}`);
  if (command) {
    const reviewer = `["sh", "-c", "cat > /dev/null; echo '>>APPROVE'"]`;
    config = config.replace(/^\[workers\.builder\][\s\S]*?(?=\n# Run whenever)/m, () =>
      [
        `[workers.builder]\nadapter = "command"\ncommand = ["${builder}"]\nenv = ["GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"]\n`,
        `[workers.reviewer]\nadapter = "command"\ncommand = ${reviewer}\n`,
      ].join('\n'),
    );
  }
  writeFileSync(configPath, config);
  rmSync(join(dir, '.tron', 'blocks', 'example.md'));
  for (const id of IDS) {
    writeFileSync(join(dir, '.tron', 'blocks', `${id}.md`), `+++\ntitle = "Block ${id}"\ncriteria = ["${id} works"]\n+++\nBuild ${id}.\n`);
  }
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-qm', 'tron: eight blocks');
  return dir;
}

/** Where a cgroup (v2) of the bench's own can be made: a folder with `cgroup.procs` whose children get `cpu.stat`. */
function cgroupRoot(): string | undefined {
  for (const root of ['/sys/fs/cgroup', '/sys/fs/cgroup/unified']) {
    if (!existsSync(join(root, 'cgroup.procs'))) continue;
    const probe = join(root, `tron-bench-probe-${process.pid}`);
    try {
      mkdirSync(probe);
      const ok = existsSync(join(probe, 'cpu.stat'));
      rmdirSync(probe);
      if (ok) return root;
    } catch {
      // Not writable here (a container without its own cgroup namespace): the next, or perf.
    }
  }
  return undefined;
}

export interface Cost {
  wallS: number;
  /** CPU seconds of the whole tree; user and system apart where the method tells them apart. */
  cpuS: number | undefined;
  userS?: number;
  systemS?: number;
  exit: number;
  stderr: string;
}

/** The methods CPU can be counted by here, best first. */
export type CpuMethod = { kind: 'cgroup'; root: string } | { kind: 'perf' } | { kind: 'none' };

export async function cpuMethod(): Promise<CpuMethod> {
  const root = cgroupRoot();
  if (root !== undefined) return { kind: 'cgroup', root };
  const perf = await execa('perf', ['stat', '-x,', '-e', 'task-clock', 'true'], { reject: false });
  return perf.exitCode === 0 && /task-clock/.test(perf.stderr) ? { kind: 'perf' } : { kind: 'none' };
}

/** The figures of the same runs when the goals were set (issue #41, main at 7d67226, 2 cores): what each is printed beside. */
const WHEN_SET = { cpu: '0.87 s', git: '~43 (342)', overhead: '2.8×' };

/** Runs `argv` in `cwd` and counts what it and every process it started cost. */
export async function costOf(argv: string[], cwd: string, method: CpuMethod): Promise<Cost> {
  const group = method.kind === 'cgroup' ? join(method.root, `tron-bench-${process.pid}-${Date.now()}`) : undefined;
  const perfOut = join(tmpdir(), `tron-bench-perf-${process.pid}.csv`);
  let full = argv;
  if (group !== undefined) {
    mkdirSync(group);
    // The shell joins the cgroup before it becomes the command: every descendant is counted.
    full = ['sh', '-c', `echo $$ > ${group}/cgroup.procs && exec "$@"`, 'sh', ...argv];
  } else if (method.kind === 'perf') {
    full = ['perf', 'stat', '-x,', '-e', 'task-clock', '-o', perfOut, '--', ...argv];
  }
  const start = performance.now();
  const { exit, stderr } = await new Promise<{ exit: number; stderr: string }>((done) => {
    const child = spawn(full[0]!, full.slice(1), { cwd, env: ENV, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      err += chunk;
    });
    child.on('close', (code) => done({ exit: code ?? 1, stderr: err }));
  });
  const wallS = (performance.now() - start) / 1000;
  if (group !== undefined) {
    // Strays (a process left behind) still count: wait until the cgroup is empty.
    for (let i = 0; i < 100 && readFileSync(join(group, 'cgroup.procs'), 'utf8').trim() !== ''; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const stat = Object.fromEntries(
      readFileSync(join(group, 'cpu.stat'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => line.split(' ') as [string, string]),
    );
    rmdirSync(group);
    const userS = Number(stat.user_usec) / 1e6;
    const systemS = Number(stat.system_usec) / 1e6;
    return { wallS, cpuS: userS + systemS, userS, systemS, exit, stderr };
  }
  if (method.kind === 'perf') {
    const line = readFileSync(perfOut, 'utf8')
      .split('\n')
      .find((l) => l.includes('task-clock'));
    rmSync(perfOut, { force: true });
    return { wallS, cpuS: Number(line?.split(',')[0]) / 1000, exit, stderr };
  }
  return { wallS, cpuS: undefined, exit, stderr };
}

/** The git processes of one run of `argv`, by `strace -f` (undefined without strace): how many, and by argv. */
async function gitProcesses(argv: string[], cwd: string): Promise<{ count: number; byArgv: Map<string, number> } | undefined> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-bench-strace-'));
  try {
    const run = await execa(
      'strace',
      ['-f', '-ff', '-qq', '-s', '256', '-e', 'trace=execve', '-e', 'signal=none', '-o', join(dir, 't'), ...argv],
      {
        cwd,
        env: ENV,
        extendEnv: false,
        reject: false,
      },
    );
    if (run.exitCode !== 0 && readdirSync(dir).length === 0) return undefined;
    const byArgv = new Map<string, number>();
    let count = 0;
    for (const file of readdirSync(dir)) {
      // One file a process: its successful execve calls, the last of which is what it ran.
      const calls = readFileSync(join(dir, file), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('execve(') && / = 0$/.test(l));
      const last = calls.at(-1);
      const path = last === undefined ? undefined : /^execve\("([^"]+)"/.exec(last)?.[1];
      if (path === undefined || !/^git(-|$)/.test(basename(path))) continue;
      count += 1;
      const args = (/\[(.*?)\], (?:\[|0x)/.exec(last!)?.[1] ?? '')
        .replace(/"-c", "[^"]*", /g, '')
        .replace(/\b[0-9a-f]{40}\b/g, 'SHA')
        .replace(/\bb\d\b/g, 'bN')
        .replace(/tron-bench-cost-\w+/g, 'REPO');
      byArgv.set(args, (byArgv.get(args) ?? 0) + 1);
    }
    return { count, byArgv };
  } catch {
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The first word of a git argv as gitProcesses folds it (`"git", "-C", "REPO", "rev-parse", …`): its subcommand. */
function subcommandOf(args: string): string {
  const words = args.split(', ').map((w) => w.replace(/^"|"$/g, ''));
  const bin = basename(words[0] ?? 'git');
  if (bin.startsWith('git-')) return bin;
  for (let i = 1; i < words.length; i++) {
    if (words[i] === '-C') i += 1;
    else if (!words[i]!.startsWith('-')) return words[i]!;
  }
  return '(none)';
}

/** Whose CPU a run spent, by `perf record` samples of task-clock (undefined without perf): seconds by whom. */
async function cpuByWhom(argv: string[], cwd: string): Promise<Map<string, number> | undefined> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-bench-perf-'));
  try {
    const data = join(dir, 'perf.data');
    const pidFile = join(dir, 'pid');
    // A sample every 0.25 ms of CPU, in every process the run starts (in the sandbox's PID namespace too).
    const run = await execa(
      'perf',
      [
        'record',
        '-q',
        '-e',
        'task-clock',
        '-c',
        '250000',
        '-o',
        data,
        '--',
        'sh',
        '-c',
        `echo $$ > ${pidFile} && exec "$@"`,
        'sh',
        ...argv,
      ],
      { cwd, env: ENV, extendEnv: false, reject: false },
    );
    if (!existsSync(pidFile) || !existsSync(data)) return undefined;
    const engine = Number(readFileSync(pidFile, 'utf8').trim());
    const script = await execa('perf', ['script', '-i', data, '-F', 'comm,pid,period'], { reject: false, maxBuffer: 1 << 30 });
    if (run.exitCode === null || script.exitCode !== 0) return undefined;
    const whom = new Map<string, number>();
    for (const line of script.stdout.split('\n')) {
      const m = /^\s*(.*?)\s+(\d+)\s+(\d+)\s*$/.exec(line);
      if (!m) continue;
      const [, comm, pid, period] = m;
      const who =
        Number(pid) === engine
          ? "tron start's own process (the engine)"
          : /^git/.test(comm!)
            ? 'git'
            : comm === 'node'
              ? 'test runs (node --test)'
              : comm === 'bwrap'
                ? 'the sandbox (bwrap)'
                : 'shells and the rest';
      whom.set(who, (whom.get(who) ?? 0) + Number(period) / 1e9);
    }
    return whom;
  } catch {
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The careful script: per block, a worktree, one builder turn, one test run, trunk moved by compare-and-swap. */
function carefulScript(builder: string): string {
  return `set -e
for id in ${IDS.join(' ')}; do
  base=$(git rev-parse refs/heads/main)
  git worktree add -q -b "tron/$id" ".tron/worktrees/$id" "$base"
  cd ".tron/worktrees/$id"
  echo "Build $id." | TRON_ROLE=builder TRON_BLOCK="$id" TRON_TURN=1 TRON_PHASE=build ${builder} > /dev/null
  sh -c ${JSON.stringify(TEST)} > /dev/null 2>&1
  head=$(git rev-parse HEAD)
  cd ../../..
  git update-ref refs/heads/main "$head" "$base"
done
`;
}

const load = () => loadavg()[0]!.toFixed(2);
const f2 = (x: number | undefined) => (x === undefined ? '—' : x.toFixed(2));

function row(label: string, cost: Cost, loadBefore: string, extra = ''): void {
  const cpu = cost.cpuS === undefined ? '—' : (cost.cpuS / BLOCKS).toFixed(3);
  const split = cost.userS === undefined ? '' : ` (${f2(cost.userS)} user + ${f2(cost.systemS)} sys)`;
  console.log(
    `${label.padEnd(38)} ${cpu.padStart(8)} ${(cost.wallS / BLOCKS).toFixed(3).padStart(8)}   load ${loadBefore} → ${load()}${split}${extra}${cost.exit === 0 ? '' : `  EXIT ${cost.exit}: ${cost.stderr.trim().split('\n').at(-1)}`}`,
  );
}

/** Builds dist/ when a source is newer than it: `bin/tron.js` would otherwise run the sources through tsx. */
async function freshDist(): Promise<void> {
  const { distIsFresh } = (await import(pathToFileURL(join(ROOT, 'bin', 'dist-fresh.js')).href)) as {
    distIsFresh: (root: string) => boolean;
  };
  if (distIsFresh(ROOT)) return;
  console.log('(dist/ is stale: building it first, so the runs measure the compiled engine)');
  await execa('node', [join(ROOT, 'bin', 'build.js')], { cwd: ROOT });
}

/** The median of `xs`. */
function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One engine's runs: its `bin/tron.js`, its label, and what each repeat cost. */
interface Engine {
  label: string;
  bin: string;
  sim: Cost[];
  command: Cost[];
}

/**
 * Runs the cost benchmark and prints its figures and verdicts: every run is printed, the
 * verdicts take medians over TRON_BENCH_REPEATS (3) repeats, the runs of one repeat back
 * to back so that each sees the same machine. TRON_BENCH_COST_AGAINST=<another tron
 * checkout, built> runs that engine beside this one in every repeat (today's figures
 * against a change's, under the same load).
 */
export async function benchCost(): Promise<void> {
  if (process.env.TRON_BENCH_COST === '0') return;
  await freshDist();
  const method = await cpuMethod();
  const how = { cgroup: 'a cgroup of its own (cpu.stat)', perf: 'perf stat task-clock', none: 'not measured (no cgroup, no perf)' }[
    method.kind
  ];
  const repeats = Math.max(1, Number(process.env.TRON_BENCH_REPEATS ?? 3));
  console.log(
    `\nengine cost a block (${BLOCKS} sequential blocks, max_parallel 1, test \`${TEST}\`; CPU by ${how}; git processes by strace; median of ${repeats})`,
  );
  console.log(`${'run'.padEnd(38)} ${'CPU-s'.padStart(8)} ${'wall s'.padStart(8)}`);
  const against = process.env.TRON_BENCH_COST_AGAINST;
  const engines: Engine[] = [{ label: 'this checkout', bin: BIN, sim: [], command: [] }];
  if (against) engines.push({ label: against, bin: join(against, 'bin', 'tron.js'), sim: [], command: [] });
  const script: Cost[] = [];
  const made: string[] = [];
  const keep = process.env.TRON_BENCH_KEEP === '1';
  const fresh = async (command = false) => {
    const dir = await project(command);
    made.push(dir);
    return dir;
  };
  try {
    for (let i = 0; i < repeats; i++) {
      for (const e of engines) {
        const name = engines.length > 1 ? ` (${e.label})` : '';
        let before = load();
        e.sim.push(await costOf(['node', e.bin, 'start', '--repo', '.'], await fresh(), method));
        row(`tron start, sim workers${name}`, e.sim.at(-1)!, before);
        before = load();
        e.command.push(await costOf(['node', e.bin, 'start', '--repo', '.'], await fresh(true), method));
        row(`tron start, command builder${name}`, e.command.at(-1)!, before);
      }
      const bare = await fresh();
      const before = load();
      script.push(await costOf(['sh', '-c', carefulScript(join(bare, 'tools', 'builder.sh'))], bare, method));
      row('careful script, same builder', script.at(-1)!, before);
    }
    const scriptWall = median(script.map((c) => c.wallS));
    for (const e of engines) {
      const name = engines.length > 1 ? ` (${e.label})` : '';
      // The git processes of one more sim run, under strace: a count, the same every run.
      const gits = await gitProcesses(['node', e.bin, 'start', '--repo', '.'], await fresh());
      const cpus = e.sim.map((c) => c.cpuS).filter((x): x is number => x !== undefined);
      const cpu = cpus.length > 0 ? median(cpus) / BLOCKS : undefined;
      console.log(
        `CPU a block, sim run${name}: ${cpu === undefined ? 'not measured' : `${cpu.toFixed(3)} s (${WHEN_SET.cpu} when the goal was set; goal ≤ 0.35: ${cpu <= 0.35 ? 'met' : 'MISSED'})`}; wall ${(median(e.sim.map((c) => c.wallS)) / BLOCKS).toFixed(3)} s`,
      );
      if (gits !== undefined) {
        const perBlock = gits.count / BLOCKS;
        console.log(
          `git processes a block, sim run${name}: ${perBlock.toFixed(1)} (${gits.count} in all; ${WHEN_SET.git} when the goal was set; goal ≤ 12: ${perBlock <= 12 ? 'met' : 'MISSED'})`,
        );
        const bySub = new Map<string, number>();
        for (const [args, n] of gits.byArgv) bySub.set(subcommandOf(args), (bySub.get(subcommandOf(args)) ?? 0) + n);
        const subs = [...bySub].sort((a, b) => b[1] - a[1]);
        console.log(`  by subcommand, a block: ${subs.map(([sub, n]) => `${sub} ${(n / BLOCKS).toFixed(1)}`).join(', ')}`);
        if (process.env.TRON_BENCH_COST_ARGV === '1') {
          for (const [args, n] of [...gits.byArgv].sort((a, b) => b[1] - a[1])) console.log(`${String(n).padStart(5)}  ${args}`);
        }
      } else console.log('git processes: not counted (strace is not installed)');
      // Whose CPU it is: one more sim run, sampled by perf (its figures a little above the cgroup's: perf's own cost).
      const whom = await cpuByWhom(['node', e.bin, 'start', '--repo', '.'], await fresh());
      if (whom !== undefined) {
        const parts = [...whom].sort((a, b) => b[1] - a[1]);
        const total = parts.reduce((sum, [, s]) => sum + s, 0);
        console.log(
          `CPU a block by whom, sim run${name} (perf samples, ${(total / BLOCKS).toFixed(3)} s in all): ${parts.map(([who, s]) => `${who} ${(s / BLOCKS).toFixed(3)}`).join(', ')}`,
        );
      } else console.log('CPU by whom: not measured (perf is not installed, or may not record here)');
      const ratio = median(e.command.map((c) => c.wallS)) / scriptWall;
      const cmdCpu = e.command.map((c) => c.cpuS).filter((x): x is number => x !== undefined);
      const scriptCpu = script.map((c) => c.cpuS).filter((x): x is number => x !== undefined);
      const cpuRatio = cmdCpu.length > 0 && scriptCpu.length > 0 ? ` (CPU ${(median(cmdCpu) / median(scriptCpu)).toFixed(1)}×)` : '';
      console.log(
        `overhead, command builder, tron wall / careful script wall${name}: ${ratio.toFixed(2)}×${cpuRatio} (${WHEN_SET.overhead} when the goal was set; goal ≤ 1.6×: ${ratio <= 1.6 ? 'met' : 'MISSED'})`,
      );
    }
  } finally {
    if (keep) console.log(`kept ${made.join(' ')}`);
    else for (const dir of made) rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await benchCost();

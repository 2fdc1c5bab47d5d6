/**
 * Time that tests and the simulator drive: every wait of the runtime is a Clock's
 * (engine/os/clock.ts), so a test's ManualClock passes it by advancing instead of sleeping
 * through it. This test is how that stays true: no file under engine/ — outside the clock
 * itself, engine/testing/ and the tests — sets a timer of its own (setTimeout, setInterval,
 * setImmediate, AbortSignal.timeout, node:timers) unless TIMERS_ALLOWED lists it, with why it
 * is not a wait of tron's. A timer inside a string (the pages' scripts run in the browser) is
 * no call here, and passes.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it, onTestFinished } from 'vitest';

/** The globals that set a timer. */
const TIMER_GLOBALS = new Set(['setTimeout', 'setInterval', 'setImmediate']);
/** The modules whose exports are timers. */
const TIMER_MODULES = new Set(['timers', 'timers/promises', 'node:timers', 'node:timers/promises']);

/**
 * The timers the runtime keeps for itself, by file and name, each with why it is not a wait a
 * test or the simulator should drive. Nothing else may set one.
 */
const TIMERS_ALLOWED: Readonly<Record<string, string>> = {
  // Turns of the event loop, not time: each lets I/O and callbacks already due run first.
  'engine/runtime/effects/liveness.ts setImmediate':
    "a turn of the event loop, not time: lets a worker's reply that is already due reach the queue before the probe's verdict",
  'engine/queue/agent-turns.ts setImmediate':
    "a turn of the event loop, not time: lets a turn's reply that is already due reach the engine before the probe's verdict",
  'engine/runtime/effects/coalesce.ts setImmediate':
    'a turn of the event loop, not time: gathers the asks made in the same turn into one round trip',
  'engine/serve/notify.ts setImmediate': 'a turn of the event loop, not time: a delivery starts after the append that caused it returns',
  'engine/serve/traces.ts setImmediate': 'a turn of the event loop, not time: the spans are made after the append that caused them returns',
  'engine/serve/runs.ts setImmediate': 'a turn of the event loop, not time: a long read yields to the requests waiting behind it',
  'engine/render/reporter.ts setImmediate': "a turn of the event loop, not time: the terminal's writes are gathered into one",
  // What people see, not what tron decides.
  'engine/render/reporter.ts setTimeout': "the live board's frame rate: drawing on a terminal, no input to the engine",
  'engine/render/reporter.ts setInterval': "the live board's elapsed-time tick: drawing on a terminal, no input to the engine",
  'engine/serve/sse.ts setInterval': "an SSE keep-alive comment, so proxies keep a browser's idle stream open: no input to anything",
  // Waits on something that runs in real time outside tron: a test's clock must not be what ends them.
  'engine/os/process-tree.ts node:timers/promises':
    "waits for real processes to exit after SIGTERM (the kill grace) and polls until they have: the kernel's time, not tron's",
  'engine/workers/command.ts setTimeout':
    "bounds the wait for a worker's pipes to close after it exited (DRAIN_MS): the operating system's time, not tron's",
  'engine/runtime/effects/testrun.ts setTimeout':
    "retries an autogroup change the kernel refused within its own 100 ms window: the kernel's time, not tron's",
  'engine/git/resolver.ts setTimeout':
    "frees an idle `git cat-file` process after 5 s unused: a resource's lifetime, no input to the engine and nothing a test waits for",
  'engine/serve/webhook.ts setTimeout':
    "bounds reading a webhook's body from its socket (a slow client is refused 408): the network's time, not tron's",
  'engine/serve/notify.ts AbortSignal.timeout': "bounds one HTTP delivery of a notification: the network's time, not tron's",
  'engine/forge/github.ts AbortSignal.timeout': "bounds one HTTP request to GitHub ([forge] timeout): the network's time, not tron's",
  'engine/git/remote.ts setTimeout':
    "bounds one git network call ([remote] timeout) by killing its process group: the network's time; the Remote is opened in five places, two of them (tron clean, a landing's travel) with no clock to give it",
};

/** Every non-test .ts file under `dir`, but the clock's own and engine/testing/'s. */
function runtimeSources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .filter((f) => !f.startsWith('testing/') && f !== 'os/clock.ts')
    .map((f) => join(dir, f))
    .sort();
}

/** Each timer `files` set themselves, as `engine/<path>:<line> <name>`. */
function timerCalls(files: string[], base: string): string[] {
  const found: string[] = [];
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const at = (node: ts.Node, name: string) =>
      found.push(`${relative(base, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1} ${name}`);
    const walk = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier) && TIMER_MODULES.has(node.moduleSpecifier.text)) {
        // The import is the site: what it names is its timers.
        at(node, node.moduleSpecifier.text.startsWith('node:') ? node.moduleSpecifier.text : `node:${node.moduleSpecifier.text}`);
        return;
      }
      if (ts.isIdentifier(node) && TIMER_GLOBALS.has(node.text)) {
        const parent = node.parent;
        // `setTimeout(…)`, `globalThis.setTimeout(…)`, or the function handed on; not a field's or a key's name.
        const named =
          (ts.isPropertyAccessExpression(parent) &&
            parent.name === node &&
            !(ts.isIdentifier(parent.expression) && parent.expression.text === 'globalThis')) ||
          ((ts.isPropertyAssignment(parent) ||
            ts.isPropertySignature(parent) ||
            ts.isPropertyDeclaration(parent) ||
            ts.isMethodDeclaration(parent)) &&
            parent.name === node);
        if (!named) at(node, node.text);
      } else if (
        ts.isPropertyAccessExpression(node) &&
        ts.isIdentifier(node.expression) &&
        node.expression.text === 'AbortSignal' &&
        node.name.text === 'timeout'
      ) {
        at(node, 'AbortSignal.timeout');
      }
      ts.forEachChild(node, walk);
    };
    walk(source);
  }
  return found;
}

/** The sites `found` holds that `allowed` does not list ("file name", the line left out). */
function refused(found: string[], allowed: Readonly<Record<string, string>>): string[] {
  return found.filter((f) => !(f.replace(/:\d+ /, ' ') in allowed));
}

const ENGINE = resolve(import.meta.dirname, '..');

describe("the runtime's timers", () => {
  it('are all the clock’s, but for those listed with why they are not a wait of tron’s', () => {
    const files = runtimeSources(ENGINE);
    expect(files.length).toBeGreaterThan(100);
    const found = timerCalls(files, resolve(ENGINE, '..'));
    expect(refused(found, TIMERS_ALLOWED)).toEqual([]);
    // Every entry still names a timer there: one moved to the clock leaves the list.
    const sites = new Set(found.map((f) => f.replace(/:\d+ /, ' ')));
    expect(Object.keys(TIMERS_ALLOWED).filter((k) => !sites.has(k))).toEqual([]);
    for (const reason of Object.values(TIMERS_ALLOWED)) expect(reason.length).toBeGreaterThan(30);
  });

  it('would be caught setting a timer of its own, in any of its forms, and passes a timer in a string or a name that is not one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-timers-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const engine = join(dir, 'engine');
    for (const d of ['runtime', 'os', 'testing']) mkdirSync(join(engine, d), { recursive: true });
    writeFileSync(
      join(engine, 'runtime', 'poll.ts'),
      [
        "import { setTimeout as delay } from 'node:timers/promises';",
        'export const a = setTimeout(() => undefined, 1);',
        'export const b = globalThis.setInterval(() => undefined, 1);',
        'export const c = AbortSignal.timeout(1);',
        'export const d = new Promise((r) => setImmediate(r));',
        'export const e = delay(1);',
        '// Names that are no timer pass: a field, a key, a method; a browser script in a string; the clock.',
        'export const page = "<script>setTimeout(refresh, 50)</script>";',
        'export const ok = (o: { setTimeout: number; clock: { after(ms: number, f: () => void): void } }) => ({ setTimeout: o.setTimeout, at: o.clock.after(1, () => undefined) });',
        '',
      ].join('\n'),
    );
    // The clock's own, the test helpers' and the tests' are theirs.
    writeFileSync(join(engine, 'os', 'clock.ts'), 'export const t = setTimeout(() => undefined, 1);\n');
    writeFileSync(join(engine, 'testing', 'wait.ts'), 'export const t = setTimeout(() => undefined, 1);\n');
    writeFileSync(join(engine, 'runtime', 'poll.test.ts'), 'export const t = setTimeout(() => undefined, 1);\n');
    const found = timerCalls(runtimeSources(engine), dir);
    expect(found).toEqual([
      'engine/runtime/poll.ts:1 node:timers/promises',
      'engine/runtime/poll.ts:2 setTimeout',
      'engine/runtime/poll.ts:3 setInterval',
      'engine/runtime/poll.ts:4 AbortSignal.timeout',
      'engine/runtime/poll.ts:5 setImmediate',
    ]);
    expect(refused(found, { 'engine/runtime/poll.ts setTimeout': 'a reason' })).toEqual([
      'engine/runtime/poll.ts:1 node:timers/promises',
      'engine/runtime/poll.ts:3 setInterval',
      'engine/runtime/poll.ts:4 AbortSignal.timeout',
      'engine/runtime/poll.ts:5 setImmediate',
    ]);
  });
});

/**
 * The user's git credential setup, as the engine's remote calls read it at start
 * (engine/git/remote.ts `remoteAccess`), is not used when a worker may have written it
 * (issue #44). Without a sandbox a builder can append a `credential.helper` to
 * `~/.gitconfig`; the next `tron start`'s fetch would run it — outside any sandbox, as the
 * engine — and hand it the password. So, as for `.tron/config.toml`
 * (engine-files.ts `configChangedInRun`), a file the credential settings come from that
 * changed while the previous run ran, and was not touched since, stops the start (exit 2)
 * until the user has looked. A file's change time cannot be set back by a process.
 */
import type { Problem } from '../core/errors.ts';
import type { TronEvent } from '../core/events.ts';
import type { RemoteAccess } from '../git/remote.ts';
import { changedDuring, runWindow } from './effects/engine-files.ts';

/** The first file of `access`'s origins that changed while the previous run ran, as a coded problem. */
export function accessChangedInRun(access: RemoteAccess, previous: readonly TronEvent[]): Problem | undefined {
  const window = runWindow(previous);
  if (!window) return undefined;
  for (const file of access.origins ?? []) {
    const at = changedDuring(file, window);
    if (at === undefined) continue;
    // A url.<base>.insteadOf key may hold a token in its base: named without the user information.
    const keys = [...new Set(access.config.map(([key]) => key.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/gi, '$1')))].join(', ');
    return {
      code: 'TRON_GIT_CONFIG_CHANGED_IN_RUN',
      path: file,
      message:
        `changed at ${new Date(at).toISOString()}, while run ${window.run} was running, and not since: a worker may have written it, ` +
        `and the engine's remote calls would use what it says (${keys}). Read it; if the change is yours, \`touch ${file}\` and start again`,
    };
  }
  return undefined;
}

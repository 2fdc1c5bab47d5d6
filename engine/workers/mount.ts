/**
 * One mount of a sandbox: its own file, so that the sandbox (sandbox.ts) and the builder's
 * private object store it mounts (private-store.ts) both use it without importing each other.
 */

/** One bwrap mount: `ro` and `rw` need the source; `*-try` skip a missing one; `hide` puts an empty folder over `dest`. */
export interface Mount {
  kind: 'ro' | 'rw' | 'rw-try' | 'hide' | 'hide-file';
  src: string;
  dest: string;
}

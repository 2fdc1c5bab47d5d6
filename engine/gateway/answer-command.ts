/**
 * The exact command line that answers a parked block: what a page, the console and the
 * pages file offer the operator. One function, so every place says the same.
 */

/** A shell word: quoted only when it must be. */
export function shellWord(text: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The exact command that answers a parked block (RETRY, or ABANDON). */
export function answerCommand(repo: string, block: string): string {
  const head = `tron answer --repo ${shellWord(repo)} ${block}`;
  return `${head} '>>RETRY {"guidance":"…"}'  (or '>>ABANDON {"reason":"…"}')`;
}

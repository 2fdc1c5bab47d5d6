/** What a database URL looks like, wherever it is given: `[cluster] database`, `--database`, `TRON_DATABASE_URL`. */
export const POSTGRES_URL = /^postgres(ql)?:\/\/\S+$/;

/** What a problem with one says (never the value itself: a URL may hold a password). */
export const POSTGRES_URL_FORM = 'must be a PostgreSQL URL, e.g. "postgres://tron@db.example:5432/tron"';

/**
 * A URL as it may be written down (a manifest, a message, a page): the password of its user
 * part, and any `password=`/`sslpassword=` parameter, as `***`. Everything up to the last `@`
 * counts as the user part, so a password holding an unescaped `@` or `/` is hidden whole.
 */
export function redactUrlSecrets(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/?#@]*:)[\s\S]*@/i, '$1***@').replace(/([?&](?:ssl)?password=)[^&#]*/gi, '$1***');
}

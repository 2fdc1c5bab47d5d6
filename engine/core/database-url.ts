/** What a database URL looks like, wherever it is given: `[cluster] database`, `--database`, `TRON_DATABASE_URL`. */
export const POSTGRES_URL = /^postgres(ql)?:\/\/\S+$/;

/** What a problem with one says (never the value itself: a URL may hold a password). */
export const POSTGRES_URL_FORM = 'must be a PostgreSQL URL, e.g. "postgres://tron@db.example:5432/tron"';

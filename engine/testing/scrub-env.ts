/**
 * Test setup: the suite does not inherit a database from the shell that runs it. With
 * `TRON_DATABASE_URL` set, every `tron start` (and every reading command) of every test
 * would use that database; the tests that want one set it, or `[cluster] database`, themselves
 * (engine/commands/cluster-reads.e2e.test.ts sets the variable on purpose).
 * `TRON_TEST_DATABASE_URL` — where the database tests make their databases — is kept.
 */
delete process.env.TRON_DATABASE_URL;

/**
 * A block, as the register states it: its own file, so that the register's loader
 * (register.ts) and its rules (register-rules.ts) both read it without importing each other.
 */

/** One unit of work, as the register file states it. */
export interface Block {
  id: string;
  title: string;
  /** Ids of blocks that must land first, in file order, without duplicates. */
  dependsOn: string[];
  /** Lower runs first; blocks without one have 0; ties break by id. */
  priority: number;
  /** Acceptance criteria, numbered c1, c2, … in this order. */
  criteria: string[];
  /** The Markdown after the front matter, line endings normalised to \n, trimmed. */
  brief: string;
  /** Repository-relative path, e.g. `.tron/blocks/login.md`. */
  file: string;
  /** sha256 hex of the file's bytes: a changed file is a changed block. */
  digest: string;
}

/**
 * Lines that were plainly meant as a `>>` line but do not fit the contract: an indented or
 * quoted line, a lower-case word, text after the JSON. The gateway never reads them (that
 * would be a guess); it names them in the refusal, so the worker's restatement can fix
 * exactly that.
 */

/** Markdown and quoting that a worker may put before its `>>` line. */
const NEAR_MISS = /^[\s`*_"'>•-]{0,16}>>[ \t]*[A-Za-z]/;

/** Whether a line that does not match the contract looks like an attempt at one. */
export function isNearMiss(line: string): boolean {
  return NEAR_MISS.test(line);
}

/** Why a near-miss line does not fit, as a clause after "because". */
export function describeNearMiss(line: string): string {
  if (!line.startsWith('>>')) {
    return '`>>` must start the line, with nothing before it (no indentation, quote mark, bullet or backtick)';
  }
  if (line.includes('\r')) return 'the line holds a carriage return';
  const rest = line.slice(2);
  if (/^[ \t]/.test(rest)) return 'there must be no space between `>>` and the word';
  const word = /^[A-Za-z_]+/.exec(rest)?.[0] ?? '';
  if (word !== word.toUpperCase()) return `the word must be in capital letters (\`>>${clip(word.toUpperCase(), 30)}\`)`;
  const after = rest.slice(word.length);
  if (after.startsWith('{')) return 'there must be a space between the word and its JSON object';
  if (!/^[ \t]/.test(after)) return 'the word must be followed by a space and a JSON object, or by nothing';
  const trimmed = trimBlanks(after);
  if (trimmed.startsWith('[') || trimmed.startsWith('"')) {
    return 'the payload must be a JSON object `{…}`, not an array or a string';
  }
  if (trimmed.startsWith('{')) {
    return trimmed.includes('}')
      ? 'nothing may follow the JSON object on that line'
      : 'the JSON object must open and close on that same line';
  }
  return 'after the word only one JSON object `{…}` may follow, on the same line';
}

/**
 * Strips spaces and tabs at both ends by hand: `/[ \t]+$/` is quadratic on a long run of
 * blanks that is not at the end, and replies can be megabytes.
 */
function trimBlanks(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s[start] === ' ' || s[start] === '\t')) start++;
  while (end > start && (s[end - 1] === ' ' || s[end - 1] === '\t')) end--;
  return s.slice(start, end);
}

/** A line shown inside a message: control characters made visible, clipped, in backticks. */
export function quote(line: string, max = 80): string {
  const shown = clip(visible(line), max);
  return shown.includes('`') ? `\`\` ${shown} \`\`` : `\`${shown}\``;
}

/** Control characters as `\xNN`, so a message never carries NULs or stray line breaks. */
export function visible(s: string): string {
  return s.replace(/[\u0000-\u0008\u000b-\u001f\u007f\n\t]/g, (c) =>
    c === '\t' ? ' ' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}

function clip(s: string, max: number): string {
  // Never cut a surrogate pair in half.
  if (s.length <= max) return s;
  const end = /[\ud800-\udbff]/.test(s[max - 1] ?? '') ? max - 1 : max;
  return `${s.slice(0, end)}…`;
}

/**
 * What a `[notify]` webhook is sent, by `format`: "text" is today's `{"text": …}`, which
 * Slack, Mattermost and most chat hooks take; "slack" is Slack's incoming-webhook message
 * with blocks (a header, the run's and block's fields, the message, a link when there is
 * one); "json" is tron's own object, documented in docs/serve.md and kept stable (`v`), for
 * anything that is not a chat (an alert manager, a script).
 *
 * Pure: the notification in, the body out. The text a person wrote (a block's title, a
 * park reason) is never trusted as markup: Slack reads `&`, `<` and `>` as the start of an
 * entity, a link or a mention (`<!channel>`), so they are escaped wherever Slack parses
 * text, and a link's own address is escaped and has its `|` percent-encoded.
 */
import type { NotifyFormat, NotifyOn } from '../project/config.ts';

/** What every format is made from (Notifier builds it from the events it saw). */
export interface NotificationFacts {
  on: NotifyOn;
  /** The repository's folder name. */
  repo: string;
  run: string;
  seq: number;
  /** The event's own time, ms since the epoch. */
  ts: number;
  block?: string;
  /** The block's title, as its file says. */
  title?: string;
  /** The one-line (or two-line) message the "text" format posts. */
  text: string;
  /** The block's pull request or issue on the forge, when the run knows it. */
  url?: string;
  /** What `url` is the page of. */
  urlOf?: 'pull request' | 'issue';
  /** What happened to the block or the run. */
  outcome: 'parked' | 'landed' | 'finished';
  /** The facts of this kind of notification (see `NotificationJson.detail`). */
  detail: NotificationJson['detail'];
}

/** The "json" format's body: version 1. A field is added, never renamed or removed, within a version. */
export interface NotificationJson {
  v: 1;
  kind: NotifyOn;
  repo: string;
  run: string;
  block: string | null;
  title: string | null;
  outcome: 'parked' | 'landed' | 'finished';
  message: string;
  url: string | null;
  /** ISO 8601, UTC: when the event happened. */
  at: string;
  seq: number;
  detail:
    | { reason: string; answer: string }
    | { sha: string; top: string }
    | { exit: number; reason: string; landed: string[]; parked: string[]; unfinished: string[]; abandoned: string[] };
}

/** The webhook's body for a format, as the JSON string to POST. */
export function notificationBody(format: NotifyFormat, n: NotificationFacts): string {
  switch (format) {
    case 'text':
      return JSON.stringify({ text: n.text });
    case 'slack':
      return JSON.stringify(slackMessage(n));
    case 'json':
      return JSON.stringify(notificationJson(n));
  }
}

export function notificationJson(n: NotificationFacts): NotificationJson {
  return {
    v: 1,
    kind: n.on,
    repo: n.repo,
    run: n.run,
    block: n.block ?? null,
    title: n.title ?? null,
    outcome: n.outcome,
    message: n.text,
    url: n.url ?? null,
    at: new Date(n.ts).toISOString(),
    seq: n.seq,
    detail: n.detail,
  };
}

/** `&`, `<` and `>` as Slack's text formatting asks; nothing else is touched. */
export function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

const HEADLINE: Record<NotifyOn, (n: NotificationFacts) => string> = {
  page: (n) => `${n.block} needs you`,
  landed: (n) => `${n.block} landed`,
  run: (n) => `Run ${n.run} finished`,
};

/** Slack's own limits: a header's plain text 150 characters, a section's text 3000, a field's 2000. */
function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** A Slack incoming-webhook message: `text` (the notification's fallback) and `blocks`. */
export function slackMessage(n: NotificationFacts): { text: string; blocks: unknown[] } {
  const mrkdwn = (text: string) => ({ type: 'mrkdwn', text });
  const field = (name: string, value: string) => mrkdwn(cut(`*${name}*\n${slackEscape(value)}`, 2000));
  const fields = [field('Repository', n.repo), field('Run', n.run)];
  if (n.block) fields.push(field('Block', n.title ? `${n.block}: ${n.title}` : n.block));
  fields.push(field('Outcome', n.outcome));
  const blocks: unknown[] = [
    // plain_text is never parsed (no links, no mentions), so it is not escaped: Slack would show `&amp;` as it is.
    { type: 'header', text: { type: 'plain_text', text: cut(`tron: ${HEADLINE[n.on](n)}`, 150), emoji: false } },
    { type: 'section', fields },
    { type: 'section', text: mrkdwn(cut(slackEscape(n.text), 3000)) },
  ];
  if (n.url) {
    const href = slackEscape(n.url).replace(/\|/g, '%7C');
    blocks.push({ type: 'section', text: mrkdwn(`<${href}|the ${n.urlOf ?? 'page'} of ${slackEscape(n.block ?? n.run)}>`) });
  }
  blocks.push({ type: 'context', elements: [mrkdwn(`seq ${n.seq} · ${new Date(n.ts).toISOString()}`)] });
  return { text: slackEscape(n.text), blocks };
}

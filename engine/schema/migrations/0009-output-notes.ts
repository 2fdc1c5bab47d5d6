/**
 * Version 9 (the queue's 5): a turn's output comes to the engine as it is written (notes
 * of kind `output`, at most 32 KiB of text each: pg-job-control.ts's OUTPUT_NOTE_CHARS),
 * and the notes' kinds are checked — an agent's note of a kind no engine reads, or an
 * output note past its size, is refused.
 */
export default `
  alter table tron_job_notes add constraint tron_job_notes_kind check (coalesce(
    body ->> 'kind' in ('started', 'spawned', 'exited')
    or (body ->> 'kind' = 'output' and jsonb_typeof(body -> 'offset') = 'number' and jsonb_typeof(body -> 'text') = 'string'
        and length(body ->> 'text') <= 32768),
    false));
`;

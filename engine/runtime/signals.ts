/**
 * Ctrl-C and SIGTERM while a run goes: the first stops the run — every turn stopped, said
 * once by the narration of the `run.stopping` it records (render/narrate.ts); a second
 * stops at once, worker process groups first, then the engine (exit 1).
 */
export function stopOnSignals(
  engine: { stop(signal: string): void; abortNow(): void },
  say: (line: string) => void,
  closeReporter: () => void,
): () => void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      engine.abortNow();
      say(`tron: ${signal} again — stopping at once`);
      closeReporter();
      process.exit(1);
    }
    stopping = true;
    engine.stop(signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

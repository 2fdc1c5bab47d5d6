/** Whether the engine's own process keeps variable `name` once scrubbed. */
export function keptInProcess(name: string): boolean;
/** Scrubs the engine's environment (bin/own-env.js); the copy taken before, and why /proc/self/environ could not be rewritten. */
export function scrubOwnEnvironment(): { env: Record<string, string>; problem?: string };
/** The copy scrubOwnEnvironment took in this process, if it ran. */
export function takenEnvironment(): Record<string, string> | undefined;

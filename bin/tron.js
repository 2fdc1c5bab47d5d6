#!/usr/bin/env node
// The tron entry point: registers the TypeScript loader, then hands over to the CLI.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../engine/cli.ts');
process.exitCode = await main(process.argv.slice(2));

/** Client commands talking to a pier API (filled in by the CLI module). */
import type { Command } from 'commander';

export function registerClientCommands(_program: Command): void {}

/** The `pier` binary: the server (`serve`) and the client commands. */
import { Command } from 'commander';
import { registerClientCommands } from './client/index.js';
import { registerServe } from './serve.js';

export async function main(argv: string[]): Promise<void> {
  const program = new Command('pier')
    .description('pier: apps, databases, buckets and secrets on your own machines')
    .version('0.1.0');
  registerServe(program);
  registerClientCommands(program);
  await program.parseAsync(argv);
}

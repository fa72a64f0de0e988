/** The `pier` binary: the server (`serve`) and the client commands. */
import { Command } from 'commander';
import { registerClientCommands } from './client/index.js';

export async function main(argv: string[]): Promise<void> {
  const program = new Command('pier')
    .description('pier: apps, databases, buckets and secrets on your own machines')
    .version('0.1.0');
  // The server pulls in fastify, pg and the rest: load it only when it is asked for, so
  // client commands start fast.
  if (argv[2] === 'serve') {
    const { registerServe } = await import('./serve.js');
    registerServe(program);
  } else {
    program.command('serve').description('run the platform (see `pier serve --help`)');
  }
  registerClientCommands(program);
  await program.parseAsync(argv);
}

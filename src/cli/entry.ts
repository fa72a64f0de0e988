/** Process entry of the `pier` binary. */
import { main } from './main.js';

main(process.argv).catch((err: Error) => {
  console.error(`pier: ${err.message}`);
  process.exit(1);
});

// Copies what tsc does not: the SQL migrations, next to the compiled migrate.js, and the
// console's own script and style files.
import { cpSync } from 'node:fs';

cpSync('src/store/migrations', 'dist/store/migrations', { recursive: true });
cpSync('src/console/static', 'dist/console/static', { recursive: true });

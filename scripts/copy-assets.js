// Copies what tsc does not: the SQL migrations, next to the compiled migrate.js.
import { cpSync } from 'node:fs';

cpSync('src/store/migrations', 'dist/store/migrations', { recursive: true });
